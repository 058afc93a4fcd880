"""How likely each image is the person, and how likely the person is in the searched images at all.

:func:`match_probabilities` turns a step's final scores into the candidate distribution the
policies choose their moves by (softmax of score / :data:`~minterpr.interaction.policies.TEMPERATURE`):
a bounded number in [0, 1], summing to 1 over the ranked images, that the page shows as each
result's "match" (never the raw score, whose scale moves with every fact said).

Example:
    >>> import numpy as np
    >>> p = match_probabilities(np.array([0.50, 0.48, 0.10]))
    >>> [round(float(x), 3) for x in p]
    [0.731, 0.269, 0.0]
    >>> match_probabilities(np.array([0.5, -np.inf])).tolist()  # an image beyond a shortlist: 0
    [1.0, 0.0]
    >>> percent(0.1234), percent(0.004), percent(None)
    ('12 %', '< 1 %', 'unknown')
"""
from __future__ import annotations

import numpy as np

from minterpr.interaction.policies import TEMPERATURE


def match_probabilities(scores: np.ndarray, temperature: float = TEMPERATURE) -> np.ndarray:
    """(K,) softmax(scores / temperature) of (K,) final scores; ``-inf`` scores get 0."""
    scores = np.asarray(scores, np.float64)
    finite = np.isfinite(scores)
    out = np.zeros(len(scores))
    if finite.any():
        logits = scores[finite] / temperature
        weights = np.exp(logits - logits.max())
        out[finite] = weights / weights.sum()
    return out


def percent(probability: float | None) -> str:
    """How a match probability is shown (the page, the confirmation and the export alike): ``'12 %'``."""
    if probability is None:
        return "unknown"
    value = 100.0 * probability
    return f"{value:.0f} %" if value >= 1 or value == 0 else "< 1 %"
