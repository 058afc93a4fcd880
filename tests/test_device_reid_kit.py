"""The appearance recipe's device kit: a pack small enough to travel (``benchmarks/device_pack_reid.py``)
and the one prepared command that trains on it (``benchmarks/device_reid.sh``), run here on the CPU."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from minterpr.data.reid import read_cuhk03, read_manifest, split_identities, write_manifest  # noqa: E402
from support.datasets import make_cuhk03  # noqa: E402
from support.helpers import load_benchmark  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def manifests(tmp_path: Path) -> tuple[Path, Path]:
    images = read_cuhk03(make_cuhk03(tmp_path / "cuhk03", people=8))
    train, val = split_identities(images, test_identities=3, seed=0)
    write_manifest(train, tmp_path / "train.jsonl")
    write_manifest(val, tmp_path / "val.jsonl")
    return tmp_path / "train.jsonl", tmp_path / "val.jsonl"


def test_the_pack_holds_every_crop_relative_and_names_its_sources(manifests, tmp_path, capsys):
    bench = load_benchmark("device_pack_reid")
    train, val = manifests
    weights = tmp_path / "start.pth"
    weights.write_bytes(b"weights")
    out = tmp_path / "pack"
    assert bench.main(["--manifests", str(train), str(val), "--weights", str(weights), "--out", str(out)]) == 0
    assert "32 crops (original bytes)" in capsys.readouterr().out
    record = json.loads((out / "pack.json").read_text())
    assert record["crops"] == 32 and record["manifests"]["train.jsonl"]["crops"] == 20
    assert record["weights"]["sha256"] == hashlib.sha256(b"weights").hexdigest()
    assert record["bytes"] == sum(f.stat().st_size for f in out.iterdir() if f.name != "pack.json")
    assert (out / "weights.pth").read_bytes() == b"weights"
    for name in ("train.jsonl", "val.jsonl"):
        rows = [json.loads(line) for line in (out / name).read_text().splitlines()]
        assert all(row["path"].startswith("images/") and row["path"].endswith(".jpg") for row in rows)
        assert not any((out / row["path"]).exists() for row in rows)  # in the zip until unpacked
    with zipfile.ZipFile(out / "images.zip") as archive:
        assert sorted(archive.namelist()) == [f"images/{k:06d}.jpg" for k in range(32)]
        archive.extractall(out)
    for name, source in (("train.jsonl", train), ("val.jsonl", val)):
        packed, original = read_manifest(out / name), read_manifest(source)
        assert [(i.person_id, i.camera) for i in packed] == [(i.person_id, i.camera) for i in original]
        for ours, theirs in zip(packed, original):  # resolved against the pack; the original bytes
            assert Path(ours.path).read_bytes() == Path(theirs.path).read_bytes()
    assert not (tmp_path / "pack.partial").exists()
    # written once; over the budget: one line, nothing left behind
    assert bench.main(["--manifests", str(train), "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    small = tmp_path / "small"
    assert bench.main(["--manifests", str(train), "--out", str(small), "--budget-mib", "0.001"]) == 2
    err = capsys.readouterr().err
    assert "--budget-mib 0.001" in err and "--namespace" in err
    assert not small.exists() and not (tmp_path / "small.partial").exists()
    assert bench.main(["--manifests", str(train), "--out", str(small), "--max-size", "wide"]) == 2
    assert "--max-size must be HxW" in capsys.readouterr().err
    assert bench.main(["--manifests", str(train), "--out", str(small), "--webp", "0"]) == 2
    assert "--webp 1-100 (got 0)" in capsys.readouterr().err
    assert bench.main(["--manifests", str(train), "--out", str(small), "--namespace", "peta-grid"]) == 2
    assert "no identity in namespace peta-grid" in capsys.readouterr().err


def test_namespaces_large_crops_and_webp(tmp_path):
    from PIL import Image

    from minterpr.data.reid import ReidImage

    Image.new("RGB", (100, 400), (200, 10, 10)).save(tmp_path / "tall.png")
    Image.new("RGB", (20, 40), (10, 200, 10)).save(tmp_path / "small.png")
    images = [ReidImage(str(tmp_path / "tall.png"), "a:1", "0"), ReidImage(str(tmp_path / "small.png"), "b:1", "0")]
    write_manifest(images, tmp_path / "m.jsonl")
    bench = load_benchmark("device_pack_reid")
    assert bench.main(["--manifests", str(tmp_path / "m.jsonl"), "--out", str(tmp_path / "p")]) == 0
    with zipfile.ZipFile(tmp_path / "p" / "images.zip") as archive:
        assert archive.namelist() == ["images/000000.jpg", "images/000001.png"]  # shrunk; kept as it was
        with Image.open(archive.open("images/000000.jpg")) as image:
            assert image.size == (64, 256)  # its shape kept
        assert archive.read("images/000001.png") == (tmp_path / "small.png").read_bytes()
    argv = ["--manifests", str(tmp_path / "m.jsonl"), "--out", str(tmp_path / "w"), "--namespace", "b", "--webp", "80"]
    assert bench.main(argv) == 0
    assert [json.loads(line)["person_id"] for line in (tmp_path / "w" / "m.jsonl").read_text().splitlines()] == ["b:1"]
    with zipfile.ZipFile(tmp_path / "w" / "images.zip") as archive:
        assert archive.namelist() == ["images/000000.webp"]
    assert json.loads((tmp_path / "w" / "pack.json").read_text())["encoding"] == "webp 80"


@pytest.mark.skipif(shutil.which("bash") is None, reason="the device command is a bash script")
def test_the_device_command_trains_on_the_pack_here_on_the_cpu(manifests, tmp_path):
    bench = load_benchmark("device_pack_reid")
    train, val = manifests
    assert bench.main(["--manifests", str(train), str(val), "--out", str(tmp_path / "pack")]) == 0
    env = {
        **os.environ,
        "DEVICE": "cpu",
        "EPOCHS": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # python3: this one
    }
    tiny = ["iterations_per_epoch=2", "identities_per_batch=3", "images_per_identity=2", "model.image_size=[32,16]"]
    command = ["bash", str(REPO / "benchmarks" / "device_reid.sh"), str(tmp_path / "pack"), str(tmp_path / "out")]
    done = subprocess.run(
        [*command, *[a for s in tiny for a in ("--set", s)]], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run = tmp_path / "out" / "run"
    assert (run / "best.pt").is_file() and (run / "last.pt").is_file()
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["epoch"] == 1
    assert "device: cpu" in (run / "config.yaml").read_text()
    log = (tmp_path / "out" / "train.log").read_text()
    assert "s of training on cpu" in log and (tmp_path / "out" / "pack.json").is_file()
    missing = subprocess.run(
        [*command[:2], str(tmp_path / "none"), str(tmp_path / "o2")], capture_output=True, text=True
    )
    assert missing.returncode == 2 and "train.jsonl is missing" in missing.stderr


def test_reid_training_takes_the_device_option(manifests, tmp_path, capsys):
    from minterpr.cli.main import main

    train, val = manifests
    args = ["train", "--config", "reid", "--out", str(tmp_path / "run"), "-q", "--set", f"train=[{train}]"]
    args += ["--set", f"val={val}", "--set", "epochs=1", "--set", "iterations_per_epoch=1"]
    args += ["--set", "identities_per_batch=3", "--set", "images_per_identity=2", "--set", "model.image_size=[32,16]"]
    if not torch.cuda.is_available():
        assert main([*args, "--device", "cuda"]) == 2
        assert "CUDA is not available" in capsys.readouterr().err
        shutil.rmtree(tmp_path / "run", ignore_errors=True)
    assert main([*args, "--device", "cpu"]) == 0
    assert "device: cpu" in (tmp_path / "run" / "config.yaml").read_text()
    assert main(["train", "--out", str(tmp_path / "run"), "--resume", "-q", "--device", "cpu"]) == 0
