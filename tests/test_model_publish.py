"""Publishing a model directory on the Hugging Face Hub (``minterpr models export --push-to-hub``), against a
stand-in hub that writes each commit in the hub cache's layout: what was pushed then loads offline
by ``hf-hub:ORG/NAME@COMMIT`` through ``huggingface_hub`` itself. Nothing reaches a network."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")
pytest.importorskip("huggingface_hub")

from minterpr.errors import InputError, RunError  # noqa: E402
from minterpr.training.publish import push_model_dir  # noqa: E402

from support.hub import export_tiny, offline_python  # noqa: E402

CARD = "# tiny-test\n\nTrained on nothing real: a test model. Not for use on people.\n"


class FakeHub:
    """``HfApi``'s create_repo / create_branch / create_commit; each commit lands in ``cache`` as the
    hub cache lays it out (refs/BRANCH -> commit, snapshots/COMMIT/files), the files read from disk."""

    def __init__(self, cache: Path, fail: BaseException | None = None):
        self.cache, self.fail, self.calls = cache, fail, []

    def create_repo(self, repo_id, *, repo_type, private, exist_ok):
        self.calls.append(("create_repo", repo_id, repo_type, private, exist_ok))
        if self.fail is not None:
            raise self.fail

    def create_branch(self, repo_id, *, branch, repo_type, exist_ok):
        self.calls.append(("create_branch", repo_id, branch))

    def create_commit(self, repo_id, operations, *, commit_message, revision, repo_type):
        contents = {op.path_in_repo: Path(op.path_or_fileobj).read_bytes() for op in operations}
        commit = hashlib.sha1(b"".join(k.encode() + v for k, v in sorted(contents.items()))).hexdigest()
        folder = self.cache / ("models--" + repo_id.replace("/", "--"))
        for name, data in contents.items():
            (folder / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
            (folder / "snapshots" / commit / name).write_bytes(data)
        (folder / "refs").mkdir(parents=True, exist_ok=True)
        (folder / "refs" / revision).write_text(commit)
        self.calls.append(("create_commit", repo_id, tuple(sorted(contents)), commit_message, revision))
        return SimpleNamespace(oid=commit, commit_url=f"https://huggingface.co/{repo_id}/commit/{commit}")


@pytest.fixture
def model_dir(tmp_path: Path) -> tuple[Path, str]:
    """A tiny exported model directory with a model card, and the model's fingerprint."""
    folder, fingerprint = export_tiny(tmp_path)
    (folder / "MODEL_CARD.md").write_text(CARD)
    (folder / ".notes").write_text("stays home")
    return folder, fingerprint


def test_a_pushed_model_loads_offline_by_its_commit(model_dir, tmp_path):
    folder, fingerprint = model_dir
    hub = FakeHub(tmp_path / "hub")
    result = push_model_dir(folder, "my-lab/tiny-test", revision="v1", private=True, api=hub)
    assert result.files == ("MODEL_CARD.md", "README.md", "config.json", "extras.json", "model.safetensors")
    assert hub.calls[0] == ("create_repo", "my-lab/tiny-test", "model", True, True)
    assert hub.calls[1] == ("create_branch", "my-lab/tiny-test", "v1")
    assert hub.calls[2][-1] == "v1" and result.revision == "v1"
    assert result.reference == f"hf-hub:my-lab/tiny-test@{result.commit}"
    snapshot = tmp_path / "hub" / "models--my-lab--tiny-test" / "snapshots" / result.commit
    assert (snapshot / "README.md").read_text() == CARD  # the card is the hub's card
    code = (
        "from minterpr.runtime.run import load_run\n"
        f"print(load_run({result.reference!r}).fingerprint)\n"
        "print(load_run('hf-hub:my-lab/tiny-test@v1').fingerprint)\n"
    )
    loaded = offline_python(code, tmp_path / "hub")
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.split() == [fingerprint, fingerprint]


def test_main_is_the_default_branch_and_a_readme_is_kept(model_dir, tmp_path):
    folder, _ = model_dir
    (folder / "README.md").write_text("# its own readme\n")
    hub = FakeHub(tmp_path / "hub")
    result = push_model_dir(folder, "my-lab/tiny-test", api=hub)
    assert [c[0] for c in hub.calls] == ["create_repo", "create_commit"] and result.revision == "main"
    snapshot = tmp_path / "hub" / "models--my-lab--tiny-test" / "snapshots" / result.commit
    assert (snapshot / "README.md").read_text() == "# its own readme\n"


def test_nothing_is_pushed_without_a_card_or_a_loadable_model(model_dir, tmp_path):
    folder, _ = model_dir
    hub = FakeHub(tmp_path / "hub")
    with pytest.raises(InputError, match="no model card"):
        bare = tmp_path / "bare"
        shutil.copytree(folder, bare)
        (bare / "MODEL_CARD.md").unlink()
        push_model_dir(bare, "my-lab/tiny-test", api=hub)
    with pytest.raises(InputError, match="not an exported model directory"):
        push_model_dir(tmp_path / "run", "my-lab/tiny-test", api=hub)
    with pytest.raises(InputError, match="name the branch with --revision"):
        push_model_dir(folder, "my-lab/tiny-test@v2", api=hub)
    for bad in ("no-slash", "a/b/c", ""):
        with pytest.raises(InputError, match="push to a hub repository named ORG/NAME"):
            push_model_dir(folder, bad, api=hub)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)  # the checksum no longer holds
    with pytest.raises(RunError):
        push_model_dir(folder, "my-lab/tiny-test", api=hub)
    assert hub.calls == []  # every refusal came before the hub was asked anything


def _transport_error() -> BaseException:
    """What the HTTP client of this huggingface_hub raises where there is no network."""
    import importlib

    for module in ("httpx2", "httpx"):
        try:
            return importlib.import_module(module).ConnectError("[Errno -2] Name or service not known")
        except (ImportError, AttributeError):
            continue
    return ConnectionError("[Errno -2] Name or service not known")


@pytest.mark.parametrize(
    "error, first_line",
    [
        (OSError("401 Unauthorized\nmore detail"), "401 Unauthorized"),
        (_transport_error(), "[Errno -2] Name or service not known"),
    ],
)
def test_a_failed_push_is_one_line(model_dir, tmp_path, error, first_line):
    import re

    folder, _ = model_dir
    hub = FakeHub(tmp_path / "hub", fail=error)
    with pytest.raises(
        RunError,
        match=r"hf-hub:my-lab/tiny-test: the push to the Hugging Face Hub failed " + re.escape(f"({first_line})") + "$",
    ):
        push_model_dir(folder, "my-lab/tiny-test", api=hub)


def test_export_pushes_from_the_command_line(model_dir, tmp_path, monkeypatch, capsys):
    import minterpr.training.publish as publish
    from minterpr.cli.main import main

    folder, _ = model_dir
    hub = FakeHub(tmp_path / "hub")
    monkeypatch.setattr(publish, "_hub_api", lambda: hub)
    push = ["--push-to-hub", "my-lab/tiny-test"]
    assert main(["models", "export", str(folder), *push, "--commit-message", "v1 of it"]) == 0
    out = capsys.readouterr().out
    assert "pushed 5 files to my-lab/tiny-test (main)" in out and "--run hf-hub:my-lab/tiny-test@" in out
    assert hub.calls[-1][3] == "v1 of it"
    # export and push in one command: the card written beside an earlier export stays and goes up
    assert main(["models", "export", str(tmp_path / "run"), "--out", str(folder), *push]) == 0
    assert "MODEL_CARD.md" in hub.calls[-1][2]
    assert main(["models", "export", str(folder), "--push-to-hub", ""]) == 2  # an empty name is refused, not "no push"
    assert "'': push to a hub repository named ORG/NAME" in capsys.readouterr().err
    assert main(["models", "export", str(tmp_path / "run")]) == 2
    assert "--out DIR is required" in capsys.readouterr().err
    assert main(["models", "export", str(tmp_path / "run"), "--out", str(tmp_path / "x"), "--private"]) == 2
    assert "go with --push-to-hub" in capsys.readouterr().err
