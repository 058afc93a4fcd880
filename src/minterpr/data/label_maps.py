"""Mappings from datasets' attribute labels to the ontology (:mod:`minterpr.language.ontology`).

Each table maps a dataset label to the (slot, value) pairs it asserts. The tables are documented
in ``docs/ontology.md``; a test checks that every label of each dataset is mapped and that every
target exists in the ontology.

Example:
    >>> labels_to_attributes(["upperBodyRed", "carryingBackpack", "personalMale"], PETA_LABELS)
    {'carried': ('backpack',), 'gender': ('male',), 'upper_colour': ('red',)}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache

from minterpr.language.ontology import COLOURS, ONTOLOGY

Assertion = tuple[tuple[str, str], ...]  # (slot, value) pairs a label asserts

_COLOUR_NAMES = {c: c.capitalize() for c in COLOURS}

# PETA: 61 binary + 4 multi-class (colour) attributes, plus the 4 rare ones the release discards
# and the spelling "footwearSneakers" that the label files use for the ReadMe's "footwearSneaker".
PETA_LABELS: dict[str, Assertion] = {
    "accessoryHeadphone": (("accessories", "headphones"),),
    "personalLess15": (("age", "child"),),
    "personalLess30": (("age", "young"),),
    "personalLess45": (("age", "adult"),),
    "personalLess60": (("age", "middle_aged"),),
    "personalLarger60": (("age", "senior"),),
    "carryingBabyBuggy": (("carried", "baby_buggy"),),
    "carryingBackpack": (("carried", "backpack"),),
    "hairBald": (("hair_length", "bald"),),
    "footwearBoots": (("footwear_type", "boots"),),
    "lowerBodyCapri": (("lower_type", "capri"),),
    "carryingOther": (("carried", "other"),),
    "carryingShoppingTro": (("carried", "shopping_trolley"),),
    "carryingUmbrella": (("carried", "umbrella"),),
    "lowerBodyCasual": (("lower_style", "casual"),),
    "upperBodyCasual": (("upper_style", "casual"),),
    "personalFemale": (("gender", "female"),),
    "carryingFolder": (("carried", "folder"),),
    "lowerBodyFormal": (("lower_style", "formal"),),
    "upperBodyFormal": (("upper_style", "formal"),),
    "accessoryHairBand": (("headwear", "hair_band"),),
    "accessoryHat": (("headwear", "hat"),),
    "lowerBodyHotPants": (("lower_type", "hot_pants"), ("lower_length", "short")),
    "upperBodyJacket": (("upper_type", "jacket"),),
    "lowerBodyJeans": (("lower_type", "jeans"), ("lower_length", "long")),
    "accessoryKerchief": (("accessories", "kerchief"),),
    "footwearLeatherShoes": (("footwear_type", "leather_shoes"),),
    "upperBodyLogo": (("upper_pattern", "logo"),),
    "hairLong": (("hair_length", "long"),),
    "lowerBodyLongSkirt": (("lower_type", "long_skirt"), ("lower_length", "long")),
    "upperBodyLongSleeve": (("sleeve_length", "long"),),
    "lowerBodyPlaid": (("lower_pattern", "plaid"),),
    "lowerBodyThinStripes": (("lower_pattern", "thin_stripes"),),
    "carryingLuggageCase": (("carried", "luggage"),),
    "personalMale": (("gender", "male"),),
    "carryingMessengerBag": (("carried", "messenger_bag"),),
    "accessoryMuffler": (("accessories", "scarf"),),
    "accessoryNothing": (("accessories", "none"),),
    "carryingNothing": (("carried", "nothing"),),
    "upperBodyNoSleeve": (("sleeve_length", "sleeveless"),),
    "upperBodyPlaid": (("upper_pattern", "plaid"),),
    "carryingPlasticBags": (("carried", "plastic_bag"),),
    "footwearSandals": (("footwear_type", "sandals"),),
    "footwearShoes": (("footwear_type", "shoes"),),
    "hairShort": (("hair_length", "short"),),
    "lowerBodyShorts": (("lower_type", "shorts"), ("lower_length", "short")),
    "upperBodyShortSleeve": (("sleeve_length", "short"),),
    "lowerBodyShortSkirt": (("lower_type", "short_skirt"), ("lower_length", "short")),
    "footwearSneaker": (("footwear_type", "sneakers"),),
    "footwearSneakers": (("footwear_type", "sneakers"),),
    "footwearStocking": (("footwear_type", "stockings"),),
    "upperBodyThinStripes": (("upper_pattern", "thin_stripes"),),
    "upperBodySuit": (("upper_type", "suit"),),
    "carryingSuitcase": (("carried", "suitcase"),),
    "lowerBodySuits": (("lower_type", "suit_trousers"), ("lower_length", "long")),
    "accessorySunglasses": (("accessories", "sunglasses"),),
    "upperBodySweater": (("upper_type", "sweater"),),
    "upperBodyThickStripes": (("upper_pattern", "thick_stripes"),),
    "lowerBodyTrousers": (("lower_type", "trousers"), ("lower_length", "long")),
    "upperBodyTshirt": (("upper_type", "tshirt"),),
    "upperBodyOther": (("upper_type", "other"),),
    "upperBodyVNeck": (("neckline", "v_neck"),),
    # Discarded by the PETA release (< 10 samples) but present in some label files.
    "accessoryFaceMask": (("accessories", "face_mask"),),
    "lowerBodyLogo": (("lower_pattern", "logo"),),
    "accessoryShawl": (("accessories", "shawl"),),
    "lowerBodyThickStripes": (("lower_pattern", "thick_stripes"),),
}
# The 35 attributes the PETA literature reports mA over (Deng et al. 2014; Jia et al. 2021's PETA and
# PETAzs protocols), by their PETA names; each is one ontology label (:func:`peta35_labels`).
PETA_35: tuple[str, ...] = (
    "accessoryHat",
    "accessoryMuffler",
    "accessoryNothing",
    "accessorySunglasses",
    "hairLong",
    "upperBodyCasual",
    "upperBodyFormal",
    "upperBodyJacket",
    "upperBodyLogo",
    "upperBodyPlaid",
    "upperBodyShortSleeve",
    "upperBodyThinStripes",
    "upperBodyTshirt",
    "upperBodyOther",
    "upperBodyVNeck",
    "lowerBodyCasual",
    "lowerBodyFormal",
    "lowerBodyJeans",
    "lowerBodyShorts",
    "lowerBodyShortSkirt",
    "lowerBodyTrousers",
    "footwearLeatherShoes",
    "footwearSandals",
    "footwearShoes",
    "footwearSneaker",
    "carryingBackpack",
    "carryingOther",
    "carryingMessengerBag",
    "carryingNothing",
    "carryingPlasticBags",
    "personalLess30",
    "personalLess45",
    "personalLess60",
    "personalLarger60",
    "personalMale",
)


def peta35_labels() -> list[tuple[str, str]]:
    """The ontology (slot, value) of each of :data:`PETA_35`, in that order (the first assertion of
    its PETA label: jeans is ``lower_type=jeans``, not its implied length).

    >>> len(peta35_labels()), peta35_labels()[-1]
    (35, ('gender', 'male'))
    """
    return [PETA_LABELS[name][0] for name in PETA_35]


# PETA annotates its binary attributes exhaustively: one not listed for an identity does not hold.
# Where PETA's labels name every value of a slot but one (its default), a row without any of them
# therefore states the default: "no hat", "a plain top" are known, not unlabelled (without this,
# the attribute loss never saw a hat-less image as a negative for "hat", and mA counted hats only
# against hair bands). Slots PETA covers in part (accessories: no glasses label; neckline: V-neck
# only) stay unlabelled when none of their labels is listed.
PETA_CLOSED_SLOTS: dict[str, str] = {"headwear": "none", "upper_pattern": "plain", "lower_pattern": "plain"}

for _colour, _name in _COLOUR_NAMES.items():
    PETA_LABELS[f"footwear{_name}"] = (("footwear_colour", _colour),)
    PETA_LABELS[f"hair{_name}"] = (("hair_colour", _colour),)
    PETA_LABELS[f"lowerBody{_name}"] = (("lower_colour", _colour),)
    PETA_LABELS[f"upperBody{_name}"] = (("upper_colour", _colour),)

# Market-1501 attributes (Lin et al.): value 1/2 coded; each entry maps (label, value) pairs.
# Keys are "name=value" where value is the dataset's code (1 = first option, 2 = second).
MARKET1501_LABELS: dict[str, Assertion] = {
    "gender=1": (("gender", "male"),),
    "gender=2": (("gender", "female"),),
    "hair=1": (("hair_length", "short"),),
    "hair=2": (("hair_length", "long"),),
    "up=1": (("sleeve_length", "long"),),
    "up=2": (("sleeve_length", "short"),),
    "down=1": (("lower_length", "long"),),
    "down=2": (("lower_length", "short"),),
    "clothes=1": (("lower_type", "dress"),),
    "clothes=2": (("lower_type", "trousers"),),
    "hat=1": (("headwear", "none"),),
    "hat=2": (("headwear", "hat"),),
    "backpack=1": (),
    "backpack=2": (("carried", "backpack"),),
    "bag=1": (),
    "bag=2": (("carried", "messenger_bag"),),
    "handbag=1": (),
    "handbag=2": (("carried", "handbag"),),
    # Market's four age groups are coarser than the ontology's; "teenager" is mapped to young.
    "age=1": (("age", "child"),),
    "age=2": (("age", "young"),),
    "age=3": (("age", "adult"),),
    "age=4": (("age", "senior"),),
}
for _c in ("black", "white", "red", "purple", "yellow", "gray", "blue", "green"):
    MARKET1501_LABELS[f"up{_c}=1"] = ()
    MARKET1501_LABELS[f"up{_c}=2"] = (("upper_colour", "grey" if _c == "gray" else _c),)
for _c in ("black", "white", "pink", "purple", "yellow", "gray", "blue", "green", "brown"):
    MARKET1501_LABELS[f"down{_c}=1"] = ()
    MARKET1501_LABELS[f"down{_c}=2"] = (("lower_colour", "grey" if _c == "gray" else _c),)


@cache
def market1501_codes() -> Mapping[str, tuple[int, ...]]:
    """Market-1501's attribute names in its fixed order (the order its labels are merged in), each
    with the codes it takes.

    >>> list(market1501_codes())[:3], market1501_codes()["age"]
    (['gender', 'hair', 'up'], (1, 2, 3, 4))
    """
    codes: dict[str, tuple[int, ...]] = {}
    for key in MARKET1501_LABELS:
        name, code = key.split("=")
        codes[name] = (*codes.get(name, ()), int(code))
    return codes


# PA-100K: 26 binary attributes (positive label -> assertion). The view labels are per image and
# go to GalleryImage.view, not to attributes. Age18-60 spans two ontology groups: mapped to adult.
PA100K_LABELS: dict[str, Assertion] = {
    "Female": (("gender", "female"),),
    "AgeOver60": (("age", "senior"),),
    "Age18-60": (("age", "adult"),),
    "AgeLess18": (("age", "child"),),
    "Front": (),
    "Side": (),
    "Back": (),
    "Hat": (("headwear", "hat"),),
    "Glasses": (("accessories", "glasses"),),
    "HandBag": (("carried", "handbag"),),
    "ShoulderBag": (("carried", "messenger_bag"),),
    "Backpack": (("carried", "backpack"),),
    "HoldObjectsInFront": (("carried", "other"),),
    "ShortSleeve": (("sleeve_length", "short"),),
    "LongSleeve": (("sleeve_length", "long"),),
    "UpperStride": (("upper_pattern", "thin_stripes"),),
    "UpperLogo": (("upper_pattern", "logo"),),
    "UpperPlaid": (("upper_pattern", "plaid"),),
    "UpperSplice": (),
    "LowerStripe": (("lower_pattern", "thin_stripes"),),
    "LowerPattern": (),
    "LongCoat": (("upper_type", "jacket"),),
    "Trousers": (("lower_type", "trousers"), ("lower_length", "long")),
    "Shorts": (("lower_type", "shorts"), ("lower_length", "short")),
    "Skirt&Dress": (("lower_type", "short_skirt"),),
    "boots": (("footwear_type", "boots"),),
}
PA100K_VIEWS = {"Front": "front", "Side": "side", "Back": "back"}
# PA-100K labels the negative case too (0), so "not male" is known: Female=0 means male.
PA100K_NEGATIVES: dict[str, Assertion] = {"Female": (("gender", "male"),)}


def labels_to_attributes(
    labels: Iterable[str], table: Mapping[str, Assertion], closed: Mapping[str, str] | None = None
) -> dict[str, tuple[str, ...]]:
    """Map dataset labels to an ontology attribute dict (sorted slots, sorted value tuples).

    Conflicting values of a single-valued slot are resolved by keeping the first label given
    (labels are annotated in a fixed order in every dataset). A multi-slot's exclusive value
    ("nothing", "none") is dropped when another value of that slot is present. ``closed``: slot ->
    the value a slot holds when none of its labels is given (a dataset that annotates every other
    value exhaustively, e.g. :data:`PETA_CLOSED_SLOTS`). Raises KeyError naming the unknown label.

    >>> labels_to_attributes(["personalMale"], PETA_LABELS, PETA_CLOSED_SLOTS)["headwear"]
    ('none',)
    >>> labels_to_attributes(["accessoryHat"], PETA_LABELS, PETA_CLOSED_SLOTS)["headwear"]
    ('hat',)
    """
    collected: dict[str, list[str]] = {}
    for label in labels:
        if label not in table:
            raise KeyError(f"unknown attribute label {label!r}")
        for slot_name, value in table[label]:
            values = collected.setdefault(slot_name, [])
            slot = ONTOLOGY.slot(slot_name)
            if slot.multi:
                if value not in values:
                    values.append(value)
            elif not values:
                values.append(value)
    out: dict[str, tuple[str, ...]] = {}
    for slot_name in sorted(collected):
        slot = ONTOLOGY.slot(slot_name)
        values = collected[slot_name]
        if slot.multi and len(values) > 1:
            values = [v for v in values if not slot.value(v).excludes_others]
        out[slot_name] = tuple(sorted(values))
    for slot_name, value in (closed or {}).items():
        if slot_name not in out:
            ONTOLOGY.slot(slot_name).value(value)  # KeyError for a value the ontology lacks
            out[slot_name] = (value,)
    return dict(sorted(out.items()))
