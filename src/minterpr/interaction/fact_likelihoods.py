"""The attribute term of re-ranking: log P(fact | image) of the stated facts over one gallery.

Each distinct fact's (N,) log-likelihood is computed once (:class:`FactLikelihoods`) and summed in
order of first mention, so a session (:func:`~minterpr.interaction.reranking.rerank`) and the static
replay (:mod:`minterpr.evaluation.static`) add the same arrays in the same order: the same bits.

Example:
    >>> import numpy as np
    >>> from minterpr.language.ontology import ONTOLOGY
    >>> probs = np.full((2, len(ONTOLOGY.flat_labels())), 0.5)
    >>> attribute_log_likelihood([], probs).tolist()  # no facts, no evidence
    [0.0, 0.0]
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from minterpr.errors import InputError
from minterpr.language.evidence import PROB_FLOOR, fact_log_likelihood
from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact

__all__ = ["FactLikelihoods", "attribute_log_likelihood"]


class FactLikelihoods:
    """Per-fact (N,) log-likelihoods over one gallery, each computed once and reused.

    :meth:`total` is the attribute term of :func:`rerank`: the float64 sum, in order of first
    mention, of the distinct facts; the static replay adds the same arrays in the same order
    round by round, so both get the same bits.
    """

    def __init__(self, attribute_probs: np.ndarray, prob_floor: float = PROB_FLOOR) -> None:
        probs = np.asarray(attribute_probs)
        if probs.ndim != 2 or probs.shape[1] != len(ONTOLOGY.flat_labels()):
            raise InputError(f"attribute_probs must be (N, {len(ONTOLOGY.flat_labels())}), got {probs.shape}")
        self.probs = probs
        self.floor = prob_floor
        self._cache: dict[Fact, np.ndarray] = {}

    def fact(self, fact: Fact) -> np.ndarray:
        """(N,) log P(fact | image)."""
        if fact not in self._cache:
            self._cache[fact] = fact_log_likelihood(fact, self.probs, self.floor)
        return self._cache[fact]

    def total(self, facts: Sequence[Fact]) -> np.ndarray:
        """(N,) float64 Σ over the distinct ``facts`` (a repeated fact is no new evidence)."""
        total = np.zeros(len(self.probs), dtype=np.float64)
        for fact in dict.fromkeys(facts):
            total += self.fact(fact)
        return total


def attribute_log_likelihood(facts: Sequence[Fact], probs: np.ndarray, floor: float = PROB_FLOOR) -> np.ndarray:
    """(N,) Σ over the distinct facts of log P(fact | image); zeros when there are no facts."""
    return FactLikelihoods(probs, floor).total(facts)
