"""An interactive search: the user describes, the system ranks, asks, shows references, re-ranks.

A :class:`Session` needs only a :class:`~minterpr.index.gallery_index.RetrievalBackend` and a
:class:`~minterpr.index.gallery_index.GalleryIndex`. Every user move adds one turn; after each
turn the whole conversation is re-encoded by the backend, combined with the explicit evidence
(:mod:`~minterpr.interaction.reranking`) and the next system move is chosen by the policies
(:mod:`~minterpr.interaction.policies`): the system's side (:mod:`~minterpr.interaction.system_side`).
The state is a pure function of the turns (and the seed), so :meth:`Session.undo` and
:meth:`Session.replay` reproduce rankings exactly, and :meth:`Session.save_history` /
:meth:`Session.load_history` keep a conversation in a file.

Large galleries:
    From ``ShortlistConfig.min_gallery`` images on (20,000 by default), a turn re-ranks only a
    shortlist: the top-K of the score before rejections, query cosine plus the stated facts'
    log-likelihoods (the fused search: ``index.fused``, a stored gallery's FusedIVF, else one exact
    fused scan; with ``ShortlistConfig(fused=False)`` the query's cosine top-K from ``index.vectors``),
    plus every image the conversation judged or named, grown when rejections exhaust it
    (:mod:`~minterpr.interaction.shortlist`). ``step.ranking`` then holds the shortlist's ranking
    (K ≤ N gallery indices; :meth:`Step.rank_of` is None beyond it). ``shortlist=None`` ranks
    every image at any size, ``shortlist=K`` uses a shortlist of K at any size.

A vision-language model:
    ``vlm=`` (a :class:`~minterpr.vlm.assist.VLMAssistant`, docs/vlm.md) lets a model read poorly read
    utterances, phrase the chosen question, answer open slots about the anchor and judge the top
    candidates (:mod:`~minterpr.interaction.vlm_turn`), on live turns only and within one deadline a
    turn; its facts are recorded in the history (source "vlm"), so undo and replay do not ask it
    again. Any failure of the model leaves the turn as without it; ``vlm=None`` (the default) is
    today's session exactly.

Errors:
    A turn is computed first and committed second. Every move (:meth:`~Session.describe`,
    :meth:`~Session.answer`, :meth:`~Session.feedback`, :meth:`~Session.example`,
    :meth:`~Session.add`, :meth:`~Session.undo`) either succeeds or raises
    :class:`~minterpr.errors.TurnError` and leaves the session exactly as it was: history,
    random generator, current step. The message says what was wrong; anything that failed while
    parsing, encoding (an unreadable image), scoring or choosing the next move is chained as the
    ``__cause__``. Arguments are checked before any computing (:mod:`~minterpr.interaction.turn_inputs`):
    texts must be ``str``, not empty (for the user's own moves), at most ``max_text_chars``
    characters and valid Unicode (no lone surrogates); other control characters than tab and
    newline become spaces. Gallery positions are ``int`` (or numpy integers) in range. Image
    paths name a gallery image or an existing file under the index root; files elsewhere only
    with ``allow_external_images=True`` (a local user's own terminal, as ``minterpr chat``).
    A session over an empty gallery is refused with :class:`~minterpr.errors.InputError`.

Example:
    >>> from minterpr.interaction.attribute_backend import AttributeBackend
    >>> from minterpr.types import GalleryImage
    >>> images = [GalleryImage(f"{i}.jpg", f"x:{i}", attributes={"gender": (g,), "upper_colour": (c,)})
    ...           for i, (g, c) in enumerate([("male", "red"), ("female", "red"), ("female", "blue")])]
    >>> backend = AttributeBackend()
    >>> session = Session(backend, backend.index_images(images), schedule="questions")
    >>> step = session.describe("a woman")
    >>> step.action.slot
    'upper_colour'
    >>> int(session.answer("Red.").ranking[0])
    1
    >>> session.feedback(7, "not her")
    Traceback (most recent call last):
    ...
    minterpr.errors.TurnError: gallery_index 7 out of range 0..2
    >>> len(session.history), int(session.step.ranking[0])  # as it was
    (2, 1)
"""

from __future__ import annotations

import os
import random
from typing import Any, Sequence

import numpy as np

from minterpr.language.phrasing import Fact
from minterpr.errors import InputError, MinterprError, TurnError
from minterpr.index.gallery_index import GalleryIndex, RetrievalBackend
from minterpr.interaction.explain import EvidencePolicy
from minterpr.interaction.history import HistoryEntry, read_history, write_history
from minterpr.interaction.policies import (
    QUESTION_POLICIES,
    REFERENCE_POLICIES,
    TEMPERATURE,
    QuestionPolicy,
    ReferencePolicy,
)
from minterpr.interaction.schedule import Schedule, make_schedule
from minterpr.interaction.reranking import RerankConfig
from minterpr.interaction.shortlist import ShortlistConfig, make_shortlist
from minterpr.interaction.system_side import SystemSide, slots_asked, stated_facts
from minterpr.interaction.steps import Action, AskQuestion, ShowReferences, Step
from minterpr.interaction.turn_inputs import (
    DEFAULT_MAX_TEXT_CHARS,
    check_options,
    checked_turn,
    clean_text,
    gallery_position,
    image_path,
)
from minterpr.interaction.vlm_turn import model_reading
from minterpr.types import DescriptionTurn, ExampleTurn, QATurn, ReferenceTurn, Turn
from minterpr.vlm.assist import VLMAssistant

__all__ = ["Action", "AskQuestion", "HistoryEntry", "Session", "ShowReferences", "Step"]


class Session(SystemSide):
    """One interactive search over a gallery (see the module doc, "Errors" for what each move checks)."""

    def __init__(
        self,
        backend: RetrievalBackend,
        index: GalleryIndex,
        *,
        question_policy: str | QuestionPolicy = "info_gain",
        reference_policy: str | ReferencePolicy = "diverse",
        reranking: RerankConfig = RerankConfig(),
        seed: int = 0,
        schedule: str | Sequence[str] | Schedule = "auto",
        num_references: int = 3,
        history_k: int = 10,
        max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
        allow_external_images: bool = False,
        shortlist: ShortlistConfig | int | None = ShortlistConfig(),
        vlm: VLMAssistant | None = None,
        evidence: EvidencePolicy | None = None,
        match_temperature: float = TEMPERATURE,
        appearance: Any = None,
        policy_temperature: float = TEMPERATURE,
    ) -> None:
        check_options(index, num_references, history_k, max_text_chars, match_temperature, policy_temperature)
        self.backend = backend
        self.index = index  # the gallery searched (a gallery_index elsewhere is a position in it)
        self.question_policy = (
            QUESTION_POLICIES.create(question_policy) if isinstance(question_policy, str) else question_policy
        )
        self.reference_policy = (
            REFERENCE_POLICIES.create(reference_policy) if isinstance(reference_policy, str) else reference_policy
        )
        self.reranking = reranking
        self.seed = seed
        self.schedule = make_schedule(schedule)
        self.num_references = num_references  # images per reference move
        self.history_k = history_k  # results kept per history entry
        self.max_text_chars = max_text_chars  # longest text a turn may carry (longer is refused)
        self.allow_external_images = bool(allow_external_images)  # example images outside the index root
        # large galleries are re-ranked on the query's top-K (interaction/shortlist.py); the default ranks
        # galleries under 20,000 images whole; None = always whole, an int K = a shortlist of K at any size
        self.shortlist = make_shortlist(shortlist)
        # a vision-language model's uses (minterpr.vlm, interaction/vlm_turn.py); None = none, as before
        self.vlm = vlm
        self._phrasing = False  # may the model phrase questions now? (live turns and undo, not a replay)
        # how predicted attributes become ✓ / ✗ in explanations (None: a 0.5 threshold; a served run passes
        # its calibration's policy, so only confident, calibrated, recognisable labels are marked)
        self.evidence = evidence
        # the temperature of the match the page shows (step.match()): a model's fitted one
        # (interaction/match.py, MatchCalibration); the policies keep theirs
        self.match_temperature = float(match_temperature)
        # the softmax temperature of the candidate distribution the policies and the auto schedule weigh
        # moves by (PolicyContext.temperature); apart from the page's match, so each is set on its own
        self.policy_temperature = float(policy_temperature)
        # the appearance model (runtime.appearance.Appearance) that embeds example images outside the gallery;
        #   None: only gallery images' stored appearance vectors are used (index.appearance)
        self.appearance = appearance
        self._example_vectors: dict[str, np.ndarray | None] = {}  # path -> its appearance vector (a cache)
        self._rng = random.Random(seed)
        self._rng_states: list[object] = []  # generator state before each step was computed
        self._history: list[HistoryEntry] = []
        self._judged: list[tuple[tuple[int, float], ...]] = []  # per turn: the model's (gallery index, P(person))
        self._step: Step | None = None

    # ----- the user's moves -------------------------------------------------------------------
    def describe(self, text: str) -> Step:
        """A free-text description (the first turn) or a remark volunteered later."""
        return self.add(DescriptionTurn(self._text(text, "description text")))

    def answer(self, text: str) -> Step:
        """Answer the question the system just asked (read with the asked slot as context)."""
        action = self.action
        if not isinstance(action, AskQuestion):
            raise TurnError("there is no pending question to answer; use describe() for a free remark")
        return self.add(QATurn(action.text, self._text(text, "answer text")), context_slot=action.slot)

    def feedback(self, gallery_index: int, text: str) -> Step:
        """Judge any gallery image: "that's her" marks a match, "maybe" leaves it open, anything else
        rejects it (with its reasons as facts)."""
        i = gallery_position(gallery_index, len(self.index), "gallery_index")
        return self.add(ReferenceTurn(self.index.images[i].path, self._text(text, "feedback text")))

    def example(self, image_path: str | os.PathLike[str]) -> Step:
        """Query by an example image of the person: a gallery path, or a file under the index root
        (or anywhere, with ``allow_external_images``)."""
        return self.add(ExampleTurn(self._image(image_path, "image path")))

    def add(
        self,
        turn: Turn,
        *,
        context_slot: str | None = None,
        facts: Sequence[Fact] | None = None,
        shown: Sequence[Fact] = (),
        model_scores: Sequence[tuple[int, float]] = (),
    ) -> Step:
        """Add any turn. A Q&A turn answering the pending question is read with its slot as context;
        ``facts`` (as recorded in a history, the model's among them) skip parsing and the model, with
        ``shown`` the facts recorded of a feedback turn's image, and ``model_scores`` are a recorded
        turn's judgements (:attr:`model_scores`). Recorded turns may carry empty text; otherwise the
        checks of the user's moves apply. Atomic: TurnError leaves the session as it was."""
        turn = checked_turn(turn, self.index, self.max_text_chars, self.allow_external_images)
        shown = tuple(shown)
        for name, given in (("facts", facts), ("shown", shown)):
            if given is not None and not all(isinstance(f, Fact) for f in given):
                raise TurnError(f"{name} must be a sequence of Fact")
        if facts is not None:
            facts = tuple(facts)
        if context_slot is not None and not isinstance(context_slot, str):
            raise TurnError(f"context_slot must be a str, got {type(context_slot).__name__}")
        state = self._rng.getstate()
        try:
            if isinstance(turn, QATurn) and context_slot is None:
                pending = self.action
                if isinstance(pending, AskQuestion) and pending.text == turn.question:
                    context_slot = pending.slot
            live = facts is None and self.vlm is not None  # the model is asked on live turns only
            self._phrasing = live
            if facts is None:
                reading = self._reading(turn, context_slot)
                facts, shown = reading.target, reading.shown
            judged = tuple((int(i), float(p)) for i, p in model_scores)
            if live:
                self.vlm.begin_turn()  # one deadline for every call of this turn
                facts = facts + model_reading(self.vlm, turn, context_slot, facts)
            history = [*self._history, HistoryEntry(turn, facts, (), shown)]
            step = self._compute(history, judged)
            if live:
                step, judged = self._assisted(history, step, state)
        except BaseException as err:
            self._rng.setstate(state)  # nothing of the failed turn stays, even after Ctrl-C
            if isinstance(err, Exception):
                raise TurnError(f"could not add the {_TURN_NAMES[type(turn)]} turn: {_reason(err)}") from err
            raise
        history[-1] = history[-1]._replace(top=step.top(self.history_k), offered=step.offered)
        self._history = history
        self._judged.append(judged)
        self._rng_states.append(state)
        self._step = step
        return step

    def undo(self) -> Step | None:
        """Remove the last turn; returns the restored step (None when nothing is left)."""
        if not self._history:
            raise TurnError("nothing to undo")
        rest = self._history[:-1]
        step = None
        state = self._rng.getstate()
        if self.vlm is not None:  # the undo's own calls (none past the cache), not the undone turn's again
            self.vlm.begin_turn()
        if rest:
            if self.vlm is not None:
                self._phrasing = True  # the question the restored step asked (the model's answer is cached)
            self._rng.setstate(self._rng_states[-2])  # as before the restored step was computed
            try:
                step = self._compute(rest, self._judged[-2])
            except BaseException as err:
                self._rng.setstate(state)
                if isinstance(err, Exception):
                    raise TurnError(f"could not undo: {_reason(err)}") from err
                raise
        else:
            self._rng.setstate(self._rng_states[0])
        self._history = rest
        self._judged.pop()
        self._rng_states.pop()
        self._step = step
        return step

    def withdraw_fact(self, turn: int, fact: Fact) -> Step | None:
        """Withdraw one fact read from turn ``turn`` (0-based): every turn from there on is recomputed as if
        that turn had recorded its other facts only (its evidence, explanations, the questions left to ask
        and the references shown; the random generator as it was before that turn), exactly as
        :meth:`replay` of the history without it. The turn itself stays (its words are what was said; a
        neural backend's text encoder still reads them). Atomic: TurnError leaves the session as it was."""
        k = gallery_position(turn, len(self._history), "turn")
        entry = self._history[k]
        if fact not in entry.facts:
            raise TurnError(f"turn {k} recorded no fact {fact!r} (it recorded {list(entry.facts)})")
        kept = tuple(f for f in entry.facts if f != fact)
        history = [*self._history[:k], entry._replace(facts=kept), *self._history[k + 1 :]]
        state, states = self._rng.getstate(), list(self._rng_states)
        step = None
        self._phrasing = False  # a recomputation asks no model to phrase anything
        try:
            self._rng.setstate(states[k])  # as before turn k was first computed
            recomputed, rng_states = [], states[:k]
            for j in range(k, len(history)):
                rng_states.append(self._rng.getstate())
                # the turns before as recomputed (the references they showed), as a replay sees them; judgements stay
                step = self._compute([*history[:k], *recomputed, history[j]], self._judged[j])
                recomputed.append(history[j]._replace(top=step.top(self.history_k), offered=step.offered))
        except BaseException as err:
            self._rng.setstate(state)
            if isinstance(err, Exception):
                raise TurnError(f"could not withdraw the fact: {_reason(err)}") from err
            raise
        self._history = [*history[:k], *recomputed]
        self._rng_states = rng_states
        self._step = step
        return step

    def _text(self, text: Any, what: str) -> str:
        return clean_text(text, what, self.max_text_chars)

    def _image(self, path: Any, what: str) -> str:
        return image_path(path, self.index, allow_external=self.allow_external_images, what=what)

    # ----- state ------------------------------------------------------------------------------
    @property
    def history(self) -> list[HistoryEntry]:
        """Every turn so far with its facts and top results (a copy)."""
        return list(self._history)

    @property
    def step(self) -> Step | None:
        """The current step (None before the first turn)."""
        return self._step

    @property
    def action(self) -> Action | None:
        return self._step.action if self._step is not None else None

    @property
    def facts(self) -> tuple[Fact, ...]:
        """Every fact about the person sought so far, in order (the model's readings of an anchor image
        only once the user confirmed that image; :func:`~minterpr.interaction.vlm_turn.target_facts`)."""
        return self._target(self._history)

    @property
    def image_facts(self) -> dict[int, tuple[Fact, ...]]:
        """Gallery index -> what the user said of that shown image ("these are blue"), oldest first;
        evidence about the image, never about the person sought (``step.explain_image`` judges the
        target's facts of those slots by it)."""
        return stated_facts(self._history, self.index)

    @property
    def model_scores(self) -> list[tuple[tuple[int, float], ...]]:
        """Per turn, the model's judgements of the top candidates (vlm rerank; empty tuples without it)."""
        return list(self._judged)

    @property
    def judgements(self) -> dict[int, bool | None]:
        """Gallery index -> the user's latest verdict (True = it is the person, False = not, None = unsure)."""
        return self._judgements(self._history)

    @property
    def asked_slots(self) -> frozenset[str]:
        return slots_asked(self._history)

    # ----- keeping a conversation -------------------------------------------------------------
    def save_history(self, path: str | os.PathLike[str]) -> str:
        """Write the conversation to ``path`` atomically (JSON, see :mod:`~minterpr.interaction.history`)."""
        try:
            return write_history(path, self._history, self.protocol())
        except OSError as err:
            raise InputError(f"{os.fspath(path)}: cannot save the conversation: {err.strerror or err}") from err

    @classmethod
    def load_history(
        cls, path: str | os.PathLike[str], backend: RetrievalBackend, index: GalleryIndex, **options: Any
    ) -> "Session":
        """The session saved by :meth:`save_history`, replayed with ``options`` (use the same as when saved)."""
        history = read_history(path)  # DataError FILE:LINE: FIELD: reason
        try:
            return cls.replay(history, backend, index, **options)
        except TurnError as err:
            raise InputError(f"{os.fspath(path)}: {err}") from err

    @classmethod
    def replay(
        cls, history: Sequence[HistoryEntry], backend: RetrievalBackend, index: GalleryIndex, **options: Any
    ) -> "Session":
        """Rebuild a session from a history (its recorded facts, not re-parsed); same options give the same
        rankings. TurnError names the entry that could not be replayed."""
        session = cls(backend, index, **options)
        for k, entry in enumerate(history):
            if not isinstance(entry, HistoryEntry):
                raise TurnError(f"history entry {k}: expected a HistoryEntry, got {type(entry).__name__}")
            try:
                session.add(entry.turn, facts=entry.facts, shown=entry.shown)
            except TurnError as err:
                raise TurnError(f"history entry {k}: {err}") from err
        return session


_TURN_NAMES = {DescriptionTurn: "description", QATurn: "answer", ReferenceTurn: "feedback", ExampleTurn: "example"}


def _reason(err: BaseException) -> str:
    """A documented error's message as it is; anything else with its type (it is unexpected)."""
    if isinstance(err, MinterprError):
        return str(err)
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
