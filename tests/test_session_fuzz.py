"""Random sequences of session moves with random arguments: only documented errors escape, and a
failed move leaves the session as if it had never been tried (same history, same generator,
same ranking and next move as a fresh replay of its history)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from support.helpers import random_attributes
from minterpr.errors import MinterprError
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.session import Session
from minterpr.types import DescriptionTurn, ExampleTurn, GalleryImage, QATurn, ReferenceTurn

OPTIONS = dict(schedule="alternate", seed=7, max_text_chars=300)
GALLERY = [
    GalleryImage(f"cam1/{pid}_{k}.png", f"fuzz:{pid}", attributes=random_attributes(random.Random(pid)))
    for pid in range(6)
    for k in range(2)
]

WORDS = [
    "a woman in a red top",
    "No, she had a backpack.",
    "Yes, that's her.",
    "Maybe, I can't tell.",
    "Jeans.",
    "not her",
    "white shoes and long hair",
    "yes",
    "no",
]
ODD_TEXT = [
    "",
    "   \t\n",
    "\ud800",
    "ok \udcff",
    "a\x00b\x1bc\x7f",
    "x" * 301,
    "a " * 50_000,
    "\u2028",
    "her top was red\r\nand blue",
]
texts = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(WORDS),
    st.sampled_from(ODD_TEXT),
    st.text(max_size=40),  # any code point: surrogates and control characters included
    st.text(st.characters(codec="utf-8"), max_size=40).map(lambda t: "a woman " + t),
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.binary(max_size=8),
    st.just(["a woman"]),
)
indices = st.one_of(
    st.integers(-3, len(GALLERY) + 2),
    st.integers(),
    st.booleans(),
    st.floats(),
    st.none(),
    st.text(max_size=3),
    st.sampled_from([np.int64(3), np.int32(-1), np.uint8(2), np.int16(len(GALLERY)), np.float64(1.0)]),
)
# "@bytes" / "@png" become files written under the root during the test (not gallery images)
paths = st.one_of(
    st.sampled_from([g.path for g in GALLERY]),
    st.sampled_from(
        [
            "missing.png",
            "../outside.png",
            "/etc/hostname",
            "cam1",
            "",
            " ",
            "@bytes",
            "@png",
            "cam1/../cam1/0_0.png",
            "cam1/0_0.png\x00",
        ]
    ),
    st.text(max_size=20),
    st.none(),
    st.integers(),
    st.binary(max_size=8),
)
moves = st.one_of(
    st.tuples(st.just("describe"), st.sampled_from(WORDS)),
    st.tuples(st.just("describe"), texts),
    st.tuples(st.just("answer"), texts),
    st.tuples(st.just("feedback"), indices, texts),
    st.tuples(st.just("feedback_ranked"), st.integers(0, 3), texts),
    st.tuples(st.just("example"), paths),
    st.tuples(st.just("undo")),
    st.tuples(
        st.just("add"),
        st.one_of(
            st.builds(DescriptionTurn, texts),
            st.builds(QATurn, texts, texts),
            st.builds(ReferenceTurn, paths, texts),
            st.builds(ExampleTurn, paths),
            st.none(),
            st.just("a woman"),
        ),
    ),
)


def scripts(max_moves: int) -> st.SearchStrategy[list]:
    """Move lists, half of them opening with a sensible description (so later moves have a ranking)."""
    opening = st.sampled_from([[], [("describe", "a woman in a red top")]])
    return st.tuples(opening, st.lists(moves, max_size=max_moves)).map(lambda pair: pair[0] + pair[1])


def _materialise(value, root: Path, data: bytes):
    """Turn the "@bytes" / "@png" markers into files under the root (outside the gallery)."""
    if value == "@bytes":
        (root / "random.bin").write_bytes(data)
        return "random.bin"
    if value == "@png":  # a PNG header and then garbage: a truncated image
        (root / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + data)
        return "broken.png"
    return value


def _apply(session: Session, move: tuple, root: Path, data: bytes):
    kind, *args = move
    if kind == "describe":
        return session.describe(args[0])
    if kind == "answer":
        return session.answer(args[0])
    if kind == "feedback":
        return session.feedback(args[0], args[1])
    if kind == "feedback_ranked":  # a plausible move: judge one of the top results
        step = session.step
        i = int(step.ranking[args[0]]) if step is not None else args[0]
        return session.feedback(i, args[1])
    if kind == "example":
        return session.example(_materialise(args[0], root, data))
    if kind == "undo":
        return session.undo()
    turn = args[0]
    if isinstance(turn, ReferenceTurn):
        turn = ReferenceTurn(_materialise(turn.reference_path, root, data), turn.feedback)
    elif isinstance(turn, ExampleTurn):
        turn = ExampleTurn(_materialise(turn.image_path, root, data))
    return session.add(turn)


def _same_as_replay(session: Session, backend, index) -> None:
    rebuilt = Session.replay(session.history, backend, index, **OPTIONS)
    assert rebuilt.history == session.history
    assert rebuilt._rng.getstate() == session._rng.getstate()  # no generator draw of a failed move stayed
    if session.step is None:
        assert rebuilt.step is None
    else:
        assert np.array_equal(rebuilt.step.ranking, session.step.ranking)
        assert np.array_equal(rebuilt.step.scores, session.step.scores)
        assert rebuilt.step.action == session.step.action


def _run_moves(session: Session, backend, index, root: Path, script: list, data: bytes) -> None:
    for move in script:
        history, step, state = session.history, session.step, session._rng.getstate()
        try:
            _apply(session, move, root, data)
            event(f"{move[0]}: ok")
        except MinterprError as err:
            event(f"{move[0]}: {type(err).__name__}")
            assert str(err)  # says what was wrong
            assert session.history == history and session.step is step and session._rng.getstate() == state
            _same_as_replay(session, backend, index)
    _same_as_replay(session, backend, index)


@pytest.fixture(scope="module")
def attribute_setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz_root")
    backend = AttributeBackend(noise=1.0, seed=3)
    return backend, backend.index_images(GALLERY, root=str(root)), root


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=scripts(8), data=st.binary(max_size=64))
def test_attribute_session_survives_any_moves(attribute_setup, script, data):
    backend, index, root = attribute_setup
    _run_moves(Session(backend, index, **OPTIONS), backend, index, root, script, data)


def test_external_images_need_the_option(attribute_setup, tmp_path):
    backend, index, root = attribute_setup
    outside = tmp_path / "photo.png"
    outside.write_bytes(b"not really a photo")
    session = Session(backend, index, **OPTIONS)
    with pytest.raises(MinterprError, match="leaves its root"):
        session.example(str(outside))
    # allowed, the file is read, and the attribute backend says it cannot see it: still a TurnError
    open_session = Session(backend, index, allow_external_images=True, **OPTIONS)
    with pytest.raises(MinterprError, match="cannot see"):
        open_session.example(os.fspath(outside))
    assert open_session.history == [] and open_session.step is None


@pytest.fixture(scope="module")
def neural_setup(tmp_path_factory):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from PIL import Image

    from minterpr.runtime.neural_backend import NeuralBackend
    from minterpr.models import create_model

    root = tmp_path_factory.mktemp("fuzz_neural")
    (root / "cam1").mkdir()
    for n, image in enumerate(GALLERY):
        Image.new("RGB", (20, 40), ((37 * n) % 255, (91 * n) % 255, (13 * n) % 255)).save(root / image.path)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    backend = NeuralBackend(create_model("tiny"), batch_size=4)
    yield backend, backend.index_images(GALLERY, str(root)), root
    torch.set_num_threads(before)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=scripts(6), data=st.binary(max_size=64))
def test_neural_session_survives_any_moves(neural_setup, script, data):
    """The same over a tiny neural model: unreadable example images fail while encoding."""
    backend, index, root = neural_setup
    _run_moves(Session(backend, index, **OPTIONS), backend, index, root, script, data)


def test_neural_example_image_that_cannot_be_decoded(neural_setup):
    """An unreadable example image fails while encoding; the session is as before and goes on."""
    backend, index, root = neural_setup
    (root / "garbage.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(200)))
    session = Session(backend, index, **OPTIONS)
    first = session.describe("a woman in a red top")
    with pytest.raises(MinterprError, match="could not add the example turn") as caught:
        session.example("garbage.png")
    assert isinstance(caught.value.__cause__, OSError)  # PIL's error, or minterpr's ImageError (an OSError)
    assert session.history == [session.history[0]] and session.step is first
    session.example(GALLERY[3].path)
    _same_as_replay(session, backend, index)
