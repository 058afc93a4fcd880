"""Per-label decision thresholds fitted on a validation split (balanced accuracy).

:func:`balanced_thresholds` picks one threshold per label that maximises (TPR + TNR) / 2 on the
images it is given. Fit it on a **validation** split and apply the thresholds to test; fitted on
test itself it inflates mA (it sees the answers). :func:`~minterpr.evaluation.attribute_metrics.attribute_metrics`
takes them as its ``threshold``.

Example:
    >>> import numpy as np
    >>> from minterpr.types import GalleryImage
    >>> images = [GalleryImage("a.jpg", "x:1", attributes={"gender": ("male",)}),
    ...           GalleryImage("b.jpg", "x:2", attributes={"gender": ("female",)})]
    >>> male, female = LABELS.index(("gender", "male")), LABELS.index(("gender", "female"))
    >>> probs = np.full((2, len(LABELS)), 0.1)
    >>> probs[0, [male, female]] = 0.8, 0.3     # right
    >>> probs[1, [male, female]] = 0.6, 0.7     # both on: female right, male a false positive
    >>> balanced_thresholds(probs, images)[[male, female]].tolist()
    [0.7, 0.5]
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from minterpr.evaluation.attribute_metrics import DEFAULT_THRESHOLD, LABELS, attribute_targets, check_probs
from minterpr.types import GalleryImage


def balanced_thresholds_from_targets(
    probs: Any, targets: np.ndarray, mask: np.ndarray, default: float = DEFAULT_THRESHOLD
) -> np.ndarray:
    """:func:`balanced_thresholds` from ``(targets, mask)``."""
    targets, mask = np.asarray(targets) > 0.5, np.asarray(mask, dtype=bool)
    probs = check_probs(probs, targets, mask)
    out = np.full(len(LABELS), float(default))
    for j in range(len(LABELS)):
        y, s = targets[mask[:, j], j], probs[mask[:, j], j]
        n_pos = int(y.sum())
        n_neg = len(y) - n_pos
        if n_pos == 0 or n_neg == 0:
            continue
        order = np.argsort(-s, kind="stable")
        s, y = s[order], y[order]
        cuts = np.flatnonzero(s[:-1] != s[1:])  # predict the top cut+1 images: a threshold between s[cut], s[cut+1]
        if not len(cuts):
            continue
        tp = np.cumsum(y)[cuts]
        fp = (cuts + 1) - tp
        score = tp / n_pos + (n_neg - fp) / n_neg
        candidates = (s[cuts] + s[cuts + 1]) / 2
        best = np.flatnonzero(score >= score.max() - 1e-12)
        out[j] = candidates[best[np.argmin(np.abs(candidates[best] - default))]]
    return out


def balanced_thresholds(probs: Any, images: Sequence[GalleryImage], default: float = DEFAULT_THRESHOLD) -> np.ndarray:
    """(L,) per-label thresholds maximising (TPR + TNR) / 2 of ``p > t`` on ``images``.

    For validation splits only (see the module docstring). Each threshold lies half-way between
    two neighbouring distinct scores of the label; among equally good ones the nearest to
    ``default`` is kept. Labels without positives or negatives, or with one distinct score,
    keep ``default``."""
    targets, mask = attribute_targets(images)
    if len(images) != len(np.asarray(probs)):
        raise ValueError(f"{len(np.asarray(probs))} probability rows for {len(images)} images")
    return balanced_thresholds_from_targets(probs, targets, mask, default)
