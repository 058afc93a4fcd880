"""The service's command line at its edges: a password that is not UTF-8, who a command-line change
is attributed to, the count an audit export reports, a copied demo cache reused."""

from __future__ import annotations

import getpass
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from minterpr.cli.main import main

SRC = str(Path(__file__).resolve().parents[1] / "src")
pytest.importorskip("sqlalchemy")


def _minterpr(*argv: str, stdin: bytes = b"", env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minterpr.cli.main", *argv],
        input=stdin,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": SRC, **(env or {})},
        timeout=300,
    )


def test_a_password_that_is_not_utf8_is_one_line(tmp_path):
    done = _minterpr(
        "users",
        "add",
        "ana",
        "--role",
        "analyst",
        "--data",
        str(tmp_path / "state"),
        stdin=b"caf\xe9 au lait 1234\n",
        env={"PYTHONIOENCODING": "utf-8"},
    )
    err = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in err, err
    assert err.strip().splitlines() == [
        "minterpr users add: error: the password on standard input is not UTF-8 text"
    ], err


def test_command_line_changes_are_the_os_users_and_export_counts_lines(tmp_path, monkeypatch, capsys):
    state = tmp_path / "state"
    monkeypatch.setattr("sys.stdin", io.StringIO("a long enough passphrase 42\n"))
    assert main(["users", "add", "ana", "--role", "analyst", "--data", str(state), "--quiet"]) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("another long passphrase 43\n"))
    assert main(["users", "passwd", "ana", "--data", str(state), "--quiet"]) == 0
    log = tmp_path / "audit.jsonl"
    assert main(["audit", "export", "--data", str(state), "--out", str(log)]) == 0
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    by = f"os:{getpass.getuser()}"
    assert [(e["user"], e["action"]) for e in entries] == [
        (by, "user_create"),
        (by, "password_set"),
        (by, "audit_export"),
    ]
    capsys.readouterr()
    with sqlite3.connect(state / "minterpr.db") as db:  # someone with the file removes an entry
        triggers = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]
        for name in triggers:
            db.execute(f"DROP TRIGGER {name}")
        db.execute("DELETE FROM audit_log WHERE seq = 2")
    assert main(["audit", "export", "--data", str(state), "--out", str(log), "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["entries"] == len(log.read_text().splitlines()) == 3  # 4 written, 1 removed


def test_a_copied_demo_cache_is_reused(tmp_path, monkeypatch):
    from minterpr.cli.shared import demo_world as demo

    trained = []

    def fake_train(cfg, run_dir, resume=False):
        trained.append(run_dir)
        (run_dir / "model.pt").write_bytes(b"weights")
        return SimpleNamespace(model_path=run_dir / "model.pt")

    monkeypatch.setattr("minterpr.training.trainer.train", fake_train)
    monkeypatch.setattr("minterpr.training.post_training.calibrate_and_choose_weight", lambda cfg, path: None)
    monkeypatch.setattr("minterpr.cli.shared.demo_world.describe_choices", lambda choices: "")
    # the fake weights cannot be loaded to fit the match temperature: record where it would be fitted
    calibrated = []
    monkeypatch.setattr("minterpr.cli.shared.demo_world.calibrate_demo_match", lambda run, data: calibrated.append(run))
    monkeypatch.setattr(
        "minterpr.cli.shared.demo_world.calibrate_demo_presence", lambda run, data: calibrated.append(run)
    )
    first = tmp_path / "demo"
    (first / "data").mkdir(parents=True)
    demo.train_model(first, first / "data", 0, progress=False)
    demo.train_model(first, first / "data", 0, progress=False)
    assert len(trained) == 1  # cached in place
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(first, copy)
    assert demo.train_model(copy, copy / "data", 0, progress=False) == copy / "run"
    assert len(trained) == 1  # a copy of the cache is the same cache
