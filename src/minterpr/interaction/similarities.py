"""Which gallery images look alike: the cosine rows re-ranking compares images by.

Near-duplicates of a rejected image, the anchor's and the plausible images' similarity rows
(:mod:`minterpr.interaction.reranking`) all come from one :class:`Similarities` per gallery: on the
appearance model's vectors when the gallery has them with their same-person calibration
(``GalleryIndex.appearance``, ``GalleryIndex.same_person``; :mod:`minterpr.runtime.appearance`), on
the attribute model's embeddings otherwise (as before appearance existed).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from minterpr.index.gallery_index import GalleryIndex


class Similarities:
    """Cosine of gallery images with a few gallery images (near-duplicates, anchors, plausible ones).

    The vectors compared are the index's appearance vectors when it has them with their calibration
    (``index.same_person``), its embeddings otherwise: one code path, :attr:`calibration` says which.
    Rows are computed one image at a time (the same way in a session and in a replay, so the
    near-duplicate threshold decides alike) and cached: a replay shares one instance, and with
    ``dense=True`` (small galleries: N × N floats) keeps them in one matrix for fast look-ups.

    Example:
        >>> from minterpr.index.gallery_index import GalleryIndex
        >>> from minterpr.interaction.appearance import SamePersonCalibration
        >>> from minterpr.types import GalleryImage
        >>> index = GalleryIndex([GalleryImage(f"{i}.jpg", "x") for i in range(2)], np.eye(2, dtype=np.float32))
        >>> from minterpr.interaction.reranking import RerankConfig
        >>> Similarities(index).threshold(RerankConfig())  # embeddings: the config's cosine
        0.9
        >>> index.appearance = np.ones((2, 1), np.float32)
        >>> index.same_person = SamePersonCalibration(10.0, -5.0, 0.01, 100, "val", 90.0)
        >>> Similarities(index).threshold(RerankConfig())  # appearance: where P(same) = 0.5
        0.5
    """

    def __init__(self, index: GalleryIndex, *, dense: bool = False) -> None:
        # the same-person calibration when comparing appearance vectors, None when comparing embeddings
        self.calibration = index.same_person if index.appearance is not None else None
        # on appearance: the vectors as compared (about the gallery's centre when the calibration was fitted so)
        self.embeddings = index.compared_appearance() if self.calibration is not None else index.embeddings
        self._outside = index.compared_vector if self.calibration is not None else np.asarray
        n = len(self.embeddings)
        self._dense = np.zeros((n, n), self.embeddings.dtype) if dense else None
        self._done = np.zeros(n, dtype=bool)
        self._rows: dict[int, np.ndarray] = {}
        self._duplicates: tuple[float, np.ndarray] | None = None  # (threshold, (N, N) bool) when dense

    def _row(self, i: int) -> np.ndarray:
        return self.embeddings @ self.embeddings[i]

    def threshold(self, config: Any) -> float:  # a reranking.RerankConfig (it imports this module)
        """The cosine above which two images are near-duplicates: ``config.duplicate_threshold`` on
        embeddings; on appearance, the cosine whose same-person probability is ``config.duplicate_probability``."""
        cal = self.calibration
        if cal is None:
            return config.duplicate_threshold
        if cal.scale <= 0:  # a calibration in which similarity is no evidence: nothing is a duplicate
            return math.inf
        p = config.duplicate_probability
        return (math.log(p / (1.0 - p)) - cal.bias) / cal.scale

    def same_person(self, images: Sequence[int] | np.ndarray) -> np.ndarray:
        """(k, N) same-person probability of each of ``images`` with every gallery image (1 with itself);
        on appearance only (ValueError on embeddings, which have no calibration)."""
        if self.calibration is None:
            raise ValueError("same_person: the index has no calibrated appearance vectors")
        images = np.asarray(images, dtype=np.int64)
        probs = self.calibration.probability(self.rows(images))
        probs[np.arange(len(images)), images] = 1.0
        return probs

    def to(self, vector: np.ndarray) -> np.ndarray:
        """(N,) cosine of an outside (A,) appearance (or embedding) vector with every gallery image
        (an appearance vector as it comes from the model: compared in the gallery's space)."""
        return self.embeddings @ np.asarray(self._outside(vector), dtype=self.embeddings.dtype)

    def rows(self, images: Sequence[int] | np.ndarray) -> np.ndarray:
        """(k, N) cosine of each of ``images`` (gallery indices) with every gallery image."""
        images = np.asarray(images, dtype=np.int64)
        if self._dense is not None:
            for i in np.unique(images[~self._done[images]]).tolist():
                self._dense[i] = self._row(i)
                self._done[i] = True
            return self._dense[images]
        out = []
        for i in images.tolist():
            row = self._rows.get(i)
            if row is None:
                row = self._rows[i] = self._row(i)
            out.append(row)
        return np.stack(out) if out else np.zeros((0, len(self.embeddings)), self.embeddings.dtype)

    def duplicates(self, images: Sequence[int] | np.ndarray, threshold: float) -> np.ndarray:
        """(k, N) bool: images whose cosine with each of ``images`` exceeds ``threshold`` (itself included)."""
        images = np.asarray(images, dtype=np.int64)
        if self._dense is None:
            similar = self.rows(images) > threshold
            similar[np.arange(len(images)), images] = True
            return similar
        if self._duplicates is None or self._duplicates[0] != threshold:
            n = len(self.embeddings)
            self._duplicates = (threshold, np.zeros((n, n), dtype=bool))
            self._dup_done = np.zeros(n, dtype=bool)
        matrix = self._duplicates[1]
        missing = np.unique(images[~self._dup_done[images]])
        if len(missing):
            matrix[missing] = self.rows(missing) > threshold
            matrix[missing, missing] = True
            self._dup_done[missing] = True
        return matrix[images]
