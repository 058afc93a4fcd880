"""Cross-camera PETA folds (minterpr.data.peta_folds, `minterpr data peta --hold-out`) on a small
fake PETA release, and the PA-100K gallery builder; the real copies when ../shared/data is there."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from support.helpers import shared_data_dir
from minterpr.cli.main import main
from minterpr.data.build import require_built_dataset
from minterpr.data.formats.gallery import read_gallery
from minterpr.data.formats.peta import read_peta
from minterpr.data.peta_folds import FOLDS, resolve_hold_out, split_held_out, subset_of
from minterpr.errors import InputError

LABELS = [
    "personalMale",
    "personalFemale",
    "upperBodyRed",
    "upperBodyBlack",
    "lowerBodyJeans",
    "lowerBodyBlue",
    "hairLong",
    "hairShort",
    "carryingBackpack",
    "footwearBlack",
    "personalLess30",
    "personalLess45",
]
# subset -> (file name of identity i, image k), identities, images per identity
LAYOUT = {
    "3DPeS": (lambda i, k: f"{i:03d}_{k + 1}_FRAME_{k}_RGB.bmp", 8, 3),
    "GRID": (lambda i, k: f"{i:04d}_{k + 1}_25004_107_32_106_221.jpeg", 10, 2),
    "MIT": (lambda i, k: f"{i:05d}_male_back.jpg", 12, 1),
    "TownCentre": (lambda i, k: f"{i}_{k * 8}.jpg", 4, 12),
    "i-LID": (lambda i, k: f"{i:04d}_{k}.jpg", 6, 3),
}


def make_fake_peta(base: Path, seed: int = 0) -> Path:
    rng = random.Random(seed)
    for subset, (name, identities, per) in LAYOUT.items():
        archive = base / "PETA dataset" / subset / "archive"
        archive.mkdir(parents=True)
        rows = []
        for i in range(1, identities + 1):
            labels = [
                rng.choice(LABELS[:2]),
                rng.choice(LABELS[2:4]),
                rng.choice(LABELS[4:6]),
                rng.choice(LABELS[6:8]),
                *rng.sample(LABELS[8:], 2),
            ]
            rows.append(f"{i} {' '.join(labels)}")
            for k in range(per):
                (archive / name(i, k)).write_bytes(b"x" * (i + k))  # never opened by the builder
        (archive / "Label.txt").write_text("\n".join(rows) + "\n")
    return base


@pytest.fixture(scope="module")
def fake_peta(tmp_path_factory) -> Path:
    return make_fake_peta(tmp_path_factory.mktemp("peta"))


def test_resolve_hold_out_matches_names_loosely_and_refuses_the_impossible():
    available = ["3DPeS", "GRID", "MIT", "i-LID"]
    assert resolve_hold_out(["ilid,grid", "GRID"], available) == ["GRID", "i-LID"]
    with pytest.raises(InputError, match="'viper': no such PETA subset here; choose from 3DPeS, GRID, MIT, i-LID"):
        resolve_hold_out(["viper"], available)
    with pytest.raises(InputError, match="nothing left to train on"):
        resolve_hold_out(["3dpes,grid,mit,ilid"], available)
    assert set(FOLDS) == {"outdoor_lowres", "indoor", "large_mixed"}


@pytest.mark.parametrize("held", [["GRID"], ["MIT", "TownCentre"]])
def test_split_held_out_is_a_fold(fake_peta, held):
    images = read_peta(fake_peta)
    splits = split_held_out(images, held, seed=3, max_val_images=4)
    assert sorted(im.path for im in splits["test"]) == sorted(im.path for im in images if subset_of(im) in held)
    pids = {split: {im.person_id for im in part} for split, part in splits.items()}
    assert not (pids["train"] & pids["val"]) and not (pids["train"] & pids["test"]) and not (pids["val"] & pids["test"])
    remaining = {subset_of(im) for im in images} - set(held)
    assert {subset_of(im) for im in splits["val"]} == remaining == {subset_of(im) for im in splits["train"]}
    per_person: dict[str, int] = {}
    for im in splits["val"]:
        per_person[im.person_id] = per_person.get(im.person_id, 0) + 1
    assert max(per_person.values()) <= 4
    # every image of a val identity beyond the cap is used nowhere; all others are in one split
    used = [im.path for part in splits.values() for im in part]
    assert len(used) == len(set(used))
    left = [im for im in images if im.path not in set(used)]
    assert all(im.person_id in pids["val"] for im in left)
    assert split_held_out(images, held, seed=3, max_val_images=4) == splits
    assert split_held_out(images, held, seed=4, max_val_images=4)["val"] != splits["val"]


def test_hold_out_build_is_a_marked_dataset_with_its_rebuild_command(fake_peta, tmp_path, capsys):
    out = tmp_path / "fold"
    assert (
        main(
            [
                "data",
                "peta",
                "--root",
                str(fake_peta),
                "--out",
                str(out),
                "--hold-out",
                "grid",
                "--quiet",
                "--max-qa-turns",
                "1",
                "--max-image-turns",
                "1",
            ]
        )
        == 0
    )
    assert "dataset written to" in capsys.readouterr().out
    marker = require_built_dataset(out)
    assert marker["hold_out"] == ["GRID"] and marker["rebuild"][-2:] == ["--hold-out", "GRID"]
    assert marker["splits"]["test"]["subsets"] == {"GRID": 20} and "GRID" not in marker["splits"]["train"]["subsets"]
    test = read_gallery(out / "gallery_test.jsonl")
    assert len(test) == 20 and all(im.path.startswith("images/GRID/archive/") for im in test)
    assert all((out / im.path).is_file() for im in test)
    for split in ("train", "val", "test"):
        records = [json.loads(line) for line in (out / f"{split}.jsonl").read_text().splitlines()]
        targets = {r["file_path"] for r in records}
        assert targets == {im.path for im in read_gallery(out / f"gallery_{split}.jsonl")}
    # the stored command rebuilds the same files
    before = (out / "dataset.json").read_text()
    args = [str(out) if a == "{DIR}" else a for a in marker["rebuild"]]
    assert main(args + ["--quiet"]) == 0
    assert json.loads((out / "dataset.json").read_text())["fingerprint"] == json.loads(before)["fingerprint"]


def test_unknown_hold_out_is_one_line_exit_2(fake_peta, tmp_path, capsys):
    assert main(["data", "peta", "--root", str(fake_peta), "--out", str(tmp_path / "x"), "--hold-out", "VIPeR"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("minterpr data peta: error: --hold-out 'VIPeR'") and len(err.splitlines()) == 1
    assert not (tmp_path / "x").exists()  # refused before anything was written


def test_pa100k_builder_refuses_a_folder_without_the_release(tmp_path, capsys):
    assert main(["data", "pa100k", "--root", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "annotation.mat: not found" in err and not (tmp_path / "out").exists()


@pytest.mark.shared_data
def test_real_folds_and_pa100k(tmp_path, capsys):
    peta, pa100k = shared_data_dir() / "peta", shared_data_dir() / "pa100k"
    if not peta.is_dir() or not pa100k.is_dir():
        pytest.skip(f"{peta} or {pa100k} not found (research-only data, never in the repository)")
    images = [im for im in read_peta(peta) if im.attributes]
    sizes = {
        name: {split: len(part) for split, part in split_held_out(images, held).items()} for name, held in FOLDS.items()
    }
    assert {name: s["test"] for name, s in sizes.items()} == {
        "outdoor_lowres": 888,
        "indoor": 1275,
        "large_mixed": 4563,
    }
    assert all(500 < s["val"] < 1000 for s in sizes.values())
    pytest.importorskip("scipy.io")
    out = tmp_path / "pa100k"
    assert main(["data", "pa100k", "--root", str(pa100k), "--out", str(out), "--quiet"]) == 0
    marker = require_built_dataset(out)
    assert {k: v["images"] for k, v in marker["splits"].items()} == {
        "train": 1599,
        "val": 200,
        "test": 199,
        "all": 1998,
    }
    gallery = read_gallery(out / "gallery_all.jsonl")
    assert len({im.person_id for im in gallery}) == 1998 and (out / gallery[0].path).is_file()
