"""The built dataset's room: one set of image suffixes, its file names spelled once, and a split
read from paths alone (no training config, nothing from training imported)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from minterpr.cli.shared.model_options import gallery_images
from minterpr.data.build import mark_dataset
from minterpr.data.dataset import BuiltDataset
from minterpr.data.formats.gallery import write_gallery
from minterpr.data.formats.minterpedes import write_minterpedes
from minterpr.data.layout import IMAGE_SUFFIXES
from minterpr.errors import DatasetError
from minterpr.ingest.sources import list_images
from minterpr.training.adaptation import list_crops
from minterpr.types import Dialogue, GalleryImage, RetrievalSample


def _crops(folder: Path) -> Path:
    folder.mkdir()
    for name, kind in (("a.jpg", "JPEG"), ("b.png", "PNG"), ("c.webp", "WEBP"), ("d.bmp", "BMP")):
        Image.new("RGB", (8, 16), "red").save(folder / name, kind)
    (folder / "notes.txt").write_text("not an image")
    return folder


def test_every_reader_of_a_crop_folder_takes_the_same_image_files(tmp_path):
    folder = _crops(tmp_path / "crops")
    want = ["a.jpg", "b.png", "c.webp", "d.bmp"]
    assert sorted(p.name for p in list_images(folder)) == want  # ingest folder source
    assert list_crops(folder) == want  # adapt --images
    assert sorted(im.path for im in gallery_images(folder, None, "test")) == want  # a gallery without a manifest
    assert {".webp", ".jpg", ".png", ".bmp", ".jpeg"} == set(IMAGE_SUFFIXES)


def _build(folder: Path) -> Path:
    folder.mkdir()
    write_gallery([GalleryImage("a.jpg", "x:1"), GalleryImage("b.jpg", "x:2")], folder / "gallery_val.jsonl")
    write_minterpedes([RetrievalSample("b.jpg", "x:2", Dialogue("a woman"))], folder / "val.jsonl", namespace="x")
    mark_dataset(folder)
    return folder


def test_a_split_is_read_from_paths(tmp_path):
    data = BuiltDataset(_build(tmp_path / "data"), image_root=tmp_path / "pictures")
    assert data.splits() == ["val"]
    assert data.gallery_path("val").name == "gallery_val.jsonl" and data.dialogues_path("val").name == "val.jsonl"
    split = data.split("val")
    assert split.sample_pids == ["x:2"] and split.image_root == tmp_path / "pictures"
    assert [im.person_id for im in data.gallery("val")] == ["x:1", "x:2"]
    with pytest.raises(FileNotFoundError, match="train split"):
        data.split("train")
    with pytest.raises(DatasetError, match="no gallery manifest for the 'test' split; this folder has val$"):
        data.gallery("test")  # a folder with other splits names them
    with pytest.raises(DatasetError, match="no gallery manifest for the 'val' split; build one with"):
        BuiltDataset(tmp_path / "nowhere").gallery("val")  # no dataset at all: how to build one


def test_a_benchmark_without_its_dataset_is_one_line(tmp_path):
    """The benchmarks that read a dataset's gallery say what is missing in one line, exit 2 (a traceback before)."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_vlm_scripted.py"
    done = subprocess.run(
        [sys.executable, str(script), "--data", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"bench_vlm_scripted: {tmp_path / 'nowhere' / 'gallery_test.jsonl'}: no gallery manifest for the 'test' "
        f"split; build one with `minterpr data synth --out {tmp_path / 'nowhere'}` or `minterpr data peta --root "
        f"PETA --out {tmp_path / 'nowhere'}`, or fingerprint a folder you assembled yourself with `minterpr data "
        f"mark {tmp_path / 'nowhere'}`"
    ]


def test_the_training_loader_is_the_built_dataset(tmp_path):
    from minterpr.training.config import DataConfig
    from minterpr.training.data import SplitData, load_split

    root = _build(tmp_path / "data")
    assert load_split(DataConfig(root=str(root)), "val") == BuiltDataset(root).split("val")
    assert SplitData is BuiltDataset(root).split("val").__class__


def test_reading_a_split_imports_no_training_and_no_torch(tmp_path):
    root = _build(tmp_path / "data")
    code = (
        "import sys; from minterpr.data.dataset import BuiltDataset; "
        f"BuiltDataset({str(root)!r}).split('val'); "
        "print(sorted(m for m in sys.modules if m.startswith('minterpr.training') or m == 'torch'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_commands_and_benchmarks_read_splits_through_the_built_dataset():
    """No command or benchmark imports the training loader, or spells a split's file name, to read
    a split (the probes, which damage named files of a fixture on purpose, may)."""
    import ast
    import re

    root = Path(__file__).resolve().parents[1]
    for path in sorted([*(root / "src" / "minterpr" / "cli").glob("*.py"), *(root / "benchmarks").glob("bench_*.py")]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert "minterpr.training.data" not in imported, path.name
        spelled = [
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and re.search(r"(^|/)gallery_\w+\.jsonl$", node.value)
        ]
        assert not spelled, f"{path.name} spells {spelled}: use BuiltDataset or minterpr.data.layout"
