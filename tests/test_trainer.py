"""Training: data plans, feature cache, checkpoints, the train command, exact resume after kill -9."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from minterpr.cli.main import main
from minterpr.data.build import mark_dataset
from minterpr.data.formats.gallery import read_gallery
from minterpr.data.formats.minterpedes import read_minterpedes
from minterpr.language.ontology import ONTOLOGY
from minterpr.evaluation.weight_selection import DEFAULT_WEIGHT_GRID
from minterpr.models import create_model, read_checkpoint
from minterpr.models.io import load_model
from minterpr.fileio import atomic_write
from minterpr.training.checkpoint import load_checkpoint, save_checkpoint
from minterpr.training.config import load_config, save_config
from minterpr.training.data import (
    FeatureTable,
    attribute_targets,
    gather_rows,
    identity_index,
    load_split,
    plan_dialogues,
)
from minterpr.types import Dialogue, GalleryImage, QATurn, ReferenceTurn, RetrievalSample
from support.datasets import make_tiny_dataset


# One intra-op thread (see conftest.one_torch_thread).
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def subprocess_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return make_tiny_dataset(tmp_path_factory.mktemp("tiny_data"))


# short enough for a test, long enough (22 steps, 4 validations) for a kill to land mid-run
TRAIN_SETTINGS = ["checkpoint_every_steps=1", "stages.2.epochs=3", "model.dropout=0.1"]  # dropout: RNG state matters


def train_args(data: Path, out: Path, *extra: str) -> list[str]:
    args = ["train", "--config", "tiny", "--data", str(data), "--out", str(out)]
    for item in (*TRAIN_SETTINGS, *extra):
        args += ["--set", item]
    return args


@pytest.fixture(scope="module")
def finished_run(dataset, tmp_path_factory) -> Path:
    """One uninterrupted training run through the console entry point (in process)."""
    out = tmp_path_factory.mktemp("runs") / "uninterrupted"
    assert main(train_args(dataset, out)) == 0
    return out


# ----------------------------------------------------------------------------- data
def test_attribute_targets_mask_unknown_slots():
    images = [
        GalleryImage("a", "x:1", attributes={"upper_colour": ("black", "white"), "gender": ("male",)}),
        GalleryImage("b", "x:2", attributes=None),
    ]
    targets, mask = attribute_targets(images)
    labels = ONTOLOGY.flat_labels()
    assert targets.shape == mask.shape == (2, len(labels))
    on = {labels[j] for j in np.flatnonzero(targets[0])}
    assert on == {("upper_colour", "black"), ("upper_colour", "white"), ("gender", "male")}
    known = {labels[j][0] for j in np.flatnonzero(mask[0])}
    assert known == {"upper_colour", "gender"}
    assert not mask[1].any()


def test_identity_index_is_dense_and_sorted():
    assert identity_index(["b:2", "a:1", "b:2"]) == {"a:1": 0, "b:2": 1}


def test_plan_dialogues_pads_shares_and_truncates():
    d1 = Dialogue("a man", (QATurn("Bag?", "no"),), (ReferenceTurn("r.jpg", "taller"),))
    s1, s2 = RetrievalSample("t1.jpg", "x:1", d1), RetrievalSample("t2.jpg", "x:2", Dialogue("a man"))
    plan = plan_dialogues([s1, s2], max_rounds=None)
    assert plan.turn_types.tolist() == [[0, 1, 2], [0, -1, -1]]
    assert plan.texts == ["a man", "Bag? no", "taller"]  # "a man" is shared by both dialogues
    assert plan.images == ["t1.jpg", "t2.jpg", "r.jpg"] and plan.target_index.tolist() == [0, 1]
    assert plan.image_index.tolist() == [[-1, -1, 2], [-1, -1, -1]]
    assert plan.text_index.tolist() == [[0, 1, 2], [0, -1, -1]]
    assert plan_dialogues([s1], max_rounds=1).turn_types.tolist() == [[0]]
    assert not plan.same_person.any()
    same = plan_dialogues([s1, s2], None, pid_of={"t1.jpg": "x:1", "r.jpg": "x:1", "t2.jpg": "x:2"})
    assert same.same_person.tolist() == [[False, False, True], [False, False, False]]
    rows = gather_rows(torch.arange(6.0).view(3, 2), plan.text_index)
    assert rows.shape == (2, 3, 2) and rows[1, 1].tolist() == [0.0, 0.0]


def test_load_split_takes_identities_from_the_manifest(dataset, tmp_path):
    cfg = load_config("tiny", [f"data.root={dataset}"]).data
    split = load_split(cfg, "val", max_samples=3)
    assert len(split.samples) == 3
    pid_of = {image.path: image.person_id for image in split.gallery}
    assert split.sample_pids == [pid_of[s.target_path] for s in split.samples]
    cfg.val = "missing.jsonl"
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        load_split(cfg, "val")
    # a dialogue whose target the manifest does not list has no identity
    lines = (dataset / "val.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["file_path"] = "images/val/not_in_the_manifest.jpg"
    (tmp_path / "val.jsonl").write_text(json.dumps(record) + "\n")
    (tmp_path / "gallery_val.jsonl").write_text((dataset / "gallery_val.jsonl").read_text())
    mark_dataset(tmp_path)  # a folder assembled by hand: fingerprinted so that training reads it
    cfg.root, cfg.val = str(tmp_path), "val.jsonl"
    with pytest.raises(ValueError, match="target images are not in .*not_in_the_manifest"):
        load_split(cfg, "val")


def test_feature_table_computes_each_chunk_once(tmp_path):
    calls: list[list[str]] = []

    def compute(chunks):
        for chunk in chunks:
            calls.append(chunk)
            yield torch.tensor([[float(ord(k[0])), 1.0 / 3.0] for k in chunk])

    keys = ["d", "a", "c", "b", "a"]
    table = FeatureTable.build(keys, "ns", compute, cache_dir=tmp_path, chunk_size=2)
    assert table.keys == ["a", "b", "c", "d"] and calls == [["a", "b"], ["c", "d"]]
    assert table.features.dtype == torch.float16
    again = FeatureTable.build(keys, "ns", compute, cache_dir=tmp_path, chunk_size=2)
    assert len(calls) == 2 and torch.equal(again.features, table.features)  # read back, not recomputed
    FeatureTable.build(keys, "other weights", compute, cache_dir=tmp_path, chunk_size=2)
    assert len(calls) == 4  # another namespace never reads these files
    assert table.rows(["c", "a"])[:, 0].tolist() == [99.0, 97.0]


# ------------------------------------------------------------------------ checkpoints
def test_text_cache_matches_direct_encoding_in_input_order(tmp_path):
    # the cache encodes several chunks at once, re-sorted by length: rows must still match keys
    from minterpr.training.stages import FeatureSource

    model = create_model("tiny").eval()
    texts = [f"text {i} " + "word " * (i % 37) for i in range(700)]  # 3 chunks of mixed lengths
    source = FeatureSource(model, load_config("tiny"), tmp_path, torch.device("cpu"), progress=False)
    table = source.text_table(texts, "texts")
    expected = model.text_features(texts)
    torch.testing.assert_close(table.rows(texts), expected, atol=2e-3, rtol=2e-3)  # stored as float16
    assert len(list((tmp_path / "texts").glob("*.pt"))) == 3


def test_checkpoint_write_interrupted_midway_keeps_the_old_one(tmp_path):
    path = tmp_path / "last.pt"
    save_checkpoint({"step": 1}, path)

    def torn_write(f):
        f.write(b"half a checkpoint")
        raise KeyboardInterrupt  # the process dies in the middle of the write

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, torn_write)
    assert load_checkpoint(path) == {"step": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


def test_training_plan_matches_the_neural_backend(dataset):
    """Training and serving encode turns the same way (texts, reference images, padding)."""
    from minterpr.runtime.neural_backend import NeuralBackend

    model = create_model("tiny").eval()
    split = load_split(load_config("tiny", [f"data.root={dataset}"]).data, "val")
    backend = NeuralBackend(model)
    index = backend.index_images(split.gallery, str(split.image_root))
    expected = backend.encode_dialogues([s.dialogue.turns() for s in split.samples], index)
    plan = plan_dialogues(split.samples, None)
    with torch.no_grad():
        pixels = model.preprocess.load_batch([split.image_root / p for p in plan.images])
        embedding = model.encode_images(pixels)["embedding"]
        queries = model.encode_dialogues(
            {
                "turn_types": plan.turn_types,
                "turn_mask": plan.turn_mask,
                "turn_text": gather_rows(model.text_features(plan.texts), plan.text_index),
                "turn_image": gather_rows(embedding, plan.image_index),
            }
        ).numpy()
    for i, q in enumerate(expected):
        np.testing.assert_allclose(queries[i, : len(q)], q, atol=1e-5)


# ------------------------------------------------------------------------ training runs
def test_train_command_writes_the_run(finished_run):
    names = {p.name for p in finished_run.iterdir()}
    assert {"config.yaml", "last.pt", "best.pt", "model.pt", "train.log", "metrics.jsonl", "cache"} <= names
    cfg = load_config(finished_run / "config.yaml")
    train_ids = {image.person_id for image in read_gallery(Path(cfg.data.root) / "gallery_train.jsonl")}
    assert cfg.model.num_identities == len(train_ids)  # sized from the training gallery for the id loss
    records = [json.loads(line) for line in (finished_run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["stage"], r["epoch"]) for r in records] == [
        ("attributes", 0),
        ("alignment", 0),
        ("dialogue", 0),
        ("dialogue", 1),
        ("dialogue", 2),
    ]
    longest = max(s.dialogue.num_rounds for s in read_minterpedes(Path(cfg.data.root) / "val.jsonl"))
    assert "val" not in records[0] and len(records[-1]["val"]["rounds"]) == longest
    assert all(np.isfinite(r["train"]["total_loss"]) for r in records)
    state = load_checkpoint(finished_run / "last.pt")
    assert state["done"] and state["best"]["stage"] in ("alignment", "dialogue")
    model = load_model(finished_run / "model.pt")
    best = torch.load(finished_run / "best.pt", weights_only=True)
    # model.pt = best.pt's weights, calibrated on val afterwards (the temperatures are all that differ)
    calibrated = {k: v for k, v in model.state_dict().items() if k != "attribute_temperature"}
    assert all(torch.equal(v, best["state_dict"][k]) for k, v in calibrated.items())
    assert any(finished_run.joinpath("cache", "stems").iterdir())
    extra = read_checkpoint(finished_run / "model.pt")["extra"]  # the attribute weight, chosen on val
    tried = extra["scoring_selection"]["r1_last_by_weight"]
    assert extra["scoring_selection"]["split"] == "val" and len(tried) == len(DEFAULT_WEIGHT_GRID)
    assert extra["scoring"]["attribute_weight"] in DEFAULT_WEIGHT_GRID
    assert tried[str(float(extra["scoring"]["attribute_weight"]))] == max(tried.values())
    calibration = extra["calibration"]  # the tiny val gallery is too small to move any slot from 1
    assert calibration["split"] == "val" and calibration["temperatures"] == {}
    assert torch.equal(model.attribute_temperature, torch.ones_like(model.attribute_temperature))
    umask = os.umask(0)
    os.umask(umask)
    for name in ("model.pt", "best.pt", "last.pt", "metrics.jsonl", "config.yaml"):  # others may read them
        assert stat.S_IMODE((finished_run / name).stat().st_mode) == 0o666 & ~umask, name
    state = torch.load(finished_run / "last.pt", weights_only=True)  # no allow-list needed: tensors and plain data
    assert isinstance(state["rng"]["numpy"][1], torch.Tensor)


def test_calibration_after_training_stores_the_temperatures(finished_run, tmp_path, monkeypatch):
    import shutil

    from minterpr.cli.shared.model_options import describe_choices
    from minterpr.runtime.run import load_run
    from minterpr.training.post_training import calibrate_and_choose_weight

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    monkeypatch.setattr("minterpr.training.calibration.MIN_ANNOTATED_IMAGES", 1)
    cfg = load_config(run / "config.yaml", ["progress=false"])  # cache_dir "": RUN_DIR/cache, the copy
    cached = {p: p.stat().st_mtime_ns for p in (run / "cache").rglob("*.pt")}
    assert cached
    extras = calibrate_and_choose_weight(cfg, run / "model.pt")
    assert {p: p.stat().st_mtime_ns for p in (run / "cache").rglob("*.pt")} == cached  # read the val caches
    calibration = extras.calibration
    assert calibration.split == "val" and calibration.temperatures
    assert set(calibration.temperatures) <= set(ONTOLOGY.slot_names)
    assert calibration.nll_after <= calibration.nll_before + 1e-9
    # the per-label validation AUC of the calibrated probabilities (what the page hides labels by)
    assert calibration.label_auc and all(0.0 <= a <= 100.0 for a in calibration.label_auc.values())
    assert set(calibration.label_auc) <= {f"{s}:{v}" for s, v in ONTOLOGY.flat_labels()}
    assert load_run(run).extras == extras  # what was returned is what was stored
    assert read_checkpoint(run / "model.pt")["extra"]["stage"] == extras.other["stage"]  # training's keys kept
    assert "attribute temperatures fitted on val" in describe_choices(extras)
    assert f"attribute weight {extras.scoring.attribute_weight:g} chosen on val" in describe_choices(extras)
    model = load_model(run / "model.pt")
    for j, (slot, _) in enumerate(ONTOLOGY.flat_labels()):  # every label of a fitted slot carries its T
        expected = calibration.temperatures.get(slot, 1.0)
        assert model.attribute_temperature[j].item() == pytest.approx(expected, rel=1e-6)


def test_existing_run_needs_resume_and_the_same_config(finished_run, dataset, capsys):
    assert main(train_args(dataset, finished_run)) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(train_args(dataset, finished_run, "seed=5") + ["--resume"]) == 2
    assert "differs from the checkpoint's in seed" in capsys.readouterr().err
    assert main(["train", "--out", str(finished_run), "--resume"]) == 0  # finished: nothing to do


def test_runs_can_share_a_feature_cache(dataset, tmp_path):
    shared = tmp_path / "shared_cache"
    first = ["stages=[attributes,alignment]", f"cache_dir={shared}"]
    assert main(train_args(dataset, tmp_path / "a", *first)) == 0
    files = {p: p.stat().st_mtime_ns for p in shared.rglob("*.pt")}
    assert files and not (tmp_path / "a" / "cache").exists()
    # another run with the same frozen encoders (same seed: tiny ones are random) reads every entry, writes none
    assert main(train_args(dataset, tmp_path / "b", *first, "loss_weights.id=0.1")) == 0
    assert {p: p.stat().st_mtime_ns for p in shared.rglob("*.pt")} == files


def test_resume_before_the_first_checkpoint_starts_over(dataset, tmp_path, capsys):
    out = tmp_path / "early"
    cfg = load_config("tiny", [f"data.root={dataset}", "stages=[alignment]"])
    save_config(cfg, out / "config.yaml")  # what a run killed before its first checkpoint leaves
    assert main(["train", "--out", str(out), "--resume"]) == 0
    assert load_checkpoint(out / "last.pt")["done"]
    # a run whose last.pt was lost after it trained is refused, never silently trained over
    (out / "last.pt").unlink()
    stamp = (out / "model.pt").stat().st_mtime_ns
    assert main(["train", "--out", str(out), "--resume"]) == 2
    assert "last.pt is missing but the run has model.pt, metrics.jsonl" in capsys.readouterr().err
    assert (out / "model.pt").stat().st_mtime_ns == stamp
    assert main(["train", "--out", str(tmp_path / "nothing"), "--resume"]) == 2
    assert "--resume without --config needs" in capsys.readouterr().err
    assert main(train_args(dataset, tmp_path / "nothing") + ["--resume"]) == 2
    assert "not a training run" in capsys.readouterr().err


def test_train_refuses_selection_on_test(dataset, tmp_path, capsys):
    assert main(train_args(dataset, tmp_path / "run", "selection_split=test")) == 2
    assert "refused" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_augmented_training_same_weights_with_or_without_workers(dataset, tmp_path):
    """No stem cache: pixels are decoded and augmented every step, per-item seeds make the
    result independent of how many worker processes decode them."""
    weights = []
    for workers in (0, 2):
        out = tmp_path / f"aug{workers}"
        args = train_args(
            dataset,
            out,
            "augment=true",
            "stages=[dialogue]",
            "stages.0.epochs=1",
            "cache_features=false",
            f"workers={workers}",
            "model.dropout=0.2",
        )  # RNG in use
        assert main(args) == 0
        assert not (out / "cache").exists() and (out / "model.pt").is_file()
        weights.append(load_checkpoint(out / "last.pt")["model"])
    assert all(torch.equal(v, weights[1][k]) for k, v in weights[0].items())


def test_kill_9_mid_epoch_then_resume_gives_the_same_weights(finished_run, dataset, tmp_path):
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "minterpr", *train_args(dataset, out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=subprocess_env())
    last = out / "last.pt"
    deadline = time.monotonic() + 120
    while not last.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)  # no cleanup, no chance to finish a write
    proc.wait()
    assert last.exists(), proc.stderr.read().decode()[-2000:]
    interrupted = load_checkpoint(last)
    assert not interrupted["done"] and not (out / "model.pt").exists()  # it really died mid-run
    resumed = subprocess.run(
        [sys.executable, "-m", "minterpr", "train", "--out", str(out), "--resume"],
        capture_output=True,
        text=True,
        timeout=300,
        env=subprocess_env(),
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "model:" in resumed.stdout
    a = load_checkpoint(finished_run / "last.pt")
    b = load_checkpoint(last)
    assert b["done"] and a["global_step"] == b["global_step"]
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
    assert [r["train"] for r in a["history"]] == [r["train"] for r in b["history"]]
    assert (finished_run / "metrics.jsonl").read_text().count("\n") == (out / "metrics.jsonl").read_text().count("\n")
