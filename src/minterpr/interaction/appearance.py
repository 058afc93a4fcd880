"""Same-person probability from appearance: a cosine of two appearance vectors, calibrated.

The appearance model (:mod:`minterpr.runtime.appearance`) gives each crop an L2-normalised
vector; two crops of one person have a high cosine, look-alikes a lower one, but "0.62" means
nothing to an analyst. :class:`SamePersonCalibration` turns a cosine into a probability with a
logistic fit, ``P(same | c) = sigmoid(scale * c + bias)``, on every pair of a validation split
whose identities are known (never test). Its ``base_rate`` is that split's share of same-person
pairs; a gallery with another share (one person among 10,000 crops, or a tracklet's 5 crops)
shifts the log-odds by the difference of the two priors (:meth:`SamePersonCalibration.probability`).

**About the gallery's centre (opt-in).** A camera adds a component common to all its crops
(light, background, angle): among the street video's crops two *different* people have an
appearance cosine of 0.33 on average, against 0.03 on CUHK03 val. A fit with ``centred=True``
(``minterpr calibrate appearance --centred``) compares vectors less their centre
(:mod:`minterpr.index.appearance_space`), and galleries then compare their crops about their own
centre (:meth:`~minterpr.index.gallery_index.GalleryIndex.compared_appearance`). It is not the
default: on PETA val it does not raise online R@1 (docs/benchmarks.md, "Appearance about the
gallery's centre"). A record without ``centred`` (every one written before) compares the vectors as they are.

It is stored beside the appearance model as ``same_person.json`` (:func:`read_same_person`,
:func:`write_same_person`), written by ``minterpr calibrate appearance`` and at the end of a
``minterpr train --config reid`` run.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> people = np.repeat(np.arange(20), 3)
    >>> centres = rng.normal(size=(20, 8))
    >>> vectors = centres[people] + 0.3 * rng.normal(size=(60, 8))
    >>> vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    >>> fit = fit_same_person(vectors, people.astype(str), split="val")
    >>> fit.scale > 0, round(fit.base_rate, 3)
    (True, 0.034)
    >>> p = fit.probability(np.array([0.95, 0.1]))
    >>> bool(p[0] > 0.9 > 0.1 > p[1])
    True
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.index.appearance_space import appearance_centre, centre_vectors
from minterpr.index.reciprocal import ReciprocalConfig, k_reciprocal_distances
from minterpr.records import count, finite, flag, mapping, split_name

SAME_PERSON_FILE = "same_person.json"  # beside the appearance model (run directory or model directory)
MAX_NEGATIVE_PAIRS = 200_000  # different-person pairs sampled for the fit (the positives are all kept)


@dataclass(frozen=True)
class SamePersonCalibration:
    """``P(same person | appearance cosine c) = sigmoid(scale * c + bias)`` at the fit's base rate."""

    scale: float  # slope of the log-odds in the cosine (> 0: more similar, more likely the same person)
    bias: float  # log-odds at cosine 0, at the fit's base rate
    base_rate: float  # share of same-person pairs among the pairs it was fitted on
    pairs: int  # pairs it was fitted on (all same-person pairs + sampled others, reweighted to the base rate)
    split: str  # the split it was fitted on (val; never test)
    auc: float  # ROC AUC (%) of the cosine separating same from different people on that split
    # None: the score is the cosine of the two vectors; set: the score is 1 - their k-reciprocal distance
    #   among the gallery's crops with these settings (minterpr.index.reciprocal), and this record is a
    #   ``reranked`` one
    rerank: ReciprocalConfig | None = None
    # the same fit on re-ranked scores of the same split (fit_same_person(..., rerank=...)): the probability
    #   "follow this person" shows for two crops of one gallery (interaction.pair_scores); None: cosine
    reranked: "SamePersonCalibration | None" = None
    # True: the cosines are of vectors centred on their gallery (centre_vectors, module doc), as fitted;
    #   False: of the vectors as they are (every record written before centring)
    centred: bool = False

    def probability(self, cosine: np.ndarray | float, base_rate: float | None = None) -> np.ndarray:
        """Same-person probability of each cosine; ``base_rate``: the prior where it is used
        (None: the fit's). Example: ``fit.probability(scores, base_rate=1 / len(gallery))``."""
        logit = self.scale * np.asarray(cosine, dtype=np.float64) + self.bias
        if base_rate is not None:
            if not 0.0 < base_rate < 1.0:
                raise ValueError(f"base_rate must be in (0, 1), got {base_rate}")
            logit = logit + _logit(base_rate) - _logit(self.base_rate)
        return 1.0 / (1.0 + np.exp(-logit))

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("rerank", "reranked", "centred")}
        if self.centred:  # written only when set: a plain record reads as every record before centring did
            out["centred"] = True
        if self.rerank is not None:
            out["rerank"] = self.rerank.to_dict()
        if self.reranked is not None:
            out["reranked"] = self.reranked.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SamePersonCalibration":
        """The record of :meth:`to_dict`; ValueError naming the field that is missing or wrong."""
        data = mapping(data)
        base_rate = finite(data.get("base_rate"), "base_rate")
        if not 0.0 < base_rate < 1.0:
            raise ValueError(f"'base_rate': {base_rate} is not in (0, 1)")
        rerank = data.get("rerank")
        if rerank is not None:
            rerank = mapping(rerank)
            try:
                rerank = ReciprocalConfig(
                    int(rerank["k1"]),
                    int(rerank["k2"]),
                    float(rerank["lambda"]),
                    int(rerank.get("qe_k", 0)),  # a fit stored before query expansion had none
                    float(rerank.get("qe_alpha", 0.0)),
                )
            except (KeyError, TypeError, ValueError) as err:
                raise ValueError(f"'rerank': needs k1, k2 and lambda ({err})") from None
        reranked = data.get("reranked")
        if reranked is not None:
            try:
                reranked = cls.from_dict(reranked)
            except ValueError as err:
                raise ValueError(f"'reranked': {err}") from None
            if reranked.rerank is None:
                raise ValueError("'reranked': has no 'rerank' settings")
        return cls(
            finite(data.get("scale"), "scale"),
            finite(data.get("bias"), "bias"),
            base_rate,
            count(data.get("pairs"), "pairs"),
            split_name(data.get("split")),
            finite(data.get("auc"), "auc"),
            rerank,
            reranked,
            flag(data.get("centred", False), "centred"),
        )


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def _pairs(
    sims: np.ndarray, people: np.ndarray, cameras: np.ndarray | None, max_negatives: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, float]:
    """(scores, labels, weight of a sampled negative) over the pairs i < j of an (N, N) score matrix;
    same-camera pairs of one person are left out when cameras are known (the re-id protocol: they are too easy)."""
    i, j = np.triu_indices(len(sims), k=1)
    same = people[i] == people[j]
    if cameras is not None:
        keep = ~same | (cameras[i] != cameras[j])
        i, j, same = i[keep], j[keep], same[keep]
    positives = np.flatnonzero(same)
    negatives = np.flatnonzero(~same)
    weight = 1.0
    if len(negatives) > max_negatives:
        weight = len(negatives) / max_negatives  # each sampled negative stands for this many
        negatives = rng.choice(negatives, max_negatives, replace=False)
    rows = np.concatenate([positives, negatives])
    return sims[i[rows], j[rows]], np.concatenate([np.ones(len(positives)), np.zeros(len(negatives))]), weight


def _auc(scores: np.ndarray, labels: np.ndarray, negative_weight: float) -> float:
    """ROC AUC (%) with the negatives weighted (ties count half)."""
    order = np.argsort(scores, kind="stable")
    s, y = scores[order], labels[order]
    w = np.where(y == 1, 1.0, negative_weight)
    # for each positive: the weight of negatives below it (+ half of those tied)
    neg_w = np.where(y == 0, w, 0.0)
    below = np.cumsum(neg_w) - neg_w
    _, first, counts = np.unique(s, return_index=True, return_counts=True)
    tied = np.add.reduceat(neg_w, first)  # negative weight per distinct score
    group = np.repeat(np.arange(len(first)), counts)
    below_group = below[first][group]
    wins = (below_group + 0.5 * tied[group])[y == 1].sum()
    total = (y == 1).sum() * neg_w.sum()
    return float(100.0 * wins / total) if total else float("nan")


def fit_same_person(
    vectors: np.ndarray,
    person_ids: Sequence[str],
    camera_ids: Sequence[str | None] | None = None,
    *,
    split: str,
    max_negatives: int = MAX_NEGATIVE_PAIRS,
    seed: int = 0,
    rerank: ReciprocalConfig | None = None,
    centred: bool = False,
) -> SamePersonCalibration:
    """Fit :class:`SamePersonCalibration` on the pairs of ``vectors`` ((N, A), L2-normalised) of
    known people (weighted logistic regression by Newton's method: two parameters, convex).
    ``rerank``: fit on 1 - the k-reciprocal distance of the pairs among these crops instead of their cosine.
    ``centred``: compare the vectors about their own centre, as galleries compare theirs (module doc).
    ValueError when there is no same-person pair or no other pair to fit on."""
    vectors = np.asarray(vectors, dtype=np.float32)
    people = np.asarray(person_ids)
    if vectors.ndim != 2 or len(vectors) != len(people):
        raise ValueError(f"fit_same_person: {len(people)} person ids for vectors of shape {vectors.shape}")
    cameras = None if camera_ids is None or any(c is None for c in camera_ids) else np.asarray(camera_ids)
    if centred and len(vectors):
        vectors = centre_vectors(vectors, appearance_centre(vectors))
    sims = vectors @ vectors.T if rerank is None else 1.0 - k_reciprocal_distances(vectors, None, rerank)  # (N, N)
    cos, y, neg_weight = _pairs(sims, people, cameras, max_negatives, np.random.default_rng(seed))
    positives = int(y.sum())
    if positives == 0 or positives == len(y):
        raise ValueError("fit_same_person: needs pairs of the same person (on other cameras) and of different people")
    weights = np.where(y == 1, 1.0, neg_weight)
    x = np.stack([cos.astype(np.float64), np.ones(len(cos))], axis=1)  # (P, 2)
    theta = np.zeros(2)
    for _ in range(100):  # Newton: converges in ~10 steps; a tiny ridge keeps separable data finite
        p = 1.0 / (1.0 + np.exp(-(x @ theta)))
        grad = x.T @ (weights * (p - y)) + 1e-3 * theta
        hess = (x * (weights * p * (1 - p))[:, None]).T @ x + 1e-3 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        theta -= step
        if np.abs(step).max() < 1e-8:
            break
    total = positives + neg_weight * (len(y) - positives)
    return SamePersonCalibration(
        float(theta[0]),
        float(theta[1]),
        float(positives / total),
        int(round(total)),
        split,
        _auc(cos, y, neg_weight),
        rerank,
        centred=centred,
    )


def fit_same_person_both(
    vectors: np.ndarray,
    person_ids: Sequence[str],
    camera_ids: Sequence[str | None] | None = None,
    *,
    split: str,
    centred: bool = False,
) -> SamePersonCalibration:
    """The cosine fit with the re-ranked fit (:class:`ReciprocalConfig`'s defaults) nested as ``reranked``:
    what ``minterpr calibrate appearance`` and a reid run store. The re-ranked one is skipped (None) when
    the crops are more than re-ranking can compare at once. ``centred``: both fitted about the vectors' centre."""
    cosine = fit_same_person(vectors, person_ids, camera_ids, split=split, centred=centred)
    from minterpr.index import reciprocal

    if len(vectors) > reciprocal.MAX_ITEMS:
        return cosine
    return replace(
        cosine,
        reranked=fit_same_person(
            vectors, person_ids, camera_ids, split=split, rerank=ReciprocalConfig(), centred=centred
        ),
    )


def same_person_path(model_path: str | os.PathLike[str]) -> Path:
    """Where the calibration of the appearance model at ``model_path`` (a file or a directory) lives."""
    path = Path(model_path)
    return (path if path.is_dir() else path.parent) / SAME_PERSON_FILE


def read_same_person(model_path: str | os.PathLike[str]) -> SamePersonCalibration | None:
    """The stored calibration of the appearance model at ``model_path``; None when none was fitted.
    A malformed file raises ValueError naming it and the field."""
    path = same_person_path(model_path)
    if not path.is_file():
        return None
    try:
        return SamePersonCalibration.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeError, json.JSONDecodeError, ValueError) as err:
        raise ValueError(
            f"{path}: malformed same-person calibration ({err}); refit it with `minterpr calibrate appearance`"
        ) from None


def write_same_person(model_path: str | os.PathLike[str], record: SamePersonCalibration) -> Path:
    """Store ``record`` beside the appearance model at ``model_path`` (atomically); its path."""
    from minterpr.fileio import atomic_write_text

    path = same_person_path(model_path)
    atomic_write_text(path, json.dumps(record.to_dict(), indent=2) + "\n")
    return path
