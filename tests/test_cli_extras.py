"""Commands without their optional packages, and output paths that cannot be written: one line
naming the right extra (with the constraints file) or the path, exit 2, before any work.

The missing packages are simulated in a subprocess (``sys.modules[name] = None``: import and
``importlib.util.find_spec`` then find nothing), never uninstalled."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")
HINT = "-c constraints.txt"


def _run(argv: list[str], hide: tuple[str, ...] = (), cwd: Path | None = None) -> subprocess.CompletedProcess:
    prelude = f"import sys\nfor name in {list(hide)!r}:\n    sys.modules[name] = None\n"
    code = prelude + f"from minterpr.cli.main import main\nraise SystemExit(main({argv!r}))\n"
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": SRC},
    )


def _one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


MISSING = [  # (argv, modules hidden, the extra the line must name)
    (["serve", "--demo", "--port", "0"], ("torch",), "model"),
    (["ingest", "--gallery", "g", "--run", "r", "video.mp4"], ("cv2",), "ingest"),
    (["ingest", "--gallery", "g", "--run", "r", "video.mp4"], ("torch",), "model"),
    (["train", "--config", "tiny", "--out", "run"], ("torch",), "model"),
    (["models", "export", "run", "--out", "exported"], ("torch",), "model"),
    (["adapt", "--run", "run", "--images", "crops", "--out", "adapted"], ("torch",), "model"),
    (["eval-attributes", "--run", "run", "--gallery", "g.jsonl"], ("torch",), "model"),
    (["demo", "--out", "demo"], ("torch",), "model"),
    (["users", "list", "--data", "state"], ("sqlalchemy",), "serve"),
]


@pytest.mark.parametrize("argv, hide, extra", MISSING, ids=[f"{m[0][0]}-{m[1][0]}" for m in MISSING])
def test_a_missing_extra_is_one_line_naming_it(argv, hide, extra, tmp_path):
    started = time.monotonic()
    line = _one_line(_run(argv, hide, cwd=tmp_path))
    assert f"minterpr[{extra}]" in line and HINT in line and hide[0] in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "work was done before the check"
    assert time.monotonic() - started < 60


def test_an_unwritable_json_path_is_refused_before_the_work(tmp_path):
    (tmp_path / "afile").write_text("in the way")
    blocked = tmp_path / "afile" / "report.json"  # its folder is a file
    line = _one_line(
        _run(["eval", "--run", str(tmp_path / "run"), "--data", str(tmp_path / "d.jsonl"), "--json", str(blocked)])
    )
    assert line.startswith(f"minterpr eval: error: --json {blocked}: "), line  # not the missing run
    line = _one_line(_run(["data", "stats", str(tmp_path), "--json", "/"]))
    assert line.startswith("minterpr data stats: error: --json /: "), line
    readonly = tmp_path / "readonly"
    readonly.mkdir()
    readonly.chmod(0o500)
    try:
        if os.access(readonly, os.W_OK):
            pytest.skip("running as a user who may write anywhere (root)")
        line = _one_line(_run(["demo", "--out", str(tmp_path / "demo"), "--json", str(readonly / "r.json")]))
        assert str(readonly) in line and ".tmp" not in line, line
    finally:
        readonly.chmod(0o700)


def test_a_missing_dialogue_file_is_named_in_one_line(tmp_path, tiny_run):
    missing = tmp_path / "missing.jsonl"
    line = _one_line(_run(["eval", "--run", str(tiny_run), "--data", str(missing)]))
    assert str(missing) in line and "Errno" not in line, line


def test_a_failed_report_write_names_the_report_not_its_temporary(tmp_path, monkeypatch):
    import minterpr.cli.shared.common as common
    from minterpr.cli.shared.common import CLIError

    def refuse(path, text):
        raise PermissionError(13, "Permission denied", str(tmp_path / ".report.json.1a2b3c4d.tmp"))

    monkeypatch.setattr(common, "atomic_write_text", refuse)
    with pytest.raises(CLIError) as caught:
        common.write_json(str(tmp_path / "report.json"), {"r1": 1.0})
    assert str(caught.value) == f"{tmp_path / 'report.json'}: cannot write the JSON report: Permission denied"


@pytest.mark.parametrize(
    "argv",
    [["models"], ["index", "build", "--images", "imgs", "--out", "idx"], ["chat", "--images", "imgs"]],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_commands_that_reach_torch_deep_inside_say_the_extra_in_one_line(argv, tmp_path):
    from PIL import Image

    (tmp_path / "imgs").mkdir()
    Image.new("RGB", (32, 64)).save(tmp_path / "imgs" / "a.png")
    line = _one_line(_run(argv, ("torch",), cwd=tmp_path))
    assert "minterpr[model]" in line and HINT in line and "torch" in line, line


def test_quiet_turns_off_third_party_progress_bars(tmp_path):
    pytest.importorskip("transformers")
    code = (
        "import transformers, huggingface_hub.utils as hub\n"
        "from minterpr.cli.main import main\n"
        "main(['models', '--quiet'])\n"
        "from transformers.utils import logging\n"
        "print(logging.is_progress_bar_enabled(), hub.are_progress_bars_disabled())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert done.stdout.strip().splitlines()[-1] == "False True", done.stdout + done.stderr
