"""The same-person probability shown for two crops of one gallery: re-ranked by shared neighbours.

"Follow this person" offers the confirmed crop's likely matches with a same-person probability
(:mod:`minterpr.interaction.follow`, :mod:`minterpr.serving.follow`). The cosine's calibration
(:class:`~minterpr.interaction.appearance.SamePersonCalibration`) overstates it on footage: on
the street video, pairs of crops from two tracks given P ≥ 0.8 showed one person 19 % of the time.
Re-ranked by shared neighbours (:mod:`minterpr.index.reciprocal`: two crops of one person sit
among the same few crops) the same pairs separate better (ROC AUC 84.4 → 90.4), and the follow
panel's offers are right a little more often (precision 0.310 → 0.334, fewer offers; recall
0.513 → 0.460; docs/benchmarks.md, "Re-ranking by shared neighbours"). So when the appearance
model's calibration carries a re-ranked fit (``reranked``) and the gallery has at most
:data:`RERANK_MAX` crops, pairs of its crops are scored re-ranked, with that fit; otherwise by
cosine with the cosine fit.

The search's own image-to-image steps (near-duplicates, what a rejection pushes down:
:class:`~minterpr.interaction.similarities.Similarities`) keep the cosine: they ask how alike two
crops look, and with re-ranked pairs PETA val's R@1 after 5 turns fell from 71.1 to 69.0 %
(docs/benchmarks.md). An image from outside the gallery has no neighbours in it: cosine too.

:class:`GalleryPairs` computes the (N, N) re-ranked scores once per gallery index, on first use
(:func:`gallery_pairs` keeps it on the index, so the sessions of one gallery share it).

Example:
    >>> import numpy as np
    >>> from minterpr.interaction.appearance import fit_same_person_both
    >>> rng = np.random.default_rng(0)
    >>> people = np.repeat(np.arange(12), 4)
    >>> vectors = rng.normal(size=(12, 8))[people] + 0.5 * rng.normal(size=(48, 8))
    >>> vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    >>> fit = fit_same_person_both(vectors, people.astype(str), split="val")
    >>> pairs = GalleryPairs(vectors, fit)
    >>> pairs.reranked, pairs.scores([0]).shape
    (True, (1, 48))
    >>> p = pairs.probability([0])[0]
    >>> bool(p[1:4].mean() > p[4:].mean())  # its own person's other crops first
    True
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from minterpr.index.reciprocal import k_reciprocal_distances

if TYPE_CHECKING:
    from minterpr.interaction.appearance import SamePersonCalibration

# gallery crops up to which pairs are re-ranked: one (N, N) float32 matrix kept (100 MB at this size; 0.65 GB
# at the peak and 7.6 s on 2 busy cores to make, once per gallery); a larger gallery compares its crops by cosine
RERANK_MAX = 5_000


class GalleryPairs:
    """Same-person scores and probabilities of gallery crops with each other (see the module doc)."""

    def __init__(self, vectors: np.ndarray, calibration: "SamePersonCalibration") -> None:
        self.vectors = np.asarray(vectors, dtype=np.float32)  # (N, A) L2-normalised appearance vectors
        fits = calibration.reranked is not None and 2 <= len(self.vectors) <= RERANK_MAX
        # the fit whose score these pairs use: the re-ranked one where it applies, else the cosine one
        self.calibration = calibration.reranked if fits else calibration
        self._matrix: np.ndarray | None = None  # (N, N) 1 - re-ranked distance, made on first use
        self._lock = threading.Lock()

    @property
    def reranked(self) -> bool:
        """Whether pairs are scored re-ranked (else by cosine)."""
        return self.calibration.rerank is not None

    def _scores(self) -> np.ndarray:
        with self._lock:
            if self._matrix is None:
                config = self.calibration.rerank
                self._matrix = 1.0 - k_reciprocal_distances(self.vectors, None, config)  # (N, N)
            return self._matrix

    def scores(self, images: Sequence[int] | np.ndarray) -> np.ndarray:
        """(k, N) score of each of ``images`` (gallery rows) with every crop, on the calibration's scale."""
        images = np.asarray(images, dtype=np.int64)
        if self.reranked:
            return self._scores()[images]
        return self.vectors[images] @ self.vectors.T

    def probability(self, images: Sequence[int] | np.ndarray, base_rate: float | None = None) -> np.ndarray:
        """(k, N) same-person probability of each of ``images`` with every crop (``base_rate``: the prior
        where it is used; None: the fit's)."""
        return np.asarray(self.calibration.probability(self.scores(images), base_rate=base_rate))


def gallery_pairs(index: Any) -> GalleryPairs | None:
    """The :class:`GalleryPairs` of a gallery index's appearance vectors (kept on the index: one per
    gallery), or None when it has no appearance vectors or no same-person calibration."""
    vectors, calibration = getattr(index, "appearance", None), getattr(index, "same_person", None)
    if vectors is None or calibration is None:
        return None
    vectors = index.compared_appearance()  # about the gallery's centre when the calibration was fitted so
    kept = getattr(index, "_gallery_pairs", None)
    if kept is not None and kept[0] is vectors and kept[1] is calibration:
        return kept[2]
    pairs = GalleryPairs(vectors, calibration)
    index._gallery_pairs = (vectors, calibration, pairs)
    return pairs
