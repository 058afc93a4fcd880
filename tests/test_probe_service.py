"""A few families of ``benchmarks/probe_service.py`` against a real server, so the script cannot rot:
its set-up (the tiny world, a real ``minterpr serve``, the actors) and the route discovery run, and
the probes that run here all hold."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.slow
def test_a_few_probe_families_hold_against_a_real_server(tmp_path, capsys):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import probe_service
    finally:
        sys.path.remove(str(BENCHMARKS))
    out = tmp_path / "probes.json"
    code = probe_service.main(
        ["--work", str(tmp_path / "work"), "--only", "login_csrf,roles,csp,file_modes", "--json", str(out)]
    )
    printed = capsys.readouterr().out
    results = json.loads(out.read_text())
    failures = [r for r in results if not r["held"]]
    assert code == 0 and not failures, failures
    by_category = {r["category"] for r in results}
    assert {"login CSRF", "role escalation", "state file modes"} <= by_category, by_category
    # the role probes are derived from the app's routes: every viewer-forbidden API operation is tried
    assert sum(r["category"] == "role escalation" for r in results) >= 10
    assert "| **all** |" in printed


def test_the_probe_table_lists_every_failure():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import probe_service
    finally:
        sys.path.remove(str(BENCHMARKS))
    results = [
        probe_service.Result("csrf", "no token", "403", "200", False),
        probe_service.Result("csrf", "wrong token", "403", "403", True),
    ]
    table = probe_service.tables(results)
    assert "| csrf | 2 | 1 | 1 |" in table and "- `csrf` no token: expected 403, got 200" in table
