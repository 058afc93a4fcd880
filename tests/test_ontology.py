import pytest

from minterpr.language.ontology import ONTOLOGY
from minterpr.registry import Registry, RegistryError


def test_every_slot_has_values_questions_and_unique_names():
    assert len(set(ONTOLOGY.slot_names)) == len(ONTOLOGY.slots)
    for slot in ONTOLOGY.slots:
        assert slot.values and slot.questions, slot.name
        assert len(set(slot.value_names)) == len(slot.values), slot.name
        for value in slot.values:
            assert value.phrases and all(p.strip() for p in value.phrases)


def test_synonyms_present():
    assert "navy" in ONTOLOGY.slot("upper_colour").value("blue").phrases
    assert "rucksack" in ONTOLOGY.slot("carried").value("backpack").phrases
    assert "dark blue" in ONTOLOGY.slot("lower_colour").value("blue").phrases


@pytest.mark.parametrize(
    "attrs, message",
    [
        ({"hat": ("x",)}, "unknown slot 'hat': must be one of"),
        ({"gender": ("robot",)}, "unknown value 'robot' of slot 'gender'"),
        ({"gender": ("male", "female")}, "takes one value"),
        ({"carried": ("nothing", "backpack")}, "excludes the other values"),
        ({"carried": ()}, "empty value list"),
        (["gender"], "must be a mapping"),
    ],
)
def test_validate_rejects_with_reason(attrs, message):
    with pytest.raises(ValueError, match=message):
        ONTOLOGY.validate(attrs)


def test_validate_normalises():
    assert ONTOLOGY.validate({"upper_colour": ["white", "black", "white"], "gender": "male"}) == {
        "upper_colour": ("black", "white"),
        "gender": ("male",),
    }


def test_registry_lists_members_on_unknown_name():
    registry = Registry("widget")
    registry.register("b")(lambda: 2)
    registry.register("a")(lambda: 1)
    assert registry.names() == ["a", "b"] and registry.create("a") == 1 and "a" in registry
    with pytest.raises(RegistryError, match="unknown widget 'c': must be one of a, b"):
        registry.get("c")
    with pytest.raises(RegistryError, match="already registered"):
        registry.register("a")(lambda: 3)


def test_label_layout_and_synthesiser_words_are_frozen():
    """flat_labels() is the attribute head's output layout (trained checkpoints depend on it), and the
    values' phrases are what the dialogue synthesiser picks from (every synthetic dataset depends on
    them). Words for reading only go in READING_PHRASES / READING_COLOURS."""
    import hashlib

    layout = hashlib.sha256(repr(ONTOLOGY.flat_labels()).encode()).hexdigest()
    words = hashlib.sha256(repr([(s.name, v.name, v.phrases) for s in ONTOLOGY.slots for v in s.values]).encode())
    assert layout == "5da0ed8e5b068c69b6b7847c0560cd1af57af300c270f7566cf737aef5cb31b6"
    assert words.hexdigest() == "8719320bc99c8c3d9f62612adc8a66c526caef7b783ad6808dc020038b4f8ad5"


def test_reading_words_name_known_values():
    from minterpr.language.ontology import COLOURS, DARK_HAIR
    from minterpr.language.reading_words import READING_COLOURS, READING_PHRASES

    for (slot, value), phrases in READING_PHRASES.items():
        ONTOLOGY.slot(slot).value(value)  # raises on an unknown slot or value
        assert phrases and all(p.strip() == p and p.lower() == p for p in phrases), (slot, value)
        assert not slot.endswith("_colour"), "colour words go in READING_COLOURS"
    for word, colours in READING_COLOURS.items():
        assert colours and set(colours) <= set(COLOURS), word
    assert set(DARK_HAIR) <= set(ONTOLOGY.slot("hair_colour").value_names)
