"""The dialogue synthesiser: MInterPEDES-style dialogues from attribute-labelled images.

For each target image it writes an initial description (1 to 4 remembered attributes), text Q&A
turns about slots not yet known (answers from the labels, "not sure" when a label is unknown),
and reference-image turns: another identity's image, chosen by a reference strategy, with
feedback on how it differs from the target. Every sentence's facts are kept, so callers can
measure ambiguity and check truthfulness.

Example:
    >>> from minterpr.types import GalleryImage
    >>> a = GalleryImage("a.jpg", "demo:1", attributes={"gender": ("male",), "upper_colour": ("red",)})
    >>> b = GalleryImage("b.jpg", "demo:2", attributes={"gender": ("male",), "upper_colour": ("blue",)})
    >>> config = DialogueSynthesisConfig(seed=0, min_qa_turns=0, max_qa_turns=0, min_image_turns=1, max_image_turns=1)
    >>> record = synthesize_records([a], [a, b], config)[0]
    >>> record.sample.dialogue.reference_turns[0].reference_path
    'b.jpg'
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.captions import caption_description
from minterpr.language.phrasing import Fact
from minterpr.language.utterances import (
    ASKABLE_SLOTS,
    SALIENCE,
    answer,
    choose_description_slots,
    description,
    feedback,
    question,
)
from minterpr.errors import InputError
from minterpr.registry import Registry
from minterpr.types import Attributes, Dialogue, GalleryImage, QATurn, ReferenceTurn, RetrievalSample


DESCRIPTION_STYLES = ("synthetic", "caption")


@dataclass(frozen=True)
class DialogueSynthesisConfig:
    """How dialogues are written; the same config and seed give the same records."""

    seed: int = 0  # master seed; each record derives its own from (seed, target index, copy)
    min_qa_turns: int = 1  # text Q&A turns per dialogue are drawn uniformly in [min, max]
    max_qa_turns: int = 3
    min_image_turns: int = 1  # reference-image turns per dialogue, uniformly in [min, max]
    max_image_turns: int = 3
    max_description_slots: int = 4  # a description mentions 1..this many attributes
    vague_rate: float = 0.25  # chance a single colour is said vaguely ("dark top")
    strategies: tuple[str, ...] = ("hard_negative", "attribute_rank")  # record k of an image uses strategies[k % n]
    records_per_image: int = 2  # MInterPEDES writes two dialogues per target image
    hard_negative_pool: int = 5  # hard negatives are drawn from this many most similar other identities' images
    # first description: "synthetic" (a witness's 1-4 remembered attributes, the default) or "caption"
    # (written like real captions: person first, ~20 words, ~7 facts; docs/language.md)
    description_style: str = "synthetic"

    def __post_init__(self) -> None:
        if not (0 <= self.min_qa_turns <= self.max_qa_turns and 0 <= self.min_image_turns <= self.max_image_turns):
            raise InputError("turn counts need 0 <= min <= max")
        if self.description_style not in DESCRIPTION_STYLES:
            raise InputError(
                f"unknown description_style {self.description_style!r}: must be one of {', '.join(DESCRIPTION_STYLES)}"
            )
        for name in self.strategies:
            REFERENCE_STRATEGIES.get(name)  # raises "must be one of ..." early


@dataclass
class SynthesizedDialogue:
    """A record plus what each round asserted about the target (round 0 = description)."""

    sample: RetrievalSample
    strategy: str  # reference strategy used for the image turns
    round_facts: list[tuple[Fact, ...]] = field(default_factory=list)
    asked_slots: list[str] = field(default_factory=list)  # slot of each Q&A turn, in order


class AttributeTable:
    """Gallery attributes as a binary matrix over the ontology's (slot, value) labels.

    Images of one identity share their labels, so scores are computed once per distinct label
    row and gathered per image.
    """

    def __init__(self, gallery: Sequence[GalleryImage]) -> None:
        self.gallery = list(gallery)
        labels = ONTOLOGY.flat_labels()
        self.column = {label: j for j, label in enumerate(labels)}
        rows: dict[tuple[int, ...], int] = {}
        self.row_of = np.zeros(len(self.gallery), dtype=np.int64)  # (G,) image -> distinct label row
        for i, image in enumerate(self.gallery):
            key = tuple(
                sorted(self.column[(slot, v)] for slot, values in (image.attributes or {}).items() for v in values)
            )
            self.row_of[i] = rows.setdefault(key, len(rows))
        # Column-major: scores only ever read the few columns a query names.
        self.unique = np.zeros((len(rows), len(labels)), dtype=np.float32, order="F")  # (U, L)
        for key, r in rows.items():
            self.unique[r, list(key)] = 1.0
        people: dict[str, int] = {}
        self.person_index = np.array([people.setdefault(g.person_id, len(people)) for g in self.gallery])  # (G,)
        self._shared_cache: dict[int, np.ndarray] = {}

    def shared_labels(self, image: int) -> np.ndarray:
        """(G,) number of labels each image shares with ``image`` (cached per label row)."""
        row = int(self.row_of[image])
        if row not in self._shared_cache:
            self._shared_cache[row] = self._scores(self.unique[row])
        return self._shared_cache[row]

    def fact_scores(self, facts: Sequence[Fact]) -> np.ndarray:
        """(G,) how well each image agrees with the facts: +1 per fact held, -1 per fact broken."""
        weights = np.zeros(self.unique.shape[1], dtype=np.float32)
        for fact in facts:
            for value in fact.values:
                weights[self.column[(fact.slot, value)]] += -1.0 if fact.negated else 1.0 / len(fact.values)
        return self._scores(weights)

    def _scores(self, weights: np.ndarray) -> np.ndarray:
        """(G,) unique @ weights gathered per image, reading only the non-zero weights' columns."""
        columns = np.flatnonzero(weights)
        return (self.unique[:, columns] @ weights[columns])[self.row_of]


ReferenceStrategy = Callable[
    [int, AttributeTable, Sequence[Fact], set[int], random.Random, DialogueSynthesisConfig], int
]
REFERENCE_STRATEGIES: Registry[int] = Registry("reference strategy")


def _allowed(target: int, table: AttributeTable, used: set[int]) -> np.ndarray:
    """(G,) images that may be shown: other identities, none already shown in this dialogue."""
    excluded = [table.person_index[target]] + [table.person_index[i] for i in used]
    return ~np.isin(table.person_index, excluded)


def _pick_top(scores: np.ndarray, allowed: np.ndarray, pool: int, rng: random.Random) -> int:
    """One of the ``pool`` best allowed images, uniformly; ties broken at random."""
    # Random jitter keeps equal-scoring images from always resolving to the lowest index.
    jitter = np.random.default_rng(rng.getrandbits(64)).random(len(scores)) * 1e-3
    masked = np.where(allowed, scores + jitter, -np.inf)
    pool = min(pool, int(allowed.sum()))
    top = np.argpartition(-masked, pool - 1)[:pool]
    top = top[np.argsort(-masked[top], kind="stable")]
    return int(top[rng.randrange(pool)])


@REFERENCE_STRATEGIES.register("hard_negative")
def hard_negative(target, table, facts, used, rng, config) -> int:
    """An image of another identity sharing the most labels with the target."""
    return _pick_top(table.shared_labels(target), _allowed(target, table, used), config.hard_negative_pool, rng)


@REFERENCE_STRATEGIES.register("attribute_rank")
def attribute_rank(target, table, facts, used, rng, config) -> int:
    """The top-ranked non-target of an attribute ranking by what the dialogue has said so far."""
    return _pick_top(table.fact_scores(facts), _allowed(target, table, used), 1, rng)


@REFERENCE_STRATEGIES.register("random")
def random_reference(target, table, facts, used, rng, config) -> int:
    """Any image of another identity."""
    candidates = np.flatnonzero(_allowed(target, table, used))
    return int(candidates[rng.randrange(len(candidates))])


def _known(facts: Sequence[Fact]) -> dict[str, tuple[str, ...]]:
    """Slots the system has heard a positive fact about (for pronouns and question choice)."""
    return {f.slot: f.values for f in facts if not f.negated}


def synthesize_qa_turns(
    attributes: Attributes,
    facts: list[Fact],
    config: DialogueSynthesisConfig,
    rng: random.Random,
    *,
    labelled_only: bool = False,
) -> tuple[list[QATurn], list[str], list[Sequence[Fact]]]:
    """Q&A turns about askable slots the ``facts`` do not state yet (drawn by salience), answered
    from ``attributes``; ``facts`` grows with each answer. ``labelled_only``: ask only about slots
    ``attributes`` has a value for. Returns the turns, the slots asked and each answer's facts."""
    turns: list[QATurn] = []
    asked: list[str] = []
    answered: list[Sequence[Fact]] = []
    for _ in range(rng.randint(config.min_qa_turns, config.max_qa_turns)):
        known = _known(facts)
        open_slots = [
            s for s in ASKABLE_SLOTS if s not in known and s not in asked and (not labelled_only or attributes.get(s))
        ]
        if not open_slots:
            break
        slot = rng.choices(open_slots, [SALIENCE[s] for s in open_slots])[0]
        reply = answer(slot, attributes, rng)
        turns.append(QATurn(question(slot, known, rng), reply.text))
        asked.append(slot)
        answered.append(reply.facts)
        facts.extend(reply.facts)
    return turns, asked, answered


def synthesize_reference_turns(
    target: int,
    table: AttributeTable,
    strategy: str,
    attributes: Attributes,
    facts: list[Fact],
    config: DialogueSynthesisConfig,
    rng: random.Random,
) -> tuple[list[ReferenceTurn], list[Sequence[Fact]]]:
    """Reference-image turns: images of other identities, chosen by ``strategy`` and none of a
    person already shown, each with the feedback ``attributes`` give on it; ``facts`` grows with
    each reply. Returns the turns and each reply's facts."""
    turns: list[ReferenceTurn] = []
    replies: list[Sequence[Fact]] = []
    used: set[int] = set()
    choose = REFERENCE_STRATEGIES.get(strategy)
    people = int(table.person_index.max()) + 1  # person_index numbers the identities 0..P-1
    for _ in range(rng.randint(config.min_image_turns, config.max_image_turns)):
        # an image may be shown while some identity is neither the target's nor one shown already
        if len({int(table.person_index[target])} | {int(table.person_index[i]) for i in used}) >= people:
            break
        ref = choose(target, table, facts, used, rng, config)
        used.add(ref)
        reply = feedback(attributes, table.gallery[ref].attributes or {}, rng)
        turns.append(ReferenceTurn(table.gallery[ref].path, reply.text))
        replies.append(reply.facts)
        facts.extend(reply.facts)
    return turns, replies


def synthesize_dialogue(
    target: int, table: AttributeTable, strategy: str, rng: random.Random, config: DialogueSynthesisConfig
) -> SynthesizedDialogue:
    """One dialogue about gallery image ``target`` using reference ``strategy``."""
    image = table.gallery[target]
    attributes = image.attributes or {}
    if config.description_style == "caption":
        said = caption_description(attributes, rng, vague_rate=config.vague_rate)
    else:
        said = description(
            attributes,
            choose_description_slots(attributes, rng, max_slots=config.max_description_slots),
            rng,
            vague_rate=config.vague_rate,
        )
    round_facts: list[tuple[Fact, ...]] = [said.facts]
    facts = list(said.facts)
    qa_turns, asked, answered = synthesize_qa_turns(attributes, facts, config, rng)
    round_facts.extend(answered)
    reference_turns, shown = synthesize_reference_turns(target, table, strategy, attributes, facts, config, rng)
    round_facts.extend(shown)
    dialogue = Dialogue(said.text, tuple(qa_turns), tuple(reference_turns))
    sample = RetrievalSample(image.path, image.person_id, dialogue)
    return SynthesizedDialogue(sample, strategy, round_facts, asked)


def synthesize_records(
    targets: Sequence[GalleryImage],
    gallery: Sequence[GalleryImage],
    config: DialogueSynthesisConfig = DialogueSynthesisConfig(),
) -> list[SynthesizedDialogue]:
    """``config.records_per_image`` dialogues per target, references drawn from ``gallery``.

    Targets must be gallery images (matched by path). Deterministic for a given config.
    """
    table = AttributeTable(gallery)
    index = {g.path: i for i, g in enumerate(table.gallery)}
    records = []
    for t, image in enumerate(targets):
        if image.path not in index:
            raise InputError(f"target {image.path!r} is not in the gallery")
        for copy in range(config.records_per_image):
            rng = random.Random(f"{config.seed}:{t}:{copy}")
            strategy = config.strategies[copy % len(config.strategies)]
            records.append(synthesize_dialogue(index[image.path], table, strategy, rng, config))
    return records


def ambiguity(
    records: Sequence[SynthesizedDialogue],
    gallery: Sequence[GalleryImage],
    *,
    rounds: int | None = None,
    min_others: int = 5,
) -> float:
    """Fraction of records whose facts up to ``rounds`` (None = all text rounds) also hold for at
    least ``min_others`` other identities of the gallery (in percent).

    A fact on an unknown slot counts as compatible, as a witness's words would be.
    """
    by_person: dict[str, dict] = {}
    for image in gallery:
        by_person.setdefault(image.person_id, image.attributes or {})
    people = list(by_person)
    position = {pid: i for i, pid in enumerate(people)}
    compatible_cache: dict[Fact, np.ndarray] = {}

    def compatible(fact: Fact) -> np.ndarray:  # (P,) identities the fact does not contradict
        if fact not in compatible_cache:
            compatible_cache[fact] = np.array([fact.holds(by_person[p]) is not False for p in people])
        return compatible_cache[fact]

    ambiguous = 0
    for record in records:
        n_text = 1 + len(record.sample.dialogue.qa_turns)
        ok = np.ones(len(people), dtype=bool)
        for facts in record.round_facts[: n_text if rounds is None else rounds]:
            for fact in facts:
                ok &= compatible(fact)
        if record.sample.person_id in position:
            ok[position[record.sample.person_id]] = False
        ambiguous += int(ok.sum()) >= min_others
    return 100.0 * ambiguous / max(1, len(records))
