"""What a run's files store and read back without pickle: the random states of a checkpoint (and the
older numpy form), and the typed extras (RunExtras, a table of records each reading and writing itself)."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
import torch

from minterpr.errors import RunError
from minterpr.interaction.fitted import RECORDS, CalibrationRecord, RunExtras, WeightSelection
from minterpr.interaction.reranking import RerankConfig
from minterpr.training.checkpoint import capture_rng_state, load_checkpoint, restore_rng_state, save_checkpoint


def test_random_states_survive_a_weights_only_checkpoint(tmp_path):
    save_checkpoint({"rng": capture_rng_state()}, tmp_path / "last.pt")
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    restore_rng_state(load_checkpoint(tmp_path / "last.pt")["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_checkpoints_of_older_minterpr_with_numpy_state_still_resume(tmp_path):
    """Before, numpy's state was stored as an ndarray: the one allow-listed numpy type loads it."""
    old = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    torch.save({"format": 1, "rng": old}, tmp_path / "last.pt")
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    restore_rng_state(load_checkpoint(tmp_path / "last.pt")["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_typed_extras_round_trip():
    extra = {
        "stage": "dialogue",
        "epoch": 2,
        "selection_metric": "r1@last",
        "value": 55.0,
        "metrics": {"bri": 1.5},
        "scoring": RerankConfig.from_dict({"attribute_weight": 0.1, "prob_floor": 0.05}).to_dict(),
        "calibration": {"split": "val", "temperatures": {"gender": 1.5}, "nll_before": 3.0, "nll_after": 2.5},
        "scoring_selection": {"split": "val", "r1_last_by_weight": {"0.0": 40.0, "0.1": 45.0}},
    }
    extras = RunExtras.from_dict(extra)
    assert extras.to_dict() == extra and RunExtras.from_dict(extras.to_dict()) == extras
    assert extras.calibration == CalibrationRecord("val", {"gender": 1.5}, 3.0, 2.5)
    assert extras.selection == WeightSelection("val", {"0.0": 40.0, "0.1": 45.0})
    assert extras.rerank_config().prob_floor == 0.05 and extras.rerank_config().attribute_weight == 0.1
    assert extras.model_selection() == {"stage": "dialogue", "epoch": 2, "selection_metric": "r1@last", "value": 55.0}
    assert RunExtras.from_dict(None) == RunExtras() and RunExtras().rerank_config() == RerankConfig()


def test_runextras_is_the_table_of_records_each_reading_and_writing_itself():
    """One row per fitted record; every record owns from_dict / to_dict and RunExtras only loops."""
    assert [row.field for row in RECORDS] + ["other"] == [f.name for f in dataclasses.fields(RunExtras)]
    assert len({row.key for row in RECORDS}) == len(RECORDS) and all(
        row.type.from_dict and row.type.to_dict for row in RECORDS
    )
    calibration = CalibrationRecord("val", {"gender": 1.5}, 3.0, 2.5, {"gender:male": 88.0})
    assert CalibrationRecord.from_dict(calibration.to_dict()) == calibration
    assert "label_auc" not in CalibrationRecord("val", {}, 1.0, 1.0).to_dict()  # an old record, written as read
    selection = WeightSelection("val", {"0.1": 45.0})
    assert WeightSelection.from_dict({"split": "val", "r1_last_by_weight": {0.1: 45}}) == selection
    assert RunExtras.row_of(selection).key == "scoring_selection"
    with pytest.raises(TypeError, match="a dict is not a record stored with a model"):
        RunExtras.row_of({})
    with pytest.raises(
        RunError,
        match=r"m.pt: malformed extra 'scoring_selection': 'r1_last_by_weight.0.1': 'x' is "
        "not a finite number",
    ):
        RunExtras.from_dict({"scoring_selection": {"split": "val", "r1_last_by_weight": {"0.1": "x"}}}, "m.pt")
    with pytest.raises(RunError, match="m.pt: malformed extra 'calibration': 'split': 3 is not a split name"):
        RunExtras.from_dict({"calibration": {"split": 3, "temperatures": {}, "nll_before": 1, "nll_after": 1}}, "m.pt")
