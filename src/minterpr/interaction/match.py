"""How likely each image is the person: the match the page shows, and its fitted temperature.

:func:`match_probabilities` turns a step's final scores into the candidate distribution the
policies choose their moves by (softmax of score / :data:`~minterpr.interaction.policies.TEMPERATURE`):
a bounded number in [0, 1], summing to 1 over the ranked images, that the page shows as each
result's "match" (never the raw score, whose scale moves with every fact said).

The temperature a model's page uses is fitted on validation searches (:func:`fit_match_temperature`:
the one T minimising the negative log-likelihood of the target's images under the match distribution,
so an image shown at match m is the person about m of the time; :class:`MatchCalibration` is the
stored record, ``minterpr calibrate match`` computes it, docs/benchmarks.md); a model without one
keeps the policies' :data:`~minterpr.interaction.policies.TEMPERATURE`.

Example:
    >>> import numpy as np
    >>> p = match_probabilities(np.array([0.50, 0.48, 0.10]))
    >>> [round(float(x), 3) for x in p]
    [0.731, 0.269, 0.0]
    >>> match_probabilities(np.array([0.5, -np.inf])).tolist()  # an image beyond a shortlist: 0
    [1.0, 0.0]
    >>> percent(0.1234), percent(0.004), percent(None)
    ('12 %', '< 1 %', 'unknown')
    >>> steps = [(np.array([2.0, 1.0, 0.0]), np.array([True, False, False])),
    ...          (np.array([2.0, 1.0, 0.0]), np.array([False, True, False]))]
    >>> round(fit_match_temperature(steps), 3)  # the top image is the target half the time: T = 1/log((1+13**.5)/2)
    1.199
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.interaction.policies import TEMPERATURE
from minterpr.records import count, finite, mapping, split_name

# the range fit_match_temperature searches (log-spaced): 1e-3 is sharper than any score gap, 1e3 flat
TEMPERATURE_RANGE = (1e-3, 1e3)
MatchStep = tuple[np.ndarray, np.ndarray]  # ((K,) final scores of a step, (K,) bool: the image shows the target)


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


def match_nll(steps: Sequence[MatchStep], temperature: float) -> float:
    """Mean over ``steps`` of -log P(the target's images) under :func:`match_probabilities` at
    ``temperature``; a step whose target images are all beyond the ranking (``-inf``) is left out."""
    total, counted = 0.0, 0
    for scores, target in steps:
        scores, target = np.asarray(scores, np.float64), np.asarray(target, bool)
        finite = np.isfinite(scores)
        if not (target & finite).any():
            continue
        logits = scores[finite] / temperature
        top = float(logits.max())
        log_all = top + math.log(float(np.exp(logits - top).sum()))
        hit = logits[target[finite]]
        log_hit = hit.max() + math.log(float(np.exp(hit - hit.max()).sum()))
        total += log_all - log_hit
        counted += 1
    if not counted:
        raise ValueError("no step ranks an image of its target: nothing to fit a temperature on")
    return float(total / counted)


def fit_match_temperature(steps: Sequence[MatchStep], bounds: tuple[float, float] = TEMPERATURE_RANGE) -> float:
    """The temperature in ``bounds`` minimising :func:`match_nll` over ``steps``: a log-spaced grid,
    then golden-section refinement around its best point (the likelihood of one temperature is
    smooth and, in practice, single-peaked)."""
    low, high = math.log(bounds[0]), math.log(bounds[1])
    grid = np.linspace(low, high, 61)
    values = [match_nll(steps, math.exp(g)) for g in grid]
    k = int(np.argmin(values))
    a, b = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = match_nll(steps, math.exp(c)), match_nll(steps, math.exp(d))
    for _ in range(40):  # the bracket shrinks 0.618x a step: 40 steps leave ~1e-9 in log T
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = match_nll(steps, math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = match_nll(steps, math.exp(d))
    return float(math.exp((a + b) / 2.0))


def match_reliability(
    steps: Sequence[MatchStep], temperature: float, top: int = 10, bins: int = 10
) -> tuple[float, list[dict[str, float]]]:
    """How well the match of the ``top`` results of each step says how often they are the person:
    (expected calibration error, one row per non-empty bin of equal width: mean match, share that
    was the target, images). ECE = sum over bins of images / all x |share - mean match|."""
    shown: list[float] = []
    hits: list[bool] = []
    for scores, target in steps:
        p = match_probabilities(scores, temperature)
        order = np.argsort(-np.asarray(scores, np.float64), kind="stable")[:top]
        shown.extend(p[order].tolist())
        hits.extend(np.asarray(target, bool)[order].tolist())
    m, y = np.asarray(shown), np.asarray(hits, np.float64)
    which = np.minimum((m * bins).astype(int), bins - 1)
    rows, ece = [], 0.0
    for b in range(bins):
        inside = which == b
        if inside.any():
            rows.append(
                {
                    "mean_match": float(m[inside].mean()),
                    "share_target": float(y[inside].mean()),
                    "images": int(inside.sum()),
                }
            )
            ece += inside.sum() / max(len(m), 1) * abs(float(y[inside].mean()) - float(m[inside].mean()))
    return float(ece), rows


@dataclass(frozen=True)
class MatchCalibration:
    """The match distribution's temperature fitted on validation searches (a run's extra
    ``"match_calibration"``; ``minterpr calibrate match`` writes it)."""

    split: str  # the split the searches ran on (never test)
    temperature: float  # softmax temperature of the page's match (and of the presence estimate it feeds)
    searches: int  # simulated searches run
    steps: int  # steps (rankings) fitted on: one per turn of each search
    nll_before: float  # mean -log P(target) per step at the policies' TEMPERATURE
    nll_after: float  # the same at ``temperature``
    ece_before: float  # expected calibration error of the top-10 matches at TEMPERATURE
    ece_after: float  # the same at ``temperature``
    protocol: Mapping[str, Any]  # how the searches ran (simulator, turns, seed)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["protocol"] = dict(self.protocol)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "MatchCalibration":
        """The record of ``to_dict``; ValueError naming the field that is missing or not a number."""
        data = mapping(data)
        values: dict[str, Any] = {
            name: finite(data.get(name), name)
            for name in ("temperature", "nll_before", "nll_after", "ece_before", "ece_after")
        }
        if values["temperature"] <= 0:
            raise ValueError(f"'temperature': {values['temperature']!r} is not positive")
        values.update({name: count(data.get(name), name) for name in ("searches", "steps")})
        return cls(
            split=split_name(data.get("split")), protocol=mapping(data.get("protocol", {}), "protocol"), **values
        )
