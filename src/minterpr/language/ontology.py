"""The attribute ontology: one vocabulary of slots and values for describing pedestrians.

Every dataset's labels map into it (see :mod:`minterpr.data.label_maps`), the dialogue
synthesiser writes text from it, the user simulators answer from it, and the text parser reads
it back. Each value carries natural-language phrases: the first is canonical, the others are
synonyms ("navy" for blue, "rucksack" for backpack). Words people use that the synthesiser does not write
are in :mod:`minterpr.language.reading_words`.

Example:
    >>> ONTOLOGY.slot("upper_colour").value("blue").phrases[:2]
    ('blue', 'navy')
    >>> ONTOLOGY.slot("carried").multi
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field

COLOURS = ("black", "blue", "brown", "green", "grey", "orange", "pink", "purple", "red", "white", "yellow")

# Colour words: canonical first, then synonyms a person would use.
_COLOUR_PHRASES: dict[str, tuple[str, ...]] = {
    "black": ("black", "jet black", "dark black"),
    "blue": ("blue", "navy", "dark blue", "light blue", "denim blue"),
    "brown": ("brown", "khaki", "tan", "beige", "dark brown"),
    "green": ("green", "olive", "dark green"),
    "grey": ("grey", "gray", "charcoal", "silver"),
    "orange": ("orange",),
    "pink": ("pink", "light pink"),
    "purple": ("purple", "violet", "lilac"),
    "red": ("red", "maroon", "burgundy", "dark red"),
    "white": ("white", "off-white", "cream"),
    "yellow": ("yellow", "mustard"),
}
# Hair is described with its own words; the other colours read as dyed hair.
_HAIR_PHRASES: dict[str, tuple[str, ...]] = {
    "black": ("black", "jet black"),
    "brown": ("brown", "dark brown", "chestnut"),
    "grey": ("grey", "gray", "silver"),
    "white": ("white", "snow-white"),
    "red": ("red", "ginger", "auburn"),
    "yellow": ("blond", "blonde", "fair"),
}
# Vague colour words that witnesses use; each names the set of colours it may mean.
VAGUE_COLOURS: dict[str, tuple[str, ...]] = {
    "dark": ("black", "blue", "brown", "grey"),
    "light": ("white", "grey", "yellow", "pink"),
    "bright": ("red", "orange", "yellow", "green", "pink"),
}
# "Dark hair" is black or brown hair, not blue.
DARK_HAIR: tuple[str, ...] = ("black", "brown")


@dataclass(frozen=True)
class Value:
    """One value of a slot with the words that express it."""

    name: str  # canonical identifier, e.g. "backpack"
    phrases: tuple[str, ...]  # noun phrases, canonical first, then synonyms
    excludes_others: bool = False  # "none" values of multi slots: exclusive with every other value


@dataclass(frozen=True)
class Slot:
    """An attribute slot (gender, upper_colour, carried, ...)."""

    name: str  # identifier used in attribute dicts
    label: str  # human-readable name for questions and reports ("top colour")
    values: tuple[Value, ...]
    multi: bool = False  # several values may hold at once (colours, carried items)
    questions: tuple[str, ...] = ()  # ways to ask about the slot; {pronoun}/{possessive} filled in
    body_part: str = "whole"  # which part of the body the evidence is in: head/upper/lower/feet/whole

    def value(self, name: str) -> Value:
        """The value called ``name``; raises KeyError listing the slot's values."""
        for v in self.values:
            if v.name == name:
                return v
        raise KeyError(f"unknown value {name!r} of slot {self.name!r}: must be one of {', '.join(self.value_names)}")

    @property
    def value_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.values)


def _colour_values() -> tuple[Value, ...]:
    return tuple(Value(c, _COLOUR_PHRASES[c]) for c in COLOURS)


def _v(name: str, *phrases: str, none: bool = False) -> Value:
    return Value(name, phrases or (name.replace("_", " "),), excludes_others=none)


def _colour_slot(name: str, label: str, *, questions: tuple[str, ...], body_part: str) -> Slot:
    """A garment's colour: any of the shared colours, several at once (a striped top is two colours)."""
    return Slot(name, label, _colour_values(), multi=True, questions=questions, body_part=body_part)


_SLOTS: tuple[Slot, ...] = (
    Slot(
        "gender",
        "gender",
        (_v("male", "man", "male", "guy", "gentleman"), _v("female", "woman", "female", "lady", "girl")),
        questions=("Was it a man or a woman?", "Is the person male or female?"),
        body_part="whole",
    ),
    Slot(
        "age",
        "age",
        (
            _v("child", "child", "kid", "teenager under 15"),
            _v("young", "young adult", "young", "in their twenties", "youth"),
            _v("adult", "adult", "in their thirties or early forties", "grown-up"),
            _v("middle_aged", "middle-aged", "in their fifties", "older adult"),
            _v("senior", "elderly", "old", "senior", "over sixty"),
        ),
        questions=("How old did {pronoun} look?", "Roughly what age was {pronoun}?"),
        body_part="whole",
    ),
    Slot(
        "hair_length",
        "hair length",
        (
            _v("bald", "bald", "shaved head"),
            _v("short", "short hair", "short"),
            _v("long", "long hair", "long", "shoulder-length hair"),
        ),
        questions=("Was {possessive} hair long or short?", "How long was {possessive} hair?"),
        body_part="head",
    ),
    Slot(
        "hair_colour",
        "hair colour",
        tuple(Value(c, _HAIR_PHRASES.get(c, (c, f"dyed {c}"))) for c in COLOURS),
        questions=("What colour was {possessive} hair?", "Do you remember {possessive} hair colour?"),
        body_part="head",
    ),
    Slot(
        "upper_type",
        "top",
        (
            _v("tshirt", "t-shirt", "tee", "tee shirt"),
            _v("shirt", "shirt", "blouse", "button-up shirt"),
            _v("jacket", "jacket", "windbreaker", "coat"),
            _v("sweater", "sweater", "jumper", "pullover", "hoodie"),
            _v("suit", "suit jacket", "blazer", "suit"),
            _v("vest", "vest", "tank top", "sleeveless top"),
            _v("other", "top", "upper garment"),
        ),
        questions=("What was {pronoun} wearing on top?", "What kind of top did {pronoun} have on?"),
        body_part="upper",
    ),
    _colour_slot(
        "upper_colour",
        "top colour",
        questions=("What colour was {possessive} top?", "Which colour was the top {pronoun} wore?"),
        body_part="upper",
    ),
    Slot(
        "upper_pattern",
        "top pattern",
        (
            _v("plain", "plain", "solid-coloured"),
            _v("logo", "logo", "print", "graphic"),
            _v("plaid", "plaid", "checked", "tartan"),
            _v("thin_stripes", "thin stripes", "pinstripes"),
            _v("thick_stripes", "thick stripes", "broad stripes"),
        ),
        questions=("Did {possessive} top have a pattern or a logo?", "Was {possessive} top plain or patterned?"),
        body_part="upper",
    ),
    Slot(
        "sleeve_length",
        "sleeve length",
        (
            _v("long", "long sleeves", "long-sleeved"),
            _v("short", "short sleeves", "short-sleeved"),
            _v("sleeveless", "no sleeves", "sleeveless"),
        ),
        questions=("Were {possessive} sleeves long or short?", "Did {pronoun} wear long or short sleeves?"),
        body_part="upper",
    ),
    Slot(
        "upper_style",
        "top style",
        (_v("casual", "casual"), _v("formal", "formal", "smart", "business")),
        questions=("Was {possessive} top casual or formal?",),
        body_part="upper",
    ),
    Slot(
        "neckline",
        "neckline",
        (_v("v_neck", "v-neck", "v neckline"), _v("round", "round neck", "crew neck")),
        questions=("What neckline did {possessive} top have?",),
        body_part="upper",
    ),
    Slot(
        "lower_type",
        "bottoms",
        (
            _v("jeans", "jeans", "denim trousers"),
            _v("trousers", "trousers", "pants", "slacks"),
            _v("suit_trousers", "suit trousers", "dress pants", "formal trousers"),
            _v("shorts", "shorts"),
            _v("hot_pants", "hot pants", "very short shorts"),
            _v("capri", "capri pants", "cropped pants", "three-quarter pants"),
            _v("short_skirt", "short skirt", "miniskirt"),
            _v("long_skirt", "long skirt", "maxi skirt"),
            _v("dress", "dress", "long dress"),
        ),
        questions=(
            "What was {pronoun} wearing on {possessive} legs?",
            "Did {pronoun} wear trousers, shorts or a skirt?",
        ),
        body_part="lower",
    ),
    _colour_slot(
        "lower_colour",
        "bottoms colour",
        questions=("What colour were {possessive} trousers or skirt?", "What colour was {possessive} lower garment?"),
        body_part="lower",
    ),
    Slot(
        "lower_pattern",
        "bottoms pattern",
        (
            _v("plain", "plain", "solid-coloured"),
            _v("plaid", "plaid", "checked"),
            _v("thin_stripes", "thin stripes", "pinstripes"),
            _v("thick_stripes", "thick stripes", "broad stripes"),
            _v("logo", "logo", "print"),
        ),
        questions=("Did {possessive} bottoms have a pattern?",),
        body_part="lower",
    ),
    Slot(
        "lower_length",
        "bottoms length",
        (_v("long", "long", "full-length"), _v("short", "short", "knee-length or shorter")),
        questions=("Were {possessive} trousers or skirt long or short?",),
        body_part="lower",
    ),
    Slot(
        "lower_style",
        "bottoms style",
        (_v("casual", "casual"), _v("formal", "formal", "smart")),
        questions=("Were {possessive} bottoms casual or formal?",),
        body_part="lower",
    ),
    Slot(
        "footwear_type",
        "shoes",
        (
            _v("sneakers", "sneakers", "trainers", "running shoes"),
            _v("leather_shoes", "leather shoes", "dress shoes"),
            _v("shoes", "shoes", "regular shoes"),
            _v("boots", "boots"),
            _v("sandals", "sandals", "flip-flops"),
            _v("stockings", "stockings", "tights"),
        ),
        questions=("What kind of shoes was {pronoun} wearing?", "Did you see {possessive} shoes?"),
        body_part="feet",
    ),
    _colour_slot(
        "footwear_colour",
        "shoe colour",
        questions=("What colour were {possessive} shoes?", "Do you remember the colour of {possessive} shoes?"),
        body_part="feet",
    ),
    Slot(
        "carried",
        "carried items",
        (
            _v("backpack", "backpack", "rucksack", "school bag"),
            _v("messenger_bag", "shoulder bag", "messenger bag", "satchel"),
            _v("handbag", "handbag", "purse"),
            _v("suitcase", "suitcase", "briefcase"),
            _v("luggage", "rolling luggage", "trolley case"),
            _v("plastic_bag", "plastic bag", "shopping bag"),
            _v("umbrella", "umbrella"),
            _v("folder", "folder", "file folder"),
            _v("baby_buggy", "baby buggy", "pushchair", "stroller"),
            _v("shopping_trolley", "shopping trolley", "shopping cart"),
            _v("other", "object in hand", "item in hand"),
            _v("nothing", "nothing", "no bag", "empty hands", none=True),
        ),
        multi=True,
        questions=("Was {pronoun} carrying anything?", "Did {pronoun} have a bag with {object}?"),
        body_part="whole",
    ),
    Slot(
        "headwear",
        "headwear",
        (
            _v("hat", "hat", "cap", "beanie"),
            _v("hair_band", "hair band", "headband"),
            _v("none", "nothing on the head", "no hat", none=True),
        ),
        multi=True,
        questions=("Was {pronoun} wearing a hat or anything on {possessive} head?",),
        body_part="head",
    ),
    Slot(
        "accessories",
        "accessories",
        (
            _v("glasses", "glasses", "spectacles"),
            _v("sunglasses", "sunglasses", "shades"),
            _v("headphones", "headphones", "earphones"),
            _v("scarf", "scarf", "muffler"),
            _v("kerchief", "kerchief", "neckerchief"),
            _v("face_mask", "face mask", "mask"),
            _v("shawl", "shawl", "wrap"),
            _v("none", "no accessories", "nothing else", none=True),
        ),
        multi=True,
        questions=("Did you notice any accessories, like glasses or a scarf?",),
        body_part="head",
    ),
)


@dataclass(frozen=True)
class Ontology:
    """The set of slots; look-ups raise errors that list what exists."""

    slots: tuple[Slot, ...] = field(default=_SLOTS)

    def slot(self, name: str) -> Slot:
        for s in self.slots:
            if s.name == name:
                return s
        raise KeyError(f"unknown slot {name!r}: must be one of {', '.join(self.slot_names)}")

    @property
    def slot_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.slots)

    def validate(self, attributes: dict[str, tuple[str, ...]] | object) -> dict[str, tuple[str, ...]]:
        """Check and normalise an attribute dict: known slots and values, sorted unique tuples.

        Raises ValueError naming the slot or value at fault.
        """
        if not isinstance(attributes, dict):
            raise ValueError(f"attributes must be a mapping of slot -> values, got {type(attributes).__name__}")
        out: dict[str, tuple[str, ...]] = {}
        for slot_name, values in attributes.items():
            try:
                slot = self.slot(slot_name)
            except KeyError as exc:
                raise ValueError(str(exc.args[0])) from None
            if isinstance(values, str):
                values = (values,)
            values = tuple(sorted(set(values)))
            if not values:
                raise ValueError(f"slot {slot_name!r} has an empty value list (omit unknown slots instead)")
            for name in values:
                if name not in slot.value_names:
                    raise ValueError(
                        f"unknown value {name!r} of slot {slot_name!r}: must be one of {', '.join(slot.value_names)}"
                    )
            if not slot.multi and len(values) > 1:
                raise ValueError(f"slot {slot_name!r} takes one value, got {list(values)}")
            exclusive = [v for v in values if slot.value(v).excludes_others]
            if exclusive and len(values) > 1:
                raise ValueError(f"slot {slot_name!r}: {exclusive[0]!r} excludes the other values {list(values)}")
            out[slot_name] = values
        return out

    def flat_labels(self) -> list[tuple[str, str]]:
        """Every (slot, value) pair, in a fixed order: the attribute head's output units."""
        return [(s.name, v.name) for s in self.slots for v in s.values]

    def slot_columns(self) -> dict[str, list[int]]:
        """Slot name -> the positions of its values in :meth:`flat_labels`, in value order.

        Example:
            >>> ONTOLOGY.slot_columns()["gender"]
            [0, 1]
        """
        columns: dict[str, list[int]] = {}
        for j, (slot, _) in enumerate(self.flat_labels()):
            columns.setdefault(slot, []).append(j)
        return columns


ONTOLOGY = Ontology()
