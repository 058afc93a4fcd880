"""How likely each image is the person, and how likely the person is in the searched images at all.

:func:`match_probabilities` turns a step's final scores into the candidate distribution the
policies choose their moves by (softmax of score / :data:`~minterpr.interaction.policies.TEMPERATURE`):
a bounded number in [0, 1], summing to 1 over the ranked images, that the page shows as each
result's "match" (never the raw score, whose scale moves with every fact said).

:func:`presence_probability` estimates whether the person is among the searched images at all.
Hypotheses: the person is image i (prior ``prior``, spread by the match distribution) or is not in
the footage (1 - ``prior``). An image the analyst rules out had mass m under the distribution shown
when they did; under "present" that verdict had probability 1 - m, under "absent" 1, so each
ruling-out multiplies the odds of presence by 1 - m: ruling out the images the system was sure of
makes "probably not in this footage" likely, ruling out long shots changes little. (The facts alone
cannot tell: a stranger's description is as likely as a gallery member's when the gallery is a fair
sample of people.) Prior and threshold are measured by ``benchmarks/bench_presence.py``
(docs/benchmarks.md).

Example:
    >>> import numpy as np
    >>> p = match_probabilities(np.array([0.50, 0.48, 0.10]))
    >>> [round(float(x), 3) for x in p]
    [0.731, 0.269, 0.0]
    >>> match_probabilities(np.array([0.5, -np.inf])).tolist()  # an image beyond a shortlist: 0
    [1.0, 0.0]
    >>> percent(0.1234), percent(0.004), percent(None)
    ('12 %', '< 1 %', 'unknown')
    >>> round(presence_probability([]), 3), round(presence_probability([0.9, 0.8]), 3)
    (0.9, 0.153)
    >>> probably_absent(presence_probability([0.9, 0.8])), probably_absent(presence_probability([0.05, 0.1]))
    (True, False)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from minterpr.interaction.policies import TEMPERATURE

PRIOR_PRESENT = 0.9  # P(the person is in the searched images) before anything is said: the analyst chose this footage
ABSENT_BELOW = 0.2  # under this presence probability the page says "probably not in this footage"


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


def presence_probability(ruled_out: Sequence[float], prior: float = PRIOR_PRESENT) -> float:
    """P(the person is among the searched images) after ruling out images whose match probabilities
    (:func:`match_probabilities`), when each was ruled out, were ``ruled_out`` (see the module doc)."""
    if not 0.0 < prior < 1.0:
        raise ValueError(f"prior must be in (0, 1), got {prior!r}")
    p = prior
    for mass in ruled_out:
        keep = 1.0 - min(max(float(mass), 0.0), 1.0)
        p = p * keep / (p * keep + (1.0 - p))
    return p


def probably_absent(probability: float, threshold: float = ABSENT_BELOW) -> bool:
    """Whether to say "probably not in this footage"."""
    return probability < threshold
