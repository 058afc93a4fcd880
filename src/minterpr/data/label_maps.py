"""Mappings from datasets' attribute labels to the ontology (:mod:`minterpr.language.ontology`).

Each table maps a dataset label to the (slot, value) pairs it asserts. The tables are data, kept
in ``label_tables/*.tsv`` beside this module and read on first use; they are documented in
``docs/ontology.md``, and a test checks that every label of each dataset is mapped and that every
target exists in the ontology.

Example:
    >>> labels_to_attributes(["upperBodyRed", "carryingBackpack", "personalMale"], PETA_LABELS)
    {'carried': ('backpack',), 'gender': ('male',), 'upper_colour': ('red',)}
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from importlib.resources import files

from minterpr.data.errors import DataError
from minterpr.language.ontology import ONTOLOGY

Assertion = tuple[tuple[str, str], ...]  # (slot, value) pairs a label asserts

_TABLES_DIR = "label_tables"  # package data beside this module, one .tsv file a dataset


def parse_label_table(text: str, path: str) -> dict[str, Assertion]:
    """A label table's rows: label -> its (slot, value) pairs, in file order.

    A row is the label, then one tab-separated ``slot=value`` field per assertion; ``#`` starts a
    comment line. A malformed row or a label listed twice is a DataError naming path, line and field.

    >>> parse_label_table("# comment\\nTrousers\\tlower_type=trousers\\tlower_length=long\\nFront\\n", "t.tsv")
    {'Trousers': (('lower_type', 'trousers'), ('lower_length', 'long')), 'Front': ()}
    >>> parse_label_table("Hat\\theadwear:hat\\n", "t.tsv")
    Traceback (most recent call last):
    minterpr.data.errors.DataError: t.tsv:1: field 2: expected slot=value, got 'headwear:hat'
    """
    table: dict[str, Assertion] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        label, *fields = line.split("\t")
        if not label or label != label.strip():
            raise DataError(path, number, "field 1", f"expected a label without surrounding space, got {label!r}")
        if label in table:
            raise DataError(path, number, "field 1", f"label {label!r} is listed twice")
        pairs = []
        for column, text_field in enumerate(fields, start=2):
            slot, equals, value = text_field.partition("=")
            if not (equals and slot.isidentifier() and value.isidentifier()):
                raise DataError(path, number, f"field {column}", f"expected slot=value, got {text_field!r}")
            pairs.append((slot, value))
        table[label] = tuple(pairs)
    return table


@cache
def _read_label_table(file_name: str) -> dict[str, Assertion]:
    text = files(__package__).joinpath(_TABLES_DIR, file_name).read_text(encoding="utf-8")
    return parse_label_table(text, f"{_TABLES_DIR}/{file_name}")


class LabelTable(Mapping[str, Assertion]):
    """A dataset's label table, read-only, read from its file on first use (importing reads no file)."""

    def __init__(self, file_name: str) -> None:
        self.file_name = file_name

    def __getitem__(self, label: str) -> Assertion:
        return _read_label_table(self.file_name)[label]

    def __contains__(self, label: object) -> bool:
        return label in _read_label_table(self.file_name)

    def __iter__(self) -> Iterator[str]:
        return iter(_read_label_table(self.file_name))

    def __len__(self) -> int:
        return len(_read_label_table(self.file_name))

    def __repr__(self) -> str:
        return f"LabelTable({self.file_name!r})"


# PETA: 61 binary + 4 multi-class (colour) attributes, plus rare and variant spellings (see the file).
PETA_LABELS = LabelTable("peta.tsv")
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

# Market-1501 attributes (Lin et al.): keys are "name=code", code the dataset's 1, 2 (, 3, 4 for age).
MARKET1501_LABELS = LabelTable("market1501.tsv")


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


# PA-100K: 26 binary attributes in the release's order (positive label -> assertion); views go to
# GalleryImage.view (PA100K_VIEWS), not to attributes.
PA100K_LABELS = LabelTable("pa100k.tsv")
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
