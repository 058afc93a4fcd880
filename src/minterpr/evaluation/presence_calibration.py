"""'Probably not in this footage', fitted on simulated validation searches whose target is present or removed.

:func:`presence_searches` searches each target twice with a simulated user (the oracle by default:
it describes the target, answers the questions, rules out the images shown with what differs and
confirms the target when it is shown; the protocol of ``benchmarks/bench_presence.py``): over the
whole gallery (present) and over the gallery with every image of the target's identity removed
(absent). Each search keeps the :func:`~minterpr.interaction.presence.session_features` row of
every step (after the description and after each turn) until the user confirms the target or the
turns run out. :func:`fit_presence` fits the logistic :class:`~minterpr.interaction.presence.PresenceModel`
on those rows and chooses its threshold; :func:`calibrate_presence` does both on a split (never test:
the test split measures the result) and returns the record a run stores (``minterpr calibrate presence``).
It searches the split's gallery whole and two samples of its identities (a third, a half:
:data:`GALLERY_SHARES`), so the model sees how its signals move with the gallery's size (its
``gallery`` feature) instead of learning one size: a search over footage larger than the
validation gallery takes more rulings-out to find a present person.

Example:
    >>> from minterpr.interaction.attribute_backend import AttributeBackend
    >>> from minterpr.types import GalleryImage
    >>> looks = [("male", "red"), ("female", "red"), ("female", "blue"), ("male", "blue"), ("male", "green")]
    >>> images = [GalleryImage(f"{i}-{k}.jpg", f"x:{i}", attributes={"gender": (g,), "upper_colour": (c,)})
    ...           for i, (g, c) in enumerate(looks) for k in range(2)]
    >>> backend = AttributeBackend(noise=0.5)
    >>> found = presence_searches(backend, backend.index_images(images), searches=5, turns=3)
    >>> len(found), sorted({s.present for s in found}), found[0].rows.shape[1]
    (10, [False, True], 6)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.errors import InputError
from minterpr.evaluation.match_calibration import one_image_per_identity
from minterpr.index.gallery_index import GalleryIndex, RetrievalBackend
from minterpr.interaction.fact_likelihoods import attribute_log_likelihood
from minterpr.interaction.presence import (
    APPEARANCE_FEATURES,
    FEATURE_NAMES,
    PresenceModel,
    choose_threshold,
    fit_logistic,
    ruled_out_images,
    session_features,
)
from minterpr.interaction.session import Session
from minterpr.interaction.simulators import SIMULATORS
from minterpr.language.dialogue_acts import verdict
from minterpr.types import ReferenceTurn

DEFAULT_SEARCHES, DEFAULT_TURNS, MAX_FALSE = 100, 5, 0.05  # targets, turns after the description, false flags
GALLERY_SHARES = (1 / 3, 1 / 2, 1.0)  # the shares of the split's identities searched (1: the whole gallery)


@dataclass(frozen=True)
class PresenceSearch:
    """One simulated search: whether its target was in the gallery, the features of each step."""

    person_id: str
    present: bool  # the target's images were in the searched gallery
    confirmed: bool  # the user confirmed the target (present searches only)
    rows: (
        np.ndarray
    )  # (S, 6) session_features ((S, 7) with the appearance feature) after the description and each turn, in order
    # present searches: how many open images of other people fit everything said better than the
    # target's best open image, at the last step (ground truth, for the benchmark only); None when absent
    outfitted_by: int | None = None


def without_identity(index: GalleryIndex, person_id: str) -> GalleryIndex:
    """The gallery with every image of ``person_id`` removed (the absent-target search's gallery)."""
    keep = np.array([k for k, image in enumerate(index.images) if image.person_id != person_id], np.int64)
    if not len(keep):
        raise InputError(f"removing {person_id!r} leaves no image to search")
    return index.subset(keep)


def identity_sample(index: GalleryIndex, share: float, seed: int = 0) -> GalleryIndex:
    """The images of ``share`` of the gallery's identities (at least two), drawn with ``seed``; 1: the gallery."""
    if share >= 1.0:
        return index
    pids = sorted({image.person_id for image in index.images})
    kept = set(np.random.default_rng(seed).permutation(pids)[: max(2, round(share * len(pids)))].tolist())
    return index.subset(np.array([k for k, image in enumerate(index.images) if image.person_id in kept], np.int64))


def outfitted_by(session: Session, person_id: str) -> int | None:
    """How many images not ruled out, of people other than ``person_id``, fit the session's facts
    better (Σ log P(fact | image), the ``best_fit`` sum) than ``person_id``'s best image not ruled out;
    None when none of theirs is left. Ground truth, so for measuring only: where a present person is
    out-fitted by many look-alikes, no signal built on how well the images fit can tell "present" from
    "absent" (docs/benchmarks.md, "Probably not in this footage").

    >>> from minterpr.interaction.attribute_backend import AttributeBackend
    >>> from minterpr.types import GalleryImage
    >>> images = [GalleryImage(f"{i}.jpg", p, attributes={"gender": (g,)})
    ...           for i, (p, g) in enumerate([("a", "female"), ("b", "male"), ("c", "female")])]
    >>> backend = AttributeBackend(noise=0.0)
    >>> session = Session(backend, backend.index_images(images))
    >>> _ = session.describe("a man")
    >>> outfitted_by(session, "a"), outfitted_by(session, "b")
    (1, 0)
    """
    index = session.index
    open_ = ~ruled_out_images(session)
    mine = np.array([image.person_id == person_id for image in index.images]) & open_
    if index.attribute_probs is None or not mine.any():
        return None
    fit = attribute_log_likelihood(session.facts, index.attribute_probs, session.reranking.prob_floor)
    others = open_ & ~mine
    return int((fit[others] > fit[mine].max()).sum())


def _one_search(session: Session, user: Any, turns: int) -> tuple[list[np.ndarray], bool]:
    """Run one search; returns (the features after each step, whether the user confirmed the target)."""
    session.describe(user.describe())
    ruled_out: list[float] = []
    rows = [session_features(session, ruled_out)]
    for _ in range(turns):
        turn = user.respond(session.action)
        if turn is None:
            break
        if isinstance(turn, ReferenceTurn):
            said = verdict(turn.feedback)
            if said is True:
                return rows, True
            i = session.index.index_of(turn.reference_path)
            rank = None if i is None else session.step.rank_of(i)
            if said is False:  # the match the page showed the image at when it was ruled out
                ruled_out.append(0.0 if rank is None else float(session.step.match()[rank]))
        session.add(turn)
        rows.append(session_features(session, ruled_out))
    return rows, False


def presence_searches(
    backend: RetrievalBackend,
    index: GalleryIndex,
    *,
    searches: int = DEFAULT_SEARCHES,
    turns: int = DEFAULT_TURNS,
    seed: int = 0,
    simulator: str = "oracle",
    session_options: Mapping[str, Any] | None = None,
    targets: Sequence[Any] | None = None,
) -> list[PresenceSearch]:
    """Two searches per target (present, then absent; see the module doc), ``searches`` targets of
    distinct identities drawn with ``seed`` (or the given ``targets``)."""
    options = dict(session_options or {})
    chosen = list(targets) if targets is not None else one_image_per_identity(index, searches, seed)
    user_of = SIMULATORS.create(simulator)
    out: list[PresenceSearch] = []
    for q, target in enumerate(chosen):
        for present, gallery in ((True, index), (False, without_identity(index, target.person_id))):
            user = user_of.user(target, gallery, query=q, seed=seed)
            session = Session(backend, gallery, seed=seed + q, **options)
            rows, confirmed = _one_search(session, user, turns)
            behind = outfitted_by(session, target.person_id) if present else None
            out.append(PresenceSearch(target.person_id, present, confirmed, np.vstack(rows), behind))
    return out


def lowest(model: PresenceModel, search: PresenceSearch) -> float:
    """The search's lowest presence probability over its steps (it is flagged when that is under the threshold)."""
    return min(model.probability(row) for row in search.rows)


def separation(absent: Sequence[float], present: Sequence[float]) -> float | None:
    """How well the lowest presence probabilities of absent searches fall under those of present
    ones: P(an absent search's < a present search's), ties counting half (the ROC AUC of "flag
    absent"; 0.5: no better than chance); None when a group is empty.

    >>> separation([0.1, 0.2], [0.3, 0.4]), separation([0.1, 0.3], [0.2, 0.3]), separation([], [0.5])
    (1.0, 0.625, None)
    """
    a, b = np.asarray(list(absent), np.float64), np.asarray(list(present), np.float64)
    if not len(a) or not len(b):
        return None
    return float((a[:, None] < b[None, :]).mean() + 0.5 * (a[:, None] == b[None, :]).mean())


def flag_rates(model: PresenceModel, searches: Sequence[PresenceSearch]) -> tuple[float, float]:
    """(% of absent searches flagged, % of present searches flagged) at the model's threshold."""
    flagged = {True: [], False: []}
    for search in searches:
        flagged[search.present].append(lowest(model, search) < model.threshold)
    return (
        100.0 * float(np.mean(flagged[False])) if flagged[False] else 0.0,
        100.0 * float(np.mean(flagged[True])) if flagged[True] else 0.0,
    )


def fit_presence(
    searches: Sequence[PresenceSearch],
    *,
    split: str,
    max_false: float = MAX_FALSE,
    l2: float = 1e-2,
    protocol: Mapping[str, Any] | None = None,
) -> PresenceModel:
    """The logistic model over every step of ``searches`` (each search weighs 1, spread over its steps;
    label: present), with the threshold flagging at most ``max_false`` of the present searches."""
    if not any(s.present for s in searches) or all(s.present for s in searches):
        raise InputError("fitting the presence model needs present and absent searches")
    rows = np.vstack([s.rows for s in searches])
    labels = np.concatenate([np.full(len(s.rows), float(s.present)) for s in searches])
    weights = np.concatenate([np.full(len(s.rows), 1.0 / len(s.rows)) for s in searches])
    coefficients, bias = fit_logistic(rows, labels, weights, l2=l2)
    names = FEATURE_NAMES + (APPEARANCE_FEATURES if rows.shape[1] > len(FEATURE_NAMES) else ())
    draft = PresenceModel(split, dict(zip(names, map(float, coefficients))), bias, 0.5, 0, 0, 0.0, 0.0, {})
    threshold = choose_threshold(
        [lowest(draft, s) for s in searches if s.present],
        [lowest(draft, s) for s in searches if not s.present],
        max_false,
    )
    draft = PresenceModel(split, draft.weights, bias, threshold, 0, 0, 0.0, 0.0, {})
    absent_pct, present_pct = flag_rates(draft, searches)
    return PresenceModel(
        split=split,
        weights={k: round(v, 8) for k, v in draft.weights.items()},
        bias=round(bias, 8),
        threshold=round(threshold, 8),
        searches=sum(1 for s in searches if s.present),
        steps=len(rows),
        absent_flagged_pct=round(absent_pct, 4),
        present_flagged_pct=round(present_pct, 4),
        protocol={**dict(protocol or {}), "max_false": max_false, "l2": l2},
    )


def calibrate_presence(
    backend: RetrievalBackend,
    index: GalleryIndex,
    *,
    split: str,
    searches: int = DEFAULT_SEARCHES,
    turns: int = DEFAULT_TURNS,
    seed: int = 0,
    max_false: float = MAX_FALSE,
    session_options: Mapping[str, Any] | None = None,
    shares: Sequence[float] = GALLERY_SHARES,
) -> PresenceModel:
    """Fit the presence model on present and absent searches over ``index`` (a gallery of the
    ``split`` named: never test) and over samples of its identities (``shares``): ``searches`` x
    share targets each; ``session_options`` are Session keywords (the run's scoring and match
    temperature)."""
    if split == "test":
        raise InputError("the presence model is fitted on a validation split, never on test (it measures it)")
    if searches < 1 or turns < 0 or not 0.0 <= max_false < 1.0:
        raise InputError(
            f"searches must be >= 1, turns >= 0 and max_false in [0, 1), got {searches}, {turns}, {max_false}"
        )
    found: list[PresenceSearch] = []
    for share in shares:
        gallery = identity_sample(index, share, seed)
        found += presence_searches(
            backend,
            gallery,
            searches=max(1, round(searches * min(share, 1.0))),
            turns=turns,
            seed=seed,
            session_options=session_options,
        )
    return fit_presence(
        found,
        split=split,
        max_false=max_false,
        protocol={
            "simulator": "oracle",
            "turns": turns,
            "seed": seed,
            "gallery_shares": [round(float(x), 4) for x in shares],
        },
    )
