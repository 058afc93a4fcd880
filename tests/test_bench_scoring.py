"""``benchmarks/bench_scoring.py``: a grid of scoring fields measured by simulated searches, seeds pooled."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from support.datasets import make_tiny_dataset  # noqa: E402
from support.helpers import load_benchmark  # noqa: E402


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_scoring")


def test_the_grid_is_parsed_strictly(bench):
    assert bench.parse_vary(["anchor_lambda=0.5,0.7", "rejection=true,false"]) == [
        ("anchor_lambda", [0.5, 0.7]),
        ("rejection", [True, False]),
    ]
    for bad, says in (
        ("anchor_lambda", "expected FIELD=V1,V2"),
        ("anchor_lambda=", "expected FIELD=V1,V2"),
        ("anchor_lambda=0.5,high", "'high' is not a number"),
    ):
        with pytest.raises(ValueError, match=says):
            bench.parse_vary([bad])


def test_each_point_is_measured_and_seeds_pool(bench, tiny_run, tmp_path, capsys, one_torch_thread):
    data = make_tiny_dataset(tmp_path / "data")
    argv = [
        "--run",
        str(tiny_run),
        "--data",
        str(data),
        "--split",
        "val",
        "--rounds",
        "2",
        "--vary",
        "anchor_lambda=0.5,1.0",
    ]
    assert bench.main(argv + ["--seeds", "0", "1", "--json", str(tmp_path / "rows.json")]) == 0
    rows = json.loads((tmp_path / "rows.json").read_text())["rows"]
    assert [r["anchor_lambda"] for r in rows] == [0.5, 1.0]
    assert bench.main(argv + ["--seeds", "0", "--json", str(tmp_path / "seed0.json")]) == 0
    seed0 = json.loads((tmp_path / "seed0.json").read_text())["rows"]
    assert bench.main(argv + ["--seeds", "1", "--json", str(tmp_path / "seed1.json")]) == 0
    seed1 = json.loads((tmp_path / "seed1.json").read_text())["rows"]
    targets = seed0[0]["searches"]  # one per val identity
    assert targets == 4 and all(r["searches"] == 2 * targets for r in rows)
    for pooled, a, b in zip(rows, seed0, seed1):  # equal searches per seed: the pooled figure is their mean
        assert pooled["r1"] == pytest.approx([(x + y) / 2 for x, y in zip(a["r1"], b["r1"])], abs=0.051)
    for row in rows:
        assert len(row["r1"]) == 3 and all(0 <= x <= y <= 100 for x, y in zip(row["r1"], row["r5"]))
    capsys.readouterr()
    # a bad field or value, a missing split: one line and exit 2, before any search
    assert bench.main(["--run", str(tiny_run), "--data", str(data), "--vary", "anchor_lambda=2"]) == 2
    assert "anchor_lambda must be in" in capsys.readouterr().err
    assert bench.main(["--run", str(tiny_run), "--data", str(data), "--vary", "no_such=1"]) == 2
    assert "unknown field(s) no_such" in capsys.readouterr().err
    assert bench.main(["--run", str(tiny_run), "--data", str(data), "--split", "absent"]) == 2
    assert "no gallery manifest" in capsys.readouterr().err


def test_the_policies_temperature_is_a_dimension_of_the_grid(bench, tiny_run, tmp_path, capsys, one_torch_thread):
    import shutil

    from minterpr.models import update_extra

    data = make_tiny_dataset(tmp_path / "data")
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    match = {"split": "val", "temperature": 0.3, "searches": 4, "steps": 8, "nll_before": 2.0, "nll_after": 1.0}
    match |= {"ece_before": 0.2, "ece_after": 0.1, "protocol": {}}
    update_extra(run / "model.pt", {"match_calibration": match})  # 'fitted' is the run's 0.3
    argv = ["--run", str(run), "--data", str(data), "--split", "val", "--rounds", "1"]
    out = tmp_path / "rows.json"
    assert bench.main([*argv, "--policy-temperature", "0.02,fitted", "--vary", "anchor_lambda=0.5,1.0"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]  # the product: 2 x 2 points
    assert [(r["policy_temperature"] == 0.02, r["anchor_lambda"]) for r in printed] == [
        (True, 0.5),
        (True, 1.0),
        (False, 0.5),
        (False, 1.0),
    ]
    assert bench.main([*argv, "--policy-temperature", "0.02,fitted", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["policy_temperature"] for r in rows] == [0.02, 0.3]
    capsys.readouterr()
    assert bench.main([*argv, "--policy-temperature", "0.02,cold"]) == 2  # before any search
    assert "positive number or 'fitted', got 'cold'" in capsys.readouterr().err


def test_a_reading_from_the_labels_is_recorded_and_checked(bench, tiny_run, tmp_path, capsys, one_torch_thread):
    data = make_tiny_dataset(tmp_path / "data")
    argv = ["--run", str(tiny_run), "--data", str(data), "--split", "val", "--rounds", "1"]
    assert bench.main([*argv, "--label-reading", "0.9:0.25"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert row["label_reading"] == "0.9:0.25" and row["searches"] == 4
    assert bench.main([*argv, "--label-reading", "sure"]) == 2  # before any search
    assert "expected CONFIDENCE[:ERRORS]" in capsys.readouterr().err


@pytest.mark.parametrize(
    "script, argv",
    [("bench_scoring", ["--run", "nowhere", "--data", "nowhere"]), ("bench_street", ["--run", "nowhere"])],
)
@pytest.mark.parametrize("seeds", [["-1"], ["0", "0"]])
def test_seeds_must_be_distinct_and_not_negative(script, argv, seeds, capsys):
    """A seed below 0 or given twice is refused in one line before anything loads (it would pool one search twice)."""
    with pytest.raises(SystemExit) as refused:
        load_benchmark(script).main([*argv, "--seeds", *seeds])
    assert refused.value.code == 2
    assert "--seeds: distinct integers >= 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    "script, argv",
    [
        ("bench_scoring", ["--run", "nowhere", "--data", "nowhere"]),
        ("bench_presence", ["--data", "nowhere"]),
        ("bench_street", ["--run", "nowhere", "--video", "nowhere.avi"]),
    ],
)
@pytest.mark.parametrize(
    "ceiling, said",
    [
        (["--label-reading", "0.3"], "--label-reading: confidence in (0.5, 1]"),
        (["--identity-appearance", "2"], "--identity-appearance: a weight in [0, 1]"),
    ],
)
def test_a_bad_ceiling_is_one_line(script, argv, ceiling, said, capsys):
    """A ceiling's setting is checked before anything loads: one line, exit 2."""
    try:
        code = load_benchmark(script).main([*argv, *ceiling])
    except SystemExit as refused:
        code = refused.code
    assert code == 2
    assert said in capsys.readouterr().err.strip().splitlines()[-1]


def test_identity_appearance_needs_an_appearance_model(bench, tiny_run, tmp_path, capsys, one_torch_thread):
    """Without appearance vectors there is nothing to replace: one line, not a search without the ceiling."""
    data = make_tiny_dataset(tmp_path / "data")
    argv = ["--run", str(tiny_run), "--data", str(data), "--split", "val", "--rounds", "1"]
    assert bench.main([*argv, "--identity-appearance", "1"]) == 2
    assert "--identity-appearance needs an appearance model" in capsys.readouterr().err


def test_bench_presence_without_its_dataset_is_one_line(capsys):
    """A missing dataset folder is one line naming it and how to build one, exit 2 (it was a traceback)."""
    assert load_benchmark("bench_presence").main(["--data", "nowhere"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench_presence: nowhere: no such dataset folder")
