"""The match the page shows, calibrated on simulated validation searches.

:func:`search_steps` runs simulated searches (an oracle user by default: it describes a target,
answers the questions, rules out the images shown with what differs and confirms the target when it
is shown; the protocol of ``benchmarks/bench_presence.py``) and keeps every step's final scores with
which ranked images show the target's identity. :func:`calibrate_match` fits the one softmax
temperature of the match distribution on them (:func:`~minterpr.interaction.match.fit_match_temperature`)
and returns the :class:`~minterpr.interaction.match.MatchCalibration` record a run stores
(``minterpr calibrate match``). Run it on the validation split only: the test split measures it.

Example:
    >>> from minterpr.interaction.attribute_backend import AttributeBackend
    >>> from minterpr.types import GalleryImage
    >>> images = [GalleryImage(f"{i}.jpg", f"x:{i}", attributes={"gender": (g,), "upper_colour": (c,)})
    ...           for i, (g, c) in enumerate([("male", "red"), ("female", "red"), ("female", "blue"),
    ...                                       ("male", "blue")])]
    >>> backend = AttributeBackend()
    >>> record = calibrate_match(backend, backend.index_images(images), split="val", searches=4, turns=2)
    >>> record.split, record.searches, record.steps > 0, record.nll_after <= record.nll_before
    ('val', 4, True, True)
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from minterpr.errors import InputError
from minterpr.index.gallery_index import GalleryIndex, RetrievalBackend
from minterpr.interaction.policies import TEMPERATURE
from minterpr.interaction.match import MatchCalibration, MatchStep, fit_match_temperature, match_nll, match_reliability
from minterpr.interaction.session import Session
from minterpr.interaction.simulators import SIMULATORS
from minterpr.language.dialogue_acts import verdict
from minterpr.types import ReferenceTurn

DEFAULT_SEARCHES, DEFAULT_TURNS = 60, 5  # targets searched, turns after the description (bench_presence's)


def _target_mask(step: Any, index: GalleryIndex, person_id: str) -> np.ndarray:
    """(K,) bool over ``step.ranking``: the ranked image shows the target's identity."""
    return np.array([index.images[int(i)].person_id == person_id for i in step.ranking], bool)


def search_steps(
    session_of: Callable[[int], Session],
    index: GalleryIndex,
    targets: Sequence[Any],
    *,
    turns: int = DEFAULT_TURNS,
    seed: int = 0,
    simulator: str = "oracle",
) -> list[MatchStep]:
    """Every step of one simulated search per target (``session_of(q)`` makes the q-th session):
    ((K,) final scores, (K,) target mask) after the description and after each turn until the user
    confirms the target or ``turns`` turns were taken."""
    user_of = SIMULATORS.create(simulator)
    out: list[MatchStep] = []
    for q, target in enumerate(targets):
        session, user = session_of(q), user_of.user(target, index, query=q, seed=seed)
        step = session.describe(user.describe())
        out.append((np.asarray(step.scores, np.float64), _target_mask(step, index, target.person_id)))
        for _ in range(turns):
            turn = user.respond(session.action)
            if turn is None or (isinstance(turn, ReferenceTurn) and verdict(turn.feedback) is True):
                break
            step = session.add(turn)
            out.append((np.asarray(step.scores, np.float64), _target_mask(step, index, target.person_id)))
    return out


def one_image_per_identity(index: GalleryIndex, searches: int, seed: int = 0) -> list[Any]:
    """``searches`` gallery images of distinct identities, drawn with ``seed`` (the first image of each)."""
    firsts: dict[str, Any] = {}
    for image in index.images:
        firsts.setdefault(image.person_id, image)
    pids = sorted(firsts)
    order = np.random.default_rng(seed).permutation(len(pids))[:searches]
    return [firsts[pids[k]] for k in order]


def calibrate_match(
    backend: RetrievalBackend,
    index: GalleryIndex,
    *,
    split: str,
    searches: int = DEFAULT_SEARCHES,
    turns: int = DEFAULT_TURNS,
    seed: int = 0,
    session_options: Mapping[str, Any] | None = None,
) -> MatchCalibration:
    """Fit the match temperature on ``searches`` simulated searches over ``index`` (a gallery of the
    ``split`` named: never test); ``session_options`` are Session keywords (the run's scoring)."""
    if split == "test":
        raise InputError("the match temperature is fitted on a validation split, never on test (it measures it)")
    if searches < 1 or turns < 0:
        raise InputError(f"searches must be >= 1 and turns >= 0, got {searches} and {turns}")
    options = dict(session_options or {})
    targets = one_image_per_identity(index, searches, seed)
    steps = search_steps(
        lambda q: Session(backend, index, seed=seed + q, **options), index, targets, turns=turns, seed=seed
    )
    temperature = fit_match_temperature(steps)
    (ece_before, _), (ece_after, _) = match_reliability(steps, TEMPERATURE), match_reliability(steps, temperature)
    return MatchCalibration(
        split=split,
        temperature=round(temperature, 6),
        searches=len(targets),
        steps=len(steps),
        nll_before=round(match_nll(steps, TEMPERATURE), 6),
        nll_after=round(match_nll(steps, temperature), 6),
        ece_before=round(ece_before, 6),
        ece_after=round(ece_after, 6),
        protocol={"simulator": "oracle", "turns": turns, "seed": seed},
    )
