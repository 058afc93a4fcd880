"""The sentences of a dialogue: descriptions, questions, answers and corrective feedback.

Each function returns a :class:`~minterpr.language.phrasing.Phrase`: the text and the facts it
asserts about the target. The dialogue synthesiser and the attribute-oracle user simulator both
speak through these functions, so their language is the same.

Example:
    >>> import random
    >>> attrs = {"gender": ("female",), "upper_colour": ("red",), "carried": ("backpack",)}
    >>> answer("carried", attrs, random.Random(1)).text
    'Yes, a backpack.'
"""

from __future__ import annotations

import random
from typing import Sequence

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import (
    Attrs,
    article,
    Fact,
    Phrase,
    colour_phrase,
    footwear_phrase,
    hair_phrase,
    items_phrase,
    lower_phrase,
    person_phrase,
    pronouns,
    upper_phrase,
    value_word,
)

# Slots a description or question may be about, with how often a witness mentions each.
SALIENCE: dict[str, float] = {
    "gender": 3.0,
    "upper_colour": 3.0,
    "upper_type": 1.5,
    "lower_colour": 2.0,
    "lower_type": 2.0,
    "hair_length": 1.2,
    "hair_colour": 0.8,
    "carried": 1.5,
    "footwear_colour": 0.8,
    "footwear_type": 0.6,
    "upper_pattern": 0.6,
    "sleeve_length": 0.6,
    "age": 0.5,
    "headwear": 0.5,
    "accessories": 0.4,
    "lower_pattern": 0.2,
    "lower_length": 0.2,
    "neckline": 0.1,
    "upper_style": 0.1,
    "lower_style": 0.1,
}
ASKABLE_SLOTS = tuple(SALIENCE)
# Values too unremarkable to volunteer in a description (they are still answered when asked).
_UNREMARKABLE = {
    ("carried", "nothing"),
    ("headwear", "none"),
    ("accessories", "none"),
    ("upper_pattern", "plain"),
    ("upper_type", "other"),
}
_GROUPS = {
    "person": ("gender", "age"),
    "hair": ("hair_length", "hair_colour"),
    "upper": ("upper_colour", "upper_type", "upper_pattern", "sleeve_length"),
    "lower": ("lower_colour", "lower_type"),
    "feet": ("footwear_colour", "footwear_type"),
    "carried": ("carried",),
    "headwear": ("headwear",),
    "accessories": ("accessories",),
}
DONT_KNOW = ("I didn't notice.", "Not sure.", "I don't remember.", "I couldn't see that.", "No idea, sorry.")


def _is_plural(noun_phrase: str) -> bool:
    return noun_phrase.endswith("s") and not noun_phrase.endswith(("dress", "glass"))


def _counted(noun_phrase: str) -> str:
    """'a jacket' but 'jeans'."""
    return noun_phrase if _is_plural(noun_phrase) else article(noun_phrase)


def capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def mentionable(slot: str, attributes: Attrs) -> bool:
    """Whether a witness would volunteer the slot: its value is known and not unremarkable ("carrying nothing")."""
    values = attributes.get(slot)
    return bool(values) and not any((slot, v) in _UNREMARKABLE for v in values)


def choose_description_slots(attributes: Attrs, rng: random.Random, *, max_slots: int = 4) -> list[str]:
    """1 to ``max_slots`` slots a witness would remember, weighted by salience."""
    describable = {s for members in _GROUPS.values() for s in members}
    candidates = [s for s in SALIENCE if s in describable and mentionable(s, attributes)]
    count = min(len(candidates), rng.choice([1, 2, 2, 3, 3, 4][: max(1, 2 * max_slots - 2)]))
    chosen: list[str] = []
    while len(chosen) < count:
        weights = [SALIENCE[s] for s in candidates]
        pick = rng.choices(candidates, weights)[0]
        candidates.remove(pick)
        chosen.append(pick)
    others = [s for s in candidates if s not in _GROUPS["person"]]
    if set(chosen) <= set(_GROUPS["person"]) and others:  # a description needs more than "a man"
        chosen.append(rng.choices(others, [SALIENCE[s] for s in others])[0])
    return chosen


def description(attributes: Attrs, slots: Sequence[str], rng: random.Random, *, vague_rate: float = 0.25) -> Phrase:
    """A witness's initial description mentioning exactly ``slots`` (CUHK-PEDES-like sentences)."""
    slots = set(slots)
    wanted = {g: [s for s in members if s in slots] for g, members in _GROUPS.items()}
    person = person_phrase(attributes, rng, slots=wanted["person"])
    wear: list[Phrase] = []
    if wanted["upper"]:
        wear.append(upper_phrase(attributes, rng, slots=wanted["upper"], vague_rate=vague_rate))
    if wanted["lower"]:
        wear.append(lower_phrase(attributes, rng, slots=wanted["lower"], vague_rate=vague_rate))
    if wanted["feet"]:
        wear.append(footwear_phrase(attributes, rng, slots=wanted["feet"]))
    for slot in ("headwear", "accessories"):
        if wanted[slot]:
            wear.append(items_phrase(slot, attributes, rng))
    hair = hair_phrase(attributes, rng, slots=wanted["hair"]) if wanted["hair"] else None
    carry = items_phrase("carried", attributes, rng) if wanted["carried"] else None
    facts = list(person.facts) + [f for p in wear for f in p.facts]
    facts += list(hair.facts) if hair else []
    facts += list(carry.facts) if carry else []
    wear_text = (
        ", ".join(p.text for p in wear[:-1]) + (" and " if len(wear) > 1 else "") + (wear[-1].text if wear else "")
    )
    pron = pronouns({"gender": attributes["gender"]} if "gender" in slots else {})
    subject = person.text if person.text != "a person" else rng.choice(["a person", "someone", "a pedestrian"])
    form = rng.randrange(4)
    if form == 1 and "gender" not in slots:  # "the person ... they has" reads badly: other forms
        form = rng.choice([0, 2, 3])
    parts: list[str] = []
    if form == 0 or (form == 3 and not wear):
        # "A man with short hair wearing a red jacket and carrying a backpack."
        clause = subject + (f" with {hair.text}" if hair else "")
        tail = [f"wearing {wear_text}"] if wear else []
        tail += [f"carrying {carry.text}"] if carry else []
        parts.append(capitalised(clause + (" " + " and ".join(tail) if tail else "") + "."))
    elif form == 1:
        # "The woman is wearing a red top. She has long hair and is carrying a backpack."
        noun = subject.split(" ", 1)[1] if subject.startswith(("a ", "an ")) else subject
        first = f"The {noun} is wearing {wear_text}." if wear else f"The {noun} has {hair.text if hair else 'no bag'}."
        parts.append(first if wear or hair else f"The {noun}.")
        rest = ([f"has {hair.text}"] if hair and wear else []) + ([f"is carrying {carry.text}"] if carry else [])
        if rest:
            parts.append(f"{capitalised(pron['pronoun'])} {' and '.join(rest)}.")
    elif form == 2:
        # "I'm looking for a young man in dark trousers, carrying a shoulder bag."
        lead = rng.choice(["I'm looking for", "I saw", "I remember"])
        clause = f"{lead} {subject}" + (f" in {wear_text}" if wear else "") + (f" with {hair.text}" if hair else "")
        parts.append(clause + (f", carrying {carry.text}" if carry else "") + ".")
    else:
        # "Wearing a red jacket and blue jeans, a woman with long hair."
        tail = f"{subject}" + (f" with {hair.text}" if hair else "") + (f", carrying {carry.text}" if carry else "")
        parts.append(f"Wearing {wear_text}, {tail}.")
    return Phrase(" ".join(parts), tuple(facts))


def question(slot: str, known_attributes: Attrs, rng: random.Random) -> str:
    """A question about ``slot``; pronouns follow what the system already knows of gender."""
    template = rng.choice(ONTOLOGY.slot(slot).questions)
    text = template.format(**pronouns(known_attributes))
    # Singular "they" takes plural verbs.
    text = text.replace("was they", "were they").replace("Was they", "Were they")
    return capitalised(text)


def answer(slot: str, attributes: Attrs, rng: random.Random) -> Phrase:
    """The user's answer about ``slot`` from ground truth; 'not sure' when the label is unknown."""
    values = attributes.get(slot)
    if not values:
        return Phrase(rng.choice(DONT_KNOW))
    p = pronouns(attributes)
    if slot.endswith("_colour"):
        colours = colour_phrase(slot, values, rng)
        thing = _THING[slot]
        verb = "were" if thing.endswith("s") else "was"
        text = rng.choice(
            [
                f"{capitalised(colours.text)}.",
                f"{capitalised(p['possessive'])} {thing} {verb} {colours.text}.",
                f"I think {colours.text}.",
            ]
        )
        return Phrase(text, colours.facts)
    if slot in ("carried", "headwear", "accessories"):
        items = items_phrase(slot, attributes, rng)
        if ONTOLOGY.slot(slot).value(values[0]).excludes_others:
            text = {
                "carried": [f"No, {p['pronoun']} wasn't carrying anything.", "No bag, empty hands."],
                "headwear": ["No hat.", "Nothing on the head."],
                "accessories": ["No, nothing like that.", "No accessories that I saw."],
            }[slot]
            return Phrase(rng.choice(text), items.facts)
        return Phrase(rng.choice([f"Yes, {items.text}.", f"{capitalised(items.text)}."]), items.facts)
    if slot in ("hair_length",):
        hair = hair_phrase(attributes, rng, slots=(slot,))
        return Phrase(f"{capitalised(hair.text)}.", hair.facts)
    if slot == "gender":
        person = person_phrase(attributes, rng, slots=("gender",))
        return Phrase(f"{capitalised(person.text)}.", person.facts)
    if slot == "sleeve_length":
        word = value_word(slot, values[0], rng)
        return Phrase(f"{capitalised(word)}.", (Fact(slot, values),))
    if slot == "upper_pattern" and values[0] == "plain":
        return Phrase(rng.choice(["It was plain.", "Plain, no pattern."]), (Fact(slot, values),))
    word = value_word(slot, values[0], rng)
    if slot == "age":
        return Phrase(f"{capitalised(p['pronoun'])} looked {word}.", (Fact(slot, values),))
    if slot in ("upper_type", "lower_type", "footwear_type", "upper_pattern"):
        phrase = {"upper_type": upper_phrase, "lower_type": lower_phrase}.get(slot)
        if phrase is not None:
            garment = phrase(attributes, rng, slots=(slot,))
            if garment.facts:
                return Phrase(
                    rng.choice([f"{capitalised(garment.text)}.", f"{capitalised(p['pronoun'])} wore {garment.text}."]),
                    garment.facts,
                )
            return Phrase(rng.choice(DONT_KNOW))
        if slot == "footwear_type":
            shoes = footwear_phrase(attributes, rng, slots=(slot,))
            return Phrase(f"{capitalised(shoes.text)}.", shoes.facts)
        text = {
            "logo": "It had a logo.",
            "plaid": f"It was {word}.",
            "thin_stripes": "It had thin stripes.",
            "thick_stripes": "It had broad stripes.",
        }[values[0]]
        return Phrase(text, (Fact(slot, values),))
    return Phrase(f"{capitalised(word)}.", (Fact(slot, values),))


# Slots compared when writing feedback on a reference image, most noticeable first.
FEEDBACK_SLOTS = (
    "gender",
    "upper_colour",
    "lower_colour",
    "lower_type",
    "upper_type",
    "carried",
    "hair_length",
    "hair_colour",
    "footwear_colour",
    "sleeve_length",
    "headwear",
    "upper_pattern",
    "footwear_type",
    "accessories",
    "age",
)
_CONFIRMABLE = (
    "upper_colour",
    "lower_colour",
    "footwear_colour",
    "hair_colour",
    "upper_type",
    "lower_type",
    "footwear_type",
    "carried",
)
_THING = {"upper_colour": "top", "lower_colour": "bottoms", "footwear_colour": "shoes", "hair_colour": "hair"}


def _difference(slot: str, target: Attrs, reference: Attrs, rng: random.Random) -> Phrase:
    """One sentence on how the target differs from the reference in ``slot``."""
    t_values, r_values = target[slot], reference[slot]
    p = pronouns(target)
    if slot.endswith("_colour"):
        right = colour_phrase(slot, t_values, rng)
        wrong = [v for v in r_values if v not in t_values]
        wrong_word = value_word(slot, wrong[0], rng) if wrong else ""
        thing = _THING[slot]
        verb = "were" if thing.endswith("s") else "was"
        negation = (Fact(slot, (wrong[0],), negated=True),) if wrong else ()
        text = rng.choice(
            [
                f"{p['possessive']} {thing} {verb} {right.text}" + (f", not {wrong_word}" if wrong else ""),
                f"the {thing} should be {right.text}" + (f" rather than {wrong_word}" if wrong else ""),
            ]
        )
        return Phrase(text, right.facts + negation)
    if slot in ("carried", "headwear", "accessories"):
        missing = [v for v in r_values if v not in t_values and not ONTOLOGY.slot(slot).value(v).excludes_others]
        if missing:
            item = value_word(slot, missing[0], rng)
            text = rng.choice(
                [f"{p['pronoun']} had no {item}", f"there {'were' if _is_plural(item) else 'was'} no {item}"]
            )
            return Phrase(text, (Fact(slot, (missing[0],), negated=True),))
        items = items_phrase(slot, target, rng)
        if ONTOLOGY.slot(slot).value(t_values[0]).excludes_others:
            return Phrase(f"{p['pronoun']} had nothing like that", items.facts)
        return Phrase(f"{p['pronoun']} had {items.text}", items.facts)
    right_word = value_word(slot, t_values[0], rng)
    wrong_word = value_word(slot, r_values[0], rng)
    facts = (Fact(slot, t_values), Fact(slot, r_values, negated=True))
    if slot == "gender":
        return Phrase(f"it was {article(right_word)}, not {article(wrong_word)}", facts)
    if slot in ("hair_length", "sleeve_length", "age", "upper_pattern"):
        label = ONTOLOGY.slot(slot).label
        return Phrase(f"the {label} is wrong: {right_word}, not {wrong_word}", facts)
    right_word, wrong_word = _counted(right_word), _counted(wrong_word)
    return Phrase(
        rng.choice([f"{p['pronoun']} wore {right_word}, not {wrong_word}", f"{right_word} rather than {wrong_word}"]),
        facts,
    )


def feedback(
    target: Attrs, reference: Attrs, rng: random.Random, *, max_differences: int = 2, confirm_rate: float = 0.4
) -> Phrase:
    """Corrective feedback on a reference image of another person, compared with the target.

    Names one or two differences in known slots and sometimes confirms a matching one.
    """
    p = pronouns(target)
    differing = [
        s
        for s in FEEDBACK_SLOTS
        if target.get(s) and reference.get(s) and target[s] != reference[s] and "other" not in target[s] + reference[s]
    ]
    matching = [
        s for s in FEEDBACK_SLOTS if target.get(s) and target.get(s) == reference.get(s) and mentionable(s, target)
    ]
    opener = rng.choice([f"Not {p['object']}.", f"No, that's not {p['object']}.", "That's not the person.", "No."])
    if not differing:
        verb = "look" if p["pronoun"] == "they" else "looks"  # "they look", "she looks"
        return Phrase(f"{opener} But {p['pronoun']} {verb} very similar.")
    # Favour the most noticeable differences, with some variety.
    count = min(len(differing), rng.choice([1, 2, 2][: max(1, max_differences + 1)]), max_differences)
    chosen = rng.sample(differing[: count + 2], count)
    differences = [_difference(s, target, reference, rng) for s in chosen]
    sentence = f"{opener} " + capitalised(" and ".join(d.text for d in differences)) + "."
    facts = tuple(f for d in differences for f in d.facts)
    touched = {ONTOLOGY.slot(s).body_part for s in chosen}
    matching = [s for s in matching if ONTOLOGY.slot(s).body_part not in touched and s in _CONFIRMABLE]
    if matching and rng.random() < confirm_rate:
        slot = rng.choice(matching)
        if slot.endswith("_colour"):
            colours = colour_phrase(slot, target[slot], rng)
            same, same_facts = f"{colours.text} {_THING[slot]}", colours.facts
        else:
            same, same_facts = value_word(slot, target[slot][0], rng), (Fact(slot, target[slot]),)
        verb = "are" if _is_plural(same) else "is"
        sentence += rng.choice([f" The {same} {verb} right, though.", f" But the {same} {verb} right."])
        facts += same_facts
    return Phrase(sentence, facts)
