"""Publishing an exported model directory on the Hugging Face Hub (``minterpr models export --push-to-hub``).

:func:`push_model_dir` checks the directory the way a user's ``--run hf-hub:ORG/NAME`` will load it
(:func:`~minterpr.runtime.run.load_run`: the config, the weights' SHA-256, the extras), requires a model
card (``README.md``, else ``MODEL_CARD.md``, which the hub then shows as the repository's card: a
model of people says what it was trained on, those data's terms and what it must not be used for),
and uploads every file of the directory in one commit (:func:`publish_files`: hidden files and
sub-folders stay home). The repository is created when missing (``private`` then applies), and
``revision`` names a branch, created from ``main`` when missing. The result names the commit, so
the model can be pinned: ``--run hf-hub:ORG/NAME@COMMIT``.

The token is ``huggingface_hub``'s own (``HF_TOKEN``, or ``hf auth login``); nothing here stores one.
Pretrained encoder weights the directory references by package (``minterpr models export`` without
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
    files = {
        p.name: p for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink() and not p.name.startswith(".")
    }
    if "README.md" not in files and "MODEL_CARD.md" in files:
        files["README.md"] = files["MODEL_CARD.md"]
    return files


def _hub_module() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise InputError(
            "pushing to the hub needs huggingface_hub: pip install -c constraints.txt 'minterpr[model]'"
        ) from None
    return huggingface_hub


def _hub_api() -> Any:
    return _hub_module().HfApi()


def _hub_errors() -> tuple[type[BaseException], ...]:
    """What a refusing or unreachable hub raises: huggingface_hub's HTTP error, and the transport
    errors of whichever HTTP client this huggingface_hub version uses (httpx2, httpx or requests)."""
    import importlib

    found: list[type[BaseException]] = [OSError, ValueError]
    for module, name in (
        ("huggingface_hub.errors", "HfHubHTTPError"),
        ("httpx2", "HTTPError"),
        ("httpx", "HTTPError"),
        ("requests", "RequestException"),
    ):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def push_model_dir(
    model_dir: str | os.PathLike[str],
    repo_id: str,
    *,
    revision: str | None = None,
    private: bool = False,
    commit_message: str | None = None,
    api: Any = None,
) -> PushResult:
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
        raise InputError(
            f"{folder}: not an exported model directory (no config.json): "
            "write one with minterpr models export RUN --out DIR"
        )
    if not any((folder / name).is_file() for name in CARD_FILES):
        raise InputError(
            f"{folder}: no model card ({' or '.join(CARD_FILES)}): say what the model was trained on, "
            "those data's terms, what it does and does not do, and its intended use before publishing "
            "it (models/peta-pa100k-lite2/MODEL_CARD.md is one)"
        )
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
        info = api.create_commit(
            repo,
            operations,
            commit_message=commit_message or f"minterpr model {folder.name}",
            revision=branch,
            repo_type="model",
        )
    except _hub_errors() as err:
        raise RunError(f"{HUB_PREFIX}{repo}", f"the push to the Hugging Face Hub failed ({first_line(err)})") from None
    return PushResult(
        repo_id=repo, revision=branch, commit=str(info.oid), url=str(info.commit_url), files=tuple(sorted(files))
    )


# float16 storage of the appearance model is accepted when every crop's vector keeps at least this
# cosine with float32's and the check manifest's rank-1 is the same (else it ships at float32)
APPEARANCE_HALF_COSINE_MIN = 0.9999


@dataclass(frozen=True)
class AppearancePublished:
    """What :func:`publish_appearance` wrote."""

    path: Path  # the model directory (models/NAME)
    precision: str  # "float16" or "float32": how the weights are stored
    cosine_min: float  # smallest float16-vs-float32 cosine over the checked crops (1.0 when float32 was forced)
    rank1: dict[str, float]  # rank-1 of the check manifest per precision ({} without one)
    fingerprint: str  # the shipped model's fingerprint: what galleries' appearance.npy record
    bytes: int  # size of model.safetensors


def publish_appearance(
    checkpoint: str | os.PathLike[str],
    name: str,
    summary: str,
    *,
    check: str | os.PathLike[str] | None = None,
    precision: str = "auto",
    min_cosine: float = APPEARANCE_HALF_COSINE_MIN,
    pin: bool = True,
) -> AppearancePublished:
    """Publish a reid run's ``best.pt`` as the shipped appearance model ``models/NAME`` (one step:
    ``minterpr models publish-appearance``). ``check``: a re-id manifest (``minterpr data reid``'s
    ``val.jsonl``) whose crops measure the float16 drift and rank-1 of both precisions; without it,
    seeded random inputs measure the drift. ``precision="auto"`` stores float16 when every vector
    keeps cosine >= ``min_cosine`` and rank-1 is unchanged, else float32. The folder must already
    hold ``MODEL_CARD.md`` and ``LICENSE-WEIGHTS.md`` (the card says where the model came from);
    ``pin`` then records its ``config.json`` in ``zoo.json`` (kind "appearance").

    Example:
        >>> import tempfile, torch
        >>> from minterpr.models.reid import ReidModel, ReidModelConfig
        >>> from minterpr.models.zoo import MODELS_ENV
        >>> root = Path(tempfile.mkdtemp()); m = ReidModel(ReidModelConfig(image_size=(64, 32))).eval()
        >>> torch.save({"model": m.search_state_dict(), "config": m.config.to_dict()}, root / "best.pt")
        >>> (root / "looks").mkdir(); _ = [(root / "looks" / f).write_text("x") for f in SHIP_NOTES]
        >>> os.environ[MODELS_ENV] = str(root)
        >>> publish_appearance(root / "best.pt", "looks", "a test").precision
        'float16'
        >>> del os.environ[MODELS_ENV]
    """
    import tempfile

    import numpy as np

    from minterpr.models.fingerprint import model_fingerprint
    from minterpr.models.reid_dir import load_reid_dir, reid_half_drift, save_reid_dir
    from minterpr.models.zoo import APPEARANCE_KIND, pin_shipped_model, shipped_models_dir
    from minterpr.runtime.appearance import Appearance, load_appearance

    if precision not in ("auto", "float16", "float32"):
        raise InputError(f"precision {precision!r}: auto, float16 or float32")
    out = shipped_models_dir() / name
    missing = [note for note in SHIP_NOTES if not (out / note).is_file()]
    if missing:
        raise InputError(
            f"{out / missing[0]}: missing; write the model card and the weights' licence note before "
            "publishing (models/peta-pa100k-lite2/ has examples)"
        )
    source = load_appearance(Path(checkpoint), engine="torch")  # the weights' own vectors, no export needed
    with tempfile.TemporaryDirectory() as scratch:
        save_reid_dir(source.model, scratch, precision="float16")
        half = Appearance(load_reid_dir(scratch), Path(scratch), engine="torch")
        rank1: dict[str, float] = {}
        if check is None:
            cosine = reid_half_drift(source.model, half.model)
        else:
            from minterpr.data.reid import query_gallery_split, read_manifest
            from minterpr.evaluation.reid import reid_metrics

            query, gallery = query_gallery_split(read_manifest(check), seed=0)
            crops = [i.path for i in (*query, *gallery)]
            full_vectors = source.embed_files(crops, strict=True)[0]
            half_vectors = half.embed_files(crops, strict=True)[0]
            cosine = float(np.sum(full_vectors * half_vectors, axis=1).min())
            for label, vectors in (("float32", full_vectors), ("float16", half_vectors)):
                rank1[label] = reid_metrics(
                    vectors[: len(query)],
                    vectors[len(query) :],
                    [i.person_id for i in query],
                    [i.person_id for i in gallery],
                    [i.camera for i in query],
                    [i.camera for i in gallery],
                ).cmc[1]
    fits = cosine >= min_cosine and rank1.get("float16") == rank1.get("float32")
    if precision == "float16" and not fits:
        raise RunError(
            out,
            f"float16 moves the vectors too far (cosine {cosine:.6f} < {min_cosine}, or rank-1 "
            f"{rank1}): publish with precision float32",
        )
    chosen = precision if precision != "auto" else ("float16" if fits else "float32")
    manifest = save_reid_dir(
        source.model,
        out,
        precision=chosen,
        source={
            "checkpoint_sha256": _sha256(Path(source.path)),
            "half_cosine_min": round(cosine, 6),
            "rank1_check": rank1,
            "check_manifest": None if check is None else Path(check).name,
        },
    )
    shipped = load_reid_dir(out)
    fingerprint = model_fingerprint(shipped)
    if pin:
        pin_shipped_model(name, summary, fingerprint, kind=APPEARANCE_KIND)
    return AppearancePublished(
        out, chosen, cosine if chosen == "float16" else 1.0, rank1, fingerprint, int(manifest["weights"]["bytes"])
    )


SHIP_NOTES = ("MODEL_CARD.md", "LICENSE-WEIGHTS.md")  # what a shipped model folder needs besides its weights


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()
