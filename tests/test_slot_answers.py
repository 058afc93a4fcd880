"""Per-slot answer calibration (interaction/slot_answers.py): never below the majority answer on the
data it was fitted on, a no-op for a confident and right model, the stored record and its errors,
and the ✓ / ✗ marks it vetoes."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from minterpr.errors import RunError
from minterpr.interaction.explain import EvidencePolicy
from minterpr.interaction.fitted import RunExtras
from minterpr.interaction.slot_answers import (
    UNSURE,
    SlotAnswers,
    fit_slot_answers,
    group_of,
    mean_scores,
    score_slot_answers,
)
from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact

L = len(ONTOLOGY.flat_labels())
COLUMNS = ONTOLOGY.slot_columns()


def synthetic(seed: int, n: int = 240, skill: float = 0.0, groups: int = 3):
    """(probs, targets, mask, groups): every slot labelled with one true value drawn from a skewed prior;
    the head's probabilities put ``skill`` extra weight on the true value over random noise (0: a head
    no better than chance, usually below the majority), and each camera set shifts the noise."""
    rng = np.random.default_rng(seed)
    probs, targets = rng.uniform(0.0, 1.0, (n, L)), np.zeros((n, L))
    group = rng.integers(0, groups, n)
    for columns in COLUMNS.values():
        prior = rng.dirichlet(np.full(len(columns), 0.5))
        truth = rng.choice(len(columns), n, p=prior)
        targets[np.arange(n), np.asarray(columns)[truth]] = 1.0
        bias = rng.normal(0, 1.0, (groups, len(columns)))[group]  # a camera set favours some values
        logits = bias + rng.normal(0, 1.0, (n, len(columns))) + skill * (targets[:, columns] > 0)
        probs[:, columns] = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return probs, targets, np.ones((n, L), bool), [f"cam{g}" for g in group]


@pytest.mark.parametrize("seed,skill", [(0, 0.0), (1, 0.0), (2, 1.0), (3, 2.0), (4, 0.5)])
def test_never_below_the_majority_on_the_data_it_was_fitted_on(seed, skill):
    probs, targets, mask, groups = synthetic(seed, skill=skill)
    record = fit_slot_answers(probs, targets, mask, groups, min_group=20)
    scores = score_slot_answers(record, probs, targets, mask)
    assert set(scores) == set(COLUMNS)
    for slot, score in scores.items():
        assert score.calibrated >= score.majority - 1e-9, slot
        assert record.slots[slot].accuracy_after == pytest.approx(score.calibrated)
    if skill == 0.0:  # a head no better than chance is below the majority raw, at it calibrated
        mean = mean_scores(scores)
        assert mean["raw"] < mean["majority"] <= mean["calibrated"]


@pytest.mark.parametrize("seed,skill", [(0, 0.0), (2, 1.0), (4, 0.5)])
def test_the_worst_case_objective_is_never_below_the_majority_on_any_camera_set(seed, skill):
    probs, targets, mask, groups = synthetic(seed, skill=skill)
    record = fit_slot_answers(probs, targets, mask, groups, min_group=20, objective="worst")
    for slot, rule in record.slots.items():
        assert rule.worst_gain >= 0
        for g in set(groups):  # on every camera set it weighed
            rows = np.array(groups) == g
            gs = score_slot_answers(record, probs[rows], targets[rows], mask[rows])[slot]
            fallback = (
                targets[rows][:, COLUMNS[slot]][
                    :, [v.name for v in ONTOLOGY.slot(slot).values].index(rule.majority)
                ].mean()
                * 100
            )
            assert gs.calibrated >= fallback - 1e-9, (slot, g)
    with pytest.raises(ValueError, match="objective must be one of blend, worst, mean"):
        fit_slot_answers(probs, targets, mask, groups, objective="best")


def test_a_confident_and_right_model_is_left_alone():
    probs, targets, mask, groups = synthetic(5, skill=12.0)
    assert all(
        score.raw == 100.0
        for score in score_slot_answers(fit_slot_answers(probs, targets, mask, groups), probs, targets, mask).values()
    )
    record = fit_slot_answers(probs, targets, mask, groups)
    for slot, rule in record.slots.items():
        assert (rule.prior_weight, rule.margin) == (0.0, 0.0), slot
        assert rule.accuracy_after == rule.accuracy_before == 100.0
    answers = record.answers(probs)
    for slot, columns in COLUMNS.items():
        assert (answers[slot] == probs[:, columns].argmax(axis=1)).all(), slot


def test_unlabelled_slots_get_no_rule_and_answer_raw():
    probs, targets, mask, groups = synthetic(6)
    mask[:, COLUMNS["gender"]] = False
    record = fit_slot_answers(probs, targets, mask, groups)
    assert "gender" not in record.slots and "age" in record.slots
    assert (record.answers(probs)["gender"] == probs[:, COLUMNS["gender"]].argmax(axis=1)).all()


def test_the_record_round_trips_through_the_model_extras():
    probs, targets, mask, groups = synthetic(7)
    record = fit_slot_answers(probs, targets, mask, groups)
    extras = RunExtras.from_dict({"slot_answers": record.to_dict(), "epoch": 3})
    assert extras.slot_answers == record and extras.to_dict()["slot_answers"] == record.to_dict()
    assert RunExtras.row_of(record).refit == "minterpr calibrate slots"
    assert any(rule.margin is None for rule in record.slots.values())  # chance-level slots always abstain
    again = SlotAnswers.from_dict(record.to_dict())
    assert again.answers(probs)["age"].tolist() == record.answers(probs)["age"].tolist()


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda d: d["slots"]["gender"].update(margin="x"), "'slots.gender.margin': 'x' is not a finite number"),
        (
            lambda d: d["slots"]["gender"].pop("prior_weight"),
            "'slots.gender.prior_weight': None is not a finite number",
        ),
        (lambda d: d["slots"]["gender"].update(majority=3), "'slots.gender.majority': 3 is not a value name"),
        (lambda d: d.update(slots=[]), "'slots': a list, not a dict"),
        (lambda d: d["slots"]["gender"].update(prior={"male": "a"}), "'slots.gender.prior.male': 'a' is not a finite"),
    ],
)
def test_a_bad_stored_record_is_one_line_naming_the_file_and_field(change, message):
    probs, targets, mask, groups = synthetic(8)
    data = fit_slot_answers(probs, targets, mask, groups).to_dict()
    change(data)
    with pytest.raises(RunError) as err:
        RunExtras.from_dict({"slot_answers": data}, "runs/x/model.pt")
    text = str(err.value)
    assert len(text.splitlines()) == 1 and text.startswith("runs/x/model.pt: malformed extra 'slot_answers': ")
    assert message in text


def test_a_record_for_another_ontology_is_kept_unused_with_a_warning(caplog):
    probs, targets, mask, groups = synthetic(9)
    data = fit_slot_answers(probs, targets, mask, groups).to_dict()
    data["slots"]["gender"]["majority"] = "robot"
    with caplog.at_level(logging.WARNING):
        extras = RunExtras.from_dict({"slot_answers": data}, "m.pt")
    assert extras.slot_answers is None and extras.other["slot_answers"] == data
    assert "minterpr calibrate slots" in caplog.text and "robot" in caplog.text


def test_group_of_uses_the_person_namespace_else_the_camera():
    assert group_of("peta-grid:cam1", "peta-grid:1") == "peta-grid" and group_of("cam3", "7") == "cam3"
    assert group_of(None, "7") == "all"


def test_marks_stand_only_where_the_calibrated_answer_agrees():
    male, female = COLUMNS["gender"]
    probs = np.full((3, L), 0.01)
    probs[:, [male, female]] = [[0.95, 0.05], [0.15, 0.85], [0.9, 0.1]]
    targets, mask = np.zeros_like(probs), np.zeros(probs.shape, bool)
    mask[:, [male, female]] = True
    targets[:, male] = 1.0  # all male: the confident "female" reading is wrong
    record = fit_slot_answers(probs, targets, mask, ["a"] * 3)
    assert record.answers(probs)["gender"].tolist() == [0, UNSURE, 0]
    plain = EvidencePolicy(calibrated=True)
    policy = EvidencePolicy.from_extras(RunExtras(calibration=None, slot_answers=record))
    assert policy.slot_answers is record and not policy.calibrated  # uncalibrated probabilities: no marks at all
    policy = EvidencePolicy(calibrated=True, slot_answers=record)
    is_female, not_male = Fact("gender", ("female",)), Fact("gender", ("male",), negated=True)
    assert plain.verdict(is_female, 0.85, probs[1]) == "yes" and policy.verdict(is_female, 0.85, probs[1]) == "unsure"
    assert policy.verdict(not_male, 0.85, probs[1]) == "unsure"
    assert policy.verdict(is_female, 0.05, probs[0]) == plain.verdict(is_female, 0.05, probs[0]) == "no"
    assert policy.verdict(Fact("gender", ("male",)), 0.9, probs[2]) == "yes"
    assert policy.verdict(is_female, 0.85) == "yes"  # without the image's probabilities: the probability alone


def test_a_loaded_pipeline_marks_with_the_slot_answers_it_stores(tiny_run, tmp_path):
    import shutil

    from minterpr.models.io import update_extra
    from minterpr.runtime.pipeline import load_pipeline

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    assert load_pipeline(run).evidence_policy().slot_answers is None
    probs, targets, mask, groups = synthetic(0)
    record = fit_slot_answers(probs, targets, mask, groups)
    update_extra(run / "model.pt", {"slot_answers": record.to_dict()})
    assert load_pipeline(run).evidence_policy().slot_answers == record  # the page's and chat's marks use it
