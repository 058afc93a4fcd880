import pytest

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.text_parser import facts_to_evidence, parse_facts


def _simple(text, **kw):
    return {(f.slot, f.values, f.negated) for f in parse_facts(text, **kw)}


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "A woman in a red top, no backpack.",
            {("gender", ("female",), False), ("upper_colour", ("red",), False), ("carried", ("backpack",), True)},
        ),
        (
            "Not her. Her top was dark red, not cream.",
            {("gender", ("female",), False), ("upper_colour", ("red",), False), ("upper_colour", ("white",), True)},
        ),
        (
            "He wore jeans rather than a skirt.",
            {
                ("gender", ("male",), False),
                ("lower_type", ("jeans",), False),
                ("lower_type", ("long_skirt", "short_skirt"), True),
            },
        ),
        (
            "A man with short grey hair in navy trousers.",
            {
                ("gender", ("male",), False),
                ("hair_length", ("short",), False),
                ("hair_colour", ("grey",), False),
                ("lower_colour", ("blue",), False),
                ("lower_type", ("trousers",), False),
            },
        ),
        (
            "someone in a dark jacket",
            {("upper_colour", ("black", "blue", "brown", "grey"), False), ("upper_type", ("jacket",), False)},
        ),
        (
            "A man wearing a black and white striped shirt.",
            {
                ("gender", ("male",), False),
                ("upper_colour", ("black",), False),
                ("upper_colour", ("white",), False),
                ("upper_type", ("shirt",), False),
                ("upper_pattern", ("thick_stripes", "thin_stripes"), False),
            },
        ),
    ],
)
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


DARK = ("black", "blue", "brown", "grey")
LIGHT = ("grey", "pink", "white", "yellow")


@pytest.mark.parametrize(
    "text, expected",
    [
        # shaded and hedged colours: the shade keeps the colour, "or" keeps both, "-ish" reads as the colour
        (
            "She wore a navy-blue coat.",
            {("gender", ("female",), False), ("upper_colour", ("blue",), False), ("upper_type", ("jacket",), False)},
        ),
        (
            "A greyish hoodie and light coloured trousers.",
            {
                ("upper_colour", ("grey",), False),
                ("upper_type", ("sweater",), False),
                ("lower_colour", LIGHT, False),
                ("lower_type", ("trousers",), False),
            },
        ),
        (
            "an off-white blouse with khaki shorts",
            {
                ("upper_colour", ("white",), False),
                ("upper_type", ("shirt",), False),
                ("lower_colour", ("brown",), False),
                ("lower_type", ("shorts",), False),
            },
        ),
        (
            "an olive or dark brown sweatshirt",
            {("upper_colour", ("brown", "green"), False), ("upper_type", ("sweater",), False)},
        ),
        ("a bluish green tank top", {("upper_colour", ("blue", "green"), False), ("upper_type", ("vest",), False)}),
        (
            "a teal polo shirt and dark colored jeans",
            {
                ("upper_colour", ("blue", "green"), False),
                ("upper_type", ("shirt",), False),
                ("lower_colour", DARK, False),
                ("lower_type", ("jeans",), False),
            },
        ),
        ("He has dark hair.", {("gender", ("male",), False), ("hair_colour", ("black", "brown"), False)}),
        # garments, bags and shoes by other names
        (
            "A tee shirt, capris, flip flops and a tote bag.",
            {
                ("upper_type", ("tshirt",), False),
                ("lower_type", ("capri",), False),
                ("footwear_type", ("sandals",), False),
                ("carried", ("handbag",), False),
            },
        ),
        (
            "a cardigan, jean shorts, tennis shoes and a book bag",
            {
                ("upper_type", ("sweater",), False),
                ("lower_type", ("shorts",), False),
                ("footwear_type", ("sneakers",), False),
                ("carried", ("backpack",), False),
            },
        ),
        ("a girl with a grey bag", {("gender", ("female",), False), ("carried", ("handbag", "messenger_bag"), False)}),
        (
            "a short, deep green skirt and a stripe shirt",
            {
                ("lower_type", ("short_skirt",), False),
                ("lower_colour", ("green",), False),
                ("upper_type", ("shirt",), False),
                ("upper_pattern", ("thick_stripes", "thin_stripes"), False),
            },
        ),
        # statements of absence
        ("She is not holding anything.", {("gender", ("female",), False), ("carried", ("nothing",), False)}),
        (
            "A woman without glasses in a dress with no sleeves.",
            {
                ("gender", ("female",), False),
                ("accessories", ("glasses",), True),
                ("lower_type", ("dress",), False),
                ("sleeve_length", ("sleeveless",), False),
            },
        ),
        ("His jacket is not zipped up.", {("gender", ("male",), False), ("upper_type", ("jacket",), False)}),
        # another person's clothes are not the target's
        (
            "A woman in a black coat walking with a man in a red shirt.",
            {("gender", ("female",), False), ("upper_colour", ("black",), False), ("upper_type", ("jacket",), False)},
        ),
        (
            "A young man next to another man in white shorts. He has a backpack.",
            {("age", ("young",), False), ("gender", ("male",), False), ("carried", ("backpack",), False)},
        ),
        ("He or she wears a white shirt.", {("upper_colour", ("white",), False), ("upper_type", ("shirt",), False)}),
        # colours of things that are not garments belong to nothing
        (
            "a blue backpack, a white cap and black shoes with white laces",
            {("carried", ("backpack",), False), ("headwear", ("hat",), False), ("footwear_colour", ("black",), False)},
        ),
    ],
)
def test_real_language(text, expected):
    assert _simple(text) == expected


def test_a_long_caption_keeps_every_fact():
    text = (
        "This young lady, whose long black hair is tied back in a ponytail, has round glasses. Her white short "
        "sleeved t-shirt has a small logo on its front, her light blue jeans are rolled up to the ankle, and she "
        "walks in grey running shoes. A black purse hangs from her left shoulder and she holds a phone in her "
        "right hand. Her shoes look a little worn, and her eyes are on the pavement as she walks."
    )
    assert _simple(text) == {
        ("age", ("young",), False),
        ("gender", ("female",), False),
        ("hair_length", ("long",), False),
        ("hair_colour", ("black",), False),
        ("accessories", ("glasses",), False),
        ("upper_colour", ("white",), False),
        ("sleeve_length", ("short",), False),
        ("upper_type", ("tshirt",), False),
        ("upper_pattern", ("logo",), False),
        ("lower_colour", ("blue",), False),
        ("lower_type", ("jeans",), False),
        ("footwear_colour", ("grey",), False),
        ("footwear_type", ("sneakers",), False),
        ("carried", ("handbag",), False),
        ("carried", ("other",), False),
    }


def test_parser_never_fails_on_any_text():
    from hypothesis import given, settings, strategies as st

    words = st.sampled_from(
        [
            "no",
            "not",
            "a",
            "dark",
            "light",
            "blue",
            "or",
            "and",
            ",",
            "-",
            "/",
            "stripe",
            "shirt",
            "with",
            "another",
            "woman",
            "hair",
            "long",
            "short",
            "bag",
            "n't",
            "'s",
            "skirt",
            ".",
        ]
    )

    @settings(max_examples=300, deadline=None)
    @given(st.lists(words, max_size=14), st.sampled_from([None, "carried", "upper_colour", "hair_length"]))
    def check(tokens, slot):
        for fact in parse_facts(" ".join(tokens), context_slot=slot):
            assert set(fact.values) <= set(ONTOLOGY.slot(fact.slot).value_names) and fact.values

    check()
