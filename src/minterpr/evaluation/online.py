"""Online evaluation: simulated users talk to sessions; the per-round rankings are scored.

For each target image a simulated user (:mod:`minterpr.interaction.simulators`) describes it
(round 0), then replies to the system's move each round; every round's final scores of all
targets form one (Q, G) matrix, fed to :func:`~minterpr.evaluation.dialogue_metrics.per_round_metrics`
one round at a time (all sessions advance together, so only one round's scores exist at once).
The report records the whole protocol: simulator and its rates, rounds, policies, schedule,
re-ranking switches, backend and seed. Sessions score with the one scoring configuration
(``reranking``: a :class:`~minterpr.interaction.reranking.RerankConfig`, the same class and defaults
as static evaluation's), so a model's stored config scores both alike.

Example:
    >>> from minterpr.interaction.attribute_backend import AttributeBackend
    >>> from minterpr.types import GalleryImage
    >>> images = [GalleryImage(f"{i}.jpg", f"x:{i}", attributes={"gender": (g,), "upper_colour": (c,)})
    ...           for i, (g, c) in enumerate([("male", "red"), ("female", "red"), ("female", "blue")])]
    >>> backend = AttributeBackend()
    >>> index = backend.index_images(images)
    >>> report = simulate(backend, index, images, rounds=2, seed=0)
    >>> len(report.rounds), report.protocol["simulator"]["simulator"]
    (3, 'oracle')
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from minterpr.errors import InputError
from minterpr.evaluation.dialogue_metrics import per_round_metrics
from minterpr.evaluation.report import EvaluationReport, build_report
from minterpr.index.gallery_index import GalleryIndex, RetrievalBackend
from minterpr.interaction.schedule import Schedule
from minterpr.interaction.reranking import RerankConfig
from minterpr.interaction.session import AskQuestion, Session, ShowReferences
from minterpr.evaluation.vlm_usage import TurnUsage, vlm_sessions
from minterpr.interaction.simulators import SIMULATORS, Simulator
from minterpr.types import GalleryImage
from minterpr.vlm.config import VLMConfig

# Settings compared by `minterpr simulate --compare`: name -> simulate() keyword arguments, where
# "rerank_changes" switches fields of the shared re-ranking config (compare's ``reranking``) instead
# of replacing it, so a setting like "no anchor" keeps the caller's attribute weight.
DEFAULT_COMPARISON: dict[str, dict[str, Any]] = {
    "auto: info_gain + diverse": {"question_policy": "info_gain", "reference_policy": "diverse", "schedule": "auto"},
    "questions: info_gain": {"question_policy": "info_gain", "schedule": "questions"},
    "questions: fixed": {"question_policy": "fixed", "schedule": "questions"},
    "questions: random": {"question_policy": "random", "schedule": "questions"},
    "references: diverse": {"reference_policy": "diverse", "schedule": "references"},
    "references: top1": {"reference_policy": "top1", "schedule": "references"},
    "references: topk": {"reference_policy": "topk", "schedule": "references"},
    "references: uncertain": {"reference_policy": "uncertain", "schedule": "references"},
    "both: alternate": {"question_policy": "info_gain", "reference_policy": "diverse", "schedule": "alternate"},
    "auto, no re-ranking": {
        "question_policy": "info_gain",
        "reference_policy": "diverse",
        "schedule": "auto",
        "reranking": RerankConfig.off(),
    },
    # each re-ranking term switched off alone (the others on)
    "auto, no attribute evidence": {
        "question_policy": "info_gain",
        "reference_policy": "diverse",
        "schedule": "auto",
        "rerank_changes": {"attributes": False},
    },
    "auto, no rejection": {
        "question_policy": "info_gain",
        "reference_policy": "diverse",
        "schedule": "auto",
        "rerank_changes": {"rejection": False},
    },
    "auto, no anchor": {
        "question_policy": "info_gain",
        "reference_policy": "diverse",
        "schedule": "auto",
        "rerank_changes": {"anchor": False},
    },
    # a fallible witness: forgets a fifth of what is asked, misremembers a tenth (the noise is in
    # the answers, so this row asks questions every other round; compare with "both: alternate")
    "both: alternate, noisy oracle": {
        "question_policy": "info_gain",
        "reference_policy": "diverse",
        "schedule": "alternate",
        "simulator": "oracle",
        "simulator_options": {"dont_know_rate": 0.2, "wrong_answer_rate": 0.1},
    },
}


def _backend_protocol(backend: RetrievalBackend) -> dict[str, Any]:
    describe = getattr(backend, "describe", None)
    if callable(describe):
        return dict(describe())
    return {"backend": type(backend).__name__}


def simulate(
    backend: RetrievalBackend,
    index: GalleryIndex,
    targets: Sequence[GalleryImage],
    *,
    rounds: int = 5,
    question_policy: str = "info_gain",
    reference_policy: str = "diverse",
    simulator: str | Simulator = "oracle",
    simulator_options: Mapping[str, Any] | None = None,
    reranking: RerankConfig = RerankConfig(),
    schedule: str | Sequence[str] | Schedule = "auto",
    num_references: int = 3,
    seed: int = 0,
    protocol: Mapping[str, Any] | None = None,
    observe: Callable[[int, Sequence[Session]], None] | None = None,
    vlm: VLMConfig | None = None,
    match_temperature: float | None = None,
    policy_temperature: float | None = None,
) -> EvaluationReport:
    """Simulate ``rounds`` rounds of interaction for every target and report per-round metrics.

    Round 0 is the simulated description; each later round is one system move and the user's
    reply (a user with nothing to say, e.g. after confirming the person, keeps its ranking).
    Extra report keys: ``mean_turns_to_rank1`` (mean round at which the target's identity first
    reaches rank 1; rounds + 1 when it never does), ``moves`` (system moves by kind),
    ``confirmed`` (% of targets the user confirmed on a shown image).
    ``protocol`` adds entries to the recorded protocol (e.g. the dataset and split).
    ``observe(round, sessions)``, when given, is called after each round with the sessions (one
    per target) and must only read them (e.g. a
    :class:`~minterpr.evaluation.picture_recorders.SessionRecorder` keeping a few rankings).
    ``vlm`` (a :class:`~minterpr.vlm.config.VLMConfig`) gives every session a model with its uses;
    the report's ``vlm`` key then holds calls, tokens, latency and fallbacks per turn and per round.
    ``match_temperature`` (a model's fitted one, as its page uses) sets the temperature of the match
    each step shows (``step.match()``); None keeps the policies' default. ``policy_temperature``
    sets the temperature of the candidate distribution the policies and the ``auto`` schedule
    choose moves by (None: the policies' :data:`~minterpr.interaction.policies.TEMPERATURE`).
    """
    if rounds < 0:
        raise InputError(f"rounds must be >= 0, got {rounds}")
    if not targets:
        raise InputError("no targets to simulate")
    if isinstance(simulator, str):
        simulator = SIMULATORS.create(simulator, **dict(simulator_options or {}))
    elif simulator_options:
        raise InputError("simulator_options only apply when the simulator is given by name")
    options = dict(
        question_policy=question_policy,
        reference_policy=reference_policy,
        reranking=reranking,
        seed=seed,
        schedule=schedule,
        num_references=num_references,
    )
    if match_temperature is not None:
        options["match_temperature"] = match_temperature
    if policy_temperature is not None:
        options["policy_temperature"] = policy_temperature
    models = vlm_sessions(vlm, len(targets))
    sessions = [Session(backend, index, **options, vlm=model) for model in models]
    usage = TurnUsage()

    def used(r: int, session: Session) -> None:
        if session.vlm is not None:
            usage.add(r, session.vlm.turn_usage())

    users = [simulator.user(t, index, query=q, seed=seed) for q, t in enumerate(targets)]
    moves = {"question": 0, "reference": 0, "none": 0}

    def round_scores() -> Iterator[np.ndarray]:
        steps = [s.describe(u.describe()) for s, u in zip(sessions, users)]
        for s in sessions:
            used(0, s)
        if observe is not None:
            observe(0, sessions)
        yield np.stack([step.gallery_scores() for step in steps])  # (Q, G)
        for r in range(1, rounds + 1):
            for q, (session, user) in enumerate(zip(sessions, users)):
                action = steps[q].action
                kind = (
                    "question"
                    if isinstance(action, AskQuestion)
                    else "reference"
                    if isinstance(action, ShowReferences)
                    else "none"
                )
                moves[kind] += 1
                turn = user.respond(action)
                if turn is not None:
                    steps[q] = session.add(turn)
                    used(r, session)
            if observe is not None:
                observe(r, sessions)
            yield np.stack([step.gallery_scores() for step in steps])

    result = per_round_metrics(round_scores(), [t.person_id for t in targets], index.person_ids)
    result["mean_turns_to_rank1"] = result["first_round_at_rank1"]
    result["moves"] = moves
    result["confirmed"] = 100.0 * float(np.mean([any(s.judgements.values()) for s in sessions]))
    if vlm is not None:
        result["vlm"] = usage.summary()
        for model in models:
            model.close()
    record = {
        "simulator": simulator.describe_protocol(),
        "rounds": rounds,
        **sessions[0].protocol(),
        "backend": _backend_protocol(backend),
        "gallery_size": len(index),
        "num_targets": len(targets),
        **dict(protocol or {}),
    }
    return build_report(record, result)


def compare(
    backend: RetrievalBackend,
    index: GalleryIndex,
    targets: Sequence[GalleryImage],
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    observers: Callable[[str], Callable[[int, Sequence[Session]], None] | None] | None = None,
    **common: Any,
) -> dict[str, EvaluationReport]:
    """Run :func:`simulate` once per named setting (``common`` keyword arguments shared); name -> report.
    ``observers(name)``, when given, returns the ``observe`` of that setting's run (or None)."""
    settings = DEFAULT_COMPARISON if settings is None else settings
    base: RerankConfig = common.get("reranking", RerankConfig())
    reports = {}
    for name, options in settings.items():
        options = dict(options)
        changes = options.pop("rerank_changes", None)
        if changes is not None:
            options["reranking"] = base.with_(**changes)
        if observers is not None:
            options["observe"] = observers(name)
        reports[name] = simulate(backend, index, targets, **{**common, **options})
    return reports


def one_target_per_identity(
    images: Sequence[GalleryImage], limit: int | None = None, seed: int = 0
) -> list[GalleryImage]:
    """The first image of each identity (gallery order); ``limit`` draws that many of them at random (seeded)."""
    seen: dict[str, GalleryImage] = {}
    for image in images:
        seen.setdefault(image.person_id, image)
    targets = list(seen.values())
    if limit is not None and limit < len(targets):
        keep = sorted(np.random.default_rng(seed).choice(len(targets), size=limit, replace=False).tolist())
        targets = [targets[i] for i in keep]
    return targets
