"""Dataset label tables: complete, pointing into the ontology, in sync with docs/ontology.md, and
merged as documented. The real PETA files are checked when ../shared/data is present."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import REPO_ROOT, shared_data_dir
from minterpr.data.errors import DataError
from minterpr.data.label_maps import (
    MARKET1501_LABELS,
    PA100K_LABELS,
    PA100K_NEGATIVES,
    PA100K_VIEWS,
    PETA_CLOSED_SLOTS,
    PETA_LABELS,
    labels_to_attributes,
    market1501_codes,
    parse_label_table,
)
from minterpr.language.ontology import COLOURS, ONTOLOGY

# The 61 binary attributes of PETA's ReadMe.txt, then the 4 it discards (< 10 images).
PETA_BINARY = """accessoryHeadphone personalLess15 personalLess30 personalLess45 personalLess60 personalLarger60
carryingBabyBuggy carryingBackpack hairBald footwearBoots lowerBodyCapri carryingOther carryingShoppingTro
carryingUmbrella lowerBodyCasual upperBodyCasual personalFemale carryingFolder lowerBodyFormal upperBodyFormal
accessoryHairBand accessoryHat lowerBodyHotPants upperBodyJacket lowerBodyJeans accessoryKerchief
footwearLeatherShoes upperBodyLogo hairLong lowerBodyLongSkirt upperBodyLongSleeve lowerBodyPlaid
lowerBodyThinStripes carryingLuggageCase personalMale carryingMessengerBag accessoryMuffler accessoryNothing
carryingNothing upperBodyNoSleeve upperBodyPlaid carryingPlasticBags footwearSandals footwearShoes hairShort
lowerBodyShorts upperBodyShortSleeve lowerBodyShortSkirt footwearSneaker footwearStocking upperBodyThinStripes
upperBodySuit carryingSuitcase lowerBodySuits accessorySunglasses upperBodySweater upperBodyThickStripes
lowerBodyTrousers upperBodyTshirt upperBodyOther upperBodyVNeck""".split()
PETA_DISCARDED = ["accessoryFaceMask", "lowerBodyLogo", "accessoryShawl", "lowerBodyThickStripes"]
PETA_COLOUR_PARTS = ("footwear", "hair", "lowerBody", "upperBody")

TABLES = {
    "PETA label": PETA_LABELS,
    "Market attribute=code": MARKET1501_LABELS,
    "PA-100K label (= 1)": PA100K_LABELS,
    "PA-100K label (= 0)": PA100K_NEGATIVES,
}


def test_peta_has_every_documented_label():
    assert len(PETA_BINARY) == 61 and len(set(PETA_BINARY)) == 61
    colours = [f"{part}{c.capitalize()}" for part in PETA_COLOUR_PARTS for c in COLOURS]
    assert len(COLOURS) == 11 and len(colours) == 44
    documented = set(PETA_BINARY) | set(PETA_DISCARDED) | set(colours)
    # Beyond the ReadMe only the spelling that the label files use.
    assert set(PETA_LABELS) - documented == {"footwearSneakers"}
    assert documented <= set(PETA_LABELS)
    assert PETA_LABELS["footwearSneakers"] == PETA_LABELS["footwearSneaker"]


def test_market_and_pa100k_tables_are_complete():
    assert len(market1501_codes()) == 27  # 10 attributes + 8 top colours + 9 bottom colours
    for name, codes in market1501_codes().items():
        assert codes == ((1, 2, 3, 4) if name == "age" else (1, 2)), name
    assert len(PA100K_LABELS) == 26
    assert set(PA100K_VIEWS) <= set(PA100K_LABELS) and set(PA100K_NEGATIVES) <= set(PA100K_LABELS)
    assert all(PA100K_LABELS[view] == () for view in PA100K_VIEWS)  # views go to GalleryImage.view


@pytest.mark.parametrize("table", TABLES.values(), ids=TABLES.keys())
def test_every_target_exists_in_the_ontology(table):
    for label, assertion in table.items():
        for slot, value in assertion:
            assert value in ONTOLOGY.slot(slot).value_names, (label, slot, value)
        # Whatever one label asserts must itself be a valid attribute dict.
        ONTOLOGY.validate(labels_to_attributes([label], table))


def test_conflicts_resolve_as_documented():
    # Single-valued slot: the first label given wins, whatever the order.
    assert labels_to_attributes(["footwearShoes", "footwearStocking"], PETA_LABELS)["footwear_type"] == ("shoes",)
    assert labels_to_attributes(["footwearStocking", "footwearShoes"], PETA_LABELS)["footwear_type"] == ("stockings",)
    assert labels_to_attributes(["lowerBodyJeans", "lowerBodyShorts"], PETA_LABELS) == {
        "lower_type": ("jeans",),
        "lower_length": ("long",),
    }
    # Multi-valued slot: values accumulate, sorted; the exclusive value yields to the others.
    assert labels_to_attributes(["upperBodyWhite", "upperBodyBlack", "upperBodyWhite"], PETA_LABELS) == {
        "upper_colour": ("black", "white")
    }
    assert labels_to_attributes(["carryingNothing", "carryingBackpack"], PETA_LABELS) == {"carried": ("backpack",)}
    assert labels_to_attributes(["carryingNothing"], PETA_LABELS) == {"carried": ("nothing",)}
    # Labels that assert nothing add nothing; slots come out sorted.
    attrs = labels_to_attributes(["upblack=1", "gender=2", "age=2", "backpack=1"], MARKET1501_LABELS)
    assert attrs == {"age": ("young",), "gender": ("female",)} and list(attrs) == ["age", "gender"]
    with pytest.raises(KeyError, match="unknown attribute label 'upperBodyTartan'"):
        labels_to_attributes(["upperBodyTartan"], PETA_LABELS)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("Hat\theadwear=hat\n# comment\nHat\theadwear=none\n", "t.tsv:3: field 1: label 'Hat' is listed twice"),
        ("Hat\theadwear=hat\tglasses\n", "t.tsv:1: field 3: expected slot=value, got 'glasses'"),
        ("Hat\theadwear=\n", "t.tsv:1: field 2: expected slot=value, got 'headwear='"),
        (" Hat\theadwear=hat\n", "t.tsv:1: field 1: expected a label without surrounding space"),
    ],
)
def test_a_malformed_table_row_names_file_line_and_field(text, where):
    with pytest.raises(DataError, match=re.escape(where)):
        parse_label_table(text, "t.tsv")


def test_tables_are_read_on_first_use_not_on_import():
    code = "import minterpr.data.label_maps as m; print(m._read_label_table.cache_info().currsize)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "0"


# ------------------------------------------------------------------ docs/ontology.md stays in sync
def doc_sections() -> dict[str, list[list[str]]]:
    """Table rows of docs/ontology.md grouped by their header's first cell."""
    text = (REPO_ROOT / "docs" / "ontology.md").read_text(encoding="utf-8")
    sections: dict[str, list[list[str]]] = {}
    current = None
    for line in text.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if current is None:
            current = sections.setdefault(cells[0], [])
        elif not set(cells[0]) <= {"-"}:
            current.append(cells)
    return sections


def parse_assertion(cell: str) -> tuple[tuple[str, str], ...]:
    if cell == "—":
        return ()
    return tuple(tuple(part.strip().strip("`").split("=")) for part in cell.split(","))


@pytest.mark.parametrize("header", TABLES)
def test_doc_mapping_tables_match_the_code(header):
    rows = doc_sections()[header]
    documented = {row[0].strip("`"): parse_assertion(row[1]) for row in rows}
    assert len(documented) == len(rows), "a label is listed twice"
    assert documented == dict(TABLES[header])


def test_doc_slot_table_matches_the_ontology():
    rows = doc_sections()["slot"]
    documented = {row[0].strip("`"): (row[2], [v.split()[0].strip("`") for v in row[4].split(",")]) for row in rows}
    assert documented == {s.name: ("yes" if s.multi else "no", list(s.value_names)) for s in ONTOLOGY.slots}


# ------------------------------------------------------------------ real PETA files
def peta_dir() -> Path:
    path = shared_data_dir() / "peta" / "PETA dataset"
    if not path.is_dir():
        pytest.skip(f"real PETA not found at {path} (set MINTERPR_SHARED_DATA)")
    return path


@pytest.mark.shared_data
def test_every_real_peta_label_is_mapped():
    seen = set()
    for label_file in sorted(peta_dir().glob("*/archive/Label.txt")):
        for line in label_file.read_text(encoding="utf-8").splitlines():
            seen.update(line.split()[1:])
    assert len(seen) > 90
    assert sorted(seen - set(PETA_LABELS)) == []


@pytest.mark.shared_data
def test_real_peta_readme_labels_are_mapped():
    readme = (peta_dir() / "ReadMe.txt").read_text(encoding="utf-8", errors="replace")
    binary = re.findall(r"^\s+\d+\t(\w+)", readme, flags=re.MULTILINE)
    discarded = re.findall(r"--\s*\d+\.\s*(\w+)", readme)
    assert binary == PETA_BINARY and sorted(discarded) == sorted(PETA_DISCARDED)
    multi_class = re.findall(r"^\d\. (\w+):\s*(.+)$", readme, flags=re.MULTILINE)
    assert [part for part, _ in multi_class] == ["footwear", "hair", "lowerbody", "upperbody"]
    for part, colours in multi_class:
        prefix = {"lowerbody": "lowerBody", "upperbody": "upperBody"}.get(part, part)
        names = [f"{prefix}{c.strip()}" for c in colours.split(",")]
        assert len(names) == 11 and set(names) <= set(PETA_LABELS), part


def test_peta_closed_slots_name_every_other_value():
    """A closed slot's default is implied only when PETA's labels cover every other value of the slot."""
    for slot, default in PETA_CLOSED_SLOTS.items():
        named = {value for assertion in PETA_LABELS.values() for s, value in assertion if s == slot}
        assert named == set(ONTOLOGY.slot(slot).value_names) - {default}, slot
    hat = labels_to_attributes(["accessoryHat", "upperBodyPlaid"], PETA_LABELS, PETA_CLOSED_SLOTS)
    assert (hat["headwear"], hat["upper_pattern"], hat["lower_pattern"]) == (("hat",), ("plaid",), ("plain",))
    assert labels_to_attributes(["personalMale"], PETA_LABELS) == {"gender": ("male",)}  # open: unlabelled
    with pytest.raises(KeyError, match="unknown value 'checked'"):
        labels_to_attributes([], PETA_LABELS, {"upper_pattern": "checked"})
