"""First descriptions written the way people caption pedestrians (CUHK-PEDES): one or two sentences,
person first, then hair, garments and what they carry, each slot mentioned about as often as real
captions mention it. The dialogue synthesiser's ``description_style="caption"`` and the VLM
captioner's fallback speak through it.
"""

from __future__ import annotations

import random
from typing import Sequence

from minterpr.language.phrasing import (
    article,
    Attrs,
    caption_garment,
    caption_items,
    caption_word,
    Fact,
    join_words,
    Phrase,
    pronouns,
)
from minterpr.language.utterances import capitalised, mentionable

# How often real captions mention a slot whose value is known and worth saying (CUHK-PEDES; docs/language.md).
CAPTION_RATES: dict[str, float] = {
    "gender": 0.95,
    "upper_colour": 0.9,
    "upper_type": 0.85,
    "lower_type": 0.9,
    "lower_colour": 0.85,
    "footwear_colour": 0.6,
    "footwear_type": 0.35,
    "hair_length": 0.3,
    "hair_colour": 0.35,
    "carried": 0.65,
    "sleeve_length": 0.25,
    "upper_pattern": 0.5,
    "lower_pattern": 0.3,
    "accessories": 0.5,
    "headwear": 0.5,
    "age": 0.08,
}


def choose_caption_slots(attributes: Attrs, rng: random.Random) -> list[str]:
    """The slots a caption writer would mention, each with its CAPTION_RATES chance (at least one)."""
    known = [s for s in CAPTION_RATES if mentionable(s, attributes)]
    chosen = [s for s in known if rng.random() < CAPTION_RATES[s]]
    return chosen or known[:1]


def _caption_person(attributes: Attrs, slots: set[str], rng: random.Random) -> Phrase:
    """'man', 'young woman', 'little girl', 'elderly man', 'person' (no article)."""
    facts: list[Fact] = []
    noun = rng.choice(["person", "person", "pedestrian"])
    if "gender" in slots:
        noun, states = caption_word("gender", attributes["gender"][0], rng)
        facts.append(Fact("gender", states))
    age = attributes["age"][0] if "age" in slots else ""
    if age == "child":
        noun = {
            "man": "boy",
            "male": "boy",
            "guy": "boy",
            "woman": "girl",
            "lady": "girl",
            "female": "girl",
            "girl": "girl",
        }.get(noun, "child")
        noun = "child" if noun == "child" else f"little {noun}"
    elif age in ("young", "middle_aged", "senior"):
        adjective = {"young": "young", "middle_aged": "middle-aged", "senior": "elderly"}[age]
        noun = f"{adjective} {'woman' if noun == 'girl' else noun}"
    if age in ("child", "young", "middle_aged", "senior"):
        facts.append(Fact("age", (age,)))
    return Phrase(noun, tuple(facts))


def _caption_hair(attributes: Attrs, slots: set[str], rng: random.Random) -> Phrase | None:
    length = attributes["hair_length"][0] if "hair_length" in slots else ""
    colour = attributes["hair_colour"][0] if "hair_colour" in slots else ""
    if not length and not colour:
        return None
    if length == "bald":
        return Phrase("a bald head", (Fact("hair_length", ("bald",)),))
    words = ([length] if length else []) + ([caption_word("hair_colour", colour, rng)[0]] if colour else [])
    facts = ([Fact("hair_length", (length,))] if length else []) + ([Fact("hair_colour", (colour,))] if colour else [])
    return Phrase(" ".join(words + ["hair"]), tuple(facts))


def caption_description(
    attributes: Attrs, rng: random.Random, *, vague_rate: float = 0.25, slots: Sequence[str] | None = None
) -> Phrase:
    """A first description written the way people caption pedestrians (CUHK-PEDES): person first,
    then hair, top, bottoms, shoes and what they carry, in one or two sentences of about 20 words.

    >>> attrs = {"gender": ("male",), "upper_colour": ("red",), "upper_type": ("tshirt",), "lower_type": ("jeans",)}
    >>> caption_description(attrs, random.Random(3), slots=["gender", "upper_colour", "upper_type", "lower_type"]).text
    'This man is wearing a red tee shirt and jeans.'
    """
    slots = set(slots if slots is not None else choose_caption_slots(attributes, rng))
    person = _caption_person(attributes, slots, rng)
    p = pronouns({"gender": attributes["gender"]} if "gender" in slots else {})
    be, have = ("are", "have") if p["pronoun"] == "they" else ("is", "has")  # after the pronoun; the noun takes is/has
    parts = [
        caption_garment(part, attributes, rng, slots=slots, vague_rate=vague_rate)
        for part, members in (
            ("upper", ("upper_colour", "upper_type", "upper_pattern", "sleeve_length")),
            ("lower", ("lower_colour", "lower_type", "lower_pattern")),
            ("feet", ("footwear_colour", "footwear_type")),
        )
        if slots & set(members)
    ]
    for slot in ("headwear", "accessories"):
        if slot in slots:
            parts.append(caption_items(slot, attributes, rng, p["possessive"]))
    wear = [w for w in parts if w.text]
    if len(wear) > 1 and rng.random() < 0.15:  # one caption in seven names the bottoms or shoes first
        wear.insert(0, wear.pop(rng.randrange(1, min(3, len(wear)))))
    hair = _caption_hair(attributes, slots, rng)
    carry = caption_items("carried", attributes, rng, p["possessive"]) if "carried" in slots else None
    carry = carry if carry and carry.text else None
    wear_text = join_words([w.text for w in wear])
    form = rng.choices(range(4), [4.0, 1.2, 3.5, 0.8])[0] if wear else 2
    det = rng.choices(["A", "The", "This"], [3.0, 3.0, 1.0] if form in (0, 3) else [0.3, 4.0, 1.0])[0]
    subject, pron = (
        f"{det} {person.text}" if det != "A" else capitalised(article(person.text)),
        capitalised(p["pronoun"]),
    )
    doing = rng.choices(["", "walking", "walking down the street", "standing"], [6.0, 2.0, 1.0, 1.0])[0]
    if form == 0:  # "A man with short hair wearing ..., ... and .... He is carrying a backpack."
        head = subject + (f" with {hair.text}" if hair else "")
        text = f"{head} {'wearing' if det == 'A' else 'is wearing'} {wear_text}." if wear else f"{head}."
        text += f" {pron} {be} {doing + ' and ' if doing else ''}carrying {carry.text}." if carry else ""
    elif form == 1:  # "The woman is wearing .... She has long hair and is carrying a purse."
        rest = ([f"{have} {hair.text}"] if hair else []) + ([f"{be} carrying {carry.text}"] if carry else [])
        text = f"{subject} {'is ' + doing + ' and ' if doing else 'is '}wearing {wear_text}."
        text += f" {pron} {' and '.join(rest)}." if rest else ""
    elif form == 2:  # "The man has short black hair and is wearing .... He is carrying a bag."
        first = ([f"has {hair.text}"] if hair else []) + ([f"is wearing {wear_text}"] if wear else [])
        text = f"{subject} {' and '.join(first) or 'is ' + (doing or 'walking')}."
        text += f" {pron} {be} carrying {carry.text}." if carry else ""
    else:  # "A man carrying a backpack is wearing ...."
        lead = subject + (f" carrying {carry.text}" if carry else "")
        text = f"{lead} is wearing {wear_text}." + (f" {pron} {have} {hair.text}." if hair else "")
    facts = list(person.facts) + (list(hair.facts) if hair else []) + [f for w in wear for f in w.facts]
    facts += list(carry.facts) if carry else []
    return Phrase(text, tuple(facts))
