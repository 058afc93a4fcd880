"""A built dataset, read: its splits, manifests, dialogues and images, from paths alone.

:class:`BuiltDataset` is the one object that knows where a build keeps things (the names
come from :mod:`minterpr.data.layout`, the build marker's check from
:mod:`minterpr.data.build`). Commands, training, evaluation and benchmarks read a split
through it instead of spelling ``gallery_<split>.jsonl`` themselves, and it takes paths, not a
training config, so reading a split imports nothing from training.

Example:
    >>> import tempfile
    >>> from minterpr.data.build import mark_dataset
    >>> from minterpr.data.formats.gallery import write_gallery
    >>> from minterpr.data.formats.minterpedes import write_minterpedes
    >>> from minterpr.types import Dialogue, GalleryImage, RetrievalSample
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = write_gallery([GalleryImage("a.jpg", "x:1"), GalleryImage("b.jpg", "x:2")], folder / "gallery_val.jsonl")
    >>> _ = write_minterpedes([RetrievalSample("b.jpg", "x:2", Dialogue("a woman"))], folder / "val.jsonl", namespace="x")
    >>> _ = mark_dataset(folder)
    >>> data = BuiltDataset(folder)
    >>> data.splits()
    ['val']
    >>> split = data.split("val")
    >>> split.sample_pids, [image.path for image in split.target_images()], split.image_root == folder
    (['x:2'], ['b.jpg'], True)
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from minterpr.data.build import BUILD_HINT, check_if_built, require_built_dataset
from minterpr.data.formats.gallery import read_gallery
from minterpr.data.formats.minterpedes import read_minterpedes
from minterpr.data.layout import DATASET_FILE, IMAGE_SUFFIXES, IMAGES_DIR, SPLITS, dialogues_file, gallery_file
from minterpr.errors import DatasetError
from minterpr.types import GalleryImage, RetrievalSample

__all__ = ["BuiltDataset", "SplitData", "DATASET_FILE", "IMAGES_DIR", "IMAGE_SUFFIXES", "SPLITS"]


@dataclass
class SplitData:
    """One split: dialogues, the gallery manifest and each dialogue's identity."""

    name: str  # "train", "val" or "test"
    samples: list[RetrievalSample]  # dialogues, file order (truncated for smoke runs)
    gallery: list[GalleryImage]  # every image of the split's gallery manifest
    image_root: Path  # image paths resolve against it
    sample_pids: list[str]  # (len(samples),) identity of each target, from the manifest

    def target_images(self) -> list[GalleryImage]:
        """Manifest entry of each sample's target image."""
        by_path = {image.path: image for image in self.gallery}
        return [by_path[s.target_path] for s in self.samples]


class BuiltDataset:
    """The dataset folder ``root`` (images resolve against ``image_root``, default ``root``)."""

    def __init__(self, root: str | os.PathLike[str], image_root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root)  # the folder the build wrote (the marker, manifests and dialogues)
        self.image_root = Path(image_root) if image_root else self.root  # gallery paths resolve here

    def __repr__(self) -> str:
        return f"BuiltDataset({os.fspath(self.root)!r})"

    def gallery_path(self, split: str) -> Path:
        """Where the gallery manifest of ``split`` lies (it need not exist)."""
        return self.root / gallery_file(split)

    def dialogues_path(self, split: str) -> Path:
        """Where the MInterPEDES dialogues of ``split`` lie (they need not exist)."""
        return self.root / dialogues_file(split)

    def splits(self) -> list[str]:
        """The splits that have a gallery manifest, in :data:`SPLITS` order."""
        return [split for split in SPLITS if self.gallery_path(split).is_file()]

    def require(self) -> dict:
        """The finished, verified build marker; DatasetError naming the rebuild command otherwise."""
        return require_built_dataset(self.root)

    def check(self) -> dict | None:
        """The verified marker, or None for a folder minterpr did not build (read as it is)."""
        return check_if_built(self.root)

    def gallery(self, split: str, *, check_images: bool = False) -> list[GalleryImage]:
        """Every image of ``split``'s manifest (DataError naming the line of a bad record;
        DatasetError naming the folder's splits, or how to build one, when the manifest is missing).

        Example:
            >>> BuiltDataset("nowhere").gallery("test")
            Traceback (most recent call last):
            ...
            minterpr.errors.DatasetError: nowhere/gallery_test.jsonl: no gallery manifest for the 'test' split; build one with `minterpr data synth --out nowhere` or `minterpr data peta --root PETA --out nowhere`, or fingerprint a folder you assembled yourself with `minterpr data mark nowhere`
        """
        path = self.gallery_path(split)
        if not path.is_file():
            present = self.splits()
            raise DatasetError(
                path,
                f"no gallery manifest for the {split!r} split; "
                + (
                    f"this folder has {', '.join(present)}"
                    if present
                    else BUILD_HINT.format(dir=shlex.quote(os.fspath(self.root)))
                ),
            )
        return read_gallery(path, check_images=check_images)

    def dialogues(self, split: str, *, check_images: bool = False) -> list[RetrievalSample]:
        """The dialogues of ``split``, file order."""
        return read_minterpedes(self.dialogues_path(split), check_images=check_images)

    def split(
        self, name: str, max_samples: int = 0, *, dialogues: str | None = None, gallery: str | None = None
    ) -> SplitData:
        """Read split ``name`` ("train", "val", "test") of a finished build whose fingerprint verifies.

        Every target image must be listed in the gallery manifest (the identity comes from it).
        ``max_samples`` > 0 keeps the first N dialogues; ``dialogues`` and ``gallery`` are other
        file names under ``root`` for the split (a training config may rename them).
        """
        self.require()
        dialogue_path = self.root / dialogues if dialogues else self.dialogues_path(name)
        manifest = self.root / gallery if gallery else self.gallery_path(name)
        for path in (dialogue_path, manifest):
            if not path.is_file():
                raise FileNotFoundError(f"{name} split: {path} does not exist (data.root={os.fspath(self.root)!r})")
        samples = read_minterpedes(dialogue_path)
        if max_samples > 0:
            samples = samples[:max_samples]
        images = read_gallery(manifest)
        pid_of = {image.path: image.person_id for image in images}
        missing = [s.target_path for s in samples if s.target_path not in pid_of]
        if missing:
            raise ValueError(
                f"{dialogue_path}: {len(missing)} target images are not in {manifest} "
                f"(first: {missing[0]!r}); the manifest gives each dialogue its identity"
            )
        return SplitData(name, samples, images, self.image_root, [pid_of[s.target_path] for s in samples])

    def image_files(self) -> list[Path]:
        """Every image file under ``root`` (:data:`IMAGE_SUFFIXES`), sorted: a folder without a manifest."""
        return sorted(p for p in self.root.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
