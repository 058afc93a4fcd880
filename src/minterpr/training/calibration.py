"""Attribute calibration: one temperature per ontology slot, fitted on the validation split.

The attribute head is trained with binary cross-entropy on the training images, and its
probabilities come out over-confident on unseen images (a wrong label at p = 0.99 costs the
right person ln 100 in the attribute evidence). Retrieval sums ``log P(fact | image)`` over the
user's facts, so calibrated probabilities matter as much as accuracy. Temperature scaling
(Guo et al., 2017) divides each slot's logits by one number ``T_slot``; it never changes which
value of a slot scores highest, only how sure the model is.

Each ``T_slot`` minimises the negative log-likelihood of the validation gallery's annotated
labels, in the form retrieval uses them (:func:`minterpr.language.evidence.fact_log_likelihood`):
for a single-valued slot the probability of the true value after normalising over the slot's
values; for a multi-valued slot the independent per-label Bernoulli likelihoods. The search is a
log-spaced grid over [1/8, 8] refined by golden-section search: one smooth parameter, no solver
dependency. The test split is never used (the callers pass the selection split).

Example:
    >>> import numpy as np
    >>> from minterpr.language.ontology import ONTOLOGY
    >>> labels = ONTOLOGY.flat_labels()
    >>> rng = np.random.default_rng(0)
    >>> targets = (rng.random((500, len(labels))) < 0.3).astype(np.float32)
    >>> true_logits = rng.normal(0, 2, targets.shape) + 2 * (2 * targets - 1)
    >>> mask = np.array([[s == "gender" for s, _ in labels]] * 500)  # only gender annotated
    >>> fitted = fit_slot_temperatures(3 * true_logits, targets, mask)  # 3x over-confident
    >>> sorted(fitted), 2.0 < fitted["gender"] < 4.0
    (['gender'], True)
"""

from __future__ import annotations

import math
from typing import Callable, Iterator, Mapping

import numpy as np

from minterpr.language.ontology import ONTOLOGY, Slot

MIN_TEMPERATURE, MAX_TEMPERATURE = 0.125, 8.0  # the search range of every slot's temperature
GRID_POINTS = 25  # log-spaced starting grid over the range
GOLDEN_STEPS = 30  # golden-section refinements around the best grid point
PROB_EPS = 1e-6  # probabilities clipped to [eps, 1 - eps] inside the log
MIN_ANNOTATED_IMAGES = 20  # a slot with fewer annotated images keeps T = 1 (too little evidence)


def _slot_nll(logits: np.ndarray, targets: np.ndarray, single_valued: bool, temperature: float) -> float:
    """Mean negative log-likelihood of one slot's labels at ``temperature``.

    logits, targets: (N, V) for the N images annotated for this slot.
    """
    probs = 1.0 / (1.0 + np.exp(-logits / temperature))  # (N, V)
    probs = np.clip(probs, PROB_EPS, 1.0 - PROB_EPS)
    if single_valued:  # P(true value) after normalising over the slot's values, as retrieval reads it
        true = (probs * targets).sum(axis=1) / probs.sum(axis=1)
        return float(-np.log(np.clip(true, PROB_EPS, 1.0)).mean())
    per_label = targets * np.log(probs) + (1.0 - targets) * np.log(1.0 - probs)  # (N, V)
    return float(-per_label.sum(axis=1).mean())


def minimise_log_temperature(nll: Callable[[float], float]) -> float:
    """argmin over log T of ``nll(log T)`` in the search range."""
    grid = np.linspace(math.log(MIN_TEMPERATURE), math.log(MAX_TEMPERATURE), GRID_POINTS)
    values = [nll(x) for x in grid]
    best = int(np.argmin(values))
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = high - ratio * (high - low), low + ratio * (high - low)
    fa, fb = nll(a), nll(b)
    for _ in range(GOLDEN_STEPS):
        if fa < fb:
            high, b, fb = b, a, fa
            a = high - ratio * (high - low)
            fa = nll(a)
        else:
            low, a, fa = a, b, fb
            b = low + ratio * (high - low)
            fb = nll(b)
    candidates = [(values[best], grid[best]), (fa, a), (fb, b)]
    return float(min(candidates)[1])


def _annotated_slots(
    logits: np.ndarray, targets: np.ndarray, mask: np.ndarray
) -> Iterator[tuple[Slot, np.ndarray, np.ndarray]]:
    """(slot, (n, V) logits, (n, V) targets) over the images annotated for each slot.

    Single-valued slots count an image only when exactly one of its values is true.
    """
    labels, slot_columns = ONTOLOGY.flat_labels(), ONTOLOGY.slot_columns()
    logits, targets, mask = np.asarray(logits, np.float64), np.asarray(targets, np.float64), np.asarray(mask, bool)
    if logits.shape[1:] != (len(labels),) or targets.shape != logits.shape or mask.shape != logits.shape:
        raise ValueError(
            f"logits, targets and mask must all be (N, {len(labels)}); got {logits.shape}, "
            f"{targets.shape}, {mask.shape}"
        )
    for slot in ONTOLOGY.slots:
        columns = slot_columns[slot.name]
        rows = mask[:, columns].all(axis=1)
        if not slot.multi:
            rows &= targets[:, columns].sum(axis=1) == 1
        yield slot, logits[rows][:, columns], targets[rows][:, columns]


def fit_slot_temperatures(
    logits: np.ndarray, targets: np.ndarray, mask: np.ndarray, min_images: int | None = None
) -> dict[str, float]:
    """Slot name -> temperature minimising the validation NLL of that slot's annotated labels.

    ``logits``, ``targets`` (0/1) and ``mask`` (True = annotated) are (N, L) over
    ``ONTOLOGY.flat_labels()``, as :func:`minterpr.training.data.attribute_targets` gives them.
    Slots with fewer than ``min_images`` (default :data:`MIN_ANNOTATED_IMAGES`) annotated images
    get no entry (too little evidence to move them from 1), and so do slots whose labels never
    vary (every annotated image holds the same values, as PETA's "V-neck", labelled only when
    present): with nothing to tell apart, the likelihood grows without limit as T shrinks.
    """
    min_images = MIN_ANNOTATED_IMAGES if min_images is None else min_images
    fitted: dict[str, float] = {}
    for slot, slot_logits, slot_targets in _annotated_slots(logits, targets, mask):
        varies = bool((slot_targets.min(axis=0) != slot_targets.max(axis=0)).any()) if len(slot_targets) else False
        if len(slot_logits) >= min_images and varies:
            log_t = minimise_log_temperature(
                lambda x: _slot_nll(slot_logits, slot_targets, not slot.multi, math.exp(x))
            )
            fitted[slot.name] = float(math.exp(log_t))
    return fitted


def calibration_nll(
    logits: np.ndarray, targets: np.ndarray, mask: np.ndarray, temperatures: Mapping[str, float] | None = None
) -> dict[str, float]:
    """Slot name -> mean NLL of its annotated labels at ``temperatures`` (default: all 1), for reports."""
    return {
        slot.name: _slot_nll(slot_logits, slot_targets, not slot.multi, (temperatures or {}).get(slot.name, 1.0))
        for slot, slot_logits, slot_targets in _annotated_slots(logits, targets, mask)
        if len(slot_logits)
    }
