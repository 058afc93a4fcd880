"""Where a session meets a vision-language model (:mod:`minterpr.vlm`): the hook of each use.

A :class:`~minterpr.interaction.session.Session` built with ``vlm=`` (a
:class:`~minterpr.vlm.assist.VLMAssistant`) calls these functions on a live turn (never on a
replay or an undo, which reuse what the history recorded):

- :func:`model_reading` before scoring: the model's facts for a poorly read utterance;
- :func:`model_anchor` after scoring: the model's answers about the anchor (the confirmed image,
  else the anchor re-ranking found, else the top result) to the slots no fact covers yet. What the
  model sees on an image is evidence about *that image* (:func:`seen_evidence`, as the user's own
  words about a shown image, weighed softer), never words put in the witness's mouth: it becomes a
  fact about the person sought only once the user confirms that image (:func:`target_facts`), it is
  dropped when they rule the image out, and it covers no slot, so questions keep coming (taking the
  top result's readings as the target's own facts cost most of the demo's final R@1: docs/vlm.md);
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

from typing import Callable, Collection, Mapping, Sequence

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


def model_reading(
    vlm: VLMAssistant, turn: Turn, context_slot: str | None, facts: Sequence[Fact]
) -> tuple[ModelFact, ...]:
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


def model_anchor(
    vlm: VLMAssistant, index: GalleryIndex, anchor: int, facts: Sequence[Fact], asked: frozenset[str]
) -> tuple[ModelFact, ...]:
    if not vlm.enabled("anchor"):
        return ()
    slots = open_slots(facts, asked)
    image = read_image(index.root, index.images[anchor].path) if slots else None
    if image is None:
        return ()
    path = index.images[anchor].path
    return tuple(ModelFact(f.slot, f.values, f.negated, "anchor", path) for f in vlm.anchor_facts(image, slots))


def is_seen(fact: Fact) -> bool:
    """Is ``fact`` the model's reading of an anchor image (not something the user said)?"""
    return isinstance(fact, ModelFact) and fact.use == "anchor"


def target_facts(history: Sequence[HistoryEntry], confirmed: Collection[str]) -> tuple[Fact, ...]:
    """The facts about the person sought, in order: the user's (and the model's readings of their words),
    and the model's readings of an anchor image only when that image's path is in ``confirmed`` (the user
    said it is the person).

    Example:
        >>> from minterpr.types import DescriptionTurn
        >>> seen = ModelFact("carried", ("umbrella",), use="anchor", image="a.jpg")
        >>> entry = HistoryEntry(DescriptionTurn("a man"), (Fact("gender", ("male",)), seen), ())
        >>> [f.slot for f in target_facts([entry], ())], [f.slot for f in target_facts([entry], {"a.jpg"})]
        (['gender'], ['gender', 'carried'])
    """
    return tuple(f for entry in history for f in entry.facts if not is_seen(f) or f.image in confirmed)


def seen_evidence(
    history: Sequence[HistoryEntry],
    index: GalleryIndex,
    judgements: Mapping[int, bool | None],
    said: Mapping[int, Sequence[Fact]],
) -> dict[int, tuple[Fact, ...]]:
    """Gallery index -> what the user said of the image (``said``) and the model's readings of it as an
    anchor, for ranking (:func:`~minterpr.language.evidence.stated_log_likelihood`). A reading is left out
    when the user ruled the image out or said something of that slot of it themselves (their words win).

    Example:
        >>> from minterpr.types import DescriptionTurn, GalleryImage
        >>> from minterpr.interaction.attribute_backend import AttributeBackend
        >>> images = [GalleryImage(p, f"p:{k}", attributes={"gender": ("male",)}) for k, p in enumerate(["a.jpg", "b.jpg"])]
        >>> index = AttributeBackend().index_images(images)
        >>> seen = ModelFact("carried", ("umbrella",), use="anchor", image="b.jpg")
        >>> history = [HistoryEntry(DescriptionTurn("a man"), (seen,), ())]
        >>> seen_evidence(history, index, {}, {}) == {1: (seen,)}, seen_evidence(history, index, {1: False}, {})
        (True, {})
    """
    out = {i: tuple(facts) for i, facts in said.items()}
    for entry in history:
        for fact in entry.facts:
            i = index.index_of(fact.image) if is_seen(fact) and fact.image else None
            if i is None or judgements.get(i) is False or any(f.slot == fact.slot for f in said.get(i, ())):
                continue
            out[i] = out.get(i, ()) + (fact,)
    return out


def model_judgements(
    vlm: VLMAssistant, index: GalleryIndex, ranking: np.ndarray, history: Sequence[HistoryEntry]
) -> tuple[tuple[int, float], ...]:
    if not vlm.enabled("rerank"):
        return ()
    rows = [int(i) for i in ranking[: vlm.config.rerank_k]]
    images = [read_image(index.root, index.images[i].path) for i in rows]
    kept = [(i, data) for i, data in zip(rows, images) if data is not None]
    scores = vlm.judge(conversation(history), [data for _, data in kept])
    return () if scores is None else tuple((i, p) for (i, _), p in zip(kept, scores))


def with_judgements(
    rows: np.ndarray, scores: np.ndarray, judged: Sequence[tuple[int, float]], weight: float
) -> np.ndarray:
    """(K,) ``scores`` of the candidates ``rows`` plus each judged candidate's bonus (others unchanged)."""
    out = scores.copy()
    for i, p in judged:
        at = np.flatnonzero(rows == i)
        out[at] += judgement_bonus(p, weight)
    return out
