"""The README's demo table is the one the demo's recorded JSON makes (it cannot drift by hand)."""

from __future__ import annotations

import json
from pathlib import Path

from minterpr.evaluation.demo_table import demo_table, readme_table

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_table_is_made_from_the_recorded_demo_json():
    record = json.loads((ROOT / "benchmarks" / "data" / "demo_results.json").read_text(encoding="utf-8"))
    assert readme_table((ROOT / "README.md").read_text(encoding="utf-8")) == demo_table(record)


def test_every_setting_records_its_moves():
    record = json.loads((ROOT / "benchmarks" / "data" / "demo_results.json").read_text(encoding="utf-8"))
    for name, report in record["settings"].items():
        moves = report["moves"]
        assert moves.get("question", 0) + moves.get("reference", 0) > 0, name
