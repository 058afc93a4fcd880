"""Publishing an exported model directory on the Hugging Face Hub (``minterpr export --push-to-hub``).

:func:`push_model_dir` checks the directory the way a user's ``--run hf-hub:ORG/NAME`` will load it
(:func:`~minterpr.runtime.run.load_run`: the config, the weights' SHA-256, the extras), requires a model
card (``README.md``, else ``MODEL_CARD.md``, which the hub then shows as the repository's card: a
model of people says what it was trained on, those data's terms and what it must not be used for),
and uploads every file of the directory in one commit (:func:`publish_files`: hidden files and
sub-folders stay home). The repository is created when missing (``private`` then applies), and
``revision`` names a branch, created from ``main`` when missing. The result names the commit, so
the model can be pinned: ``--run hf-hub:ORG/NAME@COMMIT``.

The token is ``huggingface_hub``'s own (``HF_TOKEN``, or ``hf auth login``); nothing here stores one.
Pretrained encoder weights the directory references by package (``minterpr export`` without
``--self-contained``) are not uploaded: whoever loads it installs the same packages.

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> for name in ("config.json", "model.safetensors", "MODEL_CARD.md", ".cache"):
    ...     _ = (folder / name).write_text("x")
    >>> sorted(publish_files(folder))  # the card is also the hub's README.md
    ['MODEL_CARD.md', 'README.md', 'config.json', 'model.safetensors']
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minterpr.errors import InputError, RunError, first_line
from minterpr.models.zoo import HUB_PREFIX, parse_hub_ref

CARD_FILES = ("README.md", "MODEL_CARD.md")  # the model card, in the order looked for; the hub shows README.md


@dataclass(frozen=True)
class PushResult:
    """What a push published."""

    repo_id: str  # ORG/NAME on the hub
    revision: str  # the branch the commit went to
    commit: str  # the commit's id: pin it with --run hf-hub:ORG/NAME@COMMIT
    url: str  # the commit's page
    files: tuple[str, ...]  # paths in the repository, sorted

    @property
    def reference(self) -> str:
        """The ``--run`` value that loads exactly this commit."""
        return f"{HUB_PREFIX}{self.repo_id}@{self.commit}"


def publish_files(model_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Path in the repository -> local file: every regular, non-hidden file at the top of ``model_dir``,
    and ``README.md`` from ``MODEL_CARD.md`` when the directory has no README.md of its own."""
    folder = Path(model_dir)
    files = {p.name: p for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink()
             and not p.name.startswith(".")}
    if "README.md" not in files and "MODEL_CARD.md" in files:
        files["README.md"] = files["MODEL_CARD.md"]
    return files


def _hub_module() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise InputError("pushing to the hub needs huggingface_hub: pip install -c constraints.txt "
                         "'minterpr[model]'") from None
    return huggingface_hub


def _hub_api() -> Any:
    return _hub_module().HfApi()


def _hub_errors() -> tuple[type[BaseException], ...]:
    """What a refusing or unreachable hub raises: huggingface_hub's HTTP error, and the transport
    errors of whichever HTTP client this huggingface_hub version uses (httpx2, httpx or requests)."""
    import importlib

    found: list[type[BaseException]] = [OSError, ValueError]
    for module, name in (("huggingface_hub.errors", "HfHubHTTPError"), ("httpx2", "HTTPError"),
                         ("httpx", "HTTPError"), ("requests", "RequestException")):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def push_model_dir(model_dir: str | os.PathLike[str], repo_id: str, *, revision: str | None = None,
                   private: bool = False, commit_message: str | None = None, api: Any = None) -> PushResult:
    """Upload the exported model directory ``model_dir`` to the hub repository ``repo_id`` (module doc).

    ``api``: an object with ``huggingface_hub.HfApi``'s ``create_repo``, ``create_branch`` and
    ``create_commit`` (default: a new ``HfApi``). InputError for a bad name or a directory without a
    model card, RunError (one line) for a directory that does not load or a hub that refuses."""
    try:
        repo, pinned = parse_hub_ref(HUB_PREFIX + str(repo_id))
    except InputError:
        raise InputError(f"{repo_id!r}: push to a hub repository named ORG/NAME") from None
    if pinned is not None:
        raise InputError(f"{repo_id}: push to ORG/NAME and name the branch with --revision, not @{pinned}")
    folder = Path(model_dir)
    if not (folder / "config.json").is_file():
        raise InputError(f"{folder}: not an exported model directory (no config.json): "
                         "write one with minterpr export RUN --out DIR")
    if not any((folder / name).is_file() for name in CARD_FILES):
        raise InputError(f"{folder}: no model card ({' or '.join(CARD_FILES)}): say what the model was trained on, "
                         "those data's terms, what it does and does not do, and its intended use before publishing "
                         "it (models/peta-pa100k-lite2/MODEL_CARD.md is one)")
    from minterpr.runtime.run import load_run

    load_run(folder)  # what a user's --run hf-hub:... will do: the checksum, config and extras are checked here
    files = publish_files(folder)
    add = _hub_module().CommitOperationAdd
    operations = [add(path_in_repo=name, path_or_fileobj=str(path)) for name, path in files.items()]
    api = _hub_api() if api is None else api
    branch = revision or "main"
    try:
        api.create_repo(repo, repo_type="model", private=private, exist_ok=True)
        if branch != "main":
            api.create_branch(repo, branch=branch, repo_type="model", exist_ok=True)
        info = api.create_commit(repo, operations, commit_message=commit_message or f"minterpr model {folder.name}",
                                 revision=branch, repo_type="model")
    except _hub_errors() as err:
        raise RunError(f"{HUB_PREFIX}{repo}", f"the push to the Hugging Face Hub failed ({first_line(err)})") from None
    return PushResult(repo_id=repo, revision=branch, commit=str(info.oid), url=str(info.commit_url),
                      files=tuple(sorted(files)))
