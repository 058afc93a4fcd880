"""The model zoo: the real-pixel model that ships with minterpr, and models by Hugging Face Hub id.

A model is named in one of three ways wherever minterpr takes a run (``--run``, ``load_run``,
``load_pipeline``):

* a path: a training run directory, a model file or an exported model directory;
* ``shipped`` or ``shipped:NAME``: a model directory of the repository's ``models/`` folder
  (``MINTERPR_MODELS`` names another folder of them). ``shipped`` is :data:`DEFAULT_REAL_MODEL`,
  the model for real camera footage; ``models/zoo.json`` pins each one's ``config.json`` by
  SHA-256 (which in turn pins the weights), checked before it is loaded;
* ``hf-hub:ORG/NAME`` or ``hf-hub:ORG/NAME@REVISION``: a model directory published on the
  Hugging Face Hub, fetched into (or read from) the hub's cache by ``huggingface_hub``
  (``HF_HUB_OFFLINE=1`` reads the cache only; pin a revision for reproducible results).

Nothing here imports torch.

Example:
    >>> parse_hub_ref("hf-hub:minterpr/peta-lite0@v1")
    ('minterpr/peta-lite0', 'v1')
    >>> resolve_model("runs/synth")
    PosixPath('runs/synth')
    >>> resolve_model("hf-hub:no-slash")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    minterpr.errors.InputError: hf-hub:no-slash: a hub model is named hf-hub:ORG/NAME[@REVISION]
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from minterpr.errors import InputError, RunError, first_line

DEFAULT_REAL_MODEL = "peta-pa100k-lite2"  # the shipped model for real camera footage (models/<name>/)
# the shipped appearance (same-person) model used beside it (minterpr.runtime.appearance)
DEFAULT_APPEARANCE_MODEL = "osnet-x0_25-reid"
APPEARANCE_KIND = "appearance"  # zoo.json's "kind" of an appearance model; absent = an attribute model
MODELS_ENV = "MINTERPR_MODELS"  # a folder of shipped model directories, instead of the repository's models/
ZOO_FILE = "zoo.json"  # in that folder: {name: {"config_sha256": ..., "summary": ...}}
SHIPPED_PREFIX, HUB_PREFIX = "shipped", "hf-hub:"
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def shipped_models_dir() -> Path:
    """The folder of shipped model directories: ``$MINTERPR_MODELS``, else the source checkout's
    ``models/`` (beside ``src/``, where an editable install or a clone has it)."""
    env = os.environ.get(MODELS_ENV, "").strip()
    return Path(env) if env else Path(__file__).resolve().parents[3] / "models"


def shipped_models() -> dict[str, dict[str, str]]:
    """``{name: {"config_sha256", "summary"}}`` of ``zoo.json``; {} where there is no zoo."""
    path = shipped_models_dir() / ZOO_FILE
    if not path.is_file():
        return {}
    try:
        zoo = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RunError(path, f"cannot be read ({err})") from None
    if not isinstance(zoo, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("config_sha256"), str) for v in zoo.values()
    ):
        raise RunError(path, 'expected {"NAME": {"config_sha256": "...", "summary": "..."}, ...}')
    return zoo


def shipped_model_dir(name: str = DEFAULT_REAL_MODEL) -> Path:
    """The checked directory of the shipped model ``name``; RunError in one line when it is absent
    or its ``config.json`` is not the one ``zoo.json`` pins."""
    root, zoo = shipped_models_dir(), shipped_models()
    if name not in zoo:
        known = ", ".join(sorted(zoo)) or "none"
        raise RunError(
            root / ZOO_FILE,
            f"no shipped model {name!r} (shipped here: {known}); the shipped models "
            f"come with a source checkout of minterpr, or set {MODELS_ENV}=DIR",
        )
    config = root / name / "config.json"
    try:
        digest = hashlib.sha256(config.read_bytes()).hexdigest()
    except OSError as err:
        raise RunError(config, f"cannot be read ({err.strerror or err}): the shipped model is incomplete") from None
    if digest != zoo[name]["config_sha256"]:
        raise RunError(
            config,
            f"SHA-256 {digest[:12]}... is not the {zoo[name]['config_sha256'][:12]}... that "
            f"{ZOO_FILE} pins: the shipped model was changed; restore it from the repository",
        )
    return config.parent


def default_real_model_dir() -> Path:
    """The model for real footage when none is named: the shipped :data:`DEFAULT_REAL_MODEL`."""
    return shipped_model_dir(DEFAULT_REAL_MODEL)


def parse_hub_ref(ref: str) -> tuple[str, str | None]:
    """``"hf-hub:ORG/NAME[@REV]"`` -> ``("ORG/NAME", REV or None)``; InputError when malformed."""
    repo, _, revision = ref.removeprefix(HUB_PREFIX).partition("@")
    if not _HUB_ID.fullmatch(repo) or (revision == "" and "@" in ref):
        raise InputError(f"{ref}: a hub model is named {HUB_PREFIX}ORG/NAME[@REVISION]")
    return repo, revision or None


def hub_snapshot(ref: str) -> Path:
    """The local folder of a hub model (downloaded into the hub cache unless ``HF_HUB_OFFLINE``)."""
    repo, revision = parse_hub_ref(ref)
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError
    except ImportError:
        raise InputError(
            f"{ref}: hub models need huggingface_hub: pip install -c constraints.txt 'minterpr[model]'"
        ) from None
    try:
        return Path(snapshot_download(repo, revision=revision))
    except LocalEntryNotFoundError:
        raise RunError(
            ref,
            "not in the Hugging Face cache and the hub cannot be reached (HF_HUB_OFFLINE or no "
            "network): download it once where there is a network, or copy its cache",
        ) from None
    except (HfHubHTTPError, OSError, ValueError) as err:
        raise RunError(ref, f"cannot be fetched from the Hugging Face Hub ({first_line(err)})") from None


def resolve_model(ref: str | os.PathLike[str]) -> Path:
    """A model's local path from any of the three ways of naming it (module doc)."""
    if isinstance(ref, os.PathLike):
        return Path(ref)
    if not isinstance(ref, str):
        raise InputError(f"a model is named by a path, 'shipped[:NAME]' or 'hf-hub:ORG/NAME', got {type(ref).__name__}")
    if ref.startswith(HUB_PREFIX):
        return hub_snapshot(ref)
    if ref == SHIPPED_PREFIX or ref.startswith(SHIPPED_PREFIX + ":"):
        return shipped_model_dir(ref.partition(":")[2] or DEFAULT_REAL_MODEL)
    return Path(ref)


def shipped_kind(name: str) -> str:
    """What the shipped model ``name`` is: ``"appearance"`` or ``"attribute"`` (zoo.json's ``kind``)."""
    return shipped_models().get(name, {}).get("kind", "attribute")


def pin_shipped_model(name: str, summary: str, fingerprint: str, *, kind: str | None = None) -> dict[str, str]:
    """Record the model directory ``models/NAME`` in ``zoo.json`` (its ``config.json``'s SHA-256,
    a one-line summary, the model fingerprint, and ``kind`` "appearance" for an appearance model), replacing an earlier entry of that name; the
    step that publishes a new version after its figures were measured. Returns the entry.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp()); (root / "m").mkdir(); _ = (root / "m" / "config.json").write_text("{}")
        >>> os.environ[MODELS_ENV] = str(root)
        >>> pin_shipped_model("m", "a test", "f00")["config_sha256"][:8]
        '44136fa3'
        >>> shipped_model_dir("m") == root / "m"
        True
        >>> del os.environ[MODELS_ENV]
    """
    root = shipped_models_dir()
    config = root / name / "config.json"
    if not config.is_file():
        raise RunError(config, "missing: export the model there first (minterpr models export RUN --out DIR)")
    entry = {
        "config_sha256": hashlib.sha256(config.read_bytes()).hexdigest(),
        "summary": summary,
        "fingerprint": fingerprint,
        **({"kind": kind} if kind else {}),
    }
    zoo = {**shipped_models(), name: entry}
    from minterpr.fileio import atomic_write_text

    atomic_write_text(root / ZOO_FILE, json.dumps(zoo, indent=1, sort_keys=True) + "\n")
    return entry
