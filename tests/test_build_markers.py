"""Build markers: unfinished, damaged or mixed datasets are refused with the command that rebuilds
them; reruns repair; temporaries are cleaned; a valid build is accepted (and checked quickly)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minterpr.cli.shared.model_options import gallery_images
from minterpr.cli.main import main
from minterpr.data.build import check_if_built, mark_dataset, read_marker, require_built_dataset, synth_rebuild_args
from minterpr.data.layout import DATASET_FILE
from minterpr.data.dialogue_synthesis import DialogueSynthesisConfig
from minterpr.data.formats.gallery import write_gallery
from minterpr.data.synthetic import dataset as synthetic_dataset
from minterpr.data.synthetic.dataset import SyntheticDatasetConfig, build_synthetic_dataset
from minterpr.data.synthetic.world import SyntheticWorldConfig
from minterpr.errors import DatasetError
from minterpr.training.config import load_config
from minterpr.training.data import load_split
from minterpr.types import GalleryImage

SIZES = [
    "--train-identities",
    "6",
    "--val-identities",
    "3",
    "--test-identities",
    "4",
    "--height",
    "64",
    "--width",
    "32",
]
TINY = [*SIZES, "--workers", "1", "--quiet"]


def _command(seed: int, out: Path) -> str:
    """The rebuild command readers must name for a TINY build (CLI defaults for the rest)."""
    return (
        f"minterpr data synth --out {out} --seed {seed} --train-identities 6 --val-identities 3 "
        "--test-identities 4 --cameras 6 --height 64 --width 32 --max-qa-turns 3 --max-image-turns 3"
    )


def _config(seed: int) -> SyntheticDatasetConfig:
    world = SyntheticWorldConfig(
        seed=seed, train_identities=6, val_identities=3, test_identities=4, image_size=(64, 32), workers=1
    )
    return SyntheticDatasetConfig(world=world, dialogues=DialogueSynthesisConfig(seed=seed))


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != DATASET_FILE
    }


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[int, Path]:
    """Finished TINY builds of seeds 0 and 1 (copy them before changing anything)."""
    root = tmp_path_factory.mktemp("built")
    for seed in (0, 1):
        assert main(["data", "synth", "--out", str(root / f"seed{seed}"), "--seed", str(seed), *TINY]) == 0
    return {0: root / "seed0", 1: root / "seed1"}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """An untrained tiny model: enough for `minterpr eval` to reach the dataset check."""
    from minterpr.models import create_model, save_model

    run = tmp_path_factory.mktemp("run")
    save_model(create_model("tiny"), run / "model.pt")
    return run


def _copy(builds: dict[int, Path], seed: int, tmp_path: Path) -> Path:
    return Path(shutil.copytree(builds[seed], tmp_path / "data", symlinks=True))


def _refused_everywhere(data: Path, reason: str, command: str, capsys, run: Path) -> None:
    """Every reader refuses ``data`` with ``reason`` and the rebuild ``command``."""
    for check in (
        require_built_dataset,
        check_if_built,
        lambda d: load_split(load_config("tiny", [f"data.root={d}"]).data, "val"),
        lambda d: gallery_images(d, None, "test"),
    ):
        with pytest.raises(DatasetError, match=reason) as info:
            check(data)
        assert command in str(info.value)
    capsys.readouterr()
    assert main(["simulate", "--backend", "attribute", "--data", str(data), "--rounds", "1", "--limit", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("minterpr simulate: error: ") and command in err and "Traceback" not in err
    assert main(["data", "validate", str(data / "test.jsonl"), str(data / "gallery_test.jsonl")]) == 1
    out = capsys.readouterr().out
    assert f"{data / DATASET_FILE}: build: " in out and command in out
    assert main(["eval", "--run", str(run), "--data", str(data / "test.jsonl"), "--json", str(data / "e.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("minterpr eval: error: ") and command in err and not (data / "e.json").exists()


def test_a_finished_build_is_accepted_and_reused(builds, tmp_path, capsys) -> None:
    data = _copy(builds, 0, tmp_path)
    marker = require_built_dataset(data)
    assert marker["state"] == "finished" and marker["config"]["world"]["seed"] == 0
    assert set(marker["fingerprint"]["files"]) == {
        f"{p}{s}.jsonl" for s in ("train", "val", "test") for p in ("", "gallery_")
    }
    assert marker["fingerprint"]["images"]["files"] == sum(marker["splits"][s]["images"] for s in marker["splits"])
    assert len(load_split(load_config("tiny", [f"data.root={data}"]).data, "val").samples) > 0
    assert main(["data", "validate", str(data / "test.jsonl")]) == 0
    capsys.readouterr()
    before = (data / DATASET_FILE).stat().st_ino
    # the same settings, any number of workers: recognised, nothing rewritten
    assert main(["data", "synth", "--out", str(data), "--seed", "0", *SIZES, "--workers", "2", "--quiet"]) == 0
    assert "already holds this build (fingerprint verified)" in capsys.readouterr().out
    assert (data / DATASET_FILE).stat().st_ino == before


def test_killed_build_over_another_seed_is_refused_and_a_rerun_finishes_it(
    builds, tmp_path, monkeypatch, capsys, tiny_run
) -> None:
    data = _copy(builds, 0, tmp_path)
    real_write_split = synthetic_dataset.write_split

    def dies_on_val(out, split, *args, **kwargs):
        if split == "val":
            raise KeyboardInterrupt  # killed after the seed-1 images and train split were written
        return real_write_split(out, split, *args, **kwargs)

    monkeypatch.setattr(synthetic_dataset, "write_split", dies_on_val)
    with pytest.raises(KeyboardInterrupt):
        build_synthetic_dataset(data, _config(1), progress=False)
    monkeypatch.undo()
    assert read_marker(data)["state"] == "building"
    # seed-1 images under seed-0 labels: refused, naming the interrupted build's command
    _refused_everywhere(data, "the build did not finish", _command(1, data), capsys, tiny_run)
    assert main(["data", "synth", "--out", str(data), "--seed", "1", *TINY]) == 0
    assert "dataset written to" in capsys.readouterr().out
    assert require_built_dataset(data)["config"]["world"]["seed"] == 1
    assert _files(data) == _files(builds[1])  # exactly the seed-1 build, nothing of seed 0 left


def test_truncated_split_is_refused_and_a_rerun_repairs_it(builds, tmp_path, capsys, tiny_run) -> None:
    data = _copy(builds, 0, tmp_path)
    whole = (data / "val.jsonl").read_bytes()
    (data / "val.jsonl").write_bytes(whole[: len(whole) // 2])
    _refused_everywhere(
        data,
        f"val.jsonl has {len(whole) // 2:,} bytes, the build wrote {len(whole):,}",
        _command(0, data),
        capsys,
        tiny_run,
    )
    assert main(["data", "synth", "--out", str(data), "--seed", "0", *TINY]) == 0
    assert "dataset written to" in capsys.readouterr().out  # rebuilt, not "already built"
    assert require_built_dataset(data) and _files(data) == _files(builds[0])


@pytest.mark.parametrize("damage", ["same size", "missing file", "mixed images", "extra image", "images gone"])
def test_changed_files_are_refused(builds, tmp_path, damage, capsys, tiny_run) -> None:
    data = _copy(builds, 0, tmp_path)
    if damage == "same size":
        text = (data / "gallery_test.jsonl").read_text()
        (data / "gallery_test.jsonl").write_text(text.replace("synth:", "synte:", 1))
        reason = "gallery_test.jsonl changed since the build"
    elif damage == "missing file":
        (data / "train.jsonl").unlink()
        reason = "train.jsonl is missing"
    elif damage == "mixed images":  # another seed's pictures copied over the build
        shutil.copytree(builds[1] / "images", data / "images", dirs_exist_ok=True)
        reason = "images/ changed since the build"
    elif damage == "extra image":
        (data / "images" / "test" / "99999_c0_0.jpg").write_bytes(b"\xff\xd8")
        reason = "images/ changed since the build"
    else:
        shutil.rmtree(data / "images")
        reason = "images/ is missing"
    _refused_everywhere(data, reason, _command(0, data), capsys, tiny_run)


def test_reruns_remove_stale_temporaries(builds, tmp_path, capsys) -> None:
    data = _copy(builds, 0, tmp_path)
    left = [data / ".val.jsonl.dead.tmp", data / "images" / "test" / ".00010_c1_0.jpg.4242.tmp"]
    for tmp in left:
        tmp.write_bytes(b"half")
    assert require_built_dataset(data)  # a killed writer's temporary is not part of the build
    assert main(["data", "synth", "--out", str(data), "--seed", "0", *TINY]) == 0  # the fast path cleans too
    assert not any(tmp.exists() for tmp in left)
    for tmp in left:
        tmp.write_bytes(b"half")
    assert main(["data", "synth", "--out", str(data), "--seed", "0", *TINY, "--force"]) == 0
    assert not any(tmp.exists() for tmp in left) and _files(data) == _files(builds[0])


def test_kill_9_during_synth_then_rerun(tmp_path, capsys) -> None:
    data = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    args = [
        "--train-identities",
        "300",
        "--val-identities",
        "2",
        "--test-identities",
        "2",
        "--height",
        "64",
        "--width",
        "32",
        "--workers",
        "1",
        "--quiet",
    ]
    proc = subprocess.Popen([sys.executable, "-m", "minterpr", "data", "synth", "--out", str(data), *args], env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list(data.glob("images/train/*.jpg"))) < 20:
            assert proc.poll() is None, "the build ended before it could be killed"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    command = f"minterpr data synth --out {data} --seed 0 --train-identities 300"
    with pytest.raises(DatasetError, match="the build did not finish") as info:
        require_built_dataset(data)
    assert command in str(info.value)
    assert main(["data", "synth", "--out", str(data), *args]) == 0
    marker = require_built_dataset(data)
    assert marker["fingerprint"]["images"]["files"] == sum(s["images"] for s in marker["splits"].values())
    assert not list(data.rglob(".*.tmp"))


def test_a_folder_minterpr_did_not_build(builds, tmp_path, capsys) -> None:
    data = _copy(builds, 0, tmp_path)
    (data / DATASET_FILE).unlink()
    # files read as they are by readers that only need a file ...
    assert check_if_built(data) is None and len(gallery_images(data, None, "test")) > 0
    assert main(["data", "validate", str(data / "test.jsonl")]) == 0
    # ... but training and simulate need a built or checked folder
    with pytest.raises(DatasetError, match=f"no {DATASET_FILE} build marker") as info:
        require_built_dataset(data)
    assert f"minterpr data mark {data}" in str(info.value) and f"minterpr data synth --out {data}" in str(info.value)
    assert main(["simulate", "--backend", "attribute", "--data", str(data), "--rounds", "1", "--limit", "2"]) == 2
    capsys.readouterr()
    assert main(["data", "mark", str(data)]) == 0
    assert "marked: 6 files" in capsys.readouterr().out
    assert main(["simulate", "--backend", "attribute", "--data", str(data), "--rounds", "1", "--limit", "2"]) == 0
    with open(data / "test.jsonl", "a", encoding="utf-8") as f:
        f.write("\n")
    with pytest.raises(DatasetError, match=f"test.jsonl has .*`minterpr data mark {data}` to repair it"):
        require_built_dataset(data)
    # a folder minterpr built is rebuilt with its own command, never marked
    with pytest.raises(DatasetError, match="rebuild it with `minterpr data synth"):
        mark_dataset(builds[0])


def test_mark_reads_every_file_strictly(tmp_path, capsys) -> None:
    (tmp_path / "gallery_test.jsonl").write_text('{"path": "a.jpg", "person_id": "x:1"}\n{"path": \n')
    assert main(["data", "mark", str(tmp_path)]) == 2
    assert "gallery_test.jsonl:2" in capsys.readouterr().err and not (tmp_path / DATASET_FILE).exists()
    assert main(["data", "mark", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_markers_of_other_kinds(builds, tmp_path) -> None:
    data = _copy(builds, 0, tmp_path)
    marker = json.loads((data / DATASET_FILE).read_text())
    legacy = {k: marker[k] for k in ("name", "config", "splits")}  # dataset.json as written before markers
    (data / DATASET_FILE).write_text(json.dumps(legacy))
    with pytest.raises(DatasetError, match="no build fingerprint") as info:
        require_built_dataset(data)
    assert _command(0, data) in str(info.value)
    (data / DATASET_FILE).write_text('{"name": "synth')  # cut: unreadable
    with pytest.raises(DatasetError, match="dataset.json cannot be read"):
        check_if_built(data)
    (data / DATASET_FILE).write_text('{"description": "somebody else\'s file"}')
    assert check_if_built(data) is None  # not minterpr's marker: the folder is not a minterpr build
    assert synth_rebuild_args(marker["config"])[:4] == ["data", "synth", "--out", "{DIR}"]


def test_the_check_is_fast(tmp_path) -> None:
    """One stat per image and a hash of the JSONL files: ~0.1 s for the default synthetic build
    (8,064 images, 18 MB), ~0.3 s for PETA's 16,611 files; here 2,000 images, bounded loosely so
    that a loaded test machine does not fail it."""
    write_gallery([GalleryImage(f"images/{k:05d}.jpg", f"x:{k}") for k in range(2000)], tmp_path / "gallery_test.jsonl")
    (tmp_path / "images").mkdir()
    for k in range(2000):
        (tmp_path / "images" / f"{k:05d}.jpg").write_bytes(b"x" * (k % 7))
    mark_dataset(tmp_path)
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        require_built_dataset(tmp_path)
        timings.append(time.perf_counter() - started)
    assert min(timings) < 1.0, timings


def test_feature_cache_recomputes_damaged_chunks_and_removes_old_temporaries(tmp_path) -> None:
    import torch

    from minterpr.training.data import FeatureTable

    calls = []

    def compute(chunks):
        calls.extend(chunks)  # the chunks not found in the cache
        return (torch.full((len(chunk), 2), 3.0) for chunk in chunks)

    FeatureTable.build(["a", "b"], "ns", compute, cache_dir=tmp_path)
    [chunk] = tmp_path.glob("*.pt")
    chunk.write_bytes(chunk.read_bytes()[:40])  # cut short, as by a disk-full copy
    old, fresh = tmp_path / ".x.pt.dead.tmp", tmp_path / ".y.pt.live.tmp"
    old.write_bytes(b"1")
    fresh.write_bytes(b"2")  # another run sharing the cache may be writing it right now
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    table = FeatureTable.build(["a", "b"], "ns", compute, cache_dir=tmp_path)
    assert len(calls) == 2 and table.rows(["b"]).tolist() == [[3.0, 3.0]]
    assert not old.exists() and fresh.exists()
    FeatureTable.build(["a", "b"], "ns", compute, cache_dir=tmp_path)
    assert len(calls) == 2  # the rewritten chunk is read back
