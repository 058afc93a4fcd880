"""Round scores with explicit attribute evidence: ``cos(q_r, v) + w · Σ log P(fact | v)``.

The embedding alone has to squeeze every stated attribute through one vector; the facts the
user stated (parsed from the description, the answers and the reference feedback — negations
such as "not white" included) are also direct evidence against the image side's attribute
probabilities. The log-likelihood term is the one sessions use
(:func:`minterpr.interaction.reranking.attribute_log_likelihood`); here it is applied to
replayed dialogues. A fact stated twice counts once (repeating it is no new evidence).

``w`` (``ScoringConfig.attribute_weight``) is chosen on a validation split
(:func:`select_attribute_weight`) and stored with the model (checkpoint extra ``"scoring"``).

Example:
    >>> import numpy as np
    >>> from minterpr.types import DescriptionTurn
    >>> probs = np.full((2, len(ONTOLOGY.flat_labels())), 0.1, np.float32)
    >>> col = ONTOLOGY.flat_labels().index(("upper_colour", "red"))
    >>> probs[1, col] = 0.9  # image 1 looks red on top
    >>> ll = round_log_likelihoods([DescriptionTurn("a man in a red shirt")], probs)  # (R, N)
    >>> int(np.argmax(ll[0]))
    1
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.data.ontology import ONTOLOGY
from minterpr.data.phrasing import Fact
from minterpr.interaction.dialogue_acts import turn_facts
from minterpr.interaction.reranking import fact_log_likelihood
from minterpr.types import Turn

DEFAULT_WEIGHT_GRID = (0.0, 0.02, 0.05, 0.1, 0.2, 0.4)  # w candidates tried on the validation split


@dataclass(frozen=True)
class ScoringConfig:
    """How a round's final gallery scores are formed."""

    attribute_weight: float = 0.0  # w: weight of Σ log P(fact | image); 0 = embedding cosine only
    prob_floor: float = 0.02  # probabilities clipped to [floor, 1 - floor] (one wrong label costs <= ln 50)
    reject_references: bool = True  # a reference image the user rejected ("not her") ranks below every
    #   image not rejected from that round on, as in a session (interaction.reranking.keep_rejected_below)

    def __post_init__(self) -> None:
        if self.attribute_weight < 0:
            raise ValueError(f"attribute_weight must be >= 0, got {self.attribute_weight}")
        if not 0.0 < self.prob_floor < 0.5:
            raise ValueError(f"prob_floor must be in (0, 0.5), got {self.prob_floor}")

    def to_dict(self) -> dict[str, float | bool]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "ScoringConfig":
        """Inverse of :meth:`to_dict`; None (a model saved without one) gives the default."""
        return cls(**dict(data or {}))


class FactScorer:
    """Per-fact (N,) log-likelihoods over one gallery, each computed once and reused."""

    def __init__(self, attribute_probs: np.ndarray, prob_floor: float = 0.02) -> None:
        if attribute_probs.ndim != 2 or attribute_probs.shape[1] != len(ONTOLOGY.flat_labels()):
            raise ValueError(f"attribute_probs must be (N, {len(ONTOLOGY.flat_labels())}), got {attribute_probs.shape}")
        self.probs = attribute_probs
        self.floor = prob_floor
        self._cache: dict[Fact, np.ndarray] = {}

    def fact(self, fact: Fact) -> np.ndarray:
        if fact not in self._cache:
            self._cache[fact] = fact_log_likelihood(fact, self.probs, self.floor).astype(np.float32)
        return self._cache[fact]

    def rounds(self, turns: Sequence[Turn]) -> np.ndarray:
        """(R, N): row r = Σ log P(fact | image) over the distinct facts of turns[0..r]."""
        out = np.zeros((len(turns), len(self.probs)), np.float32)
        seen: set[Fact] = set()
        total = np.zeros(len(self.probs), np.float32)
        for r, turn in enumerate(turns):
            for fact in turn_facts(turn):
                if fact not in seen:
                    seen.add(fact)
                    total = total + self.fact(fact)
            out[r] = total
        return out


def round_log_likelihoods(turns: Sequence[Turn], attribute_probs: np.ndarray, prob_floor: float = 0.02) -> np.ndarray:
    """(R, N) cumulative attribute log-likelihood of the facts of turns[0..r] for every image."""
    return FactScorer(attribute_probs, prob_floor).rounds(turns)


def combine(cosine: np.ndarray, loglik: np.ndarray | None, config: ScoringConfig) -> np.ndarray:
    """Final scores ``cosine + w · loglik`` (``cosine`` alone when w is 0 or there is no loglik)."""
    if loglik is None or config.attribute_weight == 0:
        return cosine
    return cosine + np.float32(config.attribute_weight) * loglik
