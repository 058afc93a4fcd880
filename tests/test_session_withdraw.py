"""Withdrawing a fact the system read (a removed chip on the page): the session ranks, asks and shows
exactly as a session whose history never recorded that fact."""

from __future__ import annotations

import numpy as np
import pytest

from minterpr.language.phrasing import Fact
from minterpr.errors import TurnError
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.session import Session
from minterpr.types import GalleryImage

COLOURS = ("red", "blue", "green", "black")


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
                "carried": (("backpack", "nothing")[int(rng.integers(2))],),
            },
        )
        for i in range(40)
    ]
    backend = AttributeBackend(noise=1.0, seed=3)  # predicted probabilities: the attribute evidence matters
    return backend, backend.index_images(images)


def _same(a: Session, b: Session) -> None:
    assert np.array_equal(a.step.ranking, b.step.ranking) and np.allclose(a.step.scores, b.step.scores)
    assert a.action == b.action and [e.facts for e in a.history] == [e.facts for e in b.history]
    assert [e.top for e in a.history] == [e.top for e in b.history]
    assert [e.offered for e in a.history] == [e.offered for e in b.history]  # the references shown after each


def test_a_withdrawn_fact_ranks_as_if_never_recorded(gallery) -> None:
    backend, index = gallery
    session = Session(backend, index, seed=5)
    session.describe("a man in a red top and blue trousers")
    session.feedback(int(session.step.ranking[0]), "not him, he had a backpack")
    session.describe("the top may have been green")
    red = Fact("upper_colour", ("red",))
    assert red in session.history[0].facts
    turns = session.history
    session.withdraw_fact(0, red)
    reference = Session(backend, index, seed=5)  # the same turns, the first recorded without the fact
    for k, entry in enumerate(turns):
        facts = tuple(f for f in entry.facts if f != red) if k == 0 else entry.facts
        reference.add(entry.turn, facts=facts)
    _same(session, reference)
    assert red not in session.facts
    # and it changed something: the evidence of "red" is gone
    unchanged = Session.replay(turns, backend, index, seed=5)
    assert not np.allclose(unchanged.step.scores, session.step.scores)
    # undo still works after it, from the recomputed states
    session.undo()
    reference.undo()
    _same(session, reference)


def test_forgetting_a_fact_not_said_or_a_turn_out_of_range_changes_nothing(gallery) -> None:
    backend, index = gallery
    session = Session(backend, index, seed=1)
    session.describe("a woman with a backpack")
    before = session.step.ranking.copy()
    with pytest.raises(TurnError, match="recorded no fact"):
        session.withdraw_fact(0, Fact("upper_colour", ("red",)))
    with pytest.raises(TurnError, match="out of range"):
        session.withdraw_fact(3, Fact("gender", ("female",)))
    assert np.array_equal(session.step.ranking, before) and len(session.history) == 1
