"""The demo end to end at a tiny size: builds, trains (tiny config), simulates, caches."""

import json

import pytest

torch = pytest.importorskip("torch")

from minterpr.cli.shared import demo_world as demo  # noqa: E402
from minterpr.cli.main import main  # noqa: E402


@pytest.mark.slow
def test_demo_end_to_end_and_cached(tmp_path, monkeypatch, capsys):
    torch.set_num_threads(1)
    monkeypatch.setattr(demo, "DEMO_IDENTITIES", {"train_identities": 12, "val_identities": 4, "test_identities": 6})
    monkeypatch.setattr(demo, "DEMO_IMAGE_SIZE", (64, 32))
    out, report = tmp_path / "demo", tmp_path / "eval.json"
    args = ["demo", "--out", str(out), "--config", "tiny", "--rounds", "2", "--limit", "4", "--json", str(report)]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "R@1" in first and "round 2" in first
    saved = json.loads(report.read_text())
    assert [r["round"] for r in saved["rounds"]] == [0, 1, 2] and "bri" in saved
    model = out / "run" / "model.pt"
    stamp = model.stat().st_mtime_ns
    assert main(args) == 0  # second run reuses data and model
    assert "(cached)" in capsys.readouterr().err and model.stat().st_mtime_ns == stamp  # status lines: logged
    # a run interrupted before it finished is resumed, never taken for a cached model
    (out / "run" / "demo_finished.json").unlink()
    assert main(args) == 0
    assert "(cached)" not in capsys.readouterr().err
    stamp = model.stat().st_mtime_ns
    # another minterpr's (or another seed's) run in the cache is replaced, not resumed or refused
    assert main([*args, "--seed", "1"]) == 0
    assert "holds a run with other settings" in capsys.readouterr().err and model.stat().st_mtime_ns != stamp
