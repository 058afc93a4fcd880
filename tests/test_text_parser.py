import pytest

from minterpr.data.text_parser import facts_to_evidence, parse_facts


def _simple(text, **kw):
    return {(f.slot, f.values, f.negated) for f in parse_facts(text, **kw)}


@pytest.mark.parametrize("text, expected", [
    ("A woman in a red top, no backpack.", {("gender", ("female",), False), ("upper_colour", ("red",), False),
                                            ("carried", ("backpack",), True)}),
    ("Not her. Her top was dark red, not cream.", {("gender", ("female",), False), ("upper_colour", ("red",), False),
                                                   ("upper_colour", ("white",), True)}),
    ("He wore jeans rather than a skirt.", {("gender", ("male",), False), ("lower_type", ("jeans",), False),
                                            ("lower_type", ("long_skirt", "short_skirt"), True)}),
    ("A man with short grey hair in navy trousers.", {("gender", ("male",), False), ("hair_length", ("short",), False),
                                                      ("hair_colour", ("grey",), False), ("lower_colour", ("blue",), False),
                                                      ("lower_type", ("trousers",), False)}),
    ("someone in a dark jacket", {("upper_colour", ("black", "blue", "brown", "grey"), False),
                                  ("upper_type", ("jacket",), False)}),
    ("A man wearing a black and white striped shirt.", {("gender", ("male",), False), ("upper_colour", ("black",), False),
                                                        ("upper_colour", ("white",), False), ("upper_type", ("shirt",), False),
                                                        ("upper_pattern", ("thick_stripes", "thin_stripes"), False)}),
])
def test_parse(text, expected):
    assert _simple(text) == expected


def test_context_gives_bare_answers_meaning():
    assert _simple("Navy.", context_slot="footwear_colour") == {("footwear_colour", ("blue",), False)}
    assert _simple("No, nothing.", context_slot="carried") == {("carried", ("nothing",), False)}
    assert _simple("Long.", context_slot="lower_length") == {("lower_length", ("long",), False)}
    assert _simple("I didn't notice.", context_slot="hair_colour") == set()


def test_colour_of_a_non_garment_is_not_a_garment_colour():
    facts = _simple("A man in a white shirt with a black belt.")
    assert ("upper_colour", ("black",), False) not in facts and ("footwear_colour", ("black",), False) not in facts


def test_evidence_weights():
    evidence = facts_to_evidence(parse_facts("a dark top, not black"))
    assert evidence["upper_colour"]["black"] == pytest.approx(0.25 - 1.0)
    assert evidence["upper_colour"]["blue"] == pytest.approx(0.25)
