"""Dialogues grounded in real captions: facts parsed from an image's captions, Q&A and references.

Caption datasets (CUHK-PEDES, ICFG-PEDES, RSTPReid) give each image one to a few free-text
descriptions and no attribute labels. ``minterpr data convert --synthesise-dialogues`` turns
each caption into a dialogue that starts with it:

* :func:`caption_attributes`: the image's attribute labels are the facts its captions state
  (:func:`~minterpr.language.text_parser.parse_facts`), kept only where they agree: a single-valued
  slot two captions disagree on ("a man" / "a woman") is left unknown. These are *weak* labels,
  read from the text by rules, not annotated.
* :func:`caption_dialogues`: the description is the caption itself (verbatim); then Q&A turns
  about slots the caption did not mention but the image's other captions did (the answer comes
  from what another annotator wrote, phrased by :mod:`minterpr.language.utterances`); then
  reference-image turns: another identity's image, chosen by a reference strategy of
  :mod:`minterpr.data.dialogue_synthesis`, with feedback on how the labels differ.

Example:
    >>> caption_attributes(["A woman in a red jacket and blue jeans.", "She wears a red coat."])["upper_colour"]
    ('red',)
    >>> from minterpr.types import GalleryImage
    >>> a = GalleryImage("a.jpg", "x:1", attributes=caption_attributes(["a man with a black backpack"]))
    >>> b = GalleryImage("b.jpg", "x:2", attributes=caption_attributes(["a woman in a white dress"]))
    >>> sample = caption_dialogues([(a, 0, "A man in a grey shirt.")], [a, b], DialogueSynthesisConfig())[0]
    >>> sample.dialogue.description, sample.dialogue.qa_turns[0].question
    ('A man in a grey shirt.', 'Was he carrying anything?')
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import Sequence

from minterpr.data.dialogue_synthesis import (
    AttributeTable,
    DialogueSynthesisConfig,
    synthesize_qa_turns,
    synthesize_reference_turns,
)
from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.language.text_parser import parse_facts
from minterpr.types import Attributes, Dialogue, GalleryImage, RetrievalSample


@lru_cache(maxsize=1 << 16)
def caption_facts(caption: str) -> tuple[Fact, ...]:
    """:func:`~minterpr.language.text_parser.parse_facts` of a caption, remembered: conversion reads
    every caption twice (labels, then its dialogue), and parsing costs milliseconds a caption."""
    return tuple(parse_facts(caption))


def caption_attributes(captions: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Attribute labels the captions of one image state and agree on (see the module doc).

    Only positive facts naming one value count (a vague "dark top" names several); a
    single-valued slot given two values, or a value set the ontology refuses ("nothing" and a
    bag), is left unknown.
    """
    stated: dict[str, set[str]] = {}
    for caption in captions:
        for fact in caption_facts(caption):
            if not fact.negated and len(fact.values) == 1:
                stated.setdefault(fact.slot, set()).add(fact.values[0])
    labels: dict[str, tuple[str, ...]] = {}
    for slot, values in sorted(stated.items()):
        if not ONTOLOGY.slot(slot).multi and len(values) > 1:
            continue  # the captions disagree: unknown
        try:
            labels.update(ONTOLOGY.validate({slot: tuple(sorted(values))}))
        except ValueError:
            continue
    return labels


def caption_dialogue(
    caption: str, target: int, table: AttributeTable, strategy: str, rng: random.Random, config: DialogueSynthesisConfig
) -> Dialogue:
    """One dialogue about gallery image ``target`` that opens with ``caption`` (module doc)."""
    attributes: Attributes = table.gallery[target].attributes or {}
    facts = [f for f in caption_facts(caption) if not f.negated]
    qa_turns, _, _ = synthesize_qa_turns(attributes, facts, config, rng, labelled_only=True)
    reference_turns, _ = synthesize_reference_turns(target, table, strategy, attributes, facts, config, rng)
    return Dialogue(caption, tuple(qa_turns), tuple(reference_turns))


def caption_dialogues(
    targets: Sequence[tuple[GalleryImage, int, str]], gallery: Sequence[GalleryImage], config: DialogueSynthesisConfig
) -> list[RetrievalSample]:
    """One dialogue per ``(image, caption index, caption)``, references drawn from ``gallery``
    (which holds every target, matched by path). Deterministic for a given config: each
    dialogue's random generator is seeded by the seed, the image path and the caption index.
    The reference strategy alternates with the caption index (``config.strategies``).
    ``extra["caption_index"]`` says which caption of the image opened the dialogue."""
    table = AttributeTable(gallery)
    position = {image.path: i for i, image in enumerate(table.gallery)}
    samples = []
    for image, k, caption in targets:
        rng = random.Random(f"{config.seed}:{image.path}:{k}")
        strategy = config.strategies[k % len(config.strategies)]
        dialogue = caption_dialogue(caption, position[image.path], table, strategy, rng, config)
        samples.append(RetrievalSample(image.path, image.person_id, dialogue, {"caption_index": k}))
    return samples
