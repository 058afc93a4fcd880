"""The built dataset's room: one set of image suffixes, its file names spelled once, and a split
read from paths alone (no training config, nothing from training imported)."""
from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from minterpr.cli.common import gallery_images
from minterpr.data.layout import IMAGE_SUFFIXES
from minterpr.ingest.sources import list_images
from minterpr.training.adaptation import list_crops


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

