"""``minterpr data synth`` / ``data peta``: the files written, their validity, determinism, splits."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from support.helpers import shared_data_dir
from minterpr.cli.main import main
from minterpr.data.formats import read_gallery, read_minterpedes
from minterpr.types import split_person_id

SPLITS = ("train", "val", "test")
TINY = [
    "--train-identities",
    "20",
    "--val-identities",
    "6",
    "--test-identities",
    "8",
    "--height",
    "128",
    "--width",
    "64",
    "--workers",
    "1",
    "--quiet",
]


def _synth(out: Path, seed: int, capsys) -> str:
    assert main(["data", "synth", "--out", str(out), "--seed", str(seed), *TINY]) == 0
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, Path]:
    """Three tiny builds: seed 0 twice (separate folders) and seed 1."""
    root = tmp_path_factory.mktemp("synth")
    outs = {"a": root / "a", "b": root / "b", "seed1": root / "seed1"}
    for name, seed in (("a", 0), ("b", 0), ("seed1", 1)):
        assert main(["data", "synth", "--out", str(outs[name]), "--seed", str(seed), *TINY]) == 0
    return outs


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _check_layout(out: Path, capsys) -> dict:
    """Validate every written file (images too) and check splits and references; returns dataset.json."""
    info = json.loads((out / "dataset.json").read_text(encoding="utf-8"))
    written = [str(out / f"{prefix}{split}.jsonl") for split in SPLITS for prefix in ("gallery_", "")]
    assert main(["data", "validate", "--check-images", *written]) == 0
    report = capsys.readouterr().out
    assert report.count(": OK (") == len(written) and "warning" not in report
    owner: dict[str, str] = {}  # person id -> the split it belongs to
    for split in SPLITS:
        gallery = read_gallery(out / f"gallery_{split}.jsonl")
        pid_of = {image.path: image.person_id for image in gallery}
        for pid in set(pid_of.values()):
            assert owner.setdefault(pid, split) == split, f"{pid} is in both {owner[pid]} and {split}"
        samples = read_minterpedes(out / f"{split}.jsonl")
        stats = info["splits"][split]
        assert (stats["images"], stats["identities"], stats["records"]) == (
            len(gallery),
            len(set(pid_of.values())),
            len(samples),
        )
        per_target: dict[str, int] = defaultdict(int)
        for sample in samples:
            target = pid_of[sample.target_path]  # every target is an image of the split's gallery
            per_target[sample.target_path] += 1
            assert sample.dialogue.qa_turns and sample.dialogue.reference_turns
            for ref in sample.dialogue.reference_turns:
                assert pid_of[ref.reference_path] != target, f"{split}: a reference shows the target {target}"
        assert set(per_target) == set(pid_of) and set(per_target.values()) == {2}
    return info


def test_synth_writes_a_valid_dataset(builds: dict[str, Path], capsys) -> None:
    out = builds["a"]
    for name in ("dataset.json", *(f"{p}{s}.jsonl" for s in SPLITS for p in ("gallery_", ""))):
        assert (out / name).is_file(), name
    assert len(list((out / "images" / "test").glob("*.jpg"))) >= 2 * 8  # >= 2 images per identity
    info = _check_layout(out, capsys)
    assert {s: info["splits"][s]["identities"] for s in SPLITS} == {"train": 20, "val": 6, "test": 8}
    assert all(split_person_id(g.person_id)[0] == "synth" for g in read_gallery(out / "gallery_test.jsonl"))


def test_synth_is_deterministic_per_seed(builds: dict[str, Path]) -> None:
    a, b, other = _files(builds["a"]), _files(builds["b"]), _files(builds["seed1"])
    assert a == b  # byte-identical, images included
    assert a["test.jsonl"] != other["test.jsonl"] and a["gallery_test.jsonl"] != other["gallery_test.jsonl"]
    shared_images = [name for name in a if name.endswith(".jpg") and name in other]
    assert any(a[name] != other[name] for name in shared_images) or set(a) != set(other)


def test_synth_prints_its_summary(tmp_path: Path, capsys) -> None:
    out = _synth(tmp_path / "d", 3, capsys)
    info = json.loads((tmp_path / "d" / "dataset.json").read_text(encoding="utf-8"))
    assert f"dataset written to {tmp_path / 'd'}" in out and "ambiguous@desc" in out
    rows = {
        line.split()[0]: line.split() for line in out.splitlines() if line.split()[:1] in (["train"], ["val"], ["test"])
    }
    for split in SPLITS:
        stats = info["splits"][split]
        assert rows[split][1:4] == [str(stats["images"]), str(stats["identities"]), str(stats["records"])]
        assert rows[split][4] == f"{stats['ambiguity_description']:.1f}%"


def test_built_records_can_be_shown(builds: dict[str, Path], tmp_path: Path) -> None:
    png = tmp_path / "record.png"
    assert main(["data", "show", str(builds["a"] / "test.jsonl"), "--index", "3", "--out", str(png)]) == 0
    assert png.stat().st_size > 1000


@pytest.mark.shared_data
@pytest.mark.slow
def test_peta_dialogues_on_the_real_data(tmp_path: Path, capsys) -> None:
    root = shared_data_dir() / "peta"
    if not root.is_dir():
        pytest.skip(f"{root} not found (research-only data, never in the repository)")
    out = tmp_path / "peta"
    assert main(["data", "peta", "--root", str(root), "--out", str(out), "--quiet"]) == 0
    assert "dataset written to" in capsys.readouterr().out
    assert (out / "images").is_symlink()  # images are linked, never copied
    info = _check_layout(out, capsys)
    assert info["name"] == "peta" and all(info["splits"][s]["records"] > 1000 for s in SPLITS)
    test_ids = {g.person_id for g in read_gallery(out / "gallery_test.jsonl")}
    multi_camera = ("3dpes", "grid", "i-lid", "ilid", "caviar4reid", "sarc3d")
    assert all(split_person_id(pid)[0].lower().endswith(multi_camera) for pid in test_ids)
