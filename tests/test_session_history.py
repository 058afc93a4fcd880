"""Saving a conversation and reading it back: atomic JSON, replay to the same rankings, errors
that name the file, the entry and the field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from minterpr.data.errors import DataError
from minterpr.errors import InputError, MinterprError
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.history import HistoryEntry, read_history
from minterpr.interaction.session import Session
from minterpr.interaction.simulators import SIMULATORS

OPTIONS = dict(schedule="alternate", seed=11, reference_policy="diverse")


@pytest.fixture(scope="module")
def noisy(attribute_gallery):
    backend = AttributeBackend(noise=1.0, seed=2)
    return backend, backend.index_images(attribute_gallery[:240])


@pytest.fixture()
def saved(noisy, attribute_gallery, tmp_path):
    backend, index = noisy
    session = Session(backend, index, **OPTIONS)
    user = SIMULATORS.create("oracle", wrong_answer_rate=0.1).user(attribute_gallery[60], index, query=0, seed=3)
    session.describe(user.describe())
    for _ in range(5):
        turn = user.respond(session.action)
        if turn is None:
            break
        session.add(turn)
    path = tmp_path / "talk" / "chat.json"
    assert session.save_history(path) == str(path)
    return session, path


def test_saved_history_replays_to_the_same_rankings(noisy, saved):
    backend, index = noisy
    session, path = saved
    document = json.loads(path.read_text())
    assert document["format"] == "minterpr-session-history" and document["version"] == 1
    assert document["session"]["seed"] == 11 and len(document["turns"]) == len(session.history)
    assert read_history(path) == session.history
    shown = [entry.offered for entry in session.history]  # the references shown after each turn
    assert any(shown) and all(len(set(o)) == len(o) for o in shown)
    _rewrite(path, lambda d: [t.pop("offered") for t in d["turns"]])  # written before it was kept: recomputed
    assert [e.offered for e in read_history(path)] == [()] * len(shown)
    loaded = Session.load_history(path, backend, index, **OPTIONS)
    assert loaded.history == session.history
    assert np.array_equal(loaded.step.ranking, session.step.ranking) and loaded.step.action == session.step.action
    assert [p.name for p in path.parent.iterdir()] == ["chat.json"]  # atomic: no temporary left behind


def _rewrite(path, change):
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


@pytest.mark.parametrize(
    "change, where",
    [
        (lambda d: d.update(format="something else"), ": format: not a session history"),
        (lambda d: d.update(version=99), ": version: unsupported version 99"),
        (lambda d: d.update(turns={}), ": turns: expected a list"),
        (lambda d: d["turns"].__setitem__(1, 7), ": turns[1].<entry>: expected an object, got int"),
        (lambda d: d["turns"][0].update(type="shout"), ": turns[0].type: expected one of"),
        (lambda d: d["turns"][0].pop("text"), ": turns[0].text: missing"),
        (lambda d: d["turns"][0].update(text=["a", "woman"]), ": turns[0].text: expected a string, got list"),
        (lambda d: d["turns"][0].update(mood="grumpy"), ": turns[0].mood: unknown field"),
        (
            lambda d: d["turns"][0].update(facts=[["gender", ["robot"], False]]),
            ": turns[0].facts[0]: values of slot 'gender'",
        ),
        (
            lambda d: d["turns"][0].update(facts=[["colour", ["red"], False]]),
            ": turns[0].facts[0]: unknown slot 'colour'",
        ),
        (lambda d: d["turns"][0].update(facts=[["gender", ["male"], "no"]]), ": turns[0].facts[0]: negated must be"),
        (lambda d: d["turns"][0].update(top=[1, -2]), ": turns[0].top: expected a list of gallery indices"),
        (lambda d: d["turns"][0].update(offered="3"), ": turns[0].offered: expected a list of gallery indices"),
    ],
)
def test_broken_history_files_name_the_entry_and_field(saved, change, where):
    _, path = saved
    _rewrite(path, change)
    with pytest.raises(DataError) as caught:
        read_history(path)
    assert str(caught.value).startswith(f"{path}:0{where}")


def test_unreadable_history_files_are_clear_errors(noisy, saved, tmp_path):
    backend, index = noisy
    _, path = saved
    for content, message in (
        (b'{"format": ', "not JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b"[]", "not a session history"),
    ):
        path.write_bytes(content)
        with pytest.raises(DataError, match=message):
            read_history(path)
    with pytest.raises(DataError, match="cannot read"):
        read_history(tmp_path / "absent.json")
    # a well-formed file whose turns this gallery cannot replay: the file and the entry are named
    path.write_text(
        json.dumps(
            {
                "format": "minterpr-session-history",
                "version": 1,
                "turns": [
                    {"type": "description", "text": "a woman", "facts": [], "top": []},
                    {"type": "example", "image_path": "elsewhere.jpg", "facts": [], "top": []},
                ],
            }
        )
    )
    with pytest.raises(InputError, match=f"{path}: history entry 1: image path 'elsewhere.jpg'"):
        Session.load_history(path, backend, index)


def test_from_dict_validates_its_input():
    for data, message in (
        ({"type": "description", "text": "x", "facts": [], "top": [True]}, "top"),
        ([], "<entry>: expected an object"),
        ({"type": "reference", "reference_path": "a.jpg", "facts": [], "top": []}, "feedback: missing"),
    ):
        with pytest.raises(InputError, match=message):
            HistoryEntry.from_dict(data)


def test_saving_where_nothing_can_be_written_is_a_clear_error(noisy, tmp_path):
    backend, index = noisy
    session = Session(backend, index)
    session.describe("A man.")
    (tmp_path / "file").write_text("")
    with pytest.raises(MinterprError, match="cannot save the conversation"):
        session.save_history(tmp_path / "file" / "chat.json")
