"""Attribute answers a user can trust: per-slot answer calibration (extra ``"slot_answers"``).

The model's most probable value of a slot ("what colour was the top?") is, on cameras it never
saw, more often wrong than always answering the slot's most common value (docs/attributes.md).
:class:`SlotAnswers` is fitted on the model's validation split (``minterpr calibrate slots``)
and changes each slot's answer in two ways:

* a **log-prior shift**: value v scores ``log p(v) + prior_weight * log prior(v)``, ``prior`` the
  value frequencies of the validation split; it pulls a hesitant answer toward common values;
* an **abstention margin**: the top-scoring value is answered only when it beats the majority
  value's score by ``margin`` (log units); otherwise the answer is *unsure*, and an answer that
  must be given (accuracy) is the majority value. ``margin`` None: the slot always abstains.

Per slot, (prior_weight, margin) is chosen from a small grid, among the rules at least as right as
the majority answer on the whole split, to maximise the gain over the majority answer on the
validation split's camera sets (:func:`group_of`: the person id's namespace, e.g. ``peta-3dpes``,
else the camera id; sets with at least ``min_group`` labelled images), halfway between the worst
set and the mean over sets (``objective="blend"``; ``"worst"`` and ``"mean"`` are the two ends).
Always abstaining gains exactly 0 everywhere, so the chosen rule is never below the majority on
the data it was fitted on; among equally good rules the one that changes least wins (no shift,
smallest margin), so a model that is confident and right is left alone.

Example:
    >>> import numpy as np
    >>> from minterpr.language.ontology import ONTOLOGY
    >>> cols = ONTOLOGY.slot_columns()["gender"]
    >>> probs = np.full((4, len(ONTOLOGY.flat_labels())), 0.01)
    >>> probs[:, cols] = [[0.9, 0.1], [0.2, 0.8], [0.55, 0.45], [0.45, 0.55]]  # male, female
    >>> targets = np.zeros_like(probs); mask = np.zeros(probs.shape, bool); mask[:, cols] = True
    >>> targets[:, cols] = [[1, 0], [0, 1], [1, 0], [1, 0]]  # the last guess is wrong
    >>> record = fit_slot_answers(probs, targets, mask, ["a"] * 4)
    >>> rule = record.slots["gender"]
    >>> rule.majority, rule.accuracy_before, rule.accuracy_after, rule.majority_accuracy
    ('male', 75.0, 100.0, 75.0)
    >>> record.answers(probs)["gender"].tolist()  # the hesitant "female" is unsure (-1) now
    [0, 1, 0, -1]
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.language.ontology import ONTOLOGY
from minterpr.records import Unusable, count, finite, mapping, number_map, split_name

UNSURE = -1  # the answer index of an abstention
PRIOR_WEIGHTS = (0.0, 0.25, 0.5, 1.0)  # tried shifts toward the validation prior, least change first
MARGINS = (0.0, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)  # tried margins (log units), then None (always abstain)
MIN_GROUP = 100  # labelled images a camera set needs for its gain to count (smaller ones are noise)
_FLOOR = 1e-6  # probabilities and prior frequencies are clipped here before the log


@dataclass(frozen=True)
class SlotRule:
    """How one slot is answered (the module doc); figures are percent on the fitting split."""

    majority: str  # the value most validation images hold (ties: ontology order); the answer when unsure
    prior: dict[str, float]  # value -> share of validation images holding it
    prior_weight: float  # weight of log prior(v) added to log p(v)
    margin: float | None  # log-score lead over the majority value needed to answer; None = always unsure
    images: int  # labelled validation images of the slot
    accuracy_before: float  # the raw most probable value
    accuracy_after: float  # the calibrated answer (unsure: the majority value)
    majority_accuracy: float  # always the majority value
    worst_gain: float  # the chosen rule's smallest gain over the majority across the camera sets (the split
    # itself when no set is large enough)

    @classmethod
    def from_dict(cls, slot: str, data: Mapping[str, Any]) -> "SlotRule":
        """The rule of :meth:`to_dict` for ``slot``; ValueError naming the field, Unusable for a slot or
        value this ontology lacks."""
        data = mapping(data, f"slots.{slot}")
        names = {v.name for v in ONTOLOGY.slot(slot).values}
        prior = number_map(data.get("prior"), f"slots.{slot}.prior", "value names")
        majority = data.get("majority")
        if not isinstance(majority, str):
            raise ValueError(f"'slots.{slot}.majority': {majority!r} is not a value name")
        unknown = sorted(({majority} | set(prior)) - names)
        if unknown:
            raise Unusable(f"slot {slot!r} has no value {unknown[0]!r} in this ontology")
        margin = data.get("margin")
        return cls(
            majority,
            prior,
            finite(data.get("prior_weight"), f"slots.{slot}.prior_weight"),
            None if margin is None else finite(margin, f"slots.{slot}.margin"),
            count(data.get("images"), f"slots.{slot}.images"),
            *(
                finite(data.get(k), f"slots.{slot}.{k}")
                for k in ("accuracy_before", "accuracy_after", "majority_accuracy", "worst_gain")
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def answer(self, slot_probs: np.ndarray, slot: str) -> np.ndarray:
        """(N,) answered value index (ontology order) from (N, V) probabilities, :data:`UNSURE` when
        the top value does not beat the majority by the margin."""
        values = [v.name for v in ONTOLOGY.slot(slot).values]
        prior = np.array([self.prior.get(v, 0.0) for v in values])
        return _answer(
            np.asarray(slot_probs, np.float64), prior, values.index(self.majority), self.prior_weight, self.margin
        )


@dataclass(frozen=True)
class SlotAnswers:
    """Per-slot answer calibration stored with a model (extra ``"slot_answers"``)."""

    split: str  # the split it was fitted on (validation, never test)
    groups: dict[str, float] = field(default_factory=dict)  # camera set -> labelled images in the fitting split
    slots: dict[str, SlotRule] = field(default_factory=dict)  # slot -> its rule; absent slots answer raw

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SlotAnswers":
        """The record of :meth:`to_dict`; ValueError naming the field, Unusable for an unknown slot."""
        data = mapping(data)
        slots = mapping(data.get("slots"), "slots")
        known = {s.name for s in ONTOLOGY.slots}
        for name in slots:
            if name not in known:
                raise Unusable(f"slot {name!r} is not in this ontology")
        return cls(
            split_name(data.get("split")),
            number_map(data.get("groups", {}), "groups", "camera sets"),
            {name: SlotRule.from_dict(name, rule) for name, rule in slots.items()},
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "groups": dict(self.groups),
            "slots": {name: rule.to_dict() for name, rule in self.slots.items()},
        }

    def answers(self, probs: np.ndarray) -> dict[str, np.ndarray]:
        """slot -> (N,) answered value index or :data:`UNSURE`, for every slot of the ontology (slots
        without a rule: the raw most probable value)."""
        probs = np.asarray(probs, np.float64)
        out = {}
        for slot, columns in ONTOLOGY.slot_columns().items():
            rule = self.slots.get(slot)
            out[slot] = rule.answer(probs[:, columns], slot) if rule else probs[:, columns].argmax(axis=1)
        return out

    def answer_one(self, probs: np.ndarray, slot: str) -> str | None:
        """The answered value of ``slot`` for one image's (L,) probabilities; None when unsure."""
        row = np.asarray(probs, np.float64)[None, ONTOLOGY.slot_columns()[slot]]
        rule = self.slots.get(slot)
        k = int(rule.answer(row, slot)[0]) if rule else int(row.argmax())
        return None if k == UNSURE else ONTOLOGY.slot(slot).values[k].name


def _answer(p: np.ndarray, prior: np.ndarray, majority: int, weight: float, margin: float | None) -> np.ndarray:
    if margin is None:
        return np.full(len(p), UNSURE)
    score = np.log(np.clip(p, _FLOOR, 1.0)) + weight * np.log(np.clip(prior, _FLOOR, 1.0))
    top = score.argmax(axis=1)
    lead = score[np.arange(len(p)), top] - score[:, majority]
    return np.where((top == majority) | (lead >= margin), top, UNSURE)


def group_of(camera_id: str | None, person_id: str) -> str:
    """The camera set of an image: its person id's namespace (a dataset's subset: "peta-mit:12" ->
    "peta-mit"), else its camera id, else one set for all."""
    if ":" in person_id:
        return person_id.split(":", 1)[0]
    return camera_id or "all"


# how a rule's gains on the camera sets are weighed: "blend" (the default) chosen by leaving each of the shipped
# model's val camera sets out in turn (docs/benchmarks.md, "Answers a user can trust")
_OBJECTIVES = {"blend": lambda g: (min(g) + float(np.mean(g))) / 2, "worst": min, "mean": lambda g: float(np.mean(g))}


def fit_slot_answers(
    probs: Any,
    targets: Any,
    mask: Any,
    groups: Sequence[str],
    split: str = "val",
    *,
    min_group: int = MIN_GROUP,
    objective: str = "blend",
) -> SlotAnswers:
    """Fit :class:`SlotAnswers` on (N, L) ``probs`` and ``(targets, mask)`` as
    :func:`minterpr.evaluation.attribute_metrics.attribute_targets` gives them, ``groups`` (N,) each
    image's camera set (:func:`group_of`). Only slots labelled on some image get a rule.
    ``objective``: how the camera sets' gains are weighed ("blend", "worst" or "mean")."""
    if objective not in _OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(_OBJECTIVES)}, not {objective!r}")
    probs = np.asarray(probs, np.float64)
    targets, mask, groups = np.asarray(targets) > 0.5, np.asarray(mask, bool), np.asarray(groups, dtype=object)
    if probs.shape != targets.shape or mask.shape != probs.shape or len(groups) != len(probs):
        raise ValueError(
            f"probs {probs.shape}, targets {targets.shape}, mask {mask.shape} and {len(groups)} groups "
            "must describe the same images"
        )
    rules = {}
    for slot, columns in ONTOLOGY.slot_columns().items():
        labelled = mask[:, columns[0]]
        if labelled.any():
            rules[slot] = _fit_slot(
                slot, probs[labelled][:, columns], targets[labelled][:, columns], groups[labelled], min_group, objective
            )
    names, sizes = np.unique(groups[mask.any(axis=1)].astype(str), return_counts=True)
    return SlotAnswers(split, {str(n): float(s) for n, s in zip(names, sizes)}, rules)


def _fit_slot(
    slot: str, p: np.ndarray, truth: np.ndarray, groups: np.ndarray, min_group: int, objective: str
) -> SlotRule:
    values = [v.name for v in ONTOLOGY.slot(slot).values]
    prior = truth.mean(axis=0)
    majority = int(truth.sum(axis=0).argmax())  # ties: ontology order, as the metrics count it
    base = truth[:, majority]
    # the whole split, then every camera set with enough labelled images
    sets = [groups == g for g in dict.fromkeys(groups) if (groups == g).sum() >= min_group]
    rows = np.arange(len(p))
    best: tuple[float, float, float | None, np.ndarray, float] | None = None
    for weight in PRIOR_WEIGHTS:
        for margin in (*MARGINS, None):
            answered = _answer(p, prior, majority, weight, margin)
            hit = truth[rows, np.where(answered == UNSURE, majority, answered)].astype(float)
            whole = 100.0 * float((hit - base).mean())
            if whole < 0:  # below the majority on the split itself: never (always unsure scores 0)
                continue
            gains = [100.0 * float((hit[m] - base[m]).mean()) for m in sets] or [whole]
            score = _OBJECTIVES[objective](gains)
            if best is None or score > best[0] + 1e-9:  # strictly better: ties keep the smaller change
                best = (score, weight, margin, hit, min(gains))
    _, weight, margin, hit, worst = best  # type: ignore[misc]
    return SlotRule(
        values[majority],
        {v: float(s) for v, s in zip(values, prior)},
        weight,
        margin,
        len(p),
        100.0 * float(truth[rows, p.argmax(axis=1)].mean()),
        100.0 * float(hit.mean()),
        100.0 * float(base.mean()),
        worst,
    )


@dataclass(frozen=True)
class SlotScore:
    """One slot's answers on an evaluated split (percent)."""

    images: int  # images where the slot is labelled
    raw: float  # the most probable value is one of the image's values
    calibrated: float  # the calibrated answer (unsure: the stored majority value) is
    answered: float  # share of images the calibrated rule answers (not unsure)
    majority: float  # always the majority value of the evaluated images (the metrics' baseline)


def score_slot_answers(record: SlotAnswers, probs: Any, targets: Any, mask: Any) -> dict[str, SlotScore]:
    """slot -> :class:`SlotScore` of ``record`` on (N, L) ``probs`` against ``(targets, mask)``, for the
    slots labelled there that have a rule.

    >>> empty = np.zeros((0, len(ONTOLOGY.flat_labels())))
    >>> score_slot_answers(SlotAnswers("val"), empty, empty, empty), mean_scores({})["slots"]
    ({}, 0)
    """
    probs = np.asarray(probs, np.float64)
    targets, mask = np.asarray(targets) > 0.5, np.asarray(mask, bool)
    out = {}
    for slot, rule in record.slots.items():
        columns = ONTOLOGY.slot_columns()[slot]
        labelled = mask[:, columns[0]]
        if not labelled.any():
            continue
        p, truth = probs[labelled][:, columns], targets[labelled][:, columns]
        rows = np.arange(len(p))
        answered = rule.answer(p, slot)
        fallback = [v.name for v in ONTOLOGY.slot(slot).values].index(rule.majority)
        out[slot] = SlotScore(
            len(p),
            100.0 * float(truth[rows, p.argmax(axis=1)].mean()),
            100.0 * float(truth[rows, np.where(answered == UNSURE, fallback, answered)].mean()),
            100.0 * float((answered != UNSURE).mean()),
            100.0 * float(truth[:, int(truth.sum(axis=0).argmax())].mean()),
        )
    return out


def mean_scores(scores: Mapping[str, SlotScore]) -> dict[str, float | int | None]:
    """The means over slots of :func:`score_slot_answers` (None without slots): the figures to report
    beside mA."""
    if not scores:
        return {"raw": None, "calibrated": None, "answered": None, "majority": None, "slots": 0}
    rows = list(scores.values())
    return {k: float(np.mean([getattr(r, k) for r in rows])) for k in ("raw", "calibrated", "answered", "majority")} | {
        "slots": len(rows)
    }
