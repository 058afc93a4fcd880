"""Corrective feedback read apart: facts about the person sought and about the shown image, scored on
the hand-labelled corrective utterances (tests/data/corrective_utterances.jsonl, rules in
tests/data/README.md; figures in docs/language.md), and kept apart by the session."""

from __future__ import annotations

import json

import pytest

from support.helpers import REPO_ROOT
from minterpr.data.errors import DataError
from minterpr.data.feedback_eval import KINDS, evaluate_feedback, read_labelled_utterances
from minterpr.language.feedback_reading import Reading, read_feedback
from minterpr.data.parser_eval import format_fact
from minterpr.language.text_parser import parse_facts
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.language.dialogue_acts import turn_reading
from minterpr.interaction.history import HistoryEntry
from minterpr.interaction.session import Session
from minterpr.types import DescriptionTurn, GalleryImage

LABELS = REPO_ROOT / "tests" / "data" / "corrective_utterances.jsonl"
# issue 25's target is fact F1 >= 0.9 on the corrective set, on each side; reached on 2026-12-02:
# target 0.957 / shown 0.988 (all), held out 0.917 / 0.973 (docs/language.md). Before: target 0.803, shown 0.
MIN_F1 = {("target", "all"): 0.9, ("shown", "all"): 0.9, ("target", "heldout"): 0.88, ("shown", "heldout"): 0.9}


def _read(text: str) -> tuple[list[str], list[str]]:
    reading = read_feedback(text)
    return [format_fact(f) for f in reading.target], [format_fact(f) for f in reading.shown]


def test_the_labelled_set_is_large_and_well_formed():
    items = read_labelled_utterances(LABELS)
    assert len(items) >= 150 and len({i.id for i in items}) == len(items) == len({i.text for i in items})
    assert {i.kind for i in items} == set(KINDS)
    assert sum(i.part == "heldout" for i in items) == len(items) // 5
    assert sum(bool(i.shown) for i in items) >= 40  # many say something about the shown image


def test_a_bad_label_names_file_line_and_field(tmp_path):
    row = json.loads(LABELS.read_text(encoding="utf-8").splitlines()[0])
    bad = tmp_path / "u.jsonl"
    bad.write_text(json.dumps(row) + "\n" + json.dumps({**row, "shown": ["colour=red"]}) + "\n")
    with pytest.raises(DataError, match=r"u.jsonl:2: shown\[0\]: .*not slot=value|u.jsonl:2: shown\[0\]: unknown slot"):
        read_labelled_utterances(bad)
    bad.write_text(json.dumps({**row, "kind": "poem"}) + "\n")
    with pytest.raises(DataError, match="u.jsonl:1: kind"):
        read_labelled_utterances(bad)


@pytest.mark.parametrize("side, part", sorted(MIN_F1))
def test_fact_f1_on_corrective_utterances(side, part):
    items = [i for i in read_labelled_utterances(LABELS) if part in ("all", i.part)]
    scores = evaluate_feedback(items)[side].micro
    assert scores.f1 >= MIN_F1[(side, part)], (side, part, scores)


def test_the_reported_cases_are_read_apart():
    # issue 25: both "top: jacket" and "top: not jacket"; the shown shoes' colour taken as the target's
    target, shown = _read("not him - his jacket was black not brown, and he had a cap on")
    assert target == ["gender=male", "upper_type=jacket", "upper_colour=black", "upper_colour!=brown", "headwear=hat"]
    assert shown == []
    assert _read("his shoes were light brown, these are blue") == (
        ["gender=male", "footwear_colour=brown"],
        ["footwear_colour=blue"],
    )


@pytest.mark.parametrize(
    "text, target, shown",
    [
        ("It wasn't a jacket, it was a hoodie.", ["upper_type!=jacket", "upper_type=sweater"], []),
        (
            "instead of a backpack he had a shoulder bag",
            ["carried!=backpack", "gender=male", "carried=messenger_bag"],
            [],
        ),
        ("she had long hair rather than short", ["gender=female", "hair_length=long", "hair_length!=short"], []),
        ("I don't think he had a bag", ["gender=male", "carried!=handbag|messenger_bag"], []),
        ("that guy is too old", [], ["gender=male"]),
        ("this one has a backpack, he didn't", ["gender=male", "carried!=backpack"], ["carried=backpack"]),
        (
            "this one's jacket is red, his was blue",
            ["gender=male", "upper_colour=blue"],
            ["upper_type=jacket", "upper_colour=red"],
        ),
        ("that's not him. But he looks very similar.", ["gender=male"], ["gender=male"]),
        (
            "not him, his shoes are blue, they were white",
            ["gender=male", "footwear_colour=white"],
            ["gender=male", "footwear_colour=blue"],
        ),
    ],
)
def test_contrast_scope_and_pointing_words(text, target, shown):
    assert _read(text) == (target, shown)


def test_text_without_pointing_words_reads_as_before():
    for text in (
        "A woman in a red top, no backpack.",
        "No, that's not him. He wore jeans, not a skirt.",
        "The shoes should be white rather than black.",
        "A man in a blue shirt and jeans.",
    ):
        assert read_feedback(text).target == tuple(parse_facts(text)) and read_feedback(text).shown == ()
    # pointing words point only in feedback: a description's "This man" is the person sought
    text = "This man is wearing a blue shirt and jeans."
    assert turn_reading(DescriptionTurn(text)) == Reading(tuple(parse_facts(text)))
    assert read_feedback(text).target == () and read_feedback(text).shown == tuple(parse_facts(text))


def _session() -> Session:
    images = [
        GalleryImage(f"{i}.jpg", f"x:{i}", attributes={"gender": ("male",), "footwear_colour": (c,)})
        for i, c in enumerate(["brown", "blue", "black"])
    ]
    backend = AttributeBackend()
    return Session(backend, backend.index_images(images), schedule="questions")


def test_the_session_keeps_the_shown_image_facts_apart_and_replays_them():
    session = _session()
    session.describe("a man")
    session.feedback(1, "his shoes were light brown, these are blue")
    entry = session.history[-1]
    assert [format_fact(f) for f in entry.facts] == ["gender=male", "footwear_colour=brown"]
    assert session.image_facts == {1: entry.shown} and [format_fact(f) for f in entry.shown] == ["footwear_colour=blue"]
    assert not any(f.values == ("blue",) for f in session.facts)  # never the target's
    judged = session.step.explain_image(1)  # the user said these shoes are blue: not the brown ones sought
    assert [format_fact(f) for f in judged.contradicted] == [
        "footwear_colour=brown"
    ] and judged.by_user == judged.contradicted
    data = entry.to_dict()
    assert data["shown"] == [["footwear_colour", ["blue"], False]] and data["understood"] is True
    assert HistoryEntry.from_dict(data) == entry._replace(top=tuple(data["top"]))
    replayed = Session.replay(session.history, session.backend, session.index, schedule="questions")
    assert replayed.image_facts == session.image_facts


def test_a_turn_that_understood_nothing_says_so():
    session = _session()
    session.describe("qwerty uiop")
    session.feedback(0, "No.")
    session.feedback(2, "hmm asdf")
    assert [e.understood for e in session.history] == [False, True, False]
    assert session.history[0].to_dict()["understood"] is False


def test_old_histories_without_shown_facts_still_read():
    entry = HistoryEntry.from_dict(
        {"type": "reference", "reference_path": "a.jpg", "feedback": "no", "facts": [], "top": []}
    )
    assert entry.shown == () and entry.understood
    with pytest.raises(Exception, match="shown"):
        HistoryEntry.from_dict({"type": "description", "text": "a", "facts": [], "top": [], "shown": [["hat"]]})


def test_the_feedback_reader_never_fails_on_any_text():
    from hypothesis import given, settings, strategies as st

    from minterpr.language.ontology import ONTOLOGY

    words = st.sampled_from(
        [
            "no",
            "not",
            "these",
            "this",
            "one",
            "that",
            "guy",
            "here",
            "he",
            "she",
            "mine",
            "was",
            "is",
            "has",
            "had",
            "didn't",
            "n't",
            "a",
            "blue",
            "shoes",
            "backpack",
            "long",
            "short",
            "hair",
            "sleeves",
            "skirt",
            "and",
            "but",
            ",",
            ".",
            "rather",
            "than",
            "instead",
            "of",
            "darker",
            "than",
            "none",
            "neither",
            "'s",
            "-",
        ]
    )

    @settings(max_examples=300, deadline=None)
    @given(st.lists(words, max_size=16))
    def check(tokens):
        reading = read_feedback(" ".join(tokens))
        for fact in reading.target + reading.shown:
            assert set(fact.values) <= set(ONTOLOGY.slot(fact.slot).value_names) and fact.values

    check()
