"""Where a session meets a vision-language model (:mod:`minterpr.vlm`): the hook of each use.

A :class:`~minterpr.interaction.session.Session` built with ``vlm=`` (a
:class:`~minterpr.vlm.assist.VLMAssistant`) calls these functions on a live turn (never on a
replay or an undo, which reuse what the history recorded):

- :func:`model_reading` before scoring: the model's facts for a poorly read utterance;
- :func:`model_anchor` after scoring: the model's answers about the anchor (the confirmed image,
  else the anchor re-ranking found, else the top result) to the slots no fact covers yet;
- :func:`model_judgements` after that: P(the person) for the top ``rerank_k`` candidates.

The facts are :class:`~minterpr.interaction.history.ModelFact` s, kept in the turn's history entry
beside the rule reader's (their source "vlm", :func:`~minterpr.interaction.history.fact_source`);
the judgements are kept per turn (``Session.model_scores``) and :func:`with_judgements` adds them
to the scores of the turn they belong to. Each is empty when the use is off or the model failed. With
``vlm=None`` none of this runs, and rankings are those of a session without it, bit for bit.

Example:
    >>> import numpy as np
    >>> with_judgements(np.array([2, 5]), np.array([0.1, 0.2]), ((5, 0.5), (9, 0.9)), 1.0).tolist()
    [0.1, 0.2]
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.index.gallery_index import GalleryIndex
from minterpr.language.dialogue_acts import question_slot, turn_facts
from minterpr.interaction.history import HistoryEntry, ModelFact
from minterpr.types import DescriptionTurn, ExampleTurn, QATurn, ReferenceTurn, Turn
from minterpr.vlm.assist import VLMAssistant, judgement_bonus, read_image


def turn_text(turn: Turn) -> str:
    """What the user said in a turn ("" for an example image)."""
    if isinstance(turn, DescriptionTurn):
        return turn.text
    if isinstance(turn, QATurn):
        return turn.answer
    if isinstance(turn, ReferenceTurn):
        return turn.feedback
    return ""


def conversation(history: Sequence[HistoryEntry]) -> list[str]:
    """The conversation as lines for a prompt (questions with their answers)."""
    lines = []
    for entry in history:
        turn = entry.turn
        if isinstance(turn, QATurn):
            lines.append(f"Asked {turn.question!r}, the witness said {turn.answer!r}")
        elif isinstance(turn, ReferenceTurn):
            lines.append(f"Shown another person, the witness said {turn.feedback!r}")
        elif not isinstance(turn, ExampleTurn):
            lines.append(turn_text(turn))
    return lines


def model_reading(vlm: VLMAssistant, turn: Turn, context_slot: str | None,
                  facts: Sequence[Fact]) -> tuple[ModelFact, ...]:
    text = turn_text(turn)
    if not text.strip():
        return ()
    return tuple(ModelFact(f.slot, f.values, f.negated, "reading") for f in vlm.read(text, context_slot, facts))


def turn_reader(vlm: VLMAssistant) -> Callable[[Turn], tuple[ModelFact, ...]]:
    """The reading use for a recorded turn (a static replay): its own deadline, the rule reader's facts
    and the question's slot as a session would have them."""
    def read(turn: Turn) -> tuple[ModelFact, ...]:
        vlm.begin_turn()
        slot = question_slot(turn.question) if isinstance(turn, QATurn) else None
        return model_reading(vlm, turn, slot, turn_facts(turn, slot))
    return read


def open_slots(facts: Sequence[Fact], asked: frozenset[str]) -> list[str]:
    """Slots no fact covers and no question asked, in ontology order."""
    covered = {f.slot for f in facts} | asked
    return [name for name in ONTOLOGY.slot_names if name not in covered]


def model_anchor(vlm: VLMAssistant, index: GalleryIndex, anchor: int, facts: Sequence[Fact],
                 asked: frozenset[str]) -> tuple[ModelFact, ...]:
    if not vlm.enabled("anchor"):
        return ()
    slots = open_slots(facts, asked)
    image = read_image(index.root, index.images[anchor].path) if slots else None
    if image is None:
        return ()
    return tuple(ModelFact(f.slot, f.values, f.negated, "anchor") for f in vlm.anchor_facts(image, slots))


def model_judgements(vlm: VLMAssistant, index: GalleryIndex, ranking: np.ndarray,
                     history: Sequence[HistoryEntry]) -> tuple[tuple[int, float], ...]:
    if not vlm.enabled("rerank"):
        return ()
    rows = [int(i) for i in ranking[: vlm.config.rerank_k]]
    images = [read_image(index.root, index.images[i].path) for i in rows]
    kept = [(i, data) for i, data in zip(rows, images) if data is not None]
    scores = vlm.judge(conversation(history), [data for _, data in kept])
    return () if scores is None else tuple((i, p) for (i, _), p in zip(kept, scores))


def with_judgements(rows: np.ndarray, scores: np.ndarray, judged: Sequence[tuple[int, float]],
                    weight: float) -> np.ndarray:
    """(K,) ``scores`` of the candidates ``rows`` plus each judged candidate's bonus (others unchanged)."""
    out = scores.copy()
    for i, p in judged:
        at = np.flatnonzero(rows == i)
        out[at] += judgement_bonus(p, weight)
    return out
