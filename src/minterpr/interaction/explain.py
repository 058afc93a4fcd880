"""Why an image ranks where it does: which facts of the conversation it matches or contradicts.

A fact is judged against the image's ground-truth attributes when the backend sees them (the
oracle attribute backend), otherwise against the index's predicted attribute probabilities. How a
predicted probability becomes a mark is an :class:`EvidencePolicy`:

* without one (the library default), a 0.5 threshold: every fact is matched or contradicted;
* with one (a served run: :meth:`EvidencePolicy.from_calibration` of the run's calibration record),
  a fact is matched only when P(fact | image) >= ``confident``, contradicted only when it is
  <= 1 - ``confident``, and only when the model's probabilities were calibrated on the validation
  split; anything between is "unsure". A fact on a label the model cannot recognise (validation
  ROC AUC below ``min_auc``) is "unrecognised": it is no evidence either way and is not shown;
* with a per-slot answer calibration as well (:class:`~minterpr.interaction.slot_answers.SlotAnswers`,
  ``minterpr calibrate slots``; :meth:`EvidencePolicy.from_extras`), a mark stands only when the
  slot's calibrated answer for the image agrees: where the calibration answers "unsure" (the top
  value does not beat the slot's majority value by its margin), or, on a single-valued slot, answers
  a value that contradicts the mark, the fact is "unsure".

P(fact | image) is the probability retrieval reads (:func:`~minterpr.index.fused_vectors.fact_log_likelihood`,
unclipped), so a mark and the ranking agree. A fact neither truth nor probabilities can judge is "unknown".

Example:
    >>> import numpy as np
    >>> from minterpr.language.phrasing import Fact
    >>> from minterpr.index.gallery_index import GalleryIndex
    >>> from minterpr.types import GalleryImage
    >>> image = GalleryImage("a.jpg", "x:1", attributes={"upper_colour": ("red",), "carried": ("backpack",)})
    >>> index = GalleryIndex([image], np.ones((1, 2), dtype=np.float32))
    >>> e = explain_image(index, 0, [Fact("upper_colour", ("red",)), Fact("carried", ("backpack",), negated=True)],
    ...                   use_ground_truth=True)
    >>> e.summary()
    'matches: top colour: red | contradicts: carried items: not backpack'
    >>> policy = EvidencePolicy(calibrated=True, label_auc={"carried:backpack": 60.0, "gender:male": 91.0})
    >>> policy.verdict(Fact("gender", ("male",)), 0.9), policy.verdict(Fact("gender", ("male",)), 0.6)
    ('yes', 'unsure')
    >>> policy.verdict(Fact("carried", ("backpack",)), 0.99)  # AUC 60 % < 75 %: cannot recognise it
    'unrecognised'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.language.evidence import SINGLE, stated_holds
from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.index.gallery_index import GalleryIndex

_COLUMN = {label: j for j, label in enumerate(ONTOLOGY.flat_labels())}
MIN_LABEL_AUC = 75.0  # % validation ROC AUC under which a label is not shown as evidence (see docs/web.md)
CONFIDENT = 0.8  # P(fact) at or above which a fact is marked as holding (at or below 1 - it: not holding)
VERDICTS = ("yes", "no", "unsure", "unrecognised")


def label_key(slot: str, value: str) -> str:
    """The name of one label in stored records: ``"carried:backpack"``."""
    return f"{slot}:{value}"


def describe_fact(fact: Fact) -> str:
    """'top colour: red', 'carried items: not backpack', 'age: child/young'."""
    values = "/".join(v.replace("_", " ") for v in fact.values)
    return f"{ONTOLOGY.slot(fact.slot).label}: {'not ' if fact.negated else ''}{values}"


@dataclass(frozen=True)
class EvidencePolicy:
    """When a predicted probability may be shown as a ✓ / ✗ (see the module doc)."""

    calibrated: bool  # the probabilities were temperature-scaled on the validation split
    label_auc: Mapping[str, float] | None = None  # label_key -> validation ROC AUC (%); None = not recorded
    min_auc: float = MIN_LABEL_AUC  # labels below it are "unrecognised" (no evidence, not shown)
    confident: float = CONFIDENT  # the probability a mark needs (1 - it for a ✗)
    # per-slot answer calibration (interaction.slot_answers.SlotAnswers); None = marks from probabilities alone
    slot_answers: Any = None

    @classmethod
    def from_calibration(cls, record: Any) -> "EvidencePolicy":
        """The policy of a run's :class:`~minterpr.interaction.fitted.CalibrationRecord` (None: an uncalibrated
        run, whose marks are all "unsure"). A record written before label AUCs were stored has none:
        every label counts as recognisable and only confidence decides (the fallback for old runs)."""
        if record is None:
            return cls(calibrated=False)
        auc = getattr(record, "label_auc", None)
        return cls(calibrated=True, label_auc=dict(auc) if auc else None)

    @classmethod
    def from_extras(cls, extras: Any) -> "EvidencePolicy":
        """The policy of a model's :class:`~minterpr.interaction.fitted.RunExtras`: its calibration record
        (:meth:`from_calibration`) and its slot answer calibration, when fitted.

        >>> from minterpr.interaction.fitted import RunExtras
        >>> EvidencePolicy.from_extras(RunExtras()) == EvidencePolicy(calibrated=False)
        True
        """
        return dataclasses.replace(cls.from_calibration(extras.calibration), slot_answers=extras.slot_answers)

    def recognised(self, fact: Fact) -> bool:
        """Every label of the fact has a validation AUC >= ``min_auc`` (True when none is recorded;
        a label whose AUC could not be measured, lacking positives or negatives, is not recognised)."""
        if self.label_auc is None:
            return True
        return all(self.label_auc.get(label_key(fact.slot, v), -1.0) >= self.min_auc for v in fact.values)

    def verdict(self, fact: Fact, probability: float, probs: np.ndarray | None = None) -> str:
        """One of :data:`VERDICTS` for P(fact | image) = ``probability``; ``probs``, the image's (L,) label
        probabilities, lets the slot answer calibration veto a mark (the module doc)."""
        if not self.recognised(fact):
            return "unrecognised"
        if not self.calibrated:
            return "unsure"
        mark = "yes" if probability >= self.confident else "no" if probability <= 1.0 - self.confident else "unsure"
        if mark == "unsure" or self.slot_answers is None or probs is None or fact.slot not in self.slot_answers.slots:
            return mark
        answer = self.slot_answers.answer_one(probs, fact.slot)
        if answer is None:  # the model's reading of this slot does not beat its majority value: no evidence
            return "unsure"
        if SINGLE[fact.slot] and ((answer in fact.values) != fact.negated) != (mark == "yes"):
            return "unsure"  # the calibrated answer contradicts the mark
        return mark


def fact_probability(fact: Fact, probs: np.ndarray) -> float:
    """P(fact | image) from one image's (L,) label probabilities, as retrieval reads it (unclipped):
    single-valued slots normalised over their values, multi-valued ones independent labels."""
    columns = [_COLUMN[(fact.slot, v)] for v in fact.values]
    row = np.asarray(probs, np.float64)
    if SINGLE[fact.slot]:
        slot_columns = ONTOLOGY.slot_columns()[fact.slot]
        p = float(row[columns].sum() / max(row[slot_columns].sum(), 1e-12))
    else:
        p = float(1.0 - np.prod(1.0 - row[columns]))
    return 1.0 - p if fact.negated else p


@dataclass(frozen=True)
class Explanation:
    """How one gallery image relates to the facts so far."""

    index: int  # gallery index of the image
    path: str  # its path
    matched: tuple[Fact, ...]  # facts that hold for it (confidently, under an evidence policy)
    contradicted: tuple[Fact, ...]  # facts that do not
    unknown: tuple[Fact, ...]  # facts nothing can judge for it
    source: str  # "ground_truth" or "predicted" (attribute_probs) or "none"
    unsure: tuple[Fact, ...] = ()  # facts the model is not confident about (evidence policy only)
    unrecognised: tuple[Fact, ...] = ()  # facts on labels the model cannot recognise (not evidence)
    probabilities: Mapping[Fact, float] = field(default_factory=dict)  # P(fact | image), predicted source only
    by_user: tuple[Fact, ...] = ()  # of the facts above, those judged by what the user said of this image

    def summary(self) -> str:
        parts = []
        if self.matched:
            parts.append("matches: " + ", ".join(describe_fact(f) for f in self.matched))
        if self.contradicted:
            parts.append("contradicts: " + ", ".join(describe_fact(f) for f in self.contradicted))
        if self.unsure:
            parts.append("unsure: " + ", ".join(describe_fact(f) for f in self.unsure))
        return " | ".join(parts) or "no known attributes to compare"


def explain_image(
    index: GalleryIndex,
    i: int,
    facts: Sequence[Fact],
    *,
    use_ground_truth: bool = False,
    threshold: float = 0.5,
    evidence: EvidencePolicy | None = None,
    stated: Sequence[Fact] = (),
) -> Explanation:
    """Sort ``facts`` (duplicates dropped) into matched / contradicted / unsure / unrecognised / unknown
    for gallery image ``i``; ``evidence`` None judges predictions at ``threshold``.

    ``stated``: what the user said of this image when it was shown ("these are blue"); it judges the
    facts of its slots before the labels or the model do (the user looked at the image).

    >>> from minterpr.types import GalleryImage
    >>> index = GalleryIndex([GalleryImage("a.jpg", "x:1")], np.ones((1, 2), dtype=np.float32))
    >>> e = explain_image(index, 0, [Fact("footwear_colour", ("brown",))], stated=[Fact("footwear_colour", ("blue",))])
    >>> e.summary(), len(e.by_user)
    ('contradicts: shoe colour: brown', 1)
    """
    image = index.images[i]
    buckets: dict[str, list[Fact]] = {name: [] for name in (*VERDICTS, "unknown")}
    probabilities: dict[Fact, float] = {}
    by_user = []
    truth = image.attributes if use_ground_truth else None
    source = "ground_truth" if truth is not None else ("predicted" if index.attribute_probs is not None else "none")
    for fact in dict.fromkeys(facts):
        said = stated_holds(fact, stated)
        if said is not None:
            kind = "yes" if said else "no"
            by_user.append(fact)
        elif truth is not None:
            holds = fact.holds(truth)
            kind = "unknown" if holds is None else "yes" if holds else "no"
        elif index.attribute_probs is not None:
            p = probabilities[fact] = fact_probability(fact, index.attribute_probs[i])
            if evidence is not None:
                kind = evidence.verdict(fact, p, index.attribute_probs[i])
            else:
                kind = "yes" if _holds(fact, index, i, threshold) else "no"
        else:
            kind = "unknown"
        buckets[kind].append(fact)
    return Explanation(
        i,
        image.path,
        tuple(buckets["yes"]),
        tuple(buckets["no"]),
        tuple(buckets["unknown"]),
        source,
        tuple(buckets["unsure"]),
        tuple(buckets["unrecognised"]),
        probabilities,
        tuple(by_user),
    )


def _holds(fact: Fact, index: GalleryIndex, i: int, threshold: float) -> bool:
    """The threshold rule of a session without an evidence policy: any of the fact's labels >= threshold."""
    present = any(index.attribute_probs[i][_COLUMN[(fact.slot, v)]] >= threshold for v in fact.values)
    return not present if fact.negated else present
