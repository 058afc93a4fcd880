"""Final scores: the backend's query score combined with the explicit evidence of the conversation.

Three switchable terms (see :class:`RerankConfig`):

* attribute likelihood — every parsed fact is evidence about each image through the index's
  attribute probabilities: ``+ w · Σ_facts log P(fact | image)``;
* rejected references — an image the user judged "not this one", and its near-duplicates
  (embedding cosine above a threshold: the person id is unknown at run time), lose a penalty,
  and a rejected image is kept below rank 1 whatever the other terms say;
* anchor refinement (as CTGI / ICL) — once an image is confidently the person (the user
  confirmed it, or the top-1 leads the best non-duplicate by a margin), scores blend towards it:
  ``λ · S(q) + (1 − λ) · S(anchor)``, which lifts the same person's other images.

Example:
    >>> import numpy as np
    >>> from minterpr.index.gallery_index import GalleryIndex
    >>> from minterpr.types import GalleryImage
    >>> index = GalleryIndex([GalleryImage(f"{i}.jpg", f"x:{i}") for i in range(3)], np.eye(3, dtype=np.float32))
    >>> result = rerank(np.array([0.9, 0.5, 0.1]), index, facts=(), judgements={0: False})
    >>> int(np.argmax(result.scores))  # the rejected image no longer leads
    1
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from minterpr.data.ontology import ONTOLOGY
from minterpr.data.phrasing import Fact
from minterpr.index.gallery_index import GalleryIndex
from minterpr.interaction.attribute_backend import SLOT_COLUMNS


@dataclass(frozen=True)
class RerankConfig:
    """Which evidence joins the backend's score, and how strongly."""

    attributes: bool = True  # add the attribute log-likelihood of the parsed facts (needs index.attribute_probs)
    attribute_weight: float = 0.05  # weight of the log-likelihood (cosine scores live in [-1, 1], log-probs in nats)
    prob_floor: float = 0.02  # probabilities are clipped to [floor, 1 - floor]: one wrong prediction costs <= ln 50
    rejection: bool = True  # demote images the user rejected and their near-duplicates
    rejection_penalty: float = 0.5  # subtracted from a rejected image and its near-duplicates
    duplicate_threshold: float = 0.9  # embedding cosine above which two images count as the same person
    anchor: bool = True  # blend scores towards a confident anchor image
    anchor_lambda: float = 0.7  # weight of the query score in the blend; 1 - it goes to the anchor's similarity
    confirmed_lambda: float = 0.3  # the same weight when the anchor is an image the user confirmed (trusted more)
    anchor_margin: float = 0.1  # top-1 becomes the anchor when it leads the best non-duplicate by this much
    pin_confirmed: bool = True  # images the user confirmed as the person rank first

    @classmethod
    def off(cls) -> "RerankConfig":
        """The backend's scores alone (every term switched off)."""
        return cls(attributes=False, rejection=False, anchor=False, pin_confirmed=False)

    @classmethod
    def with_attribute_weight(cls, weight: float | None) -> "RerankConfig":
        """The defaults with ``attribute_weight`` set (None keeps the default), e.g. the weight a
        trained model stores, chosen on its validation split."""
        return cls() if weight is None else cls(attribute_weight=weight)

    def with_(self, **changes: object) -> "RerankConfig":
        """A copy with some fields changed."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class RerankResult:
    """Final scores plus what produced them."""

    scores: np.ndarray  # (N,) final score per gallery image, gallery order
    anchor: int | None  # gallery index of the anchor used, if any
    attribute_loglik: np.ndarray | None  # (N,) Σ log P(facts | image), None when not used


_SINGLE = {s.name: not s.multi for s in ONTOLOGY.slots}


def fact_log_likelihood(fact: Fact, probs: np.ndarray, floor: float = 0.02) -> np.ndarray:
    """(N,) log P(fact | image) from (N, L) label probabilities.

    Single-valued slots: probabilities are normalised over the slot's values and P(one of V) is
    their sum. Multi-valued slots: labels are independent, P(any of V) = 1 - Π(1 - p_v) and a
    negated fact ("no backpack") is Π(1 - p_v).
    """
    cols = SLOT_COLUMNS[fact.slot]
    values = ONTOLOGY.slot(fact.slot).value_names
    chosen = [cols[values.index(v)] for v in fact.values]
    if _SINGLE[fact.slot]:
        slot_probs = probs[:, cols]  # (N, V)
        total = np.maximum(slot_probs.sum(axis=1), 1e-12)
        p = probs[:, chosen].sum(axis=1) / total  # (N,)
    else:
        p = 1.0 - np.prod(1.0 - probs[:, chosen], axis=1)
    if fact.negated:
        p = 1.0 - p
    return np.log(np.clip(p, floor, 1.0 - floor))


def attribute_log_likelihood(facts: Sequence[Fact], probs: np.ndarray, floor: float = 0.02) -> np.ndarray:
    """(N,) Σ over facts of log P(fact | image); zeros when there are no facts."""
    total = np.zeros(len(probs), dtype=np.float64)
    for fact in facts:
        total += fact_log_likelihood(fact, probs, floor)
    return total


def near_duplicates(index: GalleryIndex, i: int, threshold: float) -> np.ndarray:
    """(N,) bool: images whose embedding cosine with image i exceeds ``threshold`` (i included)."""
    similar = index.embeddings @ index.embeddings[i] > threshold
    similar[i] = True
    return similar


def _confident_top(scores: np.ndarray, index: GalleryIndex, config: RerankConfig,
                   excluded: np.ndarray) -> int | None:
    """The top-1 image when it leads the best image that is not its near-duplicate by the margin."""
    order = np.argsort(-scores, kind="stable")
    order = order[~excluded[order]]
    if len(order) < 2:
        return None
    top = int(order[0])
    others = order[~near_duplicates(index, top, config.duplicate_threshold)[order]]
    if len(others) == 0 or scores[top] - scores[others[0]] > config.anchor_margin:
        return top
    return None


def rerank(query_scores: np.ndarray, index: GalleryIndex, facts: Sequence[Fact],
           judgements: Mapping[int, bool | None], config: RerankConfig = RerankConfig()) -> RerankResult:
    """Combine the backend's (N,) query scores with the facts and judgements so far.

    ``judgements`` maps gallery index -> True (the user said it is the person), False (not) or
    None (unsure: neither promoted nor demoted).
    """
    scores = np.asarray(query_scores, dtype=np.float64).copy()  # (N,)
    n = len(scores)
    loglik = None
    if config.attributes and index.attribute_probs is not None and facts:
        loglik = attribute_log_likelihood(facts, index.attribute_probs, config.prob_floor)
        scores += config.attribute_weight * loglik
    rejected = np.zeros(n, dtype=bool)  # the judged images themselves
    demoted_any = np.zeros(n, dtype=bool)  # rejected images and their near-duplicates
    confirmed = [i for i, ok in judgements.items() if ok is True]
    if config.rejection:
        for i, ok in judgements.items():
            if ok is False:
                rejected[i] = True
                demoted = near_duplicates(index, i, config.duplicate_threshold)
                demoted[confirmed] = False  # a confirmed image is never demoted for looking like a rejected one
                scores[demoted] -= config.rejection_penalty
                demoted_any |= demoted
    anchor = None
    if config.anchor:
        if confirmed:
            anchor = confirmed[-1]
        else:  # never anchor on a rejected person
            anchor = _confident_top(scores, index, config, demoted_any | rejected)
        if anchor is not None:
            anchor_sim = index.embeddings @ index.embeddings[anchor]  # (N,)
            lam = config.confirmed_lambda if confirmed else config.anchor_lambda
            scores = lam * scores + (1.0 - lam) * anchor_sim
    if config.pin_confirmed and confirmed:
        scores[confirmed] = scores.max() + 1.0
    if config.rejection:
        scores = keep_rejected_below(scores, rejected)
    return RerankResult(scores, anchor, loglik)


def keep_rejected_below(scores: np.ndarray, rejected: np.ndarray) -> np.ndarray:
    """The hard rule: every rejected image scores below the best image the user has not rejected.

    ``scores`` and ``rejected`` (bool) are (..., N); each row is handled on its own, and a row
    whose images are all (or none) rejected is left as it is. Returns a new array.

    Example:
        >>> keep_rejected_below(np.array([0.9, 0.5, 0.1]), np.array([True, False, False])).argmax()
        1
    """
    scores = np.array(scores, dtype=np.float64)  # a copy
    rejected = np.broadcast_to(np.asarray(rejected, bool), scores.shape)
    rows = rejected.any(axis=-1) & ~rejected.all(axis=-1)  # (...,)
    if not rows.any():
        return scores
    best_other = np.where(rejected, -np.inf, scores).max(axis=-1, keepdims=True)  # (..., 1)
    ceiling = best_other - 1e-6 * (1.0 + np.abs(best_other))
    demote = rejected & rows[..., None]
    scores[demote] = np.minimum(scores, ceiling)[demote]
    return scores
