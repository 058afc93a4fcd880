"""An interactive search: the user describes, the system ranks, asks, shows references, re-ranks.

A :class:`Session` needs only a :class:`~minterpr.index.gallery_index.RetrievalBackend` and a
:class:`~minterpr.index.gallery_index.GalleryIndex`. Every user move adds one turn; after each
turn the whole conversation is re-encoded by the backend, combined with the explicit evidence
(:mod:`~minterpr.interaction.reranking`) and the next system move is chosen by the policies
(:mod:`~minterpr.interaction.policies`). The state is a pure function of the turns (and the
seed), so :meth:`Session.undo` and :meth:`Session.replay` reproduce rankings exactly.

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
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from minterpr.data.phrasing import Fact
from minterpr.data.utterances import question
from minterpr.index.gallery_index import GalleryIndex, RetrievalBackend
from minterpr.interaction.dialogue_acts import known_attributes, question_slot, turn_facts, verdict
from minterpr.interaction.explain import Explanation, explain_image
from minterpr.interaction.policies import (QUESTION_POLICIES, REFERENCE_POLICIES, PolicyContext, QuestionChoice,
                                           QuestionPolicy, ReferencePolicy, Schedule, make_schedule,
                                           reference_information, shown_person_mass)
from minterpr.interaction.reranking import RerankConfig, rerank
from minterpr.types import DescriptionTurn, ExampleTurn, QATurn, ReferenceTurn, Turn

_REFERENCE_PROMPTS = ("Is this the person? If not, tell me what is different.",
                      "Could it be one of these? Tell me how they differ from the person you saw.",
                      "Does one of these look right? If not, what is different?")


@dataclass(frozen=True)
class AskQuestion:
    """The system asks about an attribute slot."""

    slot: str
    text: str
    gain: float | None = None  # expected information gain (nats) when the policy estimates it


@dataclass(frozen=True)
class ShowReferences:
    """The system shows gallery images and asks whether one is the person (or how they differ)."""

    indices: tuple[int, ...]  # gallery indices, the policy's preferred first
    text: str


Action = AskQuestion | ShowReferences


class HistoryEntry(NamedTuple):
    """One turn of a session: what the user said, what it asserted, and the top results after it."""

    turn: Turn
    facts: tuple[Fact, ...]
    top: tuple[int, ...]  # gallery indices of the best results after this turn

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: {"type", turn fields..., "facts": [[slot, [values], negated]], "top": [...]}."""
        kind = {DescriptionTurn: "description", QATurn: "qa", ReferenceTurn: "reference", ExampleTurn: "example"}
        data: dict[str, Any] = {"type": kind[type(self.turn)], **self.turn.__dict__}
        data["facts"] = [[f.slot, list(f.values), f.negated] for f in self.facts]
        data["top"] = list(self.top)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HistoryEntry":
        kinds = {"description": DescriptionTurn, "qa": QATurn, "reference": ReferenceTurn, "example": ExampleTurn}
        fields = {k: v for k, v in data.items() if k not in ("type", "facts", "top")}
        turn = kinds[data["type"]](**fields)
        facts = tuple(Fact(slot, tuple(values), bool(negated)) for slot, values, negated in data["facts"])
        return cls(turn, facts, tuple(int(i) for i in data["top"]))


@dataclass
class Step:
    """The state after a turn: the ranking, its scores and the system's next move."""

    ranking: np.ndarray  # (N,) gallery indices, best first
    scores: np.ndarray  # (N,) final scores in ranking order
    action: Action | None  # the next system move; None = nothing to ask (e.g. the person was confirmed)
    anchor: int | None  # gallery index of the anchor image used in re-ranking, if any
    _explain: Callable[[int], Explanation] = field(repr=False, compare=False, default=None)  # type: ignore[assignment]

    def explain(self, k: int) -> Explanation:
        """Which facts so far the result at (0-based) rank ``k`` matches and contradicts."""
        return self._explain(int(self.ranking[k]))

    def gallery_scores(self) -> np.ndarray:
        """(N,) the final scores in gallery order."""
        out = np.empty_like(self.scores)
        out[self.ranking] = self.scores
        return out


class Session:
    """One interactive search over a gallery (see the module doc)."""

    def __init__(self, backend: RetrievalBackend, gallery_index: GalleryIndex, *,
                 question_policy: str | QuestionPolicy = "info_gain",
                 reference_policy: str | ReferencePolicy = "diverse",
                 reranking: RerankConfig = RerankConfig(), seed: int = 0,
                 schedule: str | Sequence[str] | Schedule = "auto", num_references: int = 3,
                 history_k: int = 10) -> None:
        self.backend = backend
        self.index = gallery_index
        self.question_policy = (QUESTION_POLICIES.create(question_policy) if isinstance(question_policy, str)
                                else question_policy)
        self.reference_policy = (REFERENCE_POLICIES.create(reference_policy) if isinstance(reference_policy, str)
                                 else reference_policy)
        self.reranking = reranking
        self.seed = seed
        self.schedule = make_schedule(schedule)
        self.num_references = num_references  # images per reference move
        self.history_k = history_k  # results kept per history entry
        self._rng = random.Random(seed)
        self._rng_states: list[object] = []  # generator state before each step was computed
        self._history: list[HistoryEntry] = []
        self._step: Step | None = None

    # ----- the user's moves -------------------------------------------------------------------
    def describe(self, text: str) -> Step:
        """A free-text description (the first turn) or a remark volunteered later."""
        return self.add(DescriptionTurn(text))

    def answer(self, text: str) -> Step:
        """Answer the question the system just asked (read with the asked slot as context)."""
        action = self.action
        if not isinstance(action, AskQuestion):
            raise ValueError("there is no pending question to answer; use describe() for a free remark")
        return self.add(QATurn(action.text, text), context_slot=action.slot)

    def feedback(self, gallery_index: int, text: str) -> Step:
        """Judge any gallery image: "that's her" marks a match, "maybe" leaves it open, anything else
        rejects it (with its reasons as facts)."""
        if not 0 <= gallery_index < len(self.index):
            raise IndexError(f"gallery index {gallery_index} out of range 0..{len(self.index) - 1}")
        return self.add(ReferenceTurn(self.index.images[gallery_index].path, text))

    def example(self, image_path: str) -> Step:
        """Query by an example image of the person (a gallery path, or a file under the index root)."""
        return self.add(ExampleTurn(image_path))

    def add(self, turn: Turn, *, context_slot: str | None = None, facts: Sequence[Fact] | None = None) -> Step:
        """Add any turn. A Q&A turn answering the pending question is read with its slot as context;
        ``facts`` (as recorded in a history) skip parsing."""
        if isinstance(turn, QATurn) and context_slot is None:
            pending = self.action
            if isinstance(pending, AskQuestion) and pending.text == turn.question:
                context_slot = pending.slot
        if facts is None:
            facts = turn_facts(turn, context_slot)
        self._history.append(HistoryEntry(turn, tuple(facts), ()))
        self._rng_states.append(self._rng.getstate())
        step = self._compute()
        self._history[-1] = self._history[-1]._replace(top=tuple(int(i) for i in step.ranking[: self.history_k]))
        return step

    def undo(self) -> Step | None:
        """Remove the last turn; returns the restored step (None when nothing is left)."""
        if not self._history:
            raise ValueError("nothing to undo")
        self._history.pop()
        self._rng.setstate(self._rng_states.pop())
        if not self._history:
            self._step = None
            return None
        self._rng.setstate(self._rng_states[-1])
        return self._compute()

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
        """Every fact parsed so far, in order."""
        return tuple(f for entry in self._history for f in entry.facts)

    @property
    def judgements(self) -> dict[int, bool | None]:
        """Gallery index -> the user's latest verdict (True = it is the person, False = not, None = unsure)."""
        verdicts: dict[int, bool | None] = {}
        for entry in self._history:
            if isinstance(entry.turn, ReferenceTurn):
                i = self.index.index_of(entry.turn.reference_path)
                if i is not None:
                    verdicts.pop(i, None)  # re-insert: the latest verdict is last
                    verdicts[i] = verdict(entry.turn.feedback)
        return verdicts

    @property
    def asked_slots(self) -> frozenset[str]:
        slots = (question_slot(e.turn.question) for e in self._history if isinstance(e.turn, QATurn))
        return frozenset(s for s in slots if s is not None)

    def protocol(self) -> dict[str, Any]:
        """The session's settings, for evaluation records."""
        return {"question_policy": self.question_policy.name, "reference_policy": self.reference_policy.name,
                "schedule": self.schedule.describe(), "num_references": self.num_references,
                "reranking": self.reranking.to_dict(), "seed": self.seed}

    @classmethod
    def replay(cls, history: Sequence[HistoryEntry], backend: RetrievalBackend, gallery_index: GalleryIndex,
               **options: Any) -> "Session":
        """Rebuild a session from a history (its recorded facts, not re-parsed); same options give the same rankings."""
        session = cls(backend, gallery_index, **options)
        for entry in history:
            session.add(entry.turn, facts=entry.facts)
        return session

    # ----- the system's side ------------------------------------------------------------------
    def _compute(self) -> Step:
        turns = [entry.turn for entry in self._history]
        queries = self.backend.encode_turns(turns, self.index)  # (R, D)
        judgements = self.judgements
        result = rerank(self.index.scores(queries[-1]), self.index, self.facts, judgements, self.reranking)
        ranking = np.argsort(-result.scores, kind="stable")
        done = any(judgements.values())
        action = None if done else self._next_action(result.scores, ranking, judgements)
        use_truth = bool(getattr(self.backend, "ground_truth", False))
        facts = self.facts
        self._step = Step(ranking, result.scores[ranking], action, result.anchor,
                          lambda i: explain_image(self.index, i, facts, use_ground_truth=use_truth))
        return self._step

    def _next_action(self, scores: np.ndarray, ranking: np.ndarray,
                     judgements: dict[int, bool | None]) -> Action | None:
        ctx = PolicyContext(self.index, scores, ranking, self.facts, self.asked_slots, frozenset(judgements), self._rng)
        if self.schedule.auto:
            choice = self.question_policy.choose(ctx)
            shown = self.reference_policy.choose(ctx, self.num_references)
            if choice is None or not shown:
                kind = "question" if choice is not None else "reference"
            elif shown_person_mass(ctx, shown) >= self.schedule.confident:  # likely recognised
                kind = "reference"
            else:  # the move expected to tell more about who the person is
                better = choice.gain is not None and reference_information(ctx, shown) > choice.gain
                kind = "reference" if better else "question"
            if kind == "question" and choice is not None:
                return self._ask(choice, ctx)
            return self._show(shown)
        kind = self.schedule.kind(len(self._history))
        for move in (kind, "reference" if kind == "question" else "question"):
            if move == "question":
                choice = self.question_policy.choose(ctx)
                if choice is not None:
                    return self._ask(choice, ctx)
            else:
                shown = self.reference_policy.choose(ctx, self.num_references)
                if shown:
                    return self._show(shown)
        return None

    def _ask(self, choice: QuestionChoice, ctx: PolicyContext) -> AskQuestion:
        return AskQuestion(choice.slot, question(choice.slot, known_attributes(ctx.facts), self._rng), choice.gain)

    def _show(self, shown: Sequence[int]) -> ShowReferences | None:
        if not shown:
            return None
        return ShowReferences(tuple(int(i) for i in shown), self._rng.choice(_REFERENCE_PROMPTS))
