"""The evaluation report: JSON round trip, validation, tables, plot."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from minterpr.data.errors import DataError
from minterpr.evaluation.dialogue_metrics import per_round_metrics
from minterpr.evaluation.report import (
    EvaluationReport,
    build_report,
    format_comparison,
    format_table,
    plot_metric_per_round,
)


def make_rounds(r1_values):
    return [
        {
            "round": r,
            "r1": v,
            "r5": 60.0,
            "r10": 70.5,
            "mAP": 33.25,
            "mINP": 12.0,
            "hits1": v,
            "hits5": 61.0,
            "hits10": 80.0,
            "mean_first_hit_rank": 7.5,
        }
        for r, v in enumerate(r1_values)
    ]


def make_report(r1_values=(40.0, 45.5, 52.25), bri=2.125):
    return EvaluationReport(
        protocol={"dataset": "toy", "seed": 3, "split": "test"},
        rounds=make_rounds(r1_values),
        bri=bri,
        extra={"num_queries": 12, "first_round_at_rank1": 1.5},
    )


def test_json_round_trip_and_shape():
    rep = make_report()
    data = json.loads(rep.to_json())
    assert list(data)[:3] == ["protocol", "rounds", "bri"]
    assert data["num_queries"] == 12  # extra keys sit at top level
    assert data["rounds"][2]["r1"] == 52.25 and data["rounds"][0]["hits5"] == 61.0
    back = EvaluationReport.from_json(rep.to_json(indent=None))
    assert back == rep
    assert back.extra == {"num_queries": 12, "first_round_at_rank1": 1.5}
    # to_dict returns a copy: editing it leaves the report alone
    rep.to_dict()["rounds"][0]["r1"] = 99.0
    assert rep.rounds[0]["r1"] == 40.0


def test_save_load_is_atomic(tmp_path, monkeypatch):
    rep = make_report()
    path = rep.save(tmp_path / "sub" / "eval.json")
    assert EvaluationReport.load(path) == rep
    assert os.listdir(path.parent) == ["eval.json"]  # no temporary file left behind

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        make_report(r1_values=(1.0,)).save(path)
    monkeypatch.undo()
    assert EvaluationReport.load(path) == rep  # the old report is intact
    assert os.listdir(path.parent) == ["eval.json"]


@pytest.mark.parametrize(
    "mutate, pattern",
    [
        (lambda d: d.pop("bri"), r"missing \['bri'\]"),
        (lambda d: d.update(rounds=[]), "non-empty list"),
        (lambda d: d["rounds"][1].pop("mAP"), r"rounds\[1\] is missing 'mAP'"),
        (lambda d: d["rounds"][1].update(round=5), r"rounds\[1\] must have \"round\": 1"),
        (lambda d: d["rounds"][0].update(round=True), r"rounds\[0\] must have \"round\": 0"),
        (lambda d: d["rounds"][2].update(r1=140.0), r"rounds\[2\]\['r1'\] must be a percentage"),
        (lambda d: d["rounds"][2].update(hits10="80"), r"rounds\[2\]\['hits10'\] must be a percentage"),
        (lambda d: d["rounds"][0].update(hits1=float("nan")), "must be a percentage"),
        (lambda d: d.update(bri=-1.0), "'bri' must be a finite number"),
        (lambda d: d.update(bri=True), "'bri' must be a finite number"),
        (lambda d: d.update(protocol=["toy"]), "'protocol' must be a dict"),
        (lambda d: d["rounds"][0].update(note=float("inf")), "not plain JSON"),
        (lambda d: d["protocol"].update(path=object()), "not plain JSON"),
    ],
)
def test_validation_errors(mutate, pattern):
    data = make_report().to_dict()
    mutate(data)
    with pytest.raises(ValueError, match=pattern):
        EvaluationReport.from_dict(data)


def test_invalid_json_and_bad_extra(tmp_path):
    with pytest.raises(ValueError, match="not valid JSON"):
        EvaluationReport.from_json("{")
    with pytest.raises(ValueError, match="must be a JSON object"):
        EvaluationReport.from_json("[1, 2]")
    bad = tmp_path / "bad.json"
    bad.write_text('{"protocol": {}}')
    with pytest.raises(DataError, match="bad.json:0: <report>: evaluation report is missing"):
        EvaluationReport.load(bad)
    with pytest.raises(ValueError, match="clash"):
        EvaluationReport(protocol={}, rounds=make_rounds([1.0]), bri=0.0, extra={"bri": 1.0})


def test_format_table():
    lines = format_table(make_report()).splitlines()
    assert lines[0].split() == ["round", "R@1", "R@5", "R@10", "mAP", "mINP", "Hits@1", "Hits@10"]
    assert lines[1].split() == ["0", "40.00", "60.00", "70.50", "33.25", "12.00", "40.00", "80.00"]
    assert lines[3].split()[:2] == ["2", "52.25"]
    assert len({len(line) for line in lines[:4]}) == 1  # fixed width
    assert lines[4] == "BRI: 2.1250 (lower is better)"
    assert lines[5:] == ['protocol.dataset: "toy"', "protocol.seed: 3", 'protocol.split: "test"']


def test_format_comparison():
    reports = {"baseline": make_report((10.0, 20.0)), "ours": make_report((15.0, 25.0, 35.0), 1.0)}
    lines = format_comparison(reports, metric="r1").splitlines()
    assert lines[0].split() == ["R@1", "round", "0", "round", "1", "round", "2", "BRI"]
    assert lines[1].split() == ["baseline", "10.00", "20.00", "-", "2.12"]
    assert lines[2].split() == ["ours", "15.00", "25.00", "35.00", "1.00"]
    assert format_comparison(reports, metric="hits5").splitlines()[0].startswith("Hits@5")
    with pytest.raises(ValueError, match="unknown metric 'r2'"):
        format_comparison(reports, metric="r2")
    with pytest.raises(ValueError, match="no reports"):
        format_comparison({})


def test_build_report_from_per_round_metrics():
    rng = np.random.default_rng(0)
    gp = rng.integers(0, 5, size=20)
    qp = rng.choice(gp, size=6)
    sims = [rng.standard_normal((6, 20)).astype(np.float32) for _ in range(3)]
    res = per_round_metrics(sims, qp, gp)
    rep = build_report({"dataset": "toy"}, res)
    assert [row["r1"] for row in rep.rounds] == [row["r1"] for row in res["rounds"]]
    assert rep.bri == res["bri"]
    assert rep.extra == {"first_round_at_rank1": res["first_round_at_rank1"], "num_queries": 6, "num_rounds": 3}
    assert EvaluationReport.from_json(rep.to_json()) == rep
    # numpy scalars become plain numbers (the report is plain JSON)
    res["rounds"][0]["r1"] = np.float32(25.0)
    assert type(build_report({}, res).rounds[0]["r1"]) is float
    with pytest.raises(ValueError, match="'rounds' and 'bri'"):
        build_report({}, {"rounds": []})


def test_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    reports = {"baseline": make_report((10.0, 20.0)), "ours": make_report((15.0, 25.0, 35.0))}
    path = plot_metric_per_round(reports, tmp_path / "plots" / "r1.png", metric="hits10")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 1000
    with pytest.raises(ValueError, match="unknown metric"):
        plot_metric_per_round(reports, tmp_path / "x.png", metric="nope")


def test_plot_without_matplotlib_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import now raises ImportError
    with pytest.raises(ImportError, match=r"minterpr\[plot\]"):
        plot_metric_per_round({"a": make_report()}, tmp_path / "x.png")


@pytest.mark.parametrize(
    "content, field, words",
    [
        (b'{"protocol": ' + b"[" * 2000 + b"]" * 2000 + b', "rounds": [], "bri": 0}', "<report>", "nested deeper"),
        (b'{"protocol": {}, "rounds": [], "bri": NaN}', "<report>", "NaN is not a JSON number"),
        (b'{"protocol": {"x": "\\udc80"}, "rounds": [], "bri": 0}', "protocol.x", "lone surrogate"),
        (b'{"protocol": {}, "rounds": [], "bri": 1e999}', "<report>", "too large"),
        (b'{"protocol": \xff}', "<report>", "invalid UTF-8"),
        (b'{"protocol": {}, "rounds": 1, "bri": 0}', "<report>", "'rounds' must be a non-empty list"),
    ],
)
def test_load_refuses_what_is_not_a_plain_report(tmp_path, content, field, words):
    path = tmp_path / "eval.json"
    path.write_bytes(content)
    with pytest.raises(DataError) as info:
        EvaluationReport.load(path)
    assert info.value.file == str(path) and info.value.field == field and words in info.value.reason
