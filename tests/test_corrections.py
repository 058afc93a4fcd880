"""Corrections in a conversation (issue 38): "red, not pink" replaces the earlier "pink top" (one colour
left for the top, the replaced fact kept in the history), a colour said without a garment word goes to
the colour slot last spoken of, and hedged feedback leaves the image undecided."""

from __future__ import annotations

import numpy as np
import pytest

from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.session import Session
from minterpr.language.corrections import active, replaced_by
from minterpr.language.dialogue_acts import verdict
from minterpr.language.feedback_reading import read_feedback
from minterpr.language.phrasing import Fact
from minterpr.types import GalleryImage

COLOURS = ("red", "pink", "green", "black")
PINK, RED, NOT_PINK = (
    Fact("upper_colour", ("pink",)),
    Fact("upper_colour", ("red",)),
    Fact("upper_colour", ("pink",), True),
)


@pytest.fixture()
def gallery():
    rng = np.random.default_rng(0)
    images = [
        GalleryImage(
            f"{i}.jpg",
            f"p:{i}",
            attributes={
                "gender": (("male", "female")[i % 2],),
                "upper_colour": (COLOURS[int(rng.integers(4))],),
                "lower_colour": (COLOURS[int(rng.integers(4))],),
                "footwear_colour": (COLOURS[int(rng.integers(4))],),
            },
        )
        for i in range(40)
    ]
    backend = AttributeBackend(noise=1.0, seed=3)
    return backend, backend.index_images(images)


@pytest.mark.parametrize(
    "correction", ["red, not pink", "it was red, not pink", "red rather than pink", "no, the top was red, not pink"]
)
def test_a_correction_replaces_the_fact_it_corrects(gallery, correction) -> None:
    backend, index = gallery
    session = Session(backend, index, seed=1)
    session.describe("a woman in a pink top and black trousers")
    session.describe(correction)
    assert RED in session.history[1].facts and NOT_PINK in session.history[1].facts
    held = [f for f in session.facts if f.slot == "upper_colour" and not f.negated]
    assert held == [RED]  # one active colour for the top
    assert PINK in session.history[0].facts  # kept as said (the page shows it struck through)
    top = [index.images[int(i)].attributes["upper_colour"] for i in session.step.ranking[:3]]
    assert top == [("red",)] * 3


def test_a_bare_colour_goes_to_the_slot_last_spoken_of(gallery) -> None:
    backend, index = gallery
    session = Session(backend, index, seed=1)
    session.describe("a man in a red top")
    session.answer("black") if session.action is not None and getattr(
        session.action, "slot", ""
    ) == "footwear_colour" else session.describe("his shoes were black")
    session.describe("it was green, not black")
    assert Fact("footwear_colour", ("green",)) in session.history[-1].facts
    assert Fact("footwear_colour", ("black",)) not in session.facts
    first = Session(backend, index, seed=1)
    first.describe("green, not black")  # nothing spoken of before: no garment to give the colour to
    assert not any(f.slot.endswith("_colour") for f in first.history[0].facts)


def test_replacement_is_by_slot_value_and_sense() -> None:
    said = [
        PINK,
        Fact("lower_colour", ("pink",), True),
        RED,
        NOT_PINK,
        Fact("carried", ("backpack",), True),
        Fact("carried", ("backpack",)),
    ]
    assert replaced_by(said) == [3, None, None, None, 5, None]
    assert active(said) == (Fact("lower_colour", ("pink",), True), RED, NOT_PINK, Fact("carried", ("backpack",)))


def test_mixed_feedback_keeps_the_shown_image_and_the_target_apart() -> None:
    reading = read_feedback(
        "not him, that's a man in a brown jacket and jeans - she had a light blue coat with a white hood"
    )
    shown = {(f.slot, f.values) for f in reading.shown}
    target = {(f.slot, f.values) for f in reading.target}
    assert shown == {
        ("gender", ("male",)),
        ("upper_colour", ("brown",)),
        ("upper_type", ("jacket",)),
        ("lower_type", ("jeans",)),
    }
    assert target == {
        ("gender", ("female",)),
        ("upper_colour", ("blue",)),
        ("upper_type", ("jacket",)),
        ("upper_colour", ("white",)),
    }  # the coat and its hood
    assert read_feedback("not him, he had a backpack").target[0] == Fact("gender", ("male",))  # "him" = the target


@pytest.mark.parametrize(
    "text",
    ["could be, I can't tell", "hmm, could be", "it might be her", "hard to say", "I don't know", "not sure", "dunno"],
)
def test_hedged_feedback_is_unsure(text) -> None:
    assert verdict(text) is None


@pytest.mark.parametrize(
    "text", ["no, not sure why but no", "not her, no idea who that is", "that's not him, not sure who"]
)
def test_a_denial_before_a_hedge_still_rules_out(text) -> None:
    assert verdict(text) is False
