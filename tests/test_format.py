"""The tree is formatted: `ruff format --check` over src, tests and benchmarks (pyproject's [tool.ruff]).

A change that fails here is fixed by running `ruff format .` at the repository root.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    try:
        import ruff  # noqa: F401  (the dev extra installs it)
    except ImportError:
        if shutil.which("ruff") is None:
            pytest.skip("ruff is not installed: pip install -e '.[dev]'")
        return ["ruff"]
    return [sys.executable, "-m", "ruff"]


def test_tree_is_formatted() -> None:
    result = subprocess.run(
        [*_ruff(), "format", "--check", "--diff", "src", "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, (
        "files are not formatted; run `ruff format .` at the repository root:\n" + result.stdout[-4000:]
    )


def test_check_finds_an_unformatted_file(tmp_path: Path) -> None:
    """The check itself can fail: a badly spaced file is reported under the project's config."""
    bad = tmp_path / "bad.py"
    bad.write_text("x  =  [1,2 ,3]\n")
    result = subprocess.run(
        [*_ruff(), "format", "--check", "--config", str(ROOT / "pyproject.toml"), str(bad)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert "bad.py" in result.stdout + result.stderr
