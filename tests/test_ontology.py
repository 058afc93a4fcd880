import pytest

from minterpr.data.ontology import ONTOLOGY
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


@pytest.mark.parametrize("attrs, message", [
    ({"hat": ("x",)}, "unknown slot 'hat': must be one of"),
    ({"gender": ("robot",)}, "unknown value 'robot' of slot 'gender'"),
    ({"gender": ("male", "female")}, "takes one value"),
    ({"carried": ("nothing", "backpack")}, "excludes the other values"),
    ({"carried": ()}, "empty value list"),
    (["gender"], "must be a mapping"),
])
def test_validate_rejects_with_reason(attrs, message):
    with pytest.raises(ValueError, match=message):
        ONTOLOGY.validate(attrs)


def test_validate_normalises():
    assert ONTOLOGY.validate({"upper_colour": ["white", "black", "white"], "gender": "male"}) == {
        "upper_colour": ("black", "white"), "gender": ("male",)}


def test_registry_lists_members_on_unknown_name():
    registry = Registry("widget")
    registry.register("b")(lambda: 2)
    registry.register("a")(lambda: 1)
    assert registry.names() == ["a", "b"] and registry.create("a") == 1 and "a" in registry
    with pytest.raises(RegistryError, match="unknown widget 'c': must be one of a, b"):
        registry.get("c")
    with pytest.raises(RegistryError, match="already registered"):
        registry.register("a")(lambda: 3)
