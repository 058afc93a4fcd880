"""Online evaluation: policies compared on simulated users, report shape, replay protocol."""

from __future__ import annotations

import numpy as np
import pytest

from minterpr.data.dialogue_synthesis import DialogueSynthesisConfig, synthesize_records
from minterpr.evaluation.online import compare, one_target_per_identity, simulate
from minterpr.evaluation.report import PERCENT_KEYS, EvaluationReport, plot_metric_per_round
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.reranking import RerankConfig
from minterpr.interaction.simulators import SIMULATORS


@pytest.fixture(scope="module")
def setup(attribute_gallery):
    backend = AttributeBackend(noise=1.5, seed=0)  # an imperfect attribute classifier
    index = backend.index_images(attribute_gallery)
    return backend, index, one_target_per_identity(attribute_gallery, limit=100, seed=0)


@pytest.fixture(scope="module")
def question_runs(setup):
    backend, index, targets = setup
    return {
        policy: simulate(backend, index, targets, rounds=3, schedule="questions", question_policy=policy, seed=0)
        for policy in ("info_gain", "random", "fixed")
    }


def _r1(report):
    return [row["r1"] for row in report.rounds]


def test_info_gain_beats_random_and_fixed_questions(question_runs):
    info, rand, fixed = (question_runs[p] for p in ("info_gain", "random", "fixed"))
    assert _r1(info)[0] == _r1(rand)[0] == _r1(fixed)[0]  # same descriptions: only the questions differ
    for baseline in (rand, fixed):
        assert _r1(info)[3] >= _r1(baseline)[3] + 5
        assert np.mean(_r1(info)[1:]) > np.mean(_r1(baseline)[1:])
        assert info.bri < baseline.bri
        assert info.extra["mean_turns_to_rank1"] < baseline.extra["mean_turns_to_rank1"]


def test_interaction_beats_the_description_alone(question_runs, setup):
    for report in question_runs.values():
        assert _r1(report)[3] >= _r1(report)[0] + 20
        hits = [row["hits1"] for row in report.rounds]
        assert hits == sorted(hits)  # cumulative
    backend, index, targets = setup
    auto = simulate(backend, index, targets[:50], rounds=3, seed=0)
    assert _r1(auto)[3] >= _r1(auto)[0] + 20
    assert auto.extra["moves"]["question"] + auto.extra["moves"]["reference"] > 0


def test_report_records_the_protocol(setup, tmp_path):
    backend, index, targets = setup
    report = simulate(
        backend,
        index,
        targets[:20],
        rounds=2,
        question_policy="fixed",
        reference_policy="top1",
        simulator="oracle",
        simulator_options={"dont_know_rate": 0.3, "wrong_answer_rate": 0.1},
        reranking=RerankConfig(anchor=False),
        schedule=("question", "reference"),
        seed=4,
        protocol={"dataset": "fixture"},
    )
    assert [row["round"] for row in report.rounds] == [0, 1, 2]
    assert all(key in row for row in report.rounds for key in PERCENT_KEYS)
    p = report.protocol
    assert p["simulator"] == {
        "simulator": "oracle",
        "dont_know_rate": 0.3,
        "wrong_answer_rate": 0.1,
        "max_description_slots": 4,
        "vague_rate": 0.25,
    }
    assert (p["question_policy"], p["reference_policy"], p["schedule"], p["rounds"], p["seed"]) == (
        "fixed",
        "top1",
        ["question", "reference"],
        2,
        4,
    )
    assert p["reranking"]["anchor"] is False and p["backend"]["noise"] == 1.5 and p["dataset"] == "fixture"
    assert p["num_targets"] == 20 and p["gallery_size"] == len(index)
    assert report.extra["moves"] == {
        "question": 20,
        "reference": report.extra["moves"]["reference"],
        "none": 20 - report.extra["moves"]["reference"],
    }
    saved = EvaluationReport.load(report.save(tmp_path / "r.json"))
    assert saved == report


def test_same_seed_same_report(setup):
    backend, index, targets = setup
    a = simulate(backend, index, targets[:15], rounds=2, seed=9)
    b = simulate(backend, index, targets[:15], rounds=2, seed=9)
    assert a.rounds == b.rounds and a.bri == b.bri


def test_replay_protocol_and_comparison(setup, attribute_gallery, tmp_path):
    backend, index, _ = setup
    config = DialogueSynthesisConfig(
        seed=1, min_qa_turns=2, max_qa_turns=2, min_image_turns=2, max_image_turns=2, records_per_image=1
    )
    samples = [r.sample for r in synthesize_records(attribute_gallery[:120:3], attribute_gallery, config)]
    simulator = SIMULATORS.create("replay", samples=samples)
    report = simulate(backend, index, simulator.targets(index), rounds=5, simulator=simulator)
    assert report.protocol["simulator"] == {"simulator": "replay", "dialogues": 40}
    assert (
        report.extra["moves"]["question"] + report.extra["moves"]["reference"] + report.extra["moves"]["none"] == 5 * 40
    )
    assert _r1(report)[4] > _r1(report)[0]  # the recorded Q&A and feedback help
    assert _r1(report)[5] == _r1(report)[4]  # nothing recorded after round 4: the ranking stays
    reports = compare(
        backend,
        index,
        one_target_per_identity(attribute_gallery, 20),
        rounds=2,
        settings={"a": {"question_policy": "fixed"}, "b": {"schedule": "references"}},
    )
    assert list(reports) == ["a", "b"]
    png = plot_metric_per_round(reports, tmp_path / "r1.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simulate_rejects_bad_input(setup):
    backend, index, targets = setup
    with pytest.raises(ValueError, match="no targets"):
        simulate(backend, index, [], rounds=1)
    with pytest.raises(ValueError, match="rounds"):
        simulate(backend, index, targets, rounds=-1)
