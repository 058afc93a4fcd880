"""The appearance model at run time: same-person vectors of gallery crops, beside the attribute model.

The attribute model's embedding meets text and predicts attributes; it was never trained to tell
two people apart. The appearance model (:class:`~minterpr.models.reid.ReidModel`, an OSNet trained
on identities) is: its vectors are what "search with this image", reference-image feedback,
duplicates and presence compare. A gallery index carries them as ``GalleryIndex.appearance``
(``(N, A)`` float32, L2-normalised rows) beside its ``embeddings``; a stored gallery keeps them in
``appearance.npy`` with the appearance model's fingerprint.

Example (with a trained appearance model):
    >>> from minterpr.runtime.appearance import load_appearance
    >>> appearance = load_appearance("runs/reid/best.pt")  # doctest: +SKIP
    >>> vectors, kept, failed = appearance.embed_files(["a.jpg", "b.jpg"])  # doctest: +SKIP
    >>> vectors.shape  # doctest: +SKIP
    (2, 512)
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from minterpr.errors import ImageError, InputError
from minterpr.data.paths import resolve_under
from minterpr.index.gallery_index import GalleryIndex

if TYPE_CHECKING:
    from minterpr.interaction.appearance import SamePersonCalibration
    from minterpr.models.reid import ReidModel

DEFAULT_APPEARANCE_BATCH = 64  # crops per forward pass: OSNet x0.25 at 256x128 is ~1.3 MB per crop


@dataclass
class Appearance:
    """A loaded appearance model and where it came from."""

    model: "ReidModel"  # eval mode, CPU
    path: Path  # the file it was read from
    batch_size: int = DEFAULT_APPEARANCE_BATCH  # crops per forward pass
    # cosine -> same-person probability fitted on val (same_person.json beside the model); None = not fitted
    same_person: "SamePersonCalibration | None" = None
    _fingerprint: str | None = field(default=None, repr=False)

    @property
    def fingerprint(self) -> str:
        """The model's fingerprint (16 hex characters): what a stored gallery's appearance vectors record."""
        if self._fingerprint is None:
            from minterpr.models.fingerprint import model_fingerprint

            self._fingerprint = model_fingerprint(self.model)
        return self._fingerprint

    @property
    def dim(self) -> int:
        return int(self.model.config.feature_dim)

    def embed_files(self, paths: Sequence[str], *, strict: bool = False
                    ) -> tuple[np.ndarray, list[int], list[tuple[int, ImageError]]]:
        """Image files -> ``(k, A)`` L2-normalised vectors of the readable ones, their positions in
        ``paths``, and the ImageError of each other one (``strict``: the first is raised)."""
        import torch

        vectors, kept, failed = [], [], []
        preprocess = self.model.preprocess
        with torch.inference_mode():
            for start in range(0, len(paths), self.batch_size):
                tensors = []
                for i, path in enumerate(paths[start:start + self.batch_size], start):
                    try:
                        tensors.append(preprocess.load(path))
                    except ImageError as exc:
                        if strict:
                            raise
                        failed.append((i, exc))
                        continue
                    kept.append(i)
                if tensors:
                    vectors.append(self.model.embed(torch.stack(tensors)).float().numpy())  # (b, A)
        out = np.concatenate(vectors) if vectors else np.zeros((0, self.dim), np.float32)
        return np.ascontiguousarray(out, dtype=np.float32), kept, failed

    def add_to(self, index: GalleryIndex, *, allow_outside_root: bool = False) -> GalleryIndex:
        """``index`` with ``appearance`` vectors for every image (a copy; the embeddings are shared).
        Every image must still be readable: the first that is not raises its ImageError, naming it."""
        paths = [resolve_under(index.root or None, image.path, allow_outside=allow_outside_root)
                 for image in index.images]
        vectors, _, _ = self.embed_files(paths, strict=True)
        return with_appearance(index, vectors, self.same_person)


def with_appearance(index: GalleryIndex, vectors: np.ndarray | None,
                    same_person: "SamePersonCalibration | None" = None) -> GalleryIndex:
    """A copy of ``index`` carrying ``vectors`` as its appearance (``(N, A)``, one row per image) and
    ``same_person``, their calibration (sessions compare images by appearance only with one)."""
    copy = replace(index, appearance=vectors, same_person=None if vectors is None else same_person)
    copy.vectors, copy.fused = index.vectors, index.fused
    return copy


def load_appearance(path: str | Path, *, batch_size: int = DEFAULT_APPEARANCE_BATCH) -> Appearance:
    """The appearance model in ``path`` (a re-id run's ``best.pt`` or a run directory holding one).

    A missing or foreign file raises :class:`~minterpr.errors.RunError` naming it."""
    from minterpr.errors import RunError
    from minterpr.models.reid import load_reid_model

    if batch_size < 1:
        raise InputError(f"load_appearance: batch_size must be at least 1, got {batch_size}")
    file = Path(path)
    if file.is_dir():
        file = file / "best.pt"
    if not file.is_file():
        raise RunError(str(file), "no appearance model here (train one with `minterpr train --config reid`)")
    from minterpr.interaction.appearance import read_same_person

    model = load_reid_model(str(file))
    try:
        same_person = read_same_person(file)
    except ValueError as err:
        raise RunError(str(file), str(err)) from None
    return Appearance(model, file, batch_size, same_person)
