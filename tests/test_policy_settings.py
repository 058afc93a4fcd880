"""The policies' settings: their temperature, one knob from the session (and simulate, the benchmarks)
to every candidate distribution the policies and the ``auto`` schedule weigh moves by; and the
``auto`` schedule's questions to a user who cannot tell shown images apart."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from minterpr.errors import InputError
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.policies import (
    QUESTION_POLICIES,
    REFERENCE_POLICIES,
    TEMPERATURE,
    PolicyContext,
    candidate_distribution,
    policy_temperature,
)
from minterpr.interaction.schedule import Schedule, shown_person_mass
from minterpr.interaction.session import AskQuestion, Session, ShowReferences


def _context(index, scores, temperature=TEMPERATURE):
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    return PolicyContext(index, scores, order, [], frozenset(), frozenset(), random.Random(0), temperature)


@pytest.fixture(scope="module")
def noisy(attribute_gallery):
    backend = AttributeBackend(noise=1.0, seed=0)
    return backend, backend.index_images(attribute_gallery)


def test_a_temperature_is_a_positive_number_or_fitted():
    assert policy_temperature("fitted", 0.215) == 0.215
    assert policy_temperature(" Fitted ", 0.3) == 0.3
    assert policy_temperature("0.05", 0.215) == 0.05
    assert policy_temperature(2, 0.215) == 2.0
    for bad in ("0", "-1", "warm", "inf", "nan", None, True):
        with pytest.raises(InputError, match="positive number or 'fitted'"):
            policy_temperature(bad, 0.215)


def test_the_context_temperature_is_the_default_a_policy_own_overrides_it(noisy):
    _, index = noisy
    scores = np.linspace(1.0, 0.0, len(index))
    sharp, flat = _context(index, scores, 0.02), _context(index, scores, 0.5)
    _, w_sharp = candidate_distribution(sharp, top_k=10)
    _, w_flat = candidate_distribution(flat, top_k=10)
    assert w_sharp.sum() == pytest.approx(1.0) and w_flat.sum() == pytest.approx(1.0)
    assert w_sharp[0] > w_flat[0] and w_flat[-1] > w_sharp[-1]  # a flatter distribution spreads the mass
    _, w_given = candidate_distribution(flat, top_k=10, temperature=0.02)
    np.testing.assert_allclose(w_given, w_sharp)  # an explicit temperature wins over the context's
    # the registered policies follow the context unless built with their own
    follows = QUESTION_POLICIES.create("info_gain")
    assert follows.temperature is None
    assert follows.choose(sharp).gain != pytest.approx(follows.choose(flat).gain)
    own = QUESTION_POLICIES.create("info_gain", temperature=0.02)
    assert own.choose(flat).gain == pytest.approx(follows.choose(sharp).gain)
    assert REFERENCE_POLICIES.create("uncertain").temperature is None
    shown = [int(i) for i in sharp.ranking[:3]]
    assert shown_person_mass(sharp, shown) > shown_person_mass(flat, shown)


class _Spy:
    """A question policy that records the temperature of the contexts it is given."""

    name = "spy"

    def __init__(self):
        self.seen = []

    def choose(self, ctx):
        self.seen.append(ctx.temperature)
        return None


def test_the_session_knob_reaches_the_policies_and_the_record(noisy):
    backend, index = noisy
    spy = _Spy()
    session = Session(backend, index, question_policy=spy, schedule="auto", policy_temperature=0.25)
    session.describe("a woman in a red top and black trousers")
    assert spy.seen and set(spy.seen) == {0.25}
    assert session.protocol()["policy_temperature"] == 0.25
    assert Session(backend, index).protocol()["policy_temperature"] == TEMPERATURE
    for bad in (0, -0.1, float("inf"), "0.2", True):
        with pytest.raises(InputError, match="policy_temperature must be a positive number"):
            Session(backend, index, policy_temperature=bad)


def test_the_default_is_behaviour_neutral(noisy):
    backend, index = noisy
    runs = []
    for options in ({}, {"policy_temperature": TEMPERATURE}):
        session = Session(backend, index, seed=3, **options)
        step = session.describe("a man with a backpack and jeans")
        runs.append((step.ranking[:20].tolist(), repr(step.action)))
    assert runs[0] == runs[1]
    flat = Session(backend, index, seed=3, policy_temperature=5.0).describe("a man with a backpack and jeans")
    assert flat.ranking[:20].tolist() == runs[0][0]  # the ranking does not depend on it, only the next move


def test_simulate_takes_a_number_or_the_fitted_one(tmp_path, capsys):
    from minterpr.cli.main import main
    from support.helpers import random_attributes
    from minterpr.data.build import mark_dataset
    from minterpr.data.formats.gallery import write_gallery
    from minterpr.types import GalleryImage

    root = tmp_path / "data"
    root.mkdir()
    rng = random.Random(0)
    gallery = [
        GalleryImage(f"p{pid}_{view}.png", f"toy:{pid}", camera_id=f"c{view}", attributes=attributes)
        for pid in range(6)
        for attributes in [random_attributes(rng, unknown_rate=0.0)]
        for view in range(2)
    ]
    write_gallery(gallery, root / "gallery_test.jsonl")
    mark_dataset(root)
    args = ["simulate", "--backend", "attribute", "--data", str(root), "--rounds", "2", "--limit", "4", "--quiet"]
    assert main([*args, "--policy-temperature", "0.3", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["protocol"]["policy_temperature"] == 0.3
    # the attribute backend has no fitted match temperature: 'fitted' is the policies' default
    assert main([*args, "--policy-temperature", "fitted", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["protocol"]["policy_temperature"] == TEMPERATURE
    assert main([*args, "--policy-temperature", "hot"]) == 2
    assert "positive number or 'fitted', got 'hot'" in capsys.readouterr().err


def _unsure_session(noisy, schedule):
    backend, index = noisy
    session = Session(backend, index, schedule=schedule, seed=1)
    step = session.describe("a man in a black jacket and blue jeans")
    for _ in range(4):  # until the system shows images
        if isinstance(step.action, ShowReferences):
            break
        step = session.answer("I don't remember")
    assert isinstance(step.action, ShowReferences)
    return session, step


def test_a_user_who_cannot_tell_is_asked_while_questions_remain(noisy):
    """``Schedule.ask_when_unsure`` (the default): after "maybe" to a shown image the auto schedule asks
    (an open slot's question) rather than showing more images; a rule-out is not "unsure"."""
    on, off = Schedule(), Schedule(ask_when_unsure=False)
    assert on.ask_when_unsure
    session, step = _unsure_session(noisy, on)
    after = session.feedback(step.action.indices[0], "Maybe, I'm not sure.")
    assert isinstance(after.action, AskQuestion)
    assert after.action.slot not in {f.slot for f in session._target(session._history)}
    session, step = _unsure_session(noisy, off)
    shown = session.feedback(step.action.indices[0], "Maybe, I'm not sure.").action
    assert isinstance(shown, ShowReferences)  # off: this gallery's candidates still favour images
    runs = []
    for schedule in (on, off):
        session, step = _unsure_session(noisy, schedule)
        runs.append(repr(session.feedback(step.action.indices[0], "That's not the person.").action))
    assert runs[0] == runs[1]
    assert on.describe() == "auto" and off.describe() == "auto(ask_when_unsure=False)"
