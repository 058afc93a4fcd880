"""The page's match temperature fitted on validation searches (interaction/match.py,
evaluation/match_calibration.py, ``minterpr calibrate match``): it recovers a known temperature,
it is stored with the model, and sessions, the page and the presence estimate use it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from minterpr.errors import InputError, RunError
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.policies import TEMPERATURE
from minterpr.interaction.match import (
    MatchCalibration,
    fit_match_temperature,
    match_nll,
    match_probabilities,
    match_reliability,
)
from minterpr.interaction.session import Session
from minterpr.interaction.fitted import RunExtras
from minterpr.serving.events import session_options
from minterpr.types import GalleryImage


def _drawn_steps(temperature: float, steps: int = 1500, k: int = 30, seed: int = 0):
    """Steps whose target is drawn from softmax(scores / temperature): the right answer is known."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        scores = rng.normal(0.0, 0.1, k)
        target = np.zeros(k, bool)
        target[rng.choice(k, p=match_probabilities(scores, temperature))] = True
        out.append((scores, target))
    return out


@pytest.mark.parametrize("true_temperature", [0.01, 0.05, 0.3])
def test_the_fit_recovers_the_temperature_the_targets_were_drawn_at(true_temperature: float) -> None:
    steps = _drawn_steps(true_temperature)
    fitted = fit_match_temperature(steps)
    assert fitted == pytest.approx(true_temperature, rel=0.15)
    assert match_nll(steps, fitted) <= min(match_nll(steps, true_temperature * f) for f in (0.5, 1.0, 2.0)) + 1e-9


def test_at_the_fitted_temperature_an_image_shown_at_m_is_the_person_about_m_of_the_time() -> None:
    steps = _drawn_steps(0.1, seed=1)
    ece_fitted, rows = match_reliability(steps, fit_match_temperature(steps))
    ece_sharp, _ = match_reliability(steps, TEMPERATURE)  # 0.02: five times too confident
    assert ece_fitted < 0.03 < ece_sharp
    assert sum(r["images"] for r in rows) == 10 * len(steps)


def test_several_crops_of_the_target_count_together_and_unranked_targets_are_left_out() -> None:
    scores = np.array([1.0, 1.0, 0.0, -np.inf])
    both = [(scores, np.array([True, True, False, False]))]
    assert match_nll(both, 1.0) == pytest.approx(-np.log(2 * np.e / (2 * np.e + 1)))
    beyond = (scores, np.array([False, False, False, True]))  # the target is beyond the shortlist
    assert match_nll([*both, beyond], 1.0) == pytest.approx(match_nll(both, 1.0))
    with pytest.raises(ValueError, match="no step ranks an image of its target"):
        match_nll([beyond], 1.0)


def _record(**changes) -> MatchCalibration:
    fields = dict(
        split="val",
        temperature=0.07,
        searches=60,
        steps=300,
        nll_before=4.0,
        nll_after=2.5,
        ece_before=0.3,
        ece_after=0.04,
        protocol={"simulator": "oracle", "turns": 5, "seed": 0},
    )
    return MatchCalibration(**{**fields, **changes})


def test_the_record_round_trips_through_the_run_extras_and_a_malformed_one_names_its_field() -> None:
    extras = RunExtras(match=_record())
    stored = json.loads(json.dumps(extras.to_dict()))
    assert RunExtras.from_dict(stored) == extras and extras.match_temperature() == 0.07
    assert RunExtras().match_temperature() == TEMPERATURE  # a model without one keeps the default
    stored["match_calibration"]["temperature"] = -1
    with pytest.raises(RunError, match="malformed extra 'match_calibration': 'temperature'"):
        RunExtras.from_dict(stored, "m.pt")


def _gallery():
    images = [
        GalleryImage(f"{i}.jpg", f"x:{i // 2}", attributes={"gender": (g,), "upper_colour": (c,)})
        for i, (g, c) in enumerate(
            [
                ("male", "red"),
                ("male", "red"),
                ("female", "red"),
                ("female", "blue"),
                ("male", "blue"),
                ("female", "green"),
            ]
        )
    ]
    backend = AttributeBackend()
    return backend, backend.index_images(images)


def test_sessions_show_the_match_at_their_temperature_and_the_served_options_carry_the_models() -> None:
    backend, index = _gallery()
    plain = Session(backend, index).describe("a man in red")
    flat = Session(backend, index, match_temperature=5.0).describe("a man in red")
    assert plain.ranking.tolist() == flat.ranking.tolist()  # the ranking is the same: only the match moves
    assert flat.match().tolist() == pytest.approx(match_probabilities(flat.scores, 5.0).tolist())
    assert flat.match()[0] < plain.match()[0]
    assert session_options({}, None, None, 5.0)["match_temperature"] == 5.0
    assert "match_temperature" not in session_options({}, None)
    with pytest.raises(InputError, match="match_temperature"):
        Session(backend, index, match_temperature=0.0)


def test_calibrate_match_fits_on_simulated_searches_and_refuses_test() -> None:
    from minterpr.evaluation.match_calibration import calibrate_match

    backend, index = _gallery()
    record = calibrate_match(backend, index, split="val", searches=3, turns=3)
    assert record.searches == 3 and record.steps >= 3 and record.nll_after <= record.nll_before + 1e-9
    with pytest.raises(InputError, match="never on test"):
        calibrate_match(backend, index, split="test")


def test_the_record_is_stored_in_an_exported_model_directory_without_touching_its_weights(tmp_path) -> None:
    pytest.importorskip("torch")
    from minterpr.models import create_model, save_model
    from minterpr.runtime.run import export_model_dir, load_run
    from minterpr.training.post_training import store_match_calibration

    save_model(create_model("tiny"), tmp_path / "run" / "model.pt", extra={"epoch": 1})
    export_model_dir(tmp_path / "run", tmp_path / "shared")
    config = (tmp_path / "shared" / "config.json").read_bytes()
    store_match_calibration(tmp_path / "shared", _record())
    assert (tmp_path / "shared" / "config.json").read_bytes() == config  # a shipped model's pin holds
    assert load_run(tmp_path / "shared").extras.match == _record()
    assert load_run(tmp_path / "shared").extras.other == {"epoch": 1}
