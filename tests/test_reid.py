"""The appearance model's data, protocol, recipe and commands, on crops the tests draw."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from minterpr.cli.main import main  # noqa: E402
from minterpr.data.errors import DataError  # noqa: E402
from minterpr.data.reid import (
    query_gallery_split,
    read_cuhk03,
    read_manifest,
    split_identities,  # noqa: E402
    write_manifest,
)
from minterpr.evaluation.reid import reid_metrics  # noqa: E402
from support.datasets import make_cuhk03  # noqa: E402


def reference_metrics(q, g, qp, gp, qc, gc):
    """A plain per-query loop of the protocol, for comparison with the vectorised one."""
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    g = g / np.linalg.norm(g, axis=1, keepdims=True)
    rank1 = aps = inps = scored = 0
    for i in range(len(q)):
        scores = [(-float(q[i] @ g[j]), j) for j in range(len(g)) if not (gp[j] == qp[i] and gc[j] == qc[i])]
        ranked = [j for _, j in sorted(scores)]  # ties by gallery index, as a stable sort
        hits = [n for n, j in enumerate(ranked) if gp[j] == qp[i]]
        if not hits:
            continue
        scored += 1
        rank1 += hits[0] == 0
        aps += sum((m + 1) / (n + 1) for m, n in enumerate(hits)) / len(hits)
        inps += len(hits) / (hits[-1] + 1)
    return 100 * rank1 / scored, 100 * aps / scored, 100 * inps / scored, scored


def test_protocol_matches_the_plain_reference():
    rng = np.random.default_rng(3)
    q, g = rng.normal(size=(40, 8)), rng.normal(size=(300, 8))
    qp = [f"p{i}" for i in rng.integers(0, 30, 40)]
    gp = [f"p{i}" for i in rng.integers(0, 30, 300)]
    qc, gc = [str(c) for c in rng.integers(0, 3, 40)], [str(c) for c in rng.integers(0, 3, 300)]
    got = reid_metrics(q, g, qp, gp, qc, gc, chunk_size=7)
    rank1, mean_ap, mean_inp, scored = reference_metrics(q, g, qp, gp, qc, gc)
    assert got.queries == scored and got.skipped == 40 - scored
    assert got.cmc[1] == pytest.approx(rank1) and got.mean_ap == pytest.approx(mean_ap)
    assert got.mean_inp == pytest.approx(mean_inp)


def test_same_camera_matches_are_left_out():
    q, g = np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [0.9, 0.1], [0.7, 0.7]])
    m = reid_metrics(q, g, ["a"], ["a", "b", "a"], ["0"], ["0", "1", "1"])
    assert m.cmc[1] == 0.0 and m.cmc[5] == 100.0  # the same-camera twin at rank 1 does not count
    with pytest.raises(ValueError, match="no query has a match in another camera"):
        reid_metrics(q, g[:1], ["a"], ["a"], ["0"], ["0"])


def test_cuhk03_split_is_identity_disjoint_and_seeded(tmp_path):
    images = read_cuhk03(make_cuhk03(tmp_path / "cuhk03", people=10))
    assert {i.camera for i in images} == {"0", "1"} and len(images) == 40
    rest, test = split_identities(images, test_identities=4, seed=1)
    assert not {i.person_id for i in rest} & {i.person_id for i in test}
    assert split_identities(images, test_identities=4, seed=1)[1] == test
    query, gallery = query_gallery_split(test, seed=0)
    assert len(query) == 8 and len({(i.person_id, i.camera) for i in query}) == 8
    write_manifest(test, tmp_path / "test.jsonl")
    assert read_manifest(tmp_path / "test.jsonl") == test


def test_bad_manifest_names_file_line_and_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"path": "a.jpg", "person_id": "x", "camera": "0"}\n{"path": "b.jpg", "person_id": 7, "camera": "0"}\n'
    )
    with pytest.raises(DataError, match=r"bad.jsonl:2: person_id: must be a string"):
        read_manifest(path)
    path.write_bytes(b'{"path": "a.jpg", "person_id": "x", "camera": "0"}\n\xd0\xff binary\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: record: not UTF-8 text \(byte 51\)"):
        read_manifest(path)
    with pytest.raises(DataError, match="no such folder"):
        read_cuhk03(tmp_path / "missing")


class Killed(Exception):
    """Stands for a process killed mid-run."""


def _train_args(data, run, epochs: int) -> list[str]:
    return [
        "train",
        "--config",
        "reid",
        "--out",
        str(run),
        "-q",
        "--set",
        f"train=[{data / 'all.jsonl'}]",
        "--set",
        f"val={data / 'val.jsonl'}",
        "--set",
        f"epochs={epochs}",
        "--set",
        "iterations_per_epoch=2",
        "--set",
        "identities_per_batch=3",
        "--set",
        "images_per_identity=2",
        "--set",
        "model.image_size=[32,16]",
        "--set",
        "warmup_epochs=1",
        "--set",
        "checkpoint_every_steps=1",
    ]


def _manifests(tmp_path, people: int, val_people: int):
    """A drawn CUHK03 split into ``reid/all.jsonl`` (training) and ``reid/val.jsonl``: the folder."""
    images = read_cuhk03(make_cuhk03(tmp_path / "cuhk03", people=people))
    train, val = split_identities(images, test_identities=val_people, seed=0)
    data = tmp_path / "reid"
    data.mkdir()
    write_manifest(train, data / "all.jsonl")
    write_manifest(val, data / "val.jsonl")
    return data


def test_training_resumes_exactly_and_scores(tmp_path, capsys, monkeypatch):
    data = _manifests(tmp_path, people=8, val_people=3)
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert main(_train_args(data, straight, 2)) == 0
    from minterpr.training import reid as recipe

    real_save = recipe.save_checkpoint

    def killed_after_step_3(state, path):  # the process dies right after step 3's checkpoint
        real_save(state, path)
        if state.get("step") == 3 and str(path).endswith("last.pt"):
            raise Killed

    monkeypatch.setattr(recipe, "save_checkpoint", killed_after_step_3)
    with pytest.raises(Killed):
        main(_train_args(data, stopped, 2))
    monkeypatch.setattr(recipe, "save_checkpoint", real_save)
    assert main(["train", "--out", str(stopped), "--resume", "-q"]) == 0
    a = torch.load(straight / "last.pt", weights_only=True)["model"]
    b = torch.load(stopped / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    records = [json.loads(line) for line in (straight / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2] and all(r["val_queries"] > 0 for r in records)
    from minterpr.interaction.appearance import read_same_person

    assert read_same_person(straight / "best.pt").split == "val"  # fitted on val at the end of the run
    capsys.readouterr()
    assert (
        main(["eval-reid", "--model", str(straight / "best.pt"), "--data", str(data / "val.jsonl"), "--json", "-"]) == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert 0 <= report["rank1"] <= 100 and report["query"] == 6


def test_training_starts_from_an_appearance_model(tmp_path):
    from dataclasses import replace

    from minterpr.errors import RunError
    from minterpr.models.reid import ReidModel, load_reid_model
    from minterpr.training.config import ConfigError
    from minterpr.training.reid import start_from
    from minterpr.training.reid_config import load_reid_config

    data = _manifests(tmp_path, people=6, val_people=2)
    first = tmp_path / "first"
    assert main(_train_args(data, first, 1)) == 0
    source = load_reid_model(str(first / "best.pt"))
    model = ReidModel(source.config, num_identities=5)
    fresh = model.classifier.weight.detach().clone()
    start_from(model, str(first))  # a run directory: its best.pt
    state = model.state_dict()
    assert all(torch.equal(state[key], value) for key, value in source.search_state_dict().items())
    assert torch.equal(model.classifier.weight, fresh)  # new identities: a new classifier
    other = ReidModel(replace(source.config, image_size=(64, 32)), num_identities=5)
    with pytest.raises(RunError, match="model.image_size"):
        start_from(other, str(first))
    with pytest.raises(RunError, match="no appearance model here"):
        start_from(model, str(tmp_path / "nothing"))
    with pytest.raises(ConfigError, match="not both"):
        load_reid_config("reid", ["weights=a.pth", "init=shipped"])
    second = tmp_path / "second"
    assert main(_train_args(data, second, 1) + ["--set", f"init={first / 'best.pt'}"]) == 0
    assert (second / "best.pt").is_file()


def test_eval_reid_bad_input_is_one_line(tmp_path, capsys):
    assert main(["eval-reid", "--weights", str(tmp_path / "none.pth"), "--data", str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "none.jsonl" in err[0]
    (tmp_path / "m.jsonl").write_text('{"path": "a.jpg", "person_id": "x", "camera": "0"}\n')
    (tmp_path / "model.pt").write_bytes(b"junk")
    assert main(["eval-reid", "--model", str(tmp_path / "model.pt"), "--data", str(tmp_path / "m.jsonl")]) == 2
    assert "model.pt" in capsys.readouterr().err


def test_the_shipped_reid_config_is_a_reid_task():
    from minterpr.training.reid_config import TASK, load_reid_config, read_task

    assert read_task("reid") == TASK and read_task("peta") == "retrieval"
    cfg = load_reid_config("reid")
    assert cfg.model.image_size == (256, 128) and cfg.batch_size == 64 and cfg.augment.erasing == 0.5


def test_reid_config_refuses_bad_values():
    from minterpr.training.config import ConfigError
    from minterpr.training.reid_config import load_reid_config

    with pytest.raises(ConfigError, match="unknown key 'model.depth'"):
        load_reid_config("reid", ["model.depth=3"])
    with pytest.raises(ConfigError, match="images_per_identity >= 2"):
        load_reid_config("reid", ["images_per_identity=1"])


def test_data_reid_writes_disjoint_manifests(tmp_path, monkeypatch):
    from minterpr.cli.commands import data_reid

    monkeypatch.setattr(data_reid, "CUHK03_NP_TEST_IDENTITIES", 4)  # the protocol's 700, scaled to 10 people
    make_cuhk03(tmp_path / "cuhk03", people=10)
    out = tmp_path / "reid"
    assert main(["data", "reid", "--cuhk03", str(tmp_path / "cuhk03"), "--out", str(out), "--val-identities", "2"]) == 0
    splits = {name: {i.person_id for i in read_manifest(out / f"{name}.jsonl")} for name in ("train", "val", "test")}
    assert [len(splits[n]) for n in ("train", "val", "test")] == [4, 2, 4]
    assert not (splits["train"] & splits["test"] or splits["val"] & splits["test"] or splits["train"] & splits["val"])
    assert json.loads((out / "split.json").read_text())["seed"] == 0
    assert main(["data", "reid", "--cuhk03", str(tmp_path / "nothing"), "--out", str(out)]) == 2


def test_gallery_identities_resolve_from_anywhere(tmp_path, monkeypatch):
    # a relative manifest path (``--peta data/peta``) still writes paths that resolve from any folder
    folder = tmp_path / "peta"
    folder.mkdir()
    lines = [{"path": f"images/{n}.jpg", "person_id": p, "camera_id": None} for n, p in enumerate("aab")]
    (folder / "gallery.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    monkeypatch.chdir(tmp_path)
    from minterpr.data.reid import read_gallery_identities

    rows = read_gallery_identities("peta/gallery.jsonl")
    assert [row.person_id for row in rows] == ["a", "a"]
    assert [row.path for row in rows] == [str(folder / "images" / f"{n}.jpg") for n in range(2)]
