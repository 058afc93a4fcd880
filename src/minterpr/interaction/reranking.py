"""Final scores: the backend's query score combined with the explicit evidence of the conversation.

This is the one scoring path of minterpr: a :class:`~minterpr.interaction.session.Session`
scores every turn with :func:`rerank`, and the static replay of recorded dialogues
(:mod:`minterpr.evaluation.static`) scores every round with :func:`rerank_rows`, the same
function on many conversations at once, so a replayed dialogue and a session fed the same turns
give the same scores. One :class:`RerankConfig`
with one set of defaults says which evidence joins the backend's cosine score:

* attribute likelihood — every distinct parsed fact is evidence about each image through the
  index's attribute probabilities: ``+ w · Σ_facts log P(fact | image)`` (a fact stated twice
  counts once; skipped when the index has no attribute probabilities;
  :mod:`~minterpr.interaction.fact_likelihoods`);
* rejected references — an image the user judged "not this one", and its near-duplicates
  (embedding cosine above a threshold: the person id is unknown at run time), lose a penalty,
  and a rejected image is kept below rank 1 whatever the other terms say;
* example images — when the conversation showed an example image of the person ("search with this
  image") and the gallery has appearance vectors, the scores blend towards its appearance cosine,
  ``λe · S(q) + (1 − λe) · cos_app(example, image)``, before the facts' evidence is added;
* plausible references — an image the user could not rule out ("could be", "maybe": the verdict
  None) pulls the scores towards itself, ``λp · S(q) + (1 − λp) · mean S(plausible)``, gentler than
  a confirmation (a user who cannot recognise a face still says nothing contradicts it);
* anchor refinement (as CTGI / ICL) — once an image is confidently the person (the user
  confirmed it, or the top-1 leads the best non-duplicate by a margin), scores blend towards it:
  ``λ · S(q) + (1 − λ) · S(anchor)``, which lifts the same person's other images;
* confirmed images are pinned to the top.

Image-to-image comparisons (:class:`Similarities`: near-duplicates, anchors, plausible references)
use the gallery's appearance vectors when it has them with their same-person calibration
(``index.appearance`` and ``index.same_person``, :mod:`minterpr.runtime.appearance`), the attribute
model's embeddings otherwise. On appearance, a near-duplicate is an image whose same-person
probability exceeds ``duplicate_probability`` (not a cosine: the appearance cosine has its own
scale), and a rejection lowers every image by ``rejection_penalty × P(same person | cosine)``, so
the other crops of a ruled-out person sink with it.

A trained model stores its config (weight chosen on the validation split) in model.pt as the
dict of :meth:`RerankConfig.to_dict`; :meth:`RerankConfig.from_dict` reads it back whole.

Example:
    >>> import numpy as np
    >>> from minterpr.index.gallery_index import GalleryIndex
    >>> from minterpr.types import GalleryImage
    >>> index = GalleryIndex([GalleryImage(f"{i}.jpg", f"x:{i}") for i in range(3)], np.eye(3, dtype=np.float32))
    >>> result = rerank(np.array([0.9, 0.5, 0.1]), index, facts=(), judgements={0: False})
    >>> int(np.argmax(result.scores))  # the rejected image no longer leads
    1
    >>> RerankConfig.from_dict({"attribute_weight": 0.1, "prob_floor": 0.05}).prob_floor  # a stored config
    0.05
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.language.phrasing import Fact
from minterpr.errors import InputError
from minterpr.language.evidence import PROB_FLOOR, stated_log_likelihood
from minterpr.index.gallery_index import GalleryIndex
from minterpr.interaction.fact_likelihoods import attribute_log_likelihood
from minterpr.interaction.similarities import Similarities

__all__ = [
    "RerankConfig",
    "RerankResult",
    "keep_rejected_below",
    "plausible_images",
    "rerank",
    "rerank_rows",
]

# the key static evaluation stored for ``rejection`` before the two configs were one
_LEGACY_KEYS = {"reject_references": "rejection"}
_BOUNDS = {  # field -> (low, high, closed) allowed range of the numeric fields
    "attribute_weight": (0.0, math.inf, True),
    "prob_floor": (0.0, 0.5, False),
    "rejection_penalty": (0.0, math.inf, True),
    "duplicate_threshold": (-1.0, 1.0, True),
    "anchor_lambda": (0.0, 1.0, True),
    "confirmed_lambda": (0.0, 1.0, True),
    "anchor_margin": (0.0, math.inf, True),
    "plausible_lambda": (0.0, 1.0, True),
    "duplicate_probability": (0.0, 1.0, False),
    "example_lambda": (0.0, 1.0, True),
}


@dataclass(frozen=True)
class RerankConfig:
    """Which evidence joins the backend's score, and how strongly (sessions and static evaluation alike)."""

    attributes: bool = True  # add the attribute log-likelihood of the parsed facts (needs index.attribute_probs)
    attribute_weight: float = 0.05  # w: weight of the log-likelihood (cosine scores live in [-1, 1], log-probs in
    #   nats); used by models that store none; `minterpr train` chooses one on the validation split
    prob_floor: float = PROB_FLOOR  # probabilities are clipped to [floor, 1 - floor] (language.evidence)
    rejection: bool = True  # demote images the user rejected and their near-duplicates, rejected ones below rank 1
    rejection_penalty: float = 0.5  # subtracted from a rejected image and its near-duplicates (once per rejection)
    duplicate_threshold: float = 0.9  # embedding cosine above which two images count as the same person
    # on appearance (the index has appearance vectors and their calibration): the same-person probability (at the
    #   calibration's base rate) above which two images count as the same person; replaces duplicate_threshold there
    duplicate_probability: float = 0.5
    # weight of the backend's score when an example image has an appearance vector; 1 - it goes to the appearance
    #   cosine with the example (chosen on PETA val: docs/benchmarks.md, "Search with this image")
    example_lambda: float = 0.2
    plausible: bool = True  # blend scores towards images the user could not rule out (verdict None)
    plausible_lambda: float = 0.5  # weight of the score in that blend; 1 - it goes to their mean similarity
    #   (chosen on PETA val with the text-only witness: docs/benchmarks.md, "Plausible references")
    anchor: bool = True  # blend scores towards a confident anchor image
    anchor_lambda: float = 0.7  # weight of the query score in the blend; 1 - it goes to the anchor's similarity
    confirmed_lambda: float = 0.3  # the same weight when the anchor is an image the user confirmed (trusted more)
    anchor_margin: float = 0.1  # top-1 becomes the anchor when it leads the best non-duplicate by this much
    pin_confirmed: bool = True  # images the user confirmed as the person rank first

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in (bool, "bool"):
                if not isinstance(value, (bool, np.bool_)):
                    raise InputError(f"scoring config: {f.name} must be true or false, got {value!r}")
                object.__setattr__(self, f.name, bool(value))
                continue
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise InputError(f"scoring config: {f.name} must be a number, got {value!r}")
            low, high, closed = _BOUNDS[f.name]
            value = float(value)
            inside = (low <= value <= high) if closed else (low < value < high)
            if not inside or math.isnan(value):
                bracket = f"[{low:g}, {high:g}]" if closed else f"({low:g}, {high:g})"
                raise InputError(f"scoring config: {f.name} must be in {bracket}, got {value!r}")
            object.__setattr__(self, f.name, value)

    @classmethod
    def off(cls) -> "RerankConfig":
        """The backend's scores alone (every term switched off)."""
        return cls(attributes=False, rejection=False, anchor=False, pin_confirmed=False)

    @classmethod
    def with_attribute_weight(cls, weight: float | None) -> "RerankConfig":
        """The defaults with ``attribute_weight`` set (None keeps the default). To keep everything
        a model stored (its prob_floor too), use :meth:`from_dict` on the stored dict."""
        return cls() if weight is None else cls(attribute_weight=weight)

    def with_(self, **changes: object) -> "RerankConfig":
        """A copy with some fields changed (validated like the constructor)."""
        unknown = sorted(set(changes) - {f.name for f in fields(self)})
        if unknown:
            raise InputError(f"scoring config: unknown field(s) {', '.join(unknown)}")
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Every field, plain JSON values; :meth:`from_dict` reads it back to an equal config."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "RerankConfig":
        """The config a dict describes: fields it lacks keep their defaults; None (a model saved
        without one) gives the defaults. Reads what :meth:`to_dict` writes and the older stored
        form ``{"attribute_weight", "prob_floor", "reject_references"}``.

        Raises :class:`~minterpr.errors.InputError` (a ValueError) naming an unknown key or a bad value.

        Example:
            >>> RerankConfig.from_dict({"attribute_weight": 0.2, "reject_references": False}).rejection
            False
            >>> RerankConfig.from_dict({"weight": 1})
            Traceback (most recent call last):
            ...
            minterpr.errors.InputError: scoring config: unknown key 'weight' (known: attributes, ...)
        """
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise InputError(f"scoring config must be a mapping of field -> value, got {type(data).__name__}")
        values = dict(data)
        for old, new in _LEGACY_KEYS.items():
            if old in values:
                legacy = values.pop(old)
                if new in values and values[new] != legacy:
                    raise InputError(f"scoring config: {old}={legacy!r} contradicts {new}={values[new]!r}")
                values.setdefault(new, legacy)
        names = [f.name for f in fields(cls)]
        for key in values:
            if key not in names:
                raise InputError(f"scoring config: unknown key {key!r} (known: {', '.join(names)})")
        return cls(**values)


@dataclass(frozen=True)
class RerankResult:
    """Final scores plus what produced them."""

    scores: np.ndarray  # (N,) final score per gallery image, gallery order
    anchor: int | None  # gallery index of the anchor used, if any
    attribute_loglik: np.ndarray | None  # (N,) Σ log P(facts | image), None when not used


def rerank(
    query_scores: np.ndarray,
    index: GalleryIndex,
    facts: Sequence[Fact],
    judgements: Mapping[int, bool | None],
    reranking: RerankConfig = RerankConfig(),
    stated: Mapping[int, Sequence[Fact]] | None = None,
    example: np.ndarray | None = None,
) -> RerankResult:
    """Combine the backend's (N,) query scores with the facts and judgements so far.

    ``judgements`` maps gallery index -> True (the user said it is the person), False (not) or
    None (unsure: not ruled out, so scores lean towards it, :attr:`RerankConfig.plausible`); a later
    confirmed image is the anchor.
    ``stated`` maps gallery index -> what the user said of that image when it was shown: its
    attribute term judges the facts of those slots by their words
    (:func:`~minterpr.language.evidence.stated_log_likelihood`). ``example``: the (A,) appearance
    vector of the conversation's example image, if any (used when the index compares appearance).
    One conversation of :func:`rerank_rows`.
    """
    scores = np.asarray(query_scores, dtype=np.float64)
    if scores.ndim != 1 or len(scores) != len(index):
        raise InputError(f"query_scores must be ({len(index)},), one per gallery image, got {scores.shape}")
    loglik = None
    if reranking.attributes and index.attribute_probs is not None and facts:
        loglik = attribute_log_likelihood(facts, index.attribute_probs, reranking.prob_floor)
        if stated:
            loglik = stated_log_likelihood(loglik, facts, stated, index.attribute_probs, reranking.prob_floor)
    final, anchors = rerank_rows(
        scores[None],
        index,
        None if loglik is None else loglik[None],
        [judgements],
        reranking,
        examples=None if example is None else [example],
    )
    return RerankResult(final[0], None if anchors[0] < 0 else int(anchors[0]), loglik)


def rerank_rows(
    query_scores: np.ndarray,
    index: GalleryIndex,
    loglik: np.ndarray | None,
    judgements: Sequence[Mapping[int, bool | None]],
    reranking: RerankConfig,
    similarities: Similarities | None = None,
    examples: Sequence[np.ndarray | None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`rerank` for B conversations at once: ((B, N) scores, (B,) anchor or -1).

    ``query_scores`` (B, N): the backend's scores; ``loglik`` (B, N): each conversation's
    :meth:`~minterpr.interaction.fact_likelihoods.FactLikelihoods.total` (None: no facts, or no
    attribute evidence), added when ``reranking.attributes``; ``judgements``: one mapping per
    conversation. Rows never influence each other, so a row scores the same alone or in a batch.
    ``similarities`` shares the embedding-similarity rows between calls over the same index;
    ``examples``: per conversation, the (A,) appearance vector of its example image or None
    (:attr:`RerankConfig.example_lambda`).
    """
    scores = np.array(query_scores, dtype=np.float64)  # a copy, (B, N)
    b, n = scores.shape
    if len(judgements) != b:
        raise InputError(f"judgements: one mapping per row expected ({b}), got {len(judgements)}")
    sims = similarities if similarities is not None else Similarities(index)
    if examples is not None and sims.calibration is not None:  # "search with this image": its appearance
        if len(examples) != b:
            raise InputError(f"examples: one vector (or None) per row expected ({b}), got {len(examples)}")
        lam = reranking.example_lambda
        for row, vector in enumerate(examples):
            if vector is not None:
                scores[row] = lam * scores[row] + (1.0 - lam) * sims.to(vector)
    if reranking.attributes and loglik is not None:
        scores += reranking.attribute_weight * loglik
    rejected = np.zeros((b, n), dtype=bool)  # the judged images themselves
    confirmed = np.zeros((b, n), dtype=bool)
    last_confirmed = np.full(b, -1, dtype=np.int64)  # the latest image confirmed: the anchor
    for row, judged in enumerate(judgements):
        for i, ok in judged.items():
            if not 0 <= i < n:
                raise InputError(f"judgements: gallery index {i} out of range 0..{n - 1}")
            if ok is True:
                confirmed[row, i], last_confirmed[row] = True, i
            elif ok is False:
                rejected[row, i] = True
    if reranking.plausible:
        scores = _towards_plausible(scores, judgements, sims, reranking.plausible_lambda)
    excluded = np.zeros((b, n), dtype=bool)  # never an anchor: rejected images and their near-duplicates
    if reranking.rejection and rejected.any():
        rows, images = np.nonzero(rejected)  # row-major: each row's rejections together
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        judged_rows = rows[starts]
        threshold = sims.threshold(reranking)
        soft = sims.calibration is not None  # on appearance: each image pays by its same-person probability
        count = sims.duplicates(images[starts], threshold).astype(np.int32)  # first rejections
        weight = sims.same_person(images[starts]) if soft else None
        nth = np.arange(len(rows)) - np.repeat(starts, np.diff(np.r_[starts, len(rows)]))  # k-th of its row
        group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(rows)]))
        for k in range(1, int(nth.max()) + 1):  # rejections each image looks like, a few vector adds
            count[group[nth == k]] += sims.duplicates(images[nth == k], threshold)
            if weight is not None:
                weight[group[nth == k]] += sims.same_person(images[nth == k])
        count[confirmed[judged_rows]] = 0  # a confirmed image is never demoted for looking like a rejected one
        if weight is not None:
            weight[confirmed[judged_rows]] = 0.0
        scores[judged_rows] -= reranking.rejection_penalty * (count if weight is None else weight)
        excluded = rejected.copy()
        excluded[judged_rows] |= count > 0
    anchors = np.full(b, -1, dtype=np.int64)
    if reranking.anchor:
        has_confirmed = last_confirmed >= 0
        anchors[has_confirmed] = last_confirmed[has_confirmed]
        free = np.flatnonzero(~has_confirmed)
        if len(free):
            anchors[free] = _confident_tops(scores[free], excluded[free], sims, reranking)
        blended = np.flatnonzero(anchors >= 0)
        if len(blended):
            lam = np.where(has_confirmed[blended], reranking.confirmed_lambda, reranking.anchor_lambda)[:, None]
            if len(blended) == b:  # in place: the same products and sum, fewer copies
                scores *= lam
                scores += (1.0 - lam) * sims.rows(anchors)
            else:
                scores[blended] = lam * scores[blended] + (1.0 - lam) * sims.rows(anchors[blended])
    if reranking.pin_confirmed and confirmed.any():
        rows = np.flatnonzero(confirmed.any(axis=1))
        top = scores[rows].max(axis=1, keepdims=True) + 1.0
        scores[rows] = np.where(confirmed[rows], top, scores[rows])
    if reranking.rejection:
        scores = keep_rejected_below(scores, rejected)
    return scores, anchors


def plausible_images(judgements: Mapping[int, bool | None]) -> list[int]:
    """The images a conversation left undecided (verdict None) while it confirmed none: the ones
    :class:`RerankConfig`'s plausible blend pulls towards (a confirmation outranks them).

    >>> plausible_images({3: None, 5: False, 7: None}), plausible_images({3: None, 4: True})
    ([3, 7], [])
    """
    if any(ok is True for ok in judgements.values()):
        return []
    return sorted(i for i, ok in judgements.items() if ok is None)


def _towards_plausible(
    scores: np.ndarray, judgements: Sequence[Mapping[int, bool | None]], sims: Similarities, lam: float
) -> np.ndarray:
    """(B, N) scores blended towards each row's plausible images (:func:`plausible_images`), in place."""
    for row, judged in enumerate(judgements):
        kept = plausible_images(judged)  # none once the row confirmed an image
        if kept:
            scores[row] *= lam
            scores[row] += (1.0 - lam) * sims.rows(kept).mean(axis=0)  # (N,) mean cosine to them
    return scores


def _confident_tops(scores: np.ndarray, excluded: np.ndarray, sims: Similarities, config: RerankConfig) -> np.ndarray:
    """(k,) per row: the top-1 image not excluded when it leads the best non-excluded image that
    is not its near-duplicate by the margin (or has no such rival); -1 otherwise, and when fewer
    than two images are left."""
    rows = np.arange(len(scores))
    masked = np.where(excluded, -np.inf, scores)
    top = masked.argmax(axis=1)  # the first of tied best, as a stable sort
    best = masked[rows, top]
    masked[sims.duplicates(top, sims.threshold(config))] = -np.inf
    with np.errstate(invalid="ignore"):  # every image excluded: -inf - -inf is nan, never confident
        confident = best - masked.max(axis=1) > config.anchor_margin
    if excluded.any() or scores.shape[1] < 2:
        confident &= (~excluded).sum(axis=1) >= 2
    return np.where(confident, top, -1)


def keep_rejected_below(scores: np.ndarray, rejected: np.ndarray) -> np.ndarray:
    """The hard rule: every rejected image scores below the best image the user has not rejected.

    ``scores`` and ``rejected`` (bool) are (..., N); each row is handled on its own, and a row
    whose images are all (or none) rejected is left as it is. Returns a new array.

    Example:
        >>> int(keep_rejected_below(np.array([0.9, 0.5, 0.1]), np.array([True, False, False])).argmax())
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
