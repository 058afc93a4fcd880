"""Simulated users for online evaluation: they describe a target, answer questions, judge references.

* ``oracle`` knows the target's ground-truth attributes and speaks through
  :mod:`minterpr.language.utterances` (the synthesiser's language); it recognises the target's
  identity when shown; ``dont_know_rate`` / ``wrong_answer_rate`` make it imperfect.
* ``witness`` knows only a text description of the target (a caption, or one written from
  ground truth): it answers only what that text says and gives feedback only on those slots;
  given ``knowledge`` (labelled attributes), it opens with the caption but answers and corrects
  from those (the street benchmark's witness, :mod:`minterpr.ingest.street_search`).
* ``replay`` plays back a recorded MInterPEDES dialogue (the offline protocol): the recorded
  description, Q&A turns and reference turns in order, whatever the system asks.

Each simulator makes one :class:`SimulatedUser` per target (``simulator.user(target, index,
query=q, seed=s)``); a user's every random choice comes from its own seeded generator.

Example:
    >>> import random
    >>> from minterpr.index.gallery_index import GalleryIndex
    >>> from minterpr.interaction.session import AskQuestion
    >>> import numpy as np
    >>> target = GalleryImage("a.jpg", "x:1", attributes={"gender": ("female",), "carried": ("backpack",)})
    >>> index = GalleryIndex([target], np.ones((1, 1), dtype=np.float32))
    >>> user = SIMULATORS.create("oracle").user(target, index, query=0, seed=0)
    >>> turn = user.respond(AskQuestion("carried", "Was she carrying anything?"))
    >>> [f.holds(target.attributes) for f in user.claims]
    [True]
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact, Phrase, pronouns
from minterpr.language.utterances import DONT_KNOW, SALIENCE, answer, choose_description_slots, description, feedback
from minterpr.errors import InputError
from minterpr.index.gallery_index import GalleryIndex
from minterpr.language.dialogue_acts import parse_cached, turn_facts
from minterpr.interaction.session import Action, AskQuestion, ShowReferences
from minterpr.registry import Registry
from minterpr.types import Attributes, GalleryImage, QATurn, ReferenceTurn, RetrievalSample, Turn


class SimulatedUser(Protocol):
    claims: list[Fact]  # every fact the user has asserted about the target, in order

    def describe(self) -> str:
        """The initial description (round 0)."""
        ...

    def respond(self, action: Action | None) -> Turn | None:
        """The user's turn in reply to the system's move; None = nothing to say."""
        ...


class Simulator(Protocol):
    name: str

    def user(self, target: GalleryImage, index: GalleryIndex, *, query: int, seed: int) -> SimulatedUser: ...

    def describe_protocol(self) -> dict[str, Any]: ...


SIMULATORS: Registry[Simulator] = Registry("user simulator")
_CONFIRMATIONS = ("Yes, that's {object}.", "That's {object}!", "Yes, this one.", "Yes, that's the person.")
_UNDECIDED = ("Maybe, I'm not sure.", "Could be, everything I remember fits.", "Possibly, I can't tell from that.")


def _agreement(known: Attributes, other: Attributes | None) -> int:
    """How many of the known slots the other image shares exactly."""
    return sum(1 for slot, values in known.items() if other and other.get(slot) == values)


def _pick_shown(indices: Sequence[int], index: GalleryIndex, known: Attributes) -> int:
    """The shown image a user comments on: the one most like the person (first of equals)."""
    return max(indices, key=lambda i: _agreement(known, index.images[i].attributes))


def _confirm(attributes: Attributes, rng: random.Random) -> str:
    return rng.choice(_CONFIRMATIONS).format(**pronouns(attributes))


@dataclass
class _AttributeUser:
    """A user who speaks from an attribute dict (the oracle's truth, or the witness's knowledge)."""

    target: GalleryImage
    index: GalleryIndex
    knows: Attributes  # what the user can say about the target
    rng: random.Random
    dont_know_rate: float = 0.0
    wrong_answer_rate: float = 0.0
    recognises: bool = True  # says "that's her" when the target's identity is shown
    opening: str = ""  # the initial description
    opening_facts: tuple[Fact, ...] = ()  # what the description asserts
    claims: list[Fact] = field(default_factory=list)

    def describe(self) -> str:
        self.claims.extend(self.opening_facts)
        return self.opening

    def respond(self, action: Action | None) -> Turn | None:
        if isinstance(action, AskQuestion):
            phrase = self._answer(action.slot)
            self.claims.extend(phrase.facts)
            return QATurn(action.text, phrase.text)
        if isinstance(action, ShowReferences) and action.indices:
            if self.recognises:
                for i in action.indices:
                    if self.index.images[i].person_id == self.target.person_id:
                        return ReferenceTurn(self.index.images[i].path, _confirm(self.knows, self.rng))
            i = _pick_shown(action.indices, self.index, self.knows)
            shown = self.index.images[i].attributes or {}
            if not self.recognises and _agreement(self.knows, shown) == len(self.knows):
                # everything it remembers fits: a witness who cannot recognise the face cannot rule it out
                return ReferenceTurn(self.index.images[i].path, self.rng.choice(_UNDECIDED))
            phrase = feedback(self.knows, shown, self.rng)
            self.claims.extend(phrase.facts)
            return ReferenceTurn(self.index.images[i].path, phrase.text)
        return None

    def _answer(self, slot: str) -> Phrase:
        roll = self.rng.random()
        if not self.knows.get(slot) or roll < self.dont_know_rate:
            return Phrase(self.rng.choice(DONT_KNOW))
        if roll < self.dont_know_rate + self.wrong_answer_rate:
            others = [v for v in ONTOLOGY.slot(slot).value_names if v not in self.knows[slot]]
            if others:  # a wrong answer names another value of the slot
                return answer(slot, {**self.knows, slot: (self.rng.choice(others),)}, self.rng)
        return answer(slot, self.knows, self.rng)


@dataclass
class OracleSimulator:
    """Answers from ground truth; recognises the target (see the module doc)."""

    dont_know_rate: float = 0.0  # chance of "I don't remember" to a question
    wrong_answer_rate: float = 0.0  # chance an answer names another value of the slot
    max_description_slots: int = 4  # the description mentions 1..this many attributes
    vague_rate: float = 0.25  # chance a single colour is described vaguely ("dark")
    name: str = "oracle"

    def user(self, target: GalleryImage, index: GalleryIndex, *, query: int, seed: int) -> SimulatedUser:
        rng = random.Random(f"oracle:{seed}:{query}")
        truth = dict(target.attributes or {})
        slots = choose_description_slots(truth, rng, max_slots=self.max_description_slots) if truth else []
        said = description(truth, slots, rng, vague_rate=self.vague_rate) if slots else Phrase("A person.")
        return _AttributeUser(
            target, index, truth, rng, self.dont_know_rate, self.wrong_answer_rate, True, said.text, said.facts
        )

    def describe_protocol(self) -> dict[str, Any]:
        return {
            "simulator": self.name,
            "dont_know_rate": self.dont_know_rate,
            "wrong_answer_rate": self.wrong_answer_rate,
            "max_description_slots": self.max_description_slots,
            "vague_rate": self.vague_rate,
        }


def knowledge_from_text(text: str) -> dict[str, tuple[str, ...]]:
    """The attributes a text states unambiguously: positive single-valued facts (first per slot;
    multi-valued slots collect values; vague facts such as "dark" are left out)."""
    known: dict[str, list[str]] = {}
    for fact in parse_cached(text, None):
        if fact.negated or len(fact.values) != 1:
            continue
        slot = ONTOLOGY.slot(fact.slot)
        value = fact.values[0]
        if slot.name not in known:
            known[slot.name] = [value]
        elif (
            slot.multi
            and value not in known[slot.name]
            and not slot.value(value).excludes_others
            and not any(slot.value(v).excludes_others for v in known[slot.name])
        ):
            known[slot.name].append(value)
    return ONTOLOGY.validate({k: tuple(v) for k, v in known.items()})


@dataclass
class WitnessSimulator:
    """Knows only a text description of the target (see the module doc)."""

    captions: Mapping[str, str] | None = None  # target path -> what the witness knows; None: written from ground truth
    knowledge: Mapping[str, Attributes] | None = (
        None  # target path -> what it remembers (answers, corrections); None: the caption's facts
    )
    caption_slots: int = 6  # slots of a caption written from ground truth (CUHK captions name about this many)
    initial_slots: int | None = None  # None: round 0 is the whole caption; k: only k known slots, the rest held back
    vague_rate: float = 0.25  # vague colours in written captions ("dark top": the witness cannot answer which)
    dont_know_rate: float = 0.0  # extra "not sure" on questions it could answer
    recognises: bool = False  # a text-only witness cannot recognise the person in an image
    name: str = "witness"

    def caption_for(self, target: GalleryImage, rng: random.Random) -> str:
        if self.captions is not None:
            if target.path not in self.captions:
                raise InputError(f"the witness has no caption for target {target.path!r}")
            return self.captions[target.path]
        truth = dict(target.attributes or {})
        candidates = [s for s in SALIENCE if truth.get(s)]
        slots: list[str] = []
        while candidates and len(slots) < self.caption_slots:
            pick = rng.choices(candidates, [SALIENCE[s] for s in candidates])[0]
            candidates.remove(pick)
            slots.append(pick)
        return description(truth, slots, rng, vague_rate=self.vague_rate).text if slots else "A person."

    def user(self, target: GalleryImage, index: GalleryIndex, *, query: int, seed: int) -> SimulatedUser:
        rng = random.Random(f"witness:{seed}:{query}")
        caption = self.caption_for(target, rng)
        knows = (
            dict(self.knowledge[target.path])
            if self.knowledge is not None and target.path in self.knowledge
            else knowledge_from_text(caption)
        )
        opening = caption
        if self.initial_slots is not None and knows:
            slots = list(knows)[: self.initial_slots]
            opening = description(knows, slots, rng, vague_rate=0.0).text
        return _AttributeUser(
            target, index, knows, rng, self.dont_know_rate, 0.0, self.recognises, opening, parse_cached(opening, None)
        )

    def describe_protocol(self) -> dict[str, Any]:
        return {
            "simulator": self.name,
            "captions": "given" if self.captions is not None else "from ground truth",
            "knowledge": "given" if self.knowledge is not None else "the caption's",
            "caption_slots": self.caption_slots,
            "initial_slots": self.initial_slots,
            "vague_rate": self.vague_rate,
            "dont_know_rate": self.dont_know_rate,
            "recognises": self.recognises,
        }


@dataclass
class _ReplayUser:
    sample: RetrievalSample
    claims: list[Fact] = field(default_factory=list)
    _next: int = 1  # next recorded turn to play (0 is the description)

    def describe(self) -> str:
        self.claims.extend(turn_facts(self.sample.dialogue.turns()[0]))
        return self.sample.dialogue.description

    def respond(self, action: Action | None) -> Turn | None:
        turns = self.sample.dialogue.turns()
        if self._next >= len(turns):
            return None
        self._next += 1
        self.claims.extend(turn_facts(turns[self._next - 1]))
        return turns[self._next - 1]


@dataclass
class ReplaySimulator:
    """Plays recorded dialogues: ``samples[q]`` is the dialogue of the q-th target."""

    samples: Sequence[RetrievalSample] = ()
    name: str = "replay"

    def user(self, target: GalleryImage, index: GalleryIndex, *, query: int, seed: int) -> SimulatedUser:
        if query >= len(self.samples):
            raise InputError(f"no recorded dialogue for target {query} (have {len(self.samples)})")
        sample = self.samples[query]
        if sample.target_path != target.path:
            raise InputError(f"recorded dialogue {query} is about {sample.target_path!r}, not {target.path!r}")
        return _ReplayUser(sample)

    def targets(self, index: GalleryIndex) -> list[GalleryImage]:
        """The gallery images the recorded dialogues look for, one per dialogue."""
        out = []
        for sample in self.samples:
            i = index.index_of(sample.target_path)
            if i is None:
                raise InputError(f"recorded target {sample.target_path!r} is not in the gallery")
            out.append(index.images[i])
        return out

    def describe_protocol(self) -> dict[str, Any]:
        return {"simulator": self.name, "dialogues": len(self.samples)}


@SIMULATORS.register("oracle")
def _oracle(**options: Any) -> Simulator:
    return OracleSimulator(**options)


@SIMULATORS.register("witness")
def _witness(**options: Any) -> Simulator:
    return WitnessSimulator(**options)


@SIMULATORS.register("replay")
def _replay(samples: Sequence[RetrievalSample] = ()) -> Simulator:
    return ReplaySimulator(list(samples))
