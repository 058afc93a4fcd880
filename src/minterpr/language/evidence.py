"""What a parsed fact says about an image: the one copy of the fact log-likelihood formula.

Every scorer of minterpr reads attribute evidence through :func:`fact_log_likelihood`: the
re-ranking of a session (:mod:`minterpr.interaction.reranking`), the static replay, the fused
search of the shortlist (:mod:`minterpr.index.fused_vectors`, :mod:`minterpr.index.fused_ivf`),
so all of them get the same bits. :data:`SLOT_COLUMNS` and :func:`chosen_columns` say which
columns of the (N, L) label probabilities (L = ``ONTOLOGY.flat_labels()``) a slot and a fact
read; :data:`PROB_FLOOR` is the one default clip.

What the user said of a shown image ("these shoes are blue") is evidence about that image that
outranks the model's: :func:`stated_holds` judges a fact by it, and :func:`stated_log_likelihood`
is the attribute term of such an image with the facts of the slots they described judged by
their words (a fact it makes hold counts log(1 - floor), one it denies log(floor), as a certain
prediction would), the others by the model as before. The session's marks and its ranking (and the
static replay) read it there.

Example:
    >>> import numpy as np
    >>> probs = np.full((2, len(ONTOLOGY.flat_labels())), 0.5, np.float32)
    >>> probs[:, SLOT_COLUMNS["gender"]] = [[0.9, 0.1], [0.2, 0.8]]
    >>> ONTOLOGY.slot("gender").value_names
    ('male', 'female')
    >>> [round(float(p), 2) for p in np.exp(fact_log_likelihood(Fact("gender", ("female",)), probs))]
    [0.1, 0.8]
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact

__all__ = [
    "PROB_FLOOR",
    "SINGLE",
    "SLOT_COLUMNS",
    "chosen_columns",
    "fact_log_likelihood",
    "normalised_probs",
    "stated_holds",
    "stated_log_likelihood",
]

PROB_FLOOR = 0.02  # probabilities are clipped to [floor, 1 - floor]: one wrong prediction costs <= ln 50
SLOT_COLUMNS = {slot: np.array(cols) for slot, cols in ONTOLOGY.slot_columns().items()}  # slot -> label columns
SINGLE = {s.name: not s.multi for s in ONTOLOGY.slots}  # slot -> values exclusive (probabilities normalised)
# a vision-language model's reading of an image (the anchor use) moves a fact's probability for that image
# this far towards 1 or 0: half-way, because a reading can be wrong (the user's own words move it all the way)
SEEN_WEIGHT = 0.5


def chosen_columns(fact: Fact) -> list[int]:
    """The label columns of the values a fact names, in the fact's order.

    Example:
        >>> chosen_columns(Fact("gender", ("female",))) == [int(SLOT_COLUMNS["gender"][1])]
        True
    """
    values = ONTOLOGY.slot(fact.slot).value_names
    return [int(SLOT_COLUMNS[fact.slot][values.index(v)]) for v in fact.values]


def fact_log_likelihood(
    fact: Fact, probs: np.ndarray, floor: float = PROB_FLOOR, rows: np.ndarray | None = None
) -> np.ndarray:
    """(N,) log P(fact | image) from (N, L) label probabilities (or (n,) for ``rows``, a selection).

    Single-valued slots: probabilities are normalised over the slot's values and P(one of V) is
    their sum. Multi-valued slots: labels are independent, P(any of V) = 1 - Π(1 - p_v) and a
    negated fact ("no backpack") is Π(1 - p_v).
    """
    cols = SLOT_COLUMNS[fact.slot]
    chosen = chosen_columns(fact)
    if SINGLE[fact.slot]:
        slot_probs = probs[:, cols] if rows is None else probs[rows[:, None], cols]  # (N, V)
        total = np.maximum(slot_probs.sum(axis=1), 1e-12)
        picked = probs[:, chosen] if rows is None else probs[rows[:, None], chosen]
        p = picked.sum(axis=1) / total  # (N,)
    else:
        picked = probs[:, chosen] if rows is None else probs[rows[:, None], chosen]
        p = 1.0 - np.prod(1.0 - picked, axis=1)
    if fact.negated:
        p = 1.0 - p
    return np.log(np.clip(p, floor, 1.0 - floor))


def normalised_probs(probs: np.ndarray) -> np.ndarray:
    """(N, L) r: each label's probability normalised over its slot (single-valued slots) or as it is
    (multi-valued slots): the probability a one-value fact reads (float32)."""
    probs = np.asarray(probs, np.float32)
    r = probs.copy()
    for slot, cols in SLOT_COLUMNS.items():
        if SINGLE[slot]:
            r[:, cols] = probs[:, cols] / np.maximum(probs[:, cols].sum(axis=1, keepdims=True), 1e-12)
    return r


def stated_holds(fact: Fact, stated: Sequence[Fact]) -> bool | None:
    """``fact`` judged by what the user said of an image (``stated``: "these are blue"); None when they
    said nothing of its slot, or nothing that decides it.

    Example:
        >>> blue = [Fact("footwear_colour", ("blue",))]
        >>> stated_holds(Fact("footwear_colour", ("brown",)), blue), stated_holds(Fact("gender", ("male",)), blue)
        (False, None)
    """
    said = [f for f in stated if f.slot == fact.slot]
    present_values = {v for f in said if not f.negated for v in f.values}
    absent_values = {v for f in said if f.negated for v in f.values}
    if present_values:
        present = bool(set(fact.values) & present_values)
    elif absent_values and set(fact.values) <= absent_values:
        present = False
    else:
        return None
    return not present if fact.negated else present


def stated_log_likelihood(
    loglik: np.ndarray,
    facts: Sequence[Fact],
    stated: Mapping[int, Sequence[Fact]],
    probs: np.ndarray,
    floor: float = PROB_FLOOR,
) -> np.ndarray:
    """``loglik`` ((N,) Σ over the distinct ``facts`` of log P(fact | image)) with the term of each image
    the user described (``stated``: gallery position -> what they said of it) recomputed: the facts
    their words decide count log(1 - floor) or log(floor), the rest as the model has them. A copy;
    ``loglik`` itself is left as it was. Images whose words decide none of the facts keep their term.
    A vision-language model's reading of the image among ``stated`` (a fact with ``use == "anchor"``)
    decides only what the user's words leave open, and only part of the way (:data:`SEEN_WEIGHT`).

    Example:
        >>> probs = np.full((2, len(ONTOLOGY.flat_labels())), 0.5)
        >>> brown = Fact("footwear_colour", ("brown",))
        >>> before = fact_log_likelihood(brown, probs)
        >>> after = stated_log_likelihood(before, [brown], {1: [Fact("footwear_colour", ("blue",))]}, probs)
        >>> bool(after[0] == before[0]), round(float(after[1]), 3)  # image 1's shoes are blue: not brown
        (True, -3.912)
    """
    out = np.array(loglik, dtype=np.float64)
    distinct = list(dict.fromkeys(facts))
    for i, said in stated.items():
        own = [f for f in said if not _seen(f)]
        seen = [f for f in said if _seen(f)]
        verdicts = [stated_holds(f, own) for f in distinct]
        readings = [stated_holds(f, seen) if v is None and seen else None for f, v in zip(distinct, verdicts)]
        if all(v is None for v in verdicts) and all(r is None for r in readings):
            continue
        rows = np.array([i])
        total = 0.0  # float64 in the order of first mention, as FactLikelihoods.total adds them
        for fact, holds, reading in zip(distinct, verdicts, readings):
            if holds is not None:
                total += float(np.log(1.0 - floor) if holds else np.log(floor))
            elif reading is None:
                total += float(fact_log_likelihood(fact, probs, floor, rows)[0])
            else:  # a model's reading may be wrong: it moves the predictor's probability part of the way
                p = float(np.exp(fact_log_likelihood(fact, probs, floor, rows)[0]))
                p = SEEN_WEIGHT * float(reading) + (1.0 - SEEN_WEIGHT) * p
                total += float(np.log(min(max(p, floor), 1.0 - floor)))
        out[i] = total
    return out


def _seen(fact: Fact) -> bool:
    """A vision-language model's reading of an anchor image (interaction.history.ModelFact with use
    "anchor"), told apart by its field so this layer needs no import from the interaction layer."""
    return getattr(fact, "use", None) == "anchor"
