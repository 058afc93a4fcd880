"""The names of a built dataset's files, spelled once.

Every dataset minterpr builds (``data synth``, ``data peta``, ``data pa100k``, ``data convert``,
``data mark``) has this layout, written by :mod:`minterpr.data.build` and read through
:class:`minterpr.data.dataset.BuiltDataset`; both take the names from here::

    DIR/dataset.json            the build marker (DATASET_FILE)
    DIR/images/...              the images (IMAGES_DIR)
    DIR/gallery_<split>.jsonl   every image of the split: identity, camera, attributes
    DIR/<split>.jsonl           MInterPEDES dialogues whose targets are that split's images

Example:
    >>> gallery_file("val"), dialogues_file("val")
    ('gallery_val.jsonl', 'val.jsonl')
    >>> split_files(["test"])
    ['gallery_test.jsonl', 'test.jsonl']
    >>> ".webp" in IMAGE_SUFFIXES
    True
"""

from __future__ import annotations

from typing import Iterable

SPLITS = ("train", "val", "test")  # the splits a build may write, in training order
DATASET_FILE = "dataset.json"  # the build marker
IMAGES_DIR = "images"  # the image folder of a build (for PETA and PA-100K a link to the release)
GALLERY_PREFIX = "gallery_"  # a gallery manifest is GALLERY_PREFIX + split + ".jsonl"
# the image files a folder of crops may hold (folder sources, `data peta`, `adapt --images`, a
# gallery read from a folder without a manifest); every one of them is read by Pillow
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")


def gallery_file(split: str) -> str:
    """The gallery manifest's file name of ``split``."""
    return f"{GALLERY_PREFIX}{split}.jsonl"


def dialogues_file(split: str) -> str:
    """The MInterPEDES dialogue file's name of ``split``."""
    return f"{split}.jsonl"


def split_files(splits: Iterable[str] = SPLITS) -> list[str]:
    """The manifest and dialogue file names a build writes for ``splits``."""
    return [name for split in splits for name in (gallery_file(split), dialogues_file(split))]


def split_of_file(name: str) -> str:
    """The split a manifest or dialogue file name belongs to.

    >>> split_of_file("gallery_train.jsonl"), split_of_file("val.jsonl")
    ('train', 'val')
    """
    return name.removeprefix(GALLERY_PREFIX).removesuffix(".jsonl")
