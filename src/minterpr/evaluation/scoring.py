"""How evaluation scores a round: the one scoring configuration, and attribute evidence per round.

There is one scoring path (:mod:`minterpr.interaction.reranking`): sessions and the static replay
both form a round's final gallery scores with :func:`~minterpr.interaction.reranking.rerank_rows`
from the backend's cosine scores, the facts parsed so far and the user's judgements of reference
images so far:

``cos(q_r, v) + w · Σ_distinct facts log P(fact | v)``, then rejected references and their
near-duplicates demoted (rejected ones kept below the best image not rejected), anchor
refinement, confirmed images pinned first.

The configuration is :class:`~minterpr.interaction.reranking.RerankConfig` (one name, one set
of defaults). ``w`` (``attribute_weight``) is chosen on a validation split
(:func:`minterpr.evaluation.static.select_attribute_weight`) and stored with the model
(checkpoint extra ``"scoring"``: ``RerankConfig.to_dict()``, read back by
``RerankConfig.from_dict``, which also reads the older ``{"attribute_weight", "prob_floor",
"reject_references"}`` form; a model that stores none gets the defaults).

Example:
    >>> import numpy as np
    >>> from minterpr.types import DescriptionTurn
    >>> probs = np.full((2, len(ONTOLOGY.flat_labels())), 0.1, np.float32)
    >>> col = ONTOLOGY.flat_labels().index(("upper_colour", "red"))
    >>> probs[1, col] = 0.9  # image 1 looks red on top
    >>> ll = round_log_likelihoods([DescriptionTurn("a man in a red shirt")], probs)  # (R, N)
    >>> int(np.argmax(ll[0]))
    1
    >>> RerankConfig.from_dict({"attribute_weight": 0.1, "prob_floor": 0.02, "reject_references": True}).rejection
    True
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.language.dialogue_acts import turn_facts
from minterpr.language.evidence import PROB_FLOOR
from minterpr.interaction.reranking import FactLikelihoods, RerankConfig
from minterpr.types import Turn

DEFAULT_WEIGHT_GRID = (0.0, 0.02, 0.05, 0.1, 0.2, 0.4)  # w candidates tried on the validation split

__all__ = ["DEFAULT_WEIGHT_GRID", "round_log_likelihoods"]


def round_log_likelihoods(turns: Sequence[Turn], attribute_probs: np.ndarray,
                          prob_floor: float = PROB_FLOOR) -> np.ndarray:
    """(R, N) float64: row r = Σ log P(fact | image) over the distinct facts of turns[0..r]
    (each turn read with :func:`~minterpr.language.dialogue_acts.turn_facts`), the attribute
    term :func:`~minterpr.interaction.reranking.rerank` adds after round r."""
    scorer = FactLikelihoods(attribute_probs, prob_floor)
    out = np.zeros((len(turns), len(scorer.probs)), np.float64)
    facts: list[Fact] = []
    for r, turn in enumerate(turns):
        facts.extend(turn_facts(turn))
        out[r] = scorer.total(facts)
    return out
