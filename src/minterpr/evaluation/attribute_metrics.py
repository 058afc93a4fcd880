"""Pedestrian attribute recognition (PAR) metrics of an attribute head, as Jia et al. define them.

Inputs are ``probs`` (N, L), the head's P(label) over ``ONTOLOGY.flat_labels()``, and the
ground truth of the same N images: their ontology attributes (``GalleryImage.attributes``),
turned into ``(targets, mask)`` by :func:`attribute_targets` (the one definition training uses
too). A slot absent from an image's attributes is *unlabelled*: all of its labels are masked
for that image and count nowhere. Figures are percentages.

* **Label-based** (Jia et al. 2021, "Rethinking of Pedestrian Attribute Recognition", their
  ``get_pedestrian_metrics``): a label is predicted when ``p > threshold`` (0.5, or one
  threshold per label); per label TPR = TP / positives, TNR = TN / negatives over the images
  where it is labelled; **mA** = mean over labels of (TPR + TNR) / 2, over the labels that have
  at least one positive and one negative (Jia et al. average all their 35 labels, which all
  have both on PETA; a label without positives would count as 50 for any model here).
* **Instance-based** (same paper and code), per image over its labelled labels, averaged over
  the images with at least one labelled label: accuracy = |pred ∩ true| / |pred ∪ true|,
  precision = |pred ∩ true| / |pred| (0 when nothing is predicted), recall = |pred ∩ true| /
  |true|; **F1 = 2 P R / (P + R) of the averaged precision and recall** (their code's
  definition, not the mean of per-image F1).
* **Per slot**: the most probable value of the slot (argmax over its labels) is right when
  the image holds it (a red-and-white jacket: red and white are both right), against always
  answering the slot's majority value *of the evaluated images* (ties: ontology order).
* **Per label**: positives, negatives, threshold, TPR, TNR, balanced accuracy, ROC AUC
  (rank-based, ties averaged); ``None`` where undefined (no positives or no negatives).

:func:`~minterpr.evaluation.attribute_thresholds.balanced_thresholds` fits one threshold per label on a
validation split (:mod:`minterpr.evaluation.attribute_thresholds`).

Example:
    >>> from minterpr.types import GalleryImage
    >>> images = [GalleryImage("a.jpg", "x:1", attributes={"gender": ("male",)}),
    ...           GalleryImage("b.jpg", "x:2", attributes={"gender": ("female",)}),
    ...           GalleryImage("c.jpg", "x:3", attributes=None)]
    >>> probs = np.full((3, len(LABELS)), 0.1)
    >>> male, female = LABELS.index(("gender", "male")), LABELS.index(("gender", "female"))
    >>> probs[0, [male, female]] = 0.8, 0.3     # right
    >>> probs[1, [male, female]] = 0.6, 0.7     # both on: female right, male a false positive
    >>> result = attribute_metrics(probs, images)
    >>> result.mA, result.labels_counted, result.instances
    (75.0, 2, 2)
    >>> round(result.accuracy, 2), round(result.precision, 2), result.recall, round(result.f1, 2)
    (75.0, 75.0, 100.0, 85.71)
    >>> result.slots[0].accuracy, result.slots[0].majority_accuracy
    (100.0, 50.0)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from minterpr.language.ontology import ONTOLOGY
from minterpr.types import GalleryImage

LABELS: list[tuple[str, str]] = ONTOLOGY.flat_labels()  # the L label columns, (slot, value)
DEFAULT_THRESHOLD = 0.5  # p > 0.5 predicts a label, as in Jia et al.


def attribute_targets(images: Sequence[GalleryImage]) -> tuple[np.ndarray, np.ndarray]:
    """(N, L) float32 targets and (N, L) bool masks over ``ONTOLOGY.flat_labels()``.

    A label is known (mask True) when its slot is annotated; its target is 1 when the slot
    holds that value. Unlabelled images (attributes None) are masked out entirely. Training's
    attribute loss and calibration use this same function (``minterpr.training.data`` imports it).

    >>> t, m = attribute_targets([GalleryImage("a", "x:1", attributes={"gender": ("male",)})])
    >>> int(t.sum()), int(m.sum()), t[0, LABELS.index(("gender", "male"))]
    (1, 2, np.float32(1.0))
    """
    column = {label: j for j, label in enumerate(LABELS)}
    targets = np.zeros((len(images), len(LABELS)), np.float32)
    mask = np.zeros((len(images), len(LABELS)), bool)
    slot_columns = ONTOLOGY.slot_columns()
    for i, image in enumerate(images):
        for slot, values in (image.attributes or {}).items():
            mask[i, slot_columns[slot]] = True
            for value in values:
                targets[i, column[(slot, value)]] = 1.0
    return targets, mask


@dataclass(frozen=True)
class LabelRow:
    """One label's figures (percent; None where undefined)."""

    slot: str  # ontology slot
    value: str  # ontology value
    positives: int  # labelled images that hold the label
    negatives: int  # labelled images that do not
    threshold: float  # p > threshold predicts the label
    tpr: float | None  # TP / positives (recall of the label); None without positives
    tnr: float | None  # TN / negatives; None without negatives
    balanced_accuracy: float | None  # (TPR + TNR) / 2; None unless both exist (then it counts in mA)
    auc: float | None  # ROC AUC of p; None unless both exist


@dataclass(frozen=True)
class SlotRow:
    """One slot's argmax accuracy against its majority value (percent)."""

    slot: str  # ontology slot
    multi: bool  # several values may hold at once (colours, carried items)
    images: int  # images where the slot is labelled
    accuracy: float  # the head's most probable value is one of the image's values
    majority_value: str  # the value held by most of these images
    majority_accuracy: float  # always answering majority_value


@dataclass(frozen=True)
class AttributeMetrics:
    """PAR metrics of one set of images (percent); :meth:`to_dict` is the JSON report's shape."""

    images: int  # rows evaluated (N)
    instances: int  # images with at least one labelled label (instance metrics average over them)
    threshold: float | None  # the one threshold; None when per-label thresholds were given
    mA: float  # mean balanced accuracy over the labels with positives and negatives
    labels_counted: int  # how many labels mA averages
    accuracy: float  # instance-based: mean |pred ∩ true| / |pred ∪ true|
    precision: float  # instance-based: mean |pred ∩ true| / |pred|
    recall: float  # instance-based: mean |pred ∩ true| / |true|
    f1: float  # 2 P R / (P + R) of the two means above
    labels: tuple[LabelRow, ...]  # every label, ontology order
    slots: tuple[SlotRow, ...]  # every slot labelled on at least one image, ontology order

    def subset_mA(self, labels: Sequence[tuple[str, str]]) -> tuple[float, int]:
        """(mA, labels counted) over the (slot, value) ``labels`` only, e.g. PETA's 35 standard
        attributes (:func:`minterpr.data.label_maps.peta35_labels`); NaN when none counts."""
        wanted = set(labels)
        scores = [
            r.balanced_accuracy for r in self.labels if (r.slot, r.value) in wanted and r.balanced_accuracy is not None
        ]
        return (float(np.mean(scores)) if scores else float("nan")), len(scores)

    @property
    def peta35(self) -> tuple[float, int]:
        """(mA, labels counted) over PETA's 35 standard attributes, reported beside :attr:`mA`."""
        from minterpr.data.label_maps import peta35_labels

        return self.subset_mA(peta35_labels())

    @property
    def slot_mean(self) -> tuple[float, float]:
        """(mean slot accuracy, mean majority accuracy) over :attr:`slots`; NaN when none."""
        if not self.slots:
            return float("nan"), float("nan")
        return (
            float(np.mean([s.accuracy for s in self.slots])),
            float(np.mean([s.majority_accuracy for s in self.slots])),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (documented in docs/attributes.md); no NaN (undefined is null)."""
        accuracy, majority = self.slot_mean
        peta35, peta35_counted = self.peta35
        return {
            "images": self.images,
            "instances": self.instances,
            "threshold": "per_label" if self.threshold is None else self.threshold,
            "label_based": {
                "mA": _finite(self.mA),
                "labels_counted": self.labels_counted,
                "labels_total": len(self.labels),
                "peta35_mA": _finite(peta35),
                "peta35_counted": peta35_counted,
            },
            "instance_based": {
                "accuracy": _finite(self.accuracy),
                "precision": _finite(self.precision),
                "recall": _finite(self.recall),
                "f1": _finite(self.f1),
            },
            "slots": {s.slot: {k: v for k, v in asdict(s).items() if k != "slot"} for s in self.slots},
            "slot_mean": {
                "accuracy": _finite(accuracy),
                "majority_accuracy": _finite(majority),
                "slots": len(self.slots),
            },
            "labels": [asdict(row) for row in self.labels],
        }


def _finite(value: float) -> float | None:
    """``value``, or None for NaN (JSON has no NaN; an undefined figure is null)."""
    return None if np.isnan(value) else float(value)


def check_probs(probs: Any, targets: np.ndarray, mask: np.ndarray) -> np.ndarray:
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2 or probs.shape[1] != len(LABELS):
        raise ValueError(f"probs must be (N, {len(LABELS)}) over ONTOLOGY.flat_labels(), got {probs.shape}")
    if targets.shape != probs.shape or mask.shape != probs.shape:
        raise ValueError(f"probs {probs.shape}, targets {targets.shape} and mask {mask.shape} must have one shape")
    if not np.isfinite(probs).all():
        raise ValueError("probs hold NaN or infinite values")
    return probs


def _thresholds(threshold: float | Sequence[float] | np.ndarray) -> tuple[np.ndarray, float | None]:
    if np.ndim(threshold) == 0:
        return np.full(len(LABELS), float(threshold)), float(threshold)  # type: ignore[arg-type]
    per_label = np.asarray(threshold, dtype=np.float64)
    if per_label.shape != (len(LABELS),) or not np.isfinite(per_label).all():
        raise ValueError(f"per-label thresholds must be {len(LABELS)} finite numbers, got shape {per_label.shape}")
    return per_label, None


def auc_scores(probs: np.ndarray, targets: np.ndarray, mask: np.ndarray) -> list[float | None]:
    """ROC AUC (percent) of each label over its labelled images: the Mann-Whitney statistic with
    tied scores counted half; None without positives or negatives."""
    out: list[float | None] = []
    for j in range(probs.shape[1]):
        rows = mask[:, j]
        y, s = targets[rows, j] > 0.5, probs[rows, j]
        n_pos, n_neg = int(y.sum()), int((~y).sum())
        if n_pos == 0 or n_neg == 0:
            out.append(None)
            continue
        order = np.argsort(s, kind="stable")
        ranks = np.empty(len(s))
        sorted_s = s[order]
        # average 1-based rank of each group of equal scores
        starts = np.flatnonzero(np.r_[True, sorted_s[1:] != sorted_s[:-1]])
        ends = np.r_[starts[1:], len(s)]
        ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
        out.append(100.0 * float(ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
    return out


def _slot_rows(probs: np.ndarray, targets: np.ndarray, mask: np.ndarray) -> tuple[SlotRow, ...]:
    rows = []
    for slot in ONTOLOGY.slots:
        columns = ONTOLOGY.slot_columns()[slot.name]
        labelled = mask[:, columns[0]]
        if not labelled.any():
            continue
        truth = targets[labelled][:, columns] > 0.5  # (n, V)
        predicted = probs[labelled][:, columns].argmax(axis=1)
        majority = int(truth.sum(axis=0).argmax())  # ties: the first value in ontology order
        rows.append(
            SlotRow(
                slot.name,
                slot.multi,
                int(labelled.sum()),
                100.0 * float(truth[np.arange(len(truth)), predicted].mean()),
                slot.values[majority].name,
                100.0 * float(truth[:, majority].mean()),
            )
        )
    return tuple(rows)


def attribute_metrics_from_targets(
    probs: Any,
    targets: np.ndarray,
    mask: np.ndarray,
    threshold: float | Sequence[float] | np.ndarray = DEFAULT_THRESHOLD,
    *,
    auc: bool = True,
) -> AttributeMetrics:
    """:func:`attribute_metrics` from ``(targets, mask)`` as :func:`attribute_targets` gives them
    (training's own arrays); ``auc=False`` skips the per-label AUC (a sort per label)."""
    targets, mask = np.asarray(targets) > 0.5, np.asarray(mask, dtype=bool)
    probs = check_probs(probs, targets, mask)
    per_label, single = _thresholds(threshold)
    predicted = probs > per_label  # (N, L)
    pos, neg = targets & mask, ~targets & mask
    n_pos, n_neg = pos.sum(axis=0), neg.sum(axis=0)
    tp, tn = (predicted & pos).sum(axis=0), (~predicted & neg).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        tpr, tnr = 100.0 * tp / n_pos, 100.0 * tn / n_neg
    counted = (n_pos > 0) & (n_neg > 0)
    balanced = (tpr + tnr) / 2
    mA = float(balanced[counted].mean()) if counted.any() else float("nan")
    # instance-based, per image over its labelled labels
    has = mask.any(axis=1)
    pred_on, true_on = predicted & mask, pos
    inter = (pred_on & true_on).sum(axis=1)[has].astype(np.float64)
    union = (pred_on | true_on).sum(axis=1)[has]
    n_pred, n_true = pred_on.sum(axis=1)[has], true_on.sum(axis=1)[has]
    with np.errstate(divide="ignore", invalid="ignore"):
        acc = np.where(union > 0, inter / union, 0.0)
        prec = np.where(n_pred > 0, inter / n_pred, 0.0)
        rec = np.where(n_true > 0, inter / n_true, 0.0)
    instances = int(has.sum())
    m_acc, m_prec, m_rec = ((100.0 * float(a.mean())) if instances else float("nan") for a in (acc, prec, rec))
    f1 = (
        2 * m_prec * m_rec / (m_prec + m_rec)
        if instances and m_prec + m_rec > 0
        else (0.0 if instances else float("nan"))
    )
    aucs = auc_scores(probs, targets, mask) if auc else [None] * len(LABELS)

    def number(value: float, ok: bool) -> float | None:
        return float(value) if ok else None

    labels = tuple(
        LabelRow(
            slot,
            value,
            int(n_pos[j]),
            int(n_neg[j]),
            float(per_label[j]),
            number(tpr[j], n_pos[j] > 0),
            number(tnr[j], n_neg[j] > 0),
            number(balanced[j], bool(counted[j])),
            aucs[j] if counted[j] else None,
        )
        for j, (slot, value) in enumerate(LABELS)
    )
    return AttributeMetrics(
        len(probs),
        instances,
        single,
        mA,
        int(counted.sum()),
        m_acc,
        m_prec,
        m_rec,
        f1,
        labels,
        _slot_rows(probs, targets, mask),
    )


def attribute_metrics(
    probs: Any,
    images: Sequence[GalleryImage],
    threshold: float | Sequence[float] | np.ndarray = DEFAULT_THRESHOLD,
    *,
    auc: bool = True,
) -> AttributeMetrics:
    """PAR metrics of ``probs`` (N, L) against the attributes of ``images`` (N, same order).

    ``threshold``: one number (``p > threshold`` predicts a label) or one per label, e.g. from
    :func:`~minterpr.evaluation.attribute_thresholds.balanced_thresholds` fitted on a validation split."""
    targets, mask = attribute_targets(images)
    if len(images) != len(np.asarray(probs)):
        raise ValueError(f"{len(np.asarray(probs))} probability rows for {len(images)} images")
    return attribute_metrics_from_targets(probs, targets, mask, threshold, auc=auc)


def format_attribute_table(result: AttributeMetrics, title: str = "") -> str:
    """A compact text table: mA, instance metrics, then per slot the head against the majority."""
    accuracy, majority = result.slot_mean
    threshold = "per-label thresholds" if result.threshold is None else f"p > {result.threshold:g}"
    lines = [title] if title else []
    lines += [
        f"images {result.images:,} ({result.instances:,} labelled), {threshold}",
        f"mA {result.mA:.1f} over {result.labels_counted} labels (PETA-35 mA {result.peta35[0]:.1f} over "
        f"{result.peta35[1]}) | instance: accuracy {result.accuracy:.1f}  "
        f"precision {result.precision:.1f}  recall {result.recall:.1f}  F1 {result.f1:.1f}",
        f"{'slot':<16} {'images':>7} {'head %':>7} {'majority %':>10}  majority value",
    ]
    lines += [
        f"{s.slot:<16} {s.images:7,} {s.accuracy:7.1f} {s.majority_accuracy:10.1f}  {s.majority_value}"
        for s in result.slots
    ]
    lines.append(f"{'mean':<16} {'':7} {accuracy:7.1f} {majority:10.1f}")
    return "\n".join(lines)
