"""The system's side of a session: from the turns it is given to the next :class:`Step`.

:class:`SystemSide` reads the user's turn, encodes the conversation, ranks the candidates with the
evidence, lets the model help on live turns and chooses the next move. It changes nothing but the
random generator, so :class:`~minterpr.interaction.session.Session` (which keeps the turns and
commits a step) computes, undoes and replays a step alike.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

import numpy as np

from minterpr.data.paths import resolve_under
from minterpr.index.gallery_index import GalleryIndex, RetrievalBackend
from minterpr.interaction.explain import EvidencePolicy, explain_image
from minterpr.interaction.history import HistoryEntry
from minterpr.interaction.policies import PolicyContext, QuestionChoice, QuestionPolicy, ReferencePolicy
from minterpr.interaction.reranking import RerankConfig
from minterpr.interaction.schedule import Schedule, reference_information, shown_person_mass
from minterpr.interaction.shortlist import ShortlistConfig, rank_candidates
from minterpr.interaction.steps import Action, AskQuestion, ShowReferences, Step
from minterpr.interaction.vlm_turn import model_anchor, model_judgements, seen_evidence, target_facts, with_judgements
from minterpr.language.corrections import active, last_colour_slot
from minterpr.language.dialogue_acts import known_attributes, question_slot, round_judgements, turn_reading
from minterpr.language.phrasing import Fact
from minterpr.language.utterances import question
from minterpr.types import DescriptionTurn, ExampleTurn, QATurn, ReferenceTurn, Turn
from minterpr.vlm.assist import VLMAssistant
from minterpr.vlm.config import VLMConfig

__all__ = ["SystemSide", "slots_asked", "stated_facts"]

_REFERENCE_PROMPTS = (
    "Is this the person? If not, tell me what is different.",
    "Could it be one of these? Tell me how they differ from the person you saw.",
    "Does one of these look right? If not, what is different?",
)


class SystemSide:
    """A session's computing half and the settings it computes with (:meth:`protocol`); a base of
    :class:`~minterpr.interaction.session.Session`, which sets these attributes and documents them."""

    backend: RetrievalBackend
    index: GalleryIndex
    question_policy: QuestionPolicy
    reference_policy: ReferencePolicy
    reranking: RerankConfig
    seed: int
    schedule: Schedule
    num_references: int
    allow_external_images: bool
    shortlist: ShortlistConfig | None
    vlm: VLMAssistant | None
    evidence: EvidencePolicy | None
    match_temperature: float
    policy_temperature: float
    appearance: Any
    _example_vectors: dict[str, np.ndarray | None]
    _phrasing: bool
    _rng: random.Random
    _history: list[HistoryEntry]

    def protocol(self) -> dict[str, Any]:
        """The session's settings, for evaluation records."""
        return {
            "question_policy": self.question_policy.name,
            "reference_policy": self.reference_policy.name,
            "schedule": self.schedule.describe(),
            "num_references": self.num_references,
            "reranking": self.reranking.to_dict(),
            "seed": self.seed,
            "policy_temperature": self.policy_temperature,
            "shortlist": self.shortlist.to_dict()
            if self.shortlist and self.shortlist.applies(len(self.index))
            else None,
            **({"vlm": self.vlm.config.to_dict()} if self.vlm is not None else {}),
        }

    def _reading(self, turn: Turn, context_slot: str | None) -> Any:
        """The turn read; a description's or feedback's colour said without a garment word goes to the colour
        slot spoken of (language/corrections.py: "red, not pink" after "a pink top and black trousers": the top)."""
        if not isinstance(turn, (DescriptionTurn, ReferenceTurn)):
            return turn_reading(turn, context_slot)
        said = target_facts(self._history, ())  # every fact as said, replaced ones too (not the model's)
        slot = last_colour_slot(said)
        reading = turn_reading(turn, context_slot, slot)
        denied = [v for f in reading.target if f.slot == slot and f.negated for v in f.values]
        better = last_colour_slot(said, denied)
        return reading if better == slot else turn_reading(turn, context_slot, better)

    def _assisted(
        self, history: list[HistoryEntry], step: Step, state: object
    ) -> tuple[Step, tuple[tuple[int, float], ...]]:
        """The step with the anchor's answers added to the last entry's facts and the model's judgements
        of the top candidates, recomputed when they change it (interaction/vlm_turn.py); each recomputation
        starts from the turn's generator ``state``, so undo and replay compute the same step once."""
        anchor = step.anchor if step.anchor is not None else int(step.ranking[0])
        seen = model_anchor(self.vlm, self.index, anchor, self._target(history), slots_asked(history))
        if seen:
            history[-1] = history[-1]._replace(facts=history[-1].facts + seen)
            self._rng.setstate(state)
            step = self._compute(history)
        judged = model_judgements(self.vlm, self.index, step.ranking, history)
        if judged:
            self._rng.setstate(state)
            step = self._compute(history, judged)
        return step, judged

    def _judgements(self, history: Sequence[HistoryEntry]) -> dict[int, bool | None]:
        rounds = round_judgements([entry.turn for entry in history], self.index.index_of)
        return rounds[-1] if rounds else {}

    def _compute(self, history: Sequence[HistoryEntry], judged: Sequence[tuple[int, float]] = ()) -> Step:
        turns = [entry.turn for entry in history]
        queries = self.backend.encode_turns(turns, self.index)  # (R, D)
        judgements = self._judgements(history)
        facts = self._target(history, judgements)
        named = {self.index.index_of(t.image_path) for t in turns if isinstance(t, ExampleTurn)} - {None}
        stated = stated_facts(history, self.index)  # what the user said of each shown image: evidence about it
        evidence = seen_evidence(history, self.index, judgements, stated)  # + the model's readings of anchors
        examples = [t.image_path for t in turns if isinstance(t, ExampleTurn)]
        example = self._example_vector(examples[-1]) if examples else None  # the latest example image's appearance
        found = rank_candidates(
            self.index,
            queries[-1],
            facts,
            judgements,
            self.shortlist,
            self.reranking,
            named=named,
            min_open=self.num_references + 1,
            stated=evidence,
            example=example,
        )  # every image on the exact path
        scores = found.scores
        if judged:  # the model's judgements of this turn's candidates (vlm rerank)
            weight = self.vlm.config.rerank_weight if self.vlm is not None else VLMConfig.rerank_weight
            scores = with_judgements(found.rows, scores, judged, weight)
        order = np.argsort(-scores, kind="stable")  # (K,) positions among the candidates, best first
        done = any(judgements.values())
        ctx = PolicyContext(
            found.index,
            scores,
            order,
            facts,
            slots_asked(history),
            frozenset(found.local(judgements)),
            self._rng,
            self.policy_temperature,
            # the references shown after the earlier turns (the last entry's are this step's own)
            frozenset(found.local({i for entry in history[:-1] for i in entry.offered})),
        )
        unsure = any(v is None for v in judgements.values())  # the user could not tell a shown image apart
        action = None if done else self._next_action(ctx, len(history), unsure)
        if isinstance(action, ShowReferences):  # candidate positions -> gallery indices
            action = ShowReferences(tuple(int(found.rows[i]) for i in action.indices), action.text)
        use_truth = bool(getattr(self.backend, "ground_truth", False))
        return Step(
            found.rows[order],
            scores[order],
            action,
            found.anchor,
            lambda i: explain_image(
                self.index, i, facts, use_ground_truth=use_truth, evidence=self.evidence, stated=stated.get(i, ())
            ),
            len(self.index),
            self.match_temperature,
        )

    def _example_vector(self, path: str) -> np.ndarray | None:
        """The appearance vector of an example image: its gallery row, else the appearance model's
        reading of the file; None when the gallery compares no appearance (or no model can read it)."""
        if self.index.appearance is None or self.index.same_person is None:
            return None
        position = self.index.index_of(path)
        if position is not None:
            return self.index.appearance[position]
        if self.appearance is None:
            return None
        if path not in self._example_vectors:  # a pure function of the path: caching keeps replays equal
            file = resolve_under(self.index.root or None, path, allow_outside=self.allow_external_images)
            vectors, _, _ = self.appearance.embed_files([file], strict=True)  # unreadable: its ImageError
            self._example_vectors[path] = vectors[0]
        return self._example_vectors[path]

    def _target(
        self, history: Sequence[HistoryEntry], judgements: dict[int, bool | None] | None = None
    ) -> tuple[Fact, ...]:
        judgements = self._judgements(history) if judgements is None else judgements
        # the facts no later fact replaced (a correction: language/corrections.py)
        return active(target_facts(history, {self.index.images[i].path for i, v in judgements.items() if v}))

    def _next_action(self, ctx: PolicyContext, turns: int, unsure: bool = False) -> Action | None:
        if self.schedule.auto:
            choice = self.question_policy.choose(ctx)
            if unsure and self.schedule.ask_when_unsure and choice is not None:
                return self._ask(choice, ctx)  # a user who cannot tell images apart is asked while slots remain
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
        kind = self.schedule.kind(turns)
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
        known = known_attributes(ctx.facts)
        text = question(choice.slot, known, self._rng)  # drawn either way: the generator moves as without a model
        if self.vlm is not None and self._phrasing:  # phrased by the model, kept only when it still asks this slot
            text = self.vlm.phrase(choice.slot, known, text, accept=lambda q: question_slot(q) == choice.slot)
        return AskQuestion(choice.slot, text, choice.gain)

    def _show(self, shown: Sequence[int]) -> ShowReferences | None:
        if not shown:
            return None
        return ShowReferences(tuple(int(i) for i in shown), self._rng.choice(_REFERENCE_PROMPTS))


def stated_facts(history: Sequence[HistoryEntry], index: GalleryIndex) -> dict[int, tuple[Fact, ...]]:
    out: dict[int, tuple[Fact, ...]] = {}
    for entry in history:
        if entry.shown and isinstance(entry.turn, ReferenceTurn):
            i = index.index_of(entry.turn.reference_path)
            if i is not None:
                out[i] = out.get(i, ()) + entry.shown
    return out


def slots_asked(history: Sequence[HistoryEntry]) -> frozenset[str]:
    slots = (question_slot(e.turn.question) for e in history if isinstance(e.turn, QATurn))
    return frozenset(s for s in slots if s is not None)
