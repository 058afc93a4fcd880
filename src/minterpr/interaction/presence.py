"""How likely the person is in the searched images at all: "probably not in this footage".

:func:`presence_probability` is the estimate from the rulings-out alone, used by a model without a
fitted presence model. Hypotheses: the person is image i (prior ``prior``, spread by the match
distribution, :mod:`minterpr.interaction.match`) or is not in the footage (1 - ``prior``). An image
the analyst rules out had mass m under the distribution shown when they did; under "present" that
verdict had probability 1 - m, under "absent" 1, so each ruling-out multiplies the odds of presence
by 1 - m. At a calibrated match five rulings-out barely move it; the fitted model below (how well
the remaining images fit the facts, how many were ruled out, ...) is what separates present from
absent targets (docs/benchmarks.md).

The fitted model is a small logistic model over live-session signals. Every signal is computed from
what a live session holds, without ground truth (:func:`presence_features`, one row per step):

* ``best_fit`` — max over the images not ruled out of Σ_facts log P(fact | image) (the distinct
  facts said of the person, the index's calibrated attribute probabilities clipped as the ranking
  clips them, :func:`~minterpr.language.evidence.fact_log_likelihood`): how well the best remaining
  image fits everything said. An absent person's look-alikes fail some fact once enough is said;
  the person's own images fit.
* ``compatible`` — log Σ over the same images of exp(that sum): the log of how many remaining images
  fit the facts (a soft count).
* ``rejected`` — Σ over the images ruled out of -log(1 - m), m the match each had on the page when it
  was ruled out (the odds factor of :func:`presence_probability`).
* ``top_match`` — the match probability (the page's, at the model's fitted temperature) of the best
  image not ruled out: a person present tends to stand out of the rest.
* ``ruled_out`` — how many images the analyst ruled out: the system shows its best candidates, and
  each one that is not the person makes it less likely the person is there at all.
* ``gallery`` — log of the number of images searched: in a larger gallery a present person takes
  more rulings-out to surface and an absent one has more look-alikes, so the other signals mean
  less (fitted on validation galleries of several sizes, :mod:`minterpr.evaluation.presence_calibration`).
* ``one_person`` (only when the gallery has appearance vectors with their same-person calibration,
  :data:`APPEARANCE_FEATURES`) — Σ over the next :data:`LEADERS` - 1 images not ruled out of the
  same-person probability of each with the leading one: how much of the top of the ranking is one
  person (a present person's several crops fit the facts together; look-alikes are many people).
  A model fitted with it needs it (:meth:`PresenceModel.probability`); one fitted without ignores it.

:class:`PresenceModel` is the fitted record (a run's extra ``"presence_model"``; ``minterpr
calibrate presence`` fits it on validation searches whose target is present vs removed,
:mod:`minterpr.evaluation.presence_calibration`): P(present) = σ(bias + Σ w·feature), fitted with
each search weighted equally and as many present as absent searches (so 0.5 means "as likely as
not"), and the threshold under which the page says "probably not in this footage" (chosen on the
same validation searches: the most absent searches flagged with at most the allowed share of
present ones). :func:`presence_features_reference` is a plain loop the fast path is tested against.

Example:
    >>> import numpy as np
    >>> round(presence_probability([]), 3), round(presence_probability([0.9, 0.8]), 3)
    (0.9, 0.153)
    >>> probably_absent(presence_probability([0.9, 0.8])), probably_absent(presence_probability([0.05, 0.1]))
    (True, False)
    >>> from minterpr.language.phrasing import Fact
    >>> from minterpr.language.evidence import SLOT_COLUMNS
    >>> from minterpr.language.ontology import ONTOLOGY
    >>> probs = np.full((3, len(ONTOLOGY.flat_labels())), 0.5, np.float32)
    >>> probs[:, SLOT_COLUMNS["gender"]] = [[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]]
    >>> x = presence_features(np.array([1.0, 0.5, 0.0]), 0.5, probs, [Fact("gender", ("female",))],
    ...                       rejected=np.array([False, True, False]), ruled_out=[0.6])
    >>> [(k, round(float(v), 3)) for k, v in zip(FEATURE_NAMES, x)][:3]  # image 1 (the woman) was ruled out
    [('best_fit', -0.693), ('compatible', -0.511), ('rejected', 0.916)]
    >>> [(k, round(float(v), 3)) for k, v in zip(FEATURE_NAMES, x)][3:]  # gallery: log 3 images
    [('top_match', 0.881), ('ruled_out', 1.0), ('gallery', 1.099)]
    >>> model = PresenceModel("val", dict(zip(FEATURE_NAMES, (1.0, 0.0, -1.0, 0.0, 0.0, 0.0))), 0.5, 0.2, 10, 40, 90.0,
    ...                       5.0, {})
    >>> round(model.probability(x), 3), model.absent(x)
    (0.248, False)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.interaction.fact_likelihoods import attribute_log_likelihood
from minterpr.language.evidence import PROB_FLOOR, fact_log_likelihood
from minterpr.language.phrasing import Fact
from minterpr.records import Unusable, count, finite, mapping, number_map, split_name

PRIOR_PRESENT = 0.9  # P(the person is in the searched images) before anything is said: the analyst chose this footage
ABSENT_BELOW = 0.2  # under this presence probability the page says "probably not in this footage"
FEATURE_NAMES = ("best_fit", "compatible", "rejected", "top_match", "ruled_out", "gallery")
APPEARANCE_FEATURES = ("one_person",)  # appended to FEATURE_NAMES when the gallery compares appearance
LEADERS = 10  # images at the top of the ranking ``one_person`` looks at
MATCH_CLIP = 1e-3  # a ruled-out match is clipped to [0, 1 - this]: one ruling-out adds at most ln 1000


def presence_probability(ruled_out: Sequence[float], prior: float = PRIOR_PRESENT) -> float:
    """P(the person is among the searched images) after ruling out images whose match probabilities
    (:func:`~minterpr.interaction.match.match_probabilities`), when each was ruled out, were ``ruled_out`` (see the module doc)."""
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


class OtherFeatures(Unusable):
    """A presence record fitted on another feature set (an older or newer minterpr): well formed, unusable here."""


def _distinct(facts: Sequence[Fact]) -> list[Fact]:
    return list(dict.fromkeys(facts))


def presence_features(
    scores: np.ndarray,
    temperature: float,
    probs: np.ndarray | None,
    facts: Sequence[Fact],
    *,
    rejected: np.ndarray,
    ruled_out: Sequence[float],
    order: np.ndarray | None = None,
    floor: float = PROB_FLOOR,
    looks: tuple[np.ndarray, Any] | None = None,
) -> np.ndarray:
    """(6,) the features of :data:`FEATURE_NAMES` (the module doc) for one step; (7,) with
    :data:`APPEARANCE_FEATURES` when ``looks`` = ((N, A) appearance vectors, their
    :class:`~minterpr.interaction.appearance.SamePersonCalibration`) is given.

    ``scores``: the step's final scores of the ranked images, ``order`` their gallery indices (None:
    image k has score k, the whole gallery ranked); ``probs``: the (N, L) attribute probabilities
    (None: the fact features are 0); ``rejected``: (N,) bool over the N images searched, those the
    user's latest verdict ruled out; ``ruled_out``: the match each ruled-out image had when it was."""
    rejected = np.asarray(rejected, bool)
    kept = ~rejected
    best = compatible = 0.0
    if probs is not None and kept.any():
        remaining = attribute_log_likelihood(facts, probs, floor)[kept]  # (N,)[kept]: the re-ranking's own sum
        best = float(remaining.max())
        compatible = float(best + np.log(np.exp(remaining - best).sum()))
    masses = np.clip(np.asarray(list(ruled_out), np.float64), 0.0, 1.0 - MATCH_CLIP)
    rejected_evidence = float(-np.log1p(-masses).sum())
    scores = np.asarray(scores, np.float64)
    rows = np.arange(len(scores)) if order is None else np.asarray(order)
    open_ = kept[rows] & np.isfinite(scores)
    top = 0.0
    if open_.any():
        logits = scores[open_] / temperature
        top = float(1.0 / np.exp(logits - logits.max()).sum())
    row = [best, compatible, rejected_evidence, top, float(rejected.sum()), math.log(max(len(rejected), 1))]
    if looks is not None:
        row.append(one_person(scores, rows, open_, *looks))
    return np.array(row)


def one_person(scores: np.ndarray, rows: np.ndarray, open_: np.ndarray, vectors: np.ndarray, calibration: Any) -> float:
    """The ``one_person`` feature: Σ over the :data:`LEADERS` best open images after the first of
    P(same person as the first | appearance cosine). ``scores``/``rows``: ranked images' scores and
    gallery positions, ``open_`` (same length): not ruled out.

    >>> from minterpr.interaction.appearance import SamePersonCalibration
    >>> cal = SamePersonCalibration(10.0, -5.0, 0.1, 10, "val", 90.0)
    >>> looks = np.array([[1.0, 0.0], [1.0, 0.0], [0.6, 0.8]], np.float32)  # cosines 1 and 0.6 with image 0
    >>> round(one_person(np.array([3.0, 2.0, 1.0]), np.arange(3), np.ones(3, bool), looks, cal), 3)  # 0.993 + 0.731
    1.724
    """
    ranked = np.flatnonzero(open_)
    if len(ranked) < 2:
        return 0.0
    ranked = ranked[np.argsort(-np.asarray(scores)[ranked], kind="stable")[:LEADERS]]
    leader, others = rows[ranked[0]], rows[ranked[1:]]
    return float(calibration.probability(vectors[others] @ vectors[leader]).sum())


def presence_features_reference(
    scores: Sequence[float],
    temperature: float,
    probs: np.ndarray | None,
    facts: Sequence[Fact],
    *,
    rejected: Sequence[bool],
    ruled_out: Sequence[float],
    order: Sequence[int] | None = None,
    floor: float = PROB_FLOOR,
) -> list[float]:
    """:func:`presence_features` written as plain loops, one image and one fact at a time (the test's
    reference for the fast path)."""
    fits = []
    if probs is not None:
        for i in range(len(probs)):
            if rejected[i]:
                continue
            row = probs[i : i + 1]
            fits.append(sum(float(fact_log_likelihood(f, row, floor)[0]) for f in _distinct(facts)))
    best = max(fits) if fits else 0.0
    compatible = best + math.log(sum(math.exp(v - best) for v in fits)) if fits else 0.0
    rejected_evidence = sum(-math.log(1.0 - min(max(float(m), 0.0), 1.0 - MATCH_CLIP)) for m in ruled_out)
    rows = list(range(len(scores))) if order is None else [int(r) for r in order]
    open_scores = [float(s) / temperature for s, r in zip(scores, rows) if not rejected[r] and math.isfinite(s)]
    top = 0.0
    if open_scores:
        high = max(open_scores)
        top = 1.0 / sum(math.exp(s - high) for s in open_scores)
    return [
        best,
        compatible,
        rejected_evidence,
        top,
        float(sum(1 for r in rejected if r)),
        math.log(max(len(rejected), 1)),
    ]


def ruled_out_images(session: Any) -> np.ndarray:
    """(N,) bool over a session's gallery: the images the user's verdicts rule out."""
    rejected = np.zeros(len(session.index), bool)
    for i, verdict in session.judgements.items():
        rejected[i] = verdict is False
    return rejected


def session_features(session: Any, ruled_out: Sequence[float]) -> np.ndarray | None:
    """:func:`presence_features` of a :class:`~minterpr.interaction.session.Session`'s current step
    (None before the first turn); ``ruled_out``: the match of each image ruled out when it was."""
    step = session.step
    if step is None:
        return None
    rejected = ruled_out_images(session)
    index = session.index
    looks = (
        (index.compared_appearance(), index.same_person) if index.appearance is not None and index.same_person else None
    )
    return presence_features(
        step.scores,
        step.match_temperature,
        index.attribute_probs,
        session.facts,
        rejected=rejected,
        ruled_out=ruled_out,
        order=step.ranking,
        floor=session.reranking.prob_floor,
        looks=looks,
    )


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


@dataclass(frozen=True)
class PresenceModel:
    """P(the person is in the searched images) from :data:`FEATURE_NAMES`, fitted on validation
    searches (a run's extra ``"presence_model"``; ``minterpr calibrate presence`` writes it)."""

    split: str  # the split the searches ran on (never test)
    weights: Mapping[str, float]  # feature name -> weight (every name of FEATURE_NAMES)
    bias: float
    threshold: float  # under this probability the page says "probably not in this footage"
    searches: int  # targets searched (each present and absent)
    steps: int  # steps (rows) fitted on
    absent_flagged_pct: float  # on the fitting split: absent searches flagged within the turns
    present_flagged_pct: float  # the same for present searches (wrongly)
    protocol: Mapping[str, Any]  # how the searches ran (simulator, turns, seed, allowed false flags)

    @property
    def names(self) -> tuple[str, ...]:
        """The features it was fitted on, in row order: :data:`FEATURE_NAMES` (+ :data:`APPEARANCE_FEATURES`)."""
        return FEATURE_NAMES + (APPEARANCE_FEATURES if APPEARANCE_FEATURES[0] in self.weights else ())

    def probability(self, features: Sequence[float]) -> float:
        """σ(bias + Σ weight · feature) of one row of :func:`presence_features` (a row's appearance
        feature is ignored by a model fitted without it; a model fitted with it refuses a row without it)."""
        names = self.names
        if len(features) < len(names):
            raise ValueError(
                f"this presence model was fitted with the appearance feature {APPEARANCE_FEATURES[0]!r}: "
                "the gallery needs appearance vectors with their same-person calibration"
            )
        z = self.bias + sum(self.weights[name] * float(x) for name, x in zip(names, features))
        return _sigmoid(z)

    def absent(self, features: Sequence[float]) -> bool:
        """Whether to say "probably not in this footage"."""
        return self.probability(features) < self.threshold

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["weights"], out["protocol"] = dict(self.weights), dict(self.protocol)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PresenceModel":
        """The record of ``to_dict``; ValueError naming the field that is missing or wrong
        (:class:`OtherFeatures` when it is well formed but names other features than :data:`FEATURE_NAMES`)."""
        data = mapping(data)
        fitted = number_map(data.get("weights"), "weights", "feature names")
        if set(fitted) not in (set(FEATURE_NAMES), set(FEATURE_NAMES + APPEARANCE_FEATURES)):
            raise OtherFeatures(
                f"'weights': fitted on the features {sorted(fitted)}, this minterpr computes {list(FEATURE_NAMES)}"
            )
        values: dict[str, Any] = {
            name: finite(data.get(name), name)
            for name in ("bias", "threshold", "absent_flagged_pct", "present_flagged_pct")
        }
        if not 0.0 < values["threshold"] < 1.0:
            raise ValueError(f"'threshold': {values['threshold']!r} is not in (0, 1)")
        values.update({name: count(data.get(name), name) for name in ("searches", "steps")})
        return cls(
            split=split_name(data.get("split")),
            weights=fitted,
            protocol=mapping(data.get("protocol", {}), "protocol"),
            **values,
        )


def fit_logistic(
    rows: np.ndarray, labels: np.ndarray, weights: np.ndarray | None = None, l2: float = 1e-2, iterations: int = 50
) -> tuple[np.ndarray, float]:
    """(coefficients, bias) of a weighted logistic regression of ``labels`` (1 = present) on (M, F)
    ``rows`` by Newton's method, with an L2 penalty ``l2`` on the coefficients of the standardised
    features (the bias is not penalised); coefficients are returned in the features' own units."""
    x = np.asarray(rows, np.float64)
    y = np.asarray(labels, np.float64)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, np.float64)
    if x.ndim != 2 or len(x) != len(y) or len(w) != len(y) or not len(y):
        raise ValueError(f"rows must be (M, F) with M = {len(y)} labels and weights, got {x.shape}")
    if not (0 < y @ w < w.sum()):
        raise ValueError("fitting needs rows of both classes (present and absent)")
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-12] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    beta = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2 * w.sum())
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ beta, -40, 40)))
        gradient = z.T @ (w * (p - y)) + penalty * beta
        hessian = (z * (w * p * (1 - p))[:, None]).T @ z + np.diag(penalty) + 1e-9 * np.eye(z.shape[1])
        delta = np.linalg.solve(hessian, gradient)
        beta -= delta
        if np.abs(delta).max() < 1e-10:
            break
    coefficients = beta[:-1] / scale
    return coefficients, float(beta[-1] - coefficients @ mean)


def choose_threshold(present_lowest: Sequence[float], absent_lowest: Sequence[float], max_false: float = 0.05) -> float:
    """The threshold that flags the most absent searches while flagging at most ``max_false`` of the
    present ones, from each search's lowest probability over its steps (a search is flagged when
    that falls under the threshold): halfway between the last present value it may flag and the
    next; in (0, 1)."""
    present = np.sort(np.asarray(list(present_lowest), np.float64))
    if not len(present) or not len(list(absent_lowest)):
        raise ValueError("choosing a threshold needs present and absent searches")
    allowed = int(math.floor(max_false * len(present) + 1e-9))  # present searches it may flag
    if allowed >= len(present):
        high = 1.0
    else:
        high = float(present[allowed])  # flagging stops short of this one
    low = float(present[allowed - 1]) if allowed > 0 else 0.0
    return float(min(max((low + high) / 2.0, 1e-6), 1.0 - 1e-6))
