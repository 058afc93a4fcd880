"""Attributes to words: noun phrases for people, garments and items, each tagged with its facts.

Every phrase carries the :class:`Fact` s it asserts, so a text built from phrases knows exactly
what it claims: the dialogue synthesiser checks that claims are true, and the user simulators
track what has been said.

Example:
    >>> import random
    >>> attrs = {"upper_colour": ("red",), "upper_type": ("jacket",), "gender": ("female",)}
    >>> p = upper_phrase(attrs, random.Random(0), slots=("upper_colour", "upper_type"))
    >>> p.text, [f.slot for f in p.facts]
    ('a dark red jacket', ['upper_colour', 'upper_type'])
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable, Mapping

from minterpr.language.ontology import ONTOLOGY, VAGUE_COLOURS

Attrs = Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class Fact:
    """A claim about one slot: one of ``values`` holds, or (``negated``) none of them does."""

    slot: str
    values: tuple[str, ...]
    negated: bool = False

    def holds(self, attributes: Attrs) -> bool | None:
        """True/False against ground truth; None when the slot is unknown there."""
        truth = attributes.get(self.slot)
        if not truth:
            return None
        present = any(v in truth for v in self.values)
        return not present if self.negated else present


@dataclass(frozen=True)
class Phrase:
    """Text plus the facts it asserts."""

    text: str
    facts: tuple[Fact, ...] = ()


def join_words(words: list[str], conjunction: str = "and") -> str:
    """'a', 'a and b', 'a, b and c'."""
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} {conjunction} {words[-1]}"


def article(noun_phrase: str) -> str:
    """Prefix 'a'/'an' to a singular noun phrase."""
    return ("an " if noun_phrase[:1].lower() in "aeiou" else "a ") + noun_phrase


def value_word(slot: str, value: str, rng: random.Random, *, synonyms: bool = True) -> str:
    """A phrase for ``slot=value``: the canonical one or a synonym."""
    phrases = ONTOLOGY.slot(slot).value(value).phrases
    return rng.choice(phrases) if synonyms else phrases[0]


def colour_phrase(slot: str, colours: tuple[str, ...], rng: random.Random, *, vague_rate: float = 0.0) -> Phrase:
    """'red', 'black and white', or a vague 'dark' (a fact with several possible colours)."""
    if len(colours) == 1 and rng.random() < vague_rate:
        for word, meaning in VAGUE_COLOURS.items():
            if colours[0] in meaning and rng.random() < 0.6:
                return Phrase(word, (Fact(slot, meaning),))
    shown = list(colours[:2])
    rng.shuffle(shown)
    words = [value_word(slot, c, rng) for c in shown]
    return Phrase(" and ".join(words), tuple(Fact(slot, (c,)) for c in shown))


def pronouns(attributes: Attrs) -> dict[str, str]:
    """Pronoun set for question and answer templates."""
    gender = attributes.get("gender", ("",))[0]
    if gender == "male":
        return {"pronoun": "he", "possessive": "his", "object": "him", "noun": "man"}
    if gender == "female":
        return {"pronoun": "she", "possessive": "her", "object": "her", "noun": "woman"}
    return {"pronoun": "they", "possessive": "their", "object": "them", "noun": "person"}


def person_phrase(attributes: Attrs, rng: random.Random, *, slots: Iterable[str]) -> Phrase:
    """'a young woman', 'an elderly man', 'a person'."""
    slots = set(slots)
    facts: list[Fact] = []
    noun = "person"
    if "gender" in slots and "gender" in attributes:
        noun = value_word("gender", attributes["gender"][0], rng)
        facts.append(Fact("gender", attributes["gender"]))
    if "age" in slots and "age" in attributes:
        age = attributes["age"][0]
        adjective = {
            "child": "young",
            "young": "young",
            "adult": "adult",
            "middle_aged": "middle-aged",
            "senior": rng.choice(["elderly", "old"]),
        }[age]
        if age == "child":
            noun = {
                "man": "boy",
                "guy": "boy",
                "gentleman": "boy",
                "male": "boy",
                "woman": "girl",
                "lady": "girl",
                "female": "girl",
                "girl": "girl",
            }.get(noun, "child")
            adjective = ""
        elif age == "young" and noun in ("girl",):
            adjective = ""
        noun = f"{adjective} {noun}".strip()
        # "young" covers child and young adult alike when spoken; the fact says so.
        facts.append(Fact("age", ("child", "young") if age in ("child", "young") and adjective == "young" else (age,)))
    return Phrase(article(noun), tuple(facts))


def hair_phrase(attributes: Attrs, rng: random.Random, *, slots: Iterable[str]) -> Phrase:
    """'long black hair', 'short hair', 'blond hair'; bald gives 'a shaved head'."""
    slots = set(slots)
    facts: list[Fact] = []
    length = attributes.get("hair_length", ("",))[0] if "hair_length" in slots else ""
    if length == "bald":
        return Phrase(rng.choice(["a shaved head", "a bald head"]), (Fact("hair_length", ("bald",)),))
    words: list[str] = []
    if length:
        words.append(rng.choice({"short": ["short"], "long": ["long", "shoulder-length"]}[length]))
        facts.append(Fact("hair_length", (length,)))
    if "hair_colour" in slots and "hair_colour" in attributes:
        colour = attributes["hair_colour"][0]
        words.append(value_word("hair_colour", colour, rng))
        facts.append(Fact("hair_colour", (colour,)))
    return Phrase(" ".join(words + ["hair"]), tuple(facts))


def _garment(
    attributes: Attrs,
    rng: random.Random,
    slots: set[str],
    colour_slot: str,
    type_slot: str,
    pattern_slot: str | None,
    default_noun: str,
    vague_rate: float,
) -> Phrase:
    facts: list[Fact] = []
    words: list[str] = []
    if colour_slot in slots and colour_slot in attributes:
        colours = colour_phrase(colour_slot, attributes[colour_slot], rng, vague_rate=vague_rate)
        words.append(colours.text)
        facts.extend(colours.facts)
    if pattern_slot and pattern_slot in slots and attributes.get(pattern_slot, ("plain",))[0] != "plain":
        pattern = attributes[pattern_slot][0]
        words.append(
            {
                "logo": rng.choice(["logo", "printed"]),
                "plaid": rng.choice(["plaid", "checked"]),
                "thin_stripes": rng.choice(["striped", "pinstriped"]),
                "thick_stripes": rng.choice(["striped", "broad-striped"]),
            }[pattern]
        )
        # "striped" is true of thin and thick stripes alike.
        facts.append(Fact(pattern_slot, ("thin_stripes", "thick_stripes") if words[-1] == "striped" else (pattern,)))
    noun = default_noun
    if type_slot in slots and type_slot in attributes:
        value = attributes[type_slot][0]
        if value != "other":
            noun = value_word(type_slot, value, rng)
            facts.append(Fact(type_slot, (value,)))
    text = " ".join(words + [noun])
    plural = noun.endswith("s") and not noun.endswith("dress")
    return Phrase(text if plural else article(text), tuple(facts))


def upper_phrase(attributes: Attrs, rng: random.Random, *, slots: Iterable[str], vague_rate: float = 0.0) -> Phrase:
    """'a red and white striped t-shirt', 'a dark top', 'a short-sleeved shirt'."""
    slots = set(slots)
    phrase = _garment(attributes, rng, slots, "upper_colour", "upper_type", "upper_pattern", "top", vague_rate)
    if "sleeve_length" in slots and "sleeve_length" in attributes:
        sleeve = attributes["sleeve_length"][0]
        extra = {"long": "with long sleeves", "short": "with short sleeves", "sleeveless": "with no sleeves"}[sleeve]
        phrase = Phrase(f"{phrase.text} {extra}", phrase.facts + (Fact("sleeve_length", (sleeve,)),))
    return phrase


def lower_phrase(attributes: Attrs, rng: random.Random, *, slots: Iterable[str], vague_rate: float = 0.0) -> Phrase:
    """'blue jeans', 'a black short skirt', 'grey trousers'."""
    return _garment(attributes, rng, set(slots), "lower_colour", "lower_type", "lower_pattern", "bottoms", vague_rate)


def footwear_phrase(attributes: Attrs, rng: random.Random, *, slots: Iterable[str]) -> Phrase:
    """'white sneakers', 'black leather shoes'."""
    slots = set(slots)
    phrase = _garment(attributes, rng, slots, "footwear_colour", "footwear_type", None, "shoes", 0.0)
    return phrase


def items_phrase(slot: str, attributes: Attrs, rng: random.Random) -> Phrase:
    """Carried items, headwear or accessories: 'a backpack and an umbrella' / 'nothing'."""
    values = attributes.get(slot, ())
    if not values:
        return Phrase("")
    names = [value_word(slot, v, rng) for v in values]
    if ONTOLOGY.slot(slot).value(values[0]).excludes_others:
        return Phrase(names[0], (Fact(slot, values),))
    plural = ("glasses", "sunglasses", "headphones", "earphones", "shades", "spectacles", "sneakers")
    words = [n if n in plural or n.endswith("s") else article(n) for n in names]
    return Phrase(join_words(words), tuple(Fact(slot, (v,)) for v in values))


# ------------------------------------------------------------------------------ caption style
# The words real caption writers use for a value, with how often (CUHK-PEDES counts, see
# docs/language.md); a value not listed keeps its canonical phrase. "bag" states less than the
# value it is written for: it reads as a handbag or a shoulder bag (_WORD_STATES).
CAPTION_WORDS: dict[tuple[str, str], tuple[tuple[str, float], ...]] = {
    ("gender", "male"): (("man", 9.0), ("male", 0.5), ("guy", 0.3)),
    ("gender", "female"): (("woman", 7.0), ("lady", 0.8), ("girl", 0.8), ("female", 0.4)),
    ("upper_type", "tshirt"): (("t-shirt", 4.0), ("t shirt", 1.0), ("tee shirt", 0.7)),
    ("upper_type", "shirt"): (("shirt", 8.0), ("blouse", 1.0), ("button up shirt", 0.4), ("polo shirt", 0.4)),
    ("upper_type", "jacket"): (("jacket", 5.0), ("coat", 1.0)),
    ("upper_type", "sweater"): (("sweater", 3.0), ("hoodie", 0.5), ("sweatshirt", 0.5)),
    ("upper_type", "suit"): (("suit jacket", 2.0), ("blazer", 1.0)),
    ("upper_type", "vest"): (("tank top", 2.0), ("vest", 1.0)),
    ("lower_type", "trousers"): (("pants", 9.0), ("slacks", 0.3), ("trousers", 0.2)),
    ("lower_type", "suit_trousers"): (("dress pants", 2.0), ("formal trousers", 0.5)),
    ("lower_type", "hot_pants"): (("hot pants", 1.0), ("very short shorts", 1.0)),
    ("lower_type", "capri"): (("capris", 1.0), ("capri pants", 1.0)),
    ("lower_type", "short_skirt"): (("short skirt", 2.0), ("mini skirt", 1.0)),
    ("footwear_type", "sneakers"): (("sneakers", 3.0), ("tennis shoes", 2.0)),
    ("footwear_type", "leather_shoes"): (("dress shoes", 2.0), ("leather shoes", 0.5)),
    ("footwear_type", "sandals"): (("sandals", 3.0), ("flip flops", 0.5)),
    ("footwear_type", "stockings"): (("stockings", 1.0), ("tights", 1.0)),
    ("carried", "backpack"): (("backpack", 4.0), ("back pack", 0.5)),
    ("carried", "messenger_bag"): (("shoulder bag", 2.0), ("bag", 2.0)),
    ("carried", "handbag"): (("purse", 3.0), ("handbag", 1.0), ("bag", 2.0)),
    ("carried", "plastic_bag"): (("shopping bag", 2.0), ("plastic bag", 1.0)),
    ("carried", "luggage"): (("rolling suitcase", 1.0), ("luggage", 1.0)),
    ("carried", "baby_buggy"): (("stroller", 1.0),),
    ("carried", "shopping_trolley"): (("shopping cart", 1.0),),
    ("headwear", "hat"): (("hat", 2.0), ("cap", 1.0)),
    ("headwear", "hair_band"): (("headband", 1.0),),
    ("upper_colour", "grey"): (("gray", 3.0), ("grey", 2.0)),
    ("lower_colour", "grey"): (("gray", 3.0), ("grey", 2.0)),
    ("footwear_colour", "grey"): (("gray", 3.0), ("grey", 2.0)),
    ("hair_colour", "grey"): (("gray", 3.0), ("grey", 2.0)),
}
_WORD_STATES = {("carried", "bag"): ("handbag", "messenger_bag")}
# Nouns written with "a pair of" in about a third of real captions.
_PAIRS = (
    "pants",
    "jeans",
    "shorts",
    "capris",
    "slacks",
    "trousers",
    "sneakers",
    "shoes",
    "boots",
    "sandals",
    "tennis shoes",
    "dress shoes",
    "leather shoes",
    "flip flops",
    "capri pants",
    "dress pants",
    "hot pants",
)


def caption_word(slot: str, value: str, rng: random.Random) -> tuple[str, tuple[str, ...]]:
    """A word real captions use for ``slot=value`` and the values it states.

    >>> caption_word("lower_type", "trousers", random.Random(0))
    ('pants', ('trousers',))
    """
    choices = CAPTION_WORDS.get((slot, value))
    if not choices:
        return ONTOLOGY.slot(slot).value(value).phrases[0], (value,)
    word = rng.choices([w for w, _ in choices], [n for _, n in choices])[0]
    return word, _WORD_STATES.get((slot, word), (value,))


def _caption_colours(slot: str, attributes: Attrs, rng: random.Random, vague_rate: float) -> Phrase:
    colours = attributes[slot]
    if len(colours) == 1 and rng.random() < 0.6 * vague_rate:  # captions say "dark" less often than witnesses
        for word, meaning in VAGUE_COLOURS.items():
            if colours[0] in meaning and word != "bright":
                return Phrase(word, (Fact(slot, tuple(sorted(meaning))),))
    words = [caption_word(slot, c, rng)[0] for c in colours[:2]]
    return Phrase(" and ".join(words), tuple(Fact(slot, (c,)) for c in colours[:2]))


def caption_garment(
    part: str, attributes: Attrs, rng: random.Random, *, slots: Iterable[str], vague_rate: float = 0.0
) -> Phrase:
    """A garment as captions name it: 'a white short sleeved t-shirt', 'a pair of black pants',
    'gray tennis shoes' (``part`` is upper, lower or feet; only ``slots`` are mentioned)."""
    slots = set(slots)
    colour_slot, type_slot, pattern_slot = {
        "upper": ("upper_colour", "upper_type", "upper_pattern"),
        "lower": ("lower_colour", "lower_type", "lower_pattern"),
        "feet": ("footwear_colour", "footwear_type", None),
    }[part]
    facts: list[Fact] = []
    words: list[str] = []
    sleeve = attributes.get("sleeve_length", ("",))[0] if part == "upper" and "sleeve_length" in slots else ""
    sleeve_first = sleeve and rng.random() < 0.4
    if sleeve_first:
        words.append({"long": "long sleeve", "short": "short sleeved", "sleeveless": "sleeveless"}[sleeve])
    if colour_slot in slots and attributes.get(colour_slot):
        colours = _caption_colours(colour_slot, attributes, rng, vague_rate)
        words.append(colours.text)
        facts.extend(colours.facts)
    if sleeve and not sleeve_first:
        words.append({"long": "long sleeved", "short": "short sleeved", "sleeveless": "sleeveless"}[sleeve])
    if sleeve:
        facts.append(Fact("sleeve_length", (sleeve,)))
    pattern = attributes.get(pattern_slot, ("plain",))[0] if pattern_slot in slots else "plain"
    if pattern in ("plaid", "thin_stripes", "thick_stripes"):
        words.append("plaid" if pattern == "plaid" else "striped")
        facts.append(Fact(pattern_slot, (pattern,) if pattern == "plaid" else ("thick_stripes", "thin_stripes")))
    value = attributes.get(type_slot, ("",))[0] if type_slot in slots else ""
    noun = {"upper": "top", "lower": "bottoms", "feet": "shoes"}[part]
    if value and value != "other" and (type_slot, value) != ("footwear_type", "shoes"):
        noun, states = caption_word(type_slot, value, rng)
        facts.append(Fact(type_slot, states))
    if sleeve == "sleeveless" and noun == "top":  # "a sleeveless top" would read as a vest
        words.remove("sleeveless")
        noun = "top with no sleeves"
    text = " ".join(words + [noun]) + (" with a logo" if pattern == "logo" else "")
    if pattern == "logo":
        facts.append(Fact(pattern_slot, ("logo",)))
    if noun.endswith("s") and not noun.endswith("dress"):
        return Phrase(("a pair of " if noun in _PAIRS and rng.random() < 0.35 else "") + text, tuple(facts))
    return Phrase(article(text), tuple(facts))


def caption_items(slot: str, attributes: Attrs, rng: random.Random, pronoun: str) -> Phrase:
    """Carried items, headwear or accessories as captions name them: 'a backpack and a purse'."""
    words, facts = [], []
    for value in attributes.get(slot, ())[:2]:
        if ONTOLOGY.slot(slot).value(value).excludes_others:
            continue
        if (slot, value) == ("carried", "other"):
            words.append(f"something in {pronoun} hand")
            facts.append(Fact(slot, (value,)))
            continue
        word, states = caption_word(slot, value, rng)
        words.append(word if word.endswith("s") and slot == "accessories" or word == "luggage" else article(word))
        facts.append(Fact(slot, states))
    return Phrase(join_words(words), tuple(facts))
