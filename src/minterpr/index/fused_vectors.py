"""The fused score as one nearest-neighbour search: query cosine plus attribute evidence.

Before rejections and the anchor, a turn's score of image i is

    fused(i) = cos(q, e_i) + w · Σ_{distinct facts f} log clip(P(f | i), floor, 1 - floor)

(:func:`minterpr.interaction.reranking.rerank`). Each fact's term is a per-image feature, so the
fused score is an inner product of an augmented image vector with an augmented query:

* a fact on **one value** (``Fact("gender", ("male",))``, or negated) is a label-level feature:
  ``log clip(r_l)`` or ``log clip(1 - r_l)``, where ``r_l`` is the label's probability normalised
  over its slot (single-valued slots) or the label's probability itself (multi-valued slots).
  :func:`label_features` stores these 2L features per image beside its embedding, and
  :func:`augmented_query` puts ``w`` at the features of the facts stated: then
  ``[e_i, features_i] · [q, w·indicators] == fused(i)``;
* a fact on **several values** ("red or white") is not a sum of label features (its probability
  is a sum or a product before the log and the clip), so it is one more column of its own,
  computed from the probabilities by the same formula
  (:func:`~minterpr.language.evidence.fact_log_likelihood`) the first time it is stated, and
  cached (:class:`FactColumns`).

A search over these vectors returns the top-K of the fused score directly, so a shortlist no longer
misses images the attribute evidence lifts (:mod:`minterpr.interaction.shortlist`). Two searches:

* :func:`fused_top_k`: exact, one (N, D) scan plus one (N,) column per fact and an argpartition;
* :class:`~minterpr.index.fused_ivf.FusedIVF`: inverted lists over the embeddings; the fused
  score is computed exactly on the rows of the lists probed (see that module).

:func:`~minterpr.language.evidence.fact_log_likelihood` is the one formula: rerank calls it too, so both
get the same bits.

Example:
    >>> from minterpr.language.ontology import ONTOLOGY
    >>> rng = np.random.default_rng(0)
    >>> emb = rng.normal(size=(6, 4)).astype(np.float32); emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    >>> probs = rng.uniform(size=(6, len(ONTOLOGY.flat_labels()))).astype(np.float32)
    >>> facts = (Fact("gender", ("female",)), Fact("carried", ("backpack",), negated=True))
    >>> aug = np.hstack([emb, label_features(probs, 0.02)]) @ augmented_query(emb[0], facts, 0.1)
    >>> rows, scores = fused_top_k(emb, FactColumns(probs, 0.02), emb[0], facts, 0.1, 3)
    >>> bool(np.allclose(np.sort(aug)[::-1][:3], scores, atol=1e-5))
    True
"""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.errors import InputError
from minterpr.language.evidence import chosen_columns, fact_log_likelihood, normalised_probs

__all__ = ["FactColumns", "augmented_query", "fact_feature", "fused_top_k", "label_features"]

_NUM_LABELS = len(ONTOLOGY.flat_labels())  # L


def label_features(probs: np.ndarray, floor: float) -> np.ndarray:
    """(N, 2L) float32 per image: [log clip(r_l), log clip(1 - r_l)] for every label l (r as
    :func:`~minterpr.language.evidence.normalised_probs`), the augmented part of an image vector."""
    r = normalised_probs(probs)
    return np.hstack([np.log(np.clip(r, floor, 1 - floor)), np.log(np.clip(1 - r, floor, 1 - floor))])


def fact_feature(fact: Fact) -> int | None:
    """Position in :func:`label_features` of a one-value fact's feature; None for a fact on several values."""
    if len(fact.values) != 1:
        return None
    return chosen_columns(fact)[0] + (_NUM_LABELS if fact.negated else 0)


def augmented_query(query: np.ndarray, facts: Sequence[Fact], weight: float) -> np.ndarray:
    """(D + 2L,) float64 ``[q, w · indicators]``: its inner product with ``[e_i, label_features_i]`` is
    the fused score (every distinct fact counted once). InputError for a fact on several values
    (not a label feature: :class:`FactColumns` gives it a column of its own)."""
    extra = np.zeros(2 * _NUM_LABELS)
    for fact in dict.fromkeys(facts):
        at = fact_feature(fact)
        if at is None:
            raise InputError(f"augmented_query: the fact {fact} names several values; it is not a label feature")
        extra[at] = weight
    return np.concatenate([np.asarray(query, np.float64), extra])


class FactColumns:
    """(N,) log P(fact | image) per fact over one gallery, computed the first time a fact is asked
    for and kept (at most ``max_columns``, oldest dropped): the feature columns of the augmented
    vectors, only those some conversation used. Thread-safe; an index shares one per floor."""

    def __init__(self, attribute_probs: np.ndarray, prob_floor: float, max_columns: int = 64) -> None:
        probs = np.asarray(attribute_probs)
        if probs.ndim != 2 or probs.shape[1] != _NUM_LABELS:
            raise InputError(f"attribute_probs must be (N, {_NUM_LABELS}), got {probs.shape}")
        self.probs = probs  # (N, L) as the index holds them
        self.floor = float(prob_floor)  # the rerank config's clip
        self.max_columns = int(max_columns)  # columns kept (4 bytes x N each)
        self._columns: dict[Fact, np.ndarray] = {}
        self._lock = threading.Lock()

    def column(self, fact: Fact) -> np.ndarray:
        """(N,) log P(fact | image), as :func:`~minterpr.language.evidence.fact_log_likelihood` gives it."""
        with self._lock:
            found = self._columns.get(fact)
        if found is None:
            found = fact_log_likelihood(fact, self.probs, self.floor)
            with self._lock:
                self._columns[fact] = found
                while len(self._columns) > self.max_columns:
                    self._columns.pop(next(iter(self._columns)))
        return found

    def total(self, facts: Sequence[Fact]) -> np.ndarray:
        """(N,) float64 Σ over the distinct ``facts`` in order of first mention (rerank's sum)."""
        total = np.zeros(len(self.probs), dtype=np.float64)
        for fact in dict.fromkeys(facts):
            total += self.column(fact)
        return total


def fused_top_k(
    embeddings: np.ndarray, columns: FactColumns | None, query: np.ndarray, facts: Sequence[Fact], weight: float, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k of the fused score: ((k,) gallery rows, (k,) float64 scores), best first.

    ``columns`` None (no attribute probabilities) or no facts: the cosine alone."""
    scores = (np.asarray(query, np.float32) @ embeddings.T).astype(np.float64)  # (N,)
    if columns is not None and facts and weight:
        scores += weight * columns.total(facts)
    n = len(scores)
    k = min(int(k), n)
    top = np.argpartition(scores, n - k)[n - k :] if k < n else np.arange(n)
    top = top[np.argsort(-scores[top], kind="stable")]
    return top, scores[top]


def fact_columns(index: object, floor: float) -> FactColumns | None:
    """The :class:`FactColumns` an index keeps for ``floor`` (made on first use); None without probabilities."""
    probs = getattr(index, "attribute_probs", None)
    if probs is None:
        return None
    cache = index.__dict__.setdefault("_fact_columns", {})
    with _CACHE_LOCK:
        found = cache.get(float(floor))
        if found is None:
            found = cache[float(floor)] = FactColumns(probs, floor)
    return found


_CACHE_LOCK = threading.Lock()
