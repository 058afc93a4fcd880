"""Sample synthetic pedestrian identities: full ontology attribute dicts with real-world correlations.

Each identity sets every slot of :data:`~minterpr.language.ontology.ONTOLOGY`. The frequencies are
hand-set to resemble pedestrian attribute datasets (PETA, PA-100K): dark and neutral colours
dominate, most people carry nothing or a backpack, skirts and dresses are worn mostly by women,
formal tops go with suit trousers and leather shoes, seniors have grey hair more often.

Near-twins, identities that differ from another in one visible slot, are drawn in
:mod:`minterpr.data.synthetic.twins`.

Example:
    >>> import numpy as np
    >>> attrs = sample_identity(np.random.default_rng(0))
    >>> ONTOLOGY.validate(dict(attrs)) == attrs
    True
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from minterpr.language.ontology import ONTOLOGY

Attrs = dict[str, tuple[str, ...]]

# Garment colour frequencies (roughly PETA/PA-100K): neutrals common, pink/purple/orange rare.
COLOUR_FREQ = {
    "black": 0.25,
    "white": 0.17,
    "grey": 0.14,
    "blue": 0.14,
    "red": 0.07,
    "brown": 0.06,
    "green": 0.05,
    "yellow": 0.04,
    "pink": 0.03,
    "purple": 0.025,
    "orange": 0.025,
}
_FORMAL_COLOURS = {"black": 0.42, "grey": 0.25, "blue": 0.2, "brown": 0.08, "white": 0.05}
_SHIRT_UNDER_SUIT = {"white": 0.7, "blue": 0.15, "grey": 0.05, "pink": 0.05, "black": 0.05}
HAIR_COLOUR_FREQ = {
    "black": 0.5,
    "brown": 0.3,
    "yellow": 0.12,
    "red": 0.03,
    "grey": 0.025,
    "white": 0.005,
    "blue": 0.005,
    "pink": 0.005,
    "purple": 0.005,
    "green": 0.0025,
    "orange": 0.0025,
}
CARRIED_FREQ = {
    "nothing": 0.42,
    "backpack": 0.22,
    "messenger_bag": 0.14,
    "handbag": 0.07,
    "plastic_bag": 0.05,
    "other": 0.035,
    "umbrella": 0.03,
    "suitcase": 0.02,
    "luggage": 0.02,
    "folder": 0.02,
    "baby_buggy": 0.01,
    "shopping_trolley": 0.01,
}
ACCESSORY_FREQ = {
    "none": 0.7,
    "glasses": 0.12,
    "sunglasses": 0.05,
    "scarf": 0.05,
    "headphones": 0.04,
    "face_mask": 0.025,
    "kerchief": 0.01,
    "shawl": 0.005,
}
_LOWER_LENGTH = {
    "jeans": "long",
    "trousers": "long",
    "suit_trousers": "long",
    "long_skirt": "long",
    "shorts": "short",
    "hot_pants": "short",
    "capri": "short",
    "short_skirt": "short",
}

# Tops that are the upper part of a dress (drawn as one garment with the lower_type "dress").
DRESS_BODICES = ("vest", "tshirt", "other")


def weighted_pick(rng: np.random.Generator, probs: Mapping[str, float]) -> str:
    names = list(probs)
    p = np.asarray([probs[n] for n in names], dtype=np.float64)
    return names[int(rng.choice(len(names), p=p / p.sum()))]


def _reweight(probs: Mapping[str, float], **factors: float) -> dict[str, float]:
    return {k: v * factors.get(k, 1.0) for k, v in probs.items()}


def _colours(rng: np.random.Generator, probs: Mapping[str, float], p_two: float) -> tuple[str, ...]:
    first = weighted_pick(rng, probs)
    if rng.random() < p_two:
        rest = {k: v for k, v in probs.items() if k != first}
        return (first, weighted_pick(rng, rest))
    return (first,)


def _head(rng: np.random.Generator, gender: str, age: str) -> Attrs:
    older = age in ("middle_aged", "senior")
    if gender == "male":
        hair_len = {"bald": 0.2 if older else 0.04, "short": 0.88, "long": 0.06}
    else:
        hair_len = {"bald": 0.005, "short": 0.3, "long": 0.695}
    if age == "child":
        hair_len["bald"] = 0.0
    hair_col = dict(HAIR_COLOUR_FREQ)
    if age == "senior":
        hair_col = _reweight(hair_col, grey=18.0, white=60.0)
    elif age == "middle_aged":
        hair_col = _reweight(hair_col, grey=8.0, white=5.0)
    length = weighted_pick(rng, hair_len)
    headwear = {"none": 0.85, "hat": 0.12, "hair_band": 0.03 if length == "long" else 0.0}
    acc = dict(ACCESSORY_FREQ)
    if older:
        acc = _reweight(acc, glasses=2.5, headphones=0.3)
    if gender == "male":
        acc["shawl"] = 0.0
    accessories = [weighted_pick(rng, acc)]
    if accessories[0] != "none" and rng.random() < 0.12:  # a second accessory, e.g. glasses + scarf
        accessories.append(weighted_pick(rng, {k: v for k, v in acc.items() if k not in ("none", accessories[0])}))
    return {
        "hair_length": (length,),
        "hair_colour": (weighted_pick(rng, hair_col),),
        "headwear": (weighted_pick(rng, headwear),),
        "accessories": tuple(accessories),
    }


def _upper(rng: np.random.Generator, gender: str, age: str, dress: bool) -> Attrs:
    p_formal = {"child": 0.01, "young": 0.08, "adult": 0.2, "middle_aged": 0.25, "senior": 0.12}[age]
    style = "formal" if rng.random() < p_formal and not dress else "casual"
    if style == "formal":
        kind = weighted_pick(rng, {"suit": 0.6, "shirt": 0.35, "sweater": 0.05})
    elif dress:  # the dress's own bodice (vest, tshirt, other), or a top worn over it
        kind = weighted_pick(rng, {"vest": 0.35, "tshirt": 0.3, "other": 0.1, "jacket": 0.15, "sweater": 0.1})
    else:
        kind = weighted_pick(
            rng, {"tshirt": 0.34, "shirt": 0.13, "jacket": 0.26, "sweater": 0.15, "vest": 0.05, "other": 0.04}
        )
    sleeves = {
        "tshirt": {"short": 0.92, "long": 0.08},
        "shirt": {"long": 0.6, "short": 0.4},
        "jacket": {"long": 1.0},
        "suit": {"long": 1.0},
        "sweater": {"long": 0.97, "short": 0.03},
        "vest": {"sleeveless": 1.0},
        "other": {"long": 0.5, "short": 0.4, "sleeveless": 0.1},
    }[kind]
    neck = {"tshirt": 0.25, "shirt": 0.7, "suit": 1.0, "sweater": 0.3, "jacket": 0.5, "vest": 0.4, "other": 0.4}[
        kind
    ]  # P(v-neck)
    if kind == "suit":
        colours = (weighted_pick(rng, _FORMAL_COLOURS),)
        if rng.random() < 0.8:  # the shirt shows in the V of the lapels
            shirt = weighted_pick(rng, {k: v for k, v in _SHIRT_UNDER_SUIT.items() if k != colours[0]})
            colours = (colours[0], shirt)
    elif style == "formal":
        colours = _colours(rng, _reweight(_FORMAL_COLOURS, white=10.0), p_two=0.1)
    else:
        probs = _reweight(COLOUR_FREQ, pink=2.5, purple=2.0, red=1.4) if gender == "female" else COLOUR_FREQ
        colours = _colours(rng, probs, p_two=0.45 if kind == "jacket" else 0.22)
    if style == "formal":
        pattern = weighted_pick(rng, {"plain": 0.85, "thin_stripes": 0.1, "plaid": 0.05})
    else:
        logo = 0.2 if kind in ("tshirt", "sweater") else 0.04
        plaid = 0.15 if kind == "shirt" else 0.03
        pattern = weighted_pick(
            rng, {"plain": 0.68, "logo": logo, "plaid": plaid, "thin_stripes": 0.06, "thick_stripes": 0.06}
        )
    if pattern in ("thin_stripes", "thick_stripes", "plaid") and len(colours) == 1 and rng.random() < 0.6:
        colours = (colours[0], weighted_pick(rng, {k: v for k, v in COLOUR_FREQ.items() if k != colours[0]}))
    return {
        "upper_type": (kind,),
        "upper_colour": colours,
        "upper_pattern": (pattern,),
        "sleeve_length": (weighted_pick(rng, sleeves),),
        "upper_style": (style,),
        "neckline": ("v_neck" if rng.random() < neck else "round",),
    }


def _lower(rng: np.random.Generator, gender: str, upper: Attrs, dress: bool) -> Attrs:
    kind_up, style_up = upper["upper_type"][0], upper["upper_style"][0]
    if dress:
        if kind_up in DRESS_BODICES:  # one garment: the skirt carries the bodice's labels
            colours, pattern = upper["upper_colour"], upper["upper_pattern"][0]
            pattern = "plain" if pattern == "logo" else pattern
        else:  # a jacket or sweater over the dress
            colours = _colours(rng, _reweight(COLOUR_FREQ, pink=2.0, purple=2.0, red=1.5), p_two=0.15)
            pattern = weighted_pick(rng, {"plain": 0.8, "plaid": 0.06, "thin_stripes": 0.07, "thick_stripes": 0.07})
        return {
            "lower_type": ("dress",),
            "lower_colour": colours,
            "lower_pattern": (pattern,),
            "lower_length": (weighted_pick(rng, {"short": 0.6, "long": 0.4}),),
            "lower_style": ("casual",),
        }
    p_formal = 0.97 if kind_up == "suit" else 0.85 if style_up == "formal" else 0.03
    style = "formal" if rng.random() < p_formal else "casual"
    if style == "formal" and kind_up == "suit":  # a suit: its own trousers, or a skirt suit
        probs = (
            {"suit_trousers": 0.95, "trousers": 0.05}
            if gender == "male"
            else {"suit_trousers": 0.6, "trousers": 0.1, "short_skirt": 0.18, "long_skirt": 0.12}
        )
    elif style == "formal":
        probs = (
            {"suit_trousers": 0.6, "trousers": 0.4}
            if gender == "male"
            else {"suit_trousers": 0.35, "trousers": 0.3, "long_skirt": 0.15, "short_skirt": 0.2}
        )
    elif gender == "male":
        probs = {
            "jeans": 0.45,
            "trousers": 0.33,
            "shorts": 0.18,
            "capri": 0.03,
            "short_skirt": 0.005,
            "long_skirt": 0.005,
        }
    else:
        probs = {
            "jeans": 0.32,
            "trousers": 0.2,
            "shorts": 0.08,
            "hot_pants": 0.05,
            "capri": 0.07,
            "short_skirt": 0.15,
            "long_skirt": 0.13,
        }
    kind = weighted_pick(rng, probs)
    if kind == "jeans":
        colours = (weighted_pick(rng, {"blue": 0.8, "black": 0.12, "grey": 0.05, "white": 0.03}),)
    elif kind == "suit_trousers" and kind_up == "suit" and rng.random() < 0.85:
        colours = upper["upper_colour"][:1]  # the suit's trousers match its jacket
    elif style == "formal":
        colours = (weighted_pick(rng, _FORMAL_COLOURS),)
    else:
        neutral = _reweight(COLOUR_FREQ, black=1.6, grey=1.3, brown=1.5, blue=1.2, white=0.5, yellow=0.5)
        colours = _colours(rng, neutral, p_two=0.08)
    if kind == "jeans" or style == "formal":
        pattern = weighted_pick(rng, {"plain": 0.97, "thin_stripes": 0.03})
    elif kind in ("short_skirt", "long_skirt"):
        pattern = weighted_pick(
            rng, {"plain": 0.82, "plaid": 0.09, "thin_stripes": 0.03, "thick_stripes": 0.03, "logo": 0.03}
        )
    else:
        pattern = weighted_pick(
            rng, {"plain": 0.93, "plaid": 0.02, "thin_stripes": 0.02, "thick_stripes": 0.01, "logo": 0.02}
        )
    return {
        "lower_type": (kind,),
        "lower_colour": colours,
        "lower_pattern": (pattern,),
        "lower_length": (_LOWER_LENGTH[kind],),
        "lower_style": (style,),
    }


def _feet(rng: np.random.Generator, gender: str, lower: Attrs, formal: bool) -> Attrs:
    kind_low, short = lower["lower_type"][0], lower["lower_length"][0] == "short"
    if formal:
        probs = {"leather_shoes": 0.75, "shoes": 0.2, "boots": 0.05}
    else:
        probs = {
            "sneakers": 0.5,
            "shoes": 0.25,
            "boots": 0.1,
            "sandals": 0.18 if short else 0.05,
            "leather_shoes": 0.07,
        }
    if gender == "female" and kind_low in ("short_skirt", "long_skirt", "dress", "hot_pants"):
        probs["stockings"] = 0.45 if kind_low != "long_skirt" else 0.2
    kind = weighted_pick(rng, probs)
    colour_probs = {
        "leather_shoes": {"black": 0.75, "brown": 0.25},
        "sneakers": {
            "white": 0.4,
            "black": 0.3,
            "grey": 0.1,
            "blue": 0.07,
            "red": 0.04,
            "pink": 0.03,
            "green": 0.02,
            "yellow": 0.02,
            "orange": 0.01,
            "purple": 0.01,
        },
        "shoes": {"black": 0.5, "brown": 0.2, "white": 0.1, "grey": 0.1, "blue": 0.05, "red": 0.05},
        "boots": {"black": 0.5, "brown": 0.4, "grey": 0.05, "white": 0.05},
        "sandals": {"brown": 0.35, "black": 0.35, "white": 0.15, "pink": 0.08, "blue": 0.07},
        "stockings": {"black": 0.7, "grey": 0.12, "brown": 0.1, "white": 0.08},
    }[kind]
    return {
        "footwear_type": (kind,),
        "footwear_colour": _colours(rng, colour_probs, 0.15 if kind == "sneakers" else 0.0),
    }


def _carried(rng: np.random.Generator, gender: str, age: str) -> tuple[str, ...]:
    probs = dict(CARRIED_FREQ)
    if gender == "female":
        probs = _reweight(probs, handbag=2.3, baby_buggy=1.8, messenger_bag=1.1)
    else:
        probs = _reweight(probs, handbag=0.4, baby_buggy=0.5)
    if age == "child":
        probs = _reweight(
            probs, backpack=2.0, suitcase=0.0, luggage=0.3, baby_buggy=0.0, shopping_trolley=0.0, folder=0.3
        )
    first = weighted_pick(rng, probs)
    if first == "nothing" or rng.random() >= 0.1:
        return (first,)
    rest = {k: v for k, v in probs.items() if k not in ("nothing", first)}
    return (first, weighted_pick(rng, rest))


def sample_identity(rng: np.random.Generator) -> Attrs:
    """Draw one identity: every ontology slot set, with realistic correlations.

    Deterministic given the generator's state.

    >>> import numpy as np
    >>> a = sample_identity(np.random.default_rng(3))
    >>> sorted(a) == sorted(ONTOLOGY.slot_names)
    True
    """
    gender = "female" if rng.random() < 0.5 else "male"
    age = weighted_pick(rng, {"child": 0.05, "young": 0.35, "adult": 0.33, "middle_aged": 0.17, "senior": 0.1})
    attrs: Attrs = {"gender": (gender,), "age": (age,)}
    attrs.update(_head(rng, gender, age))
    dress = gender == "female" and rng.random() < 0.08
    upper = _upper(rng, gender, age, dress)
    attrs.update(upper)
    lower = _lower(rng, gender, upper, dress)
    attrs.update(lower)
    attrs.update(
        _feet(rng, gender, lower, formal=lower["lower_style"][0] == "formal" or upper["upper_style"][0] == "formal")
    )
    attrs["carried"] = _carried(rng, gender, age)
    return ONTOLOGY.validate(attrs)
