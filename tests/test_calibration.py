"""Attribute calibration: per-slot temperatures fitted on labels, stored in and applied by the model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from minterpr.language.ontology import ONTOLOGY
from minterpr.models import create_model, save_model
from minterpr.models.io import load_model
from minterpr.training.calibration import calibration_nll, fit_slot_temperatures, minimise_log_temperature

LABELS = ONTOLOGY.flat_labels()


def _columns(slot: str) -> list[int]:
    return ONTOLOGY.slot_columns()[slot]


def _sampled(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logits and labels drawn so that sigmoid(logit) is the true P(label): calibrated at T = 1."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 3.0, (n, len(LABELS)))
    targets = (rng.random(logits.shape) < 1.0 / (1.0 + np.exp(-logits))).astype(np.float32)
    mask = np.zeros(logits.shape, bool)
    for slot in ("upper_colour", "carried"):  # multi-valued: independent labels, exactly as drawn
        mask[:, _columns(slot)] = True
    return logits, targets, mask


def test_calibrated_logits_keep_temperature_one_and_overconfident_ones_are_cooled() -> None:
    logits, targets, mask = _sampled(3000)
    fitted = fit_slot_temperatures(logits, targets, mask)
    assert sorted(fitted) == ["carried", "upper_colour"]  # only annotated slots
    assert all(0.85 < t < 1.15 for t in fitted.values()), fitted
    hot = fit_slot_temperatures(4.0 * logits, targets, mask)  # 4x over-confident
    assert all(3.4 < t < 4.6 for t in hot.values()), hot
    before, after = calibration_nll(4 * logits, targets, mask), calibration_nll(4 * logits, targets, mask, hot)
    assert all(after[s] < before[s] for s in hot)


def test_single_valued_slots_are_fitted_on_the_normalised_true_value() -> None:
    rng = np.random.default_rng(1)
    columns = _columns("upper_type")
    n = 2000
    truth = rng.integers(0, len(columns), n)
    logits = np.full((n, len(LABELS)), -3.0)
    logits[:, columns] = rng.normal(0, 1, (n, len(columns)))
    logits[np.arange(n), np.array(columns)[truth]] += 6.0  # right value far ahead: under-confident at /4
    targets = np.zeros_like(logits, np.float32)
    targets[np.arange(n), np.array(columns)[truth]] = 1
    mask = np.zeros(logits.shape, bool)
    mask[:, columns] = True
    mask[:5, columns] = False  # unannotated images are left out
    fitted = fit_slot_temperatures(logits / 4, targets, mask)
    assert list(fitted) == ["upper_type"] and fitted["upper_type"] < 1.0  # sharpened
    assert fit_slot_temperatures(logits, targets, mask, min_images=n) == {}  # too few annotated images
    one_value = mask & (targets[:, [columns[0]]] == 1)  # only the images holding the first value
    assert fit_slot_temperatures(logits / 4, targets, one_value, min_images=1) == {}  # labels never vary


def test_golden_section_agrees_with_a_fine_grid() -> None:
    curve = lambda x: (x - 0.7) ** 2 + 0.1 * math.sin(3 * x)  # noqa: E731
    grid = np.linspace(math.log(0.125), math.log(8.0), 20001)
    assert minimise_log_temperature(curve) == pytest.approx(grid[np.argmin([curve(x) for x in grid])], abs=1e-3)


def test_fit_rejects_mismatched_shapes() -> None:
    logits, targets, mask = _sampled(10)
    with pytest.raises(ValueError, match="must all be"):
        fit_slot_temperatures(logits[:, :5], targets, mask)


def test_model_applies_stores_and_reloads_its_temperatures(tmp_path) -> None:
    model = create_model("tiny").eval()
    assert torch.equal(model.attribute_temperature, torch.ones(len(LABELS)))
    model.set_attribute_temperature({"gender": 2.0, "carried": 0.5})
    logits = torch.randn(3, len(LABELS))
    expected = torch.sigmoid(logits)
    expected[:, _columns("gender")] = torch.sigmoid(logits[:, _columns("gender")] / 2.0)
    expected[:, _columns("carried")] = torch.sigmoid(logits[:, _columns("carried")] / 0.5)
    torch.testing.assert_close(model.attribute_probabilities(logits), expected)
    save_model(model, tmp_path / "m.pt")
    assert torch.equal(load_model(tmp_path / "m.pt").attribute_temperature, model.attribute_temperature)
    with pytest.raises(ValueError, match="must be among"):
        model.set_attribute_temperature({"shoe_size": 2.0})
    with pytest.raises(ValueError, match="must be > 0"):
        model.set_attribute_temperature({"gender": 0.0})


def test_models_saved_before_calibration_load_uncalibrated() -> None:
    model = create_model("tiny")
    state = {k: v for k, v in model.state_dict().items() if k != "attribute_temperature"}
    fresh = create_model("tiny")
    fresh.attribute_temperature.fill_(3.0)
    fresh.load_state_dict(state, strict=True)
    assert torch.equal(fresh.attribute_temperature, torch.ones(len(LABELS)))
