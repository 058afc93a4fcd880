"""The models this installation can use, for ``minterpr models``: the shipped ones
(:mod:`minterpr.models.zoo`: the attribute model, and the appearance model used beside it), and
the training runs and exported model directories under folders.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from minterpr.models import create_model, save_model
    >>> root = Path(tempfile.mkdtemp())
    >>> save_model(create_model("tiny"), root / "mine" / "model.pt")
    >>> [(e.kind, e.path.name, e.image_encoder) for e in describe_models([root]) if e.kind != "shipped"]
    [('run', 'mine', 'tiny_cnn')]
"""

from __future__ import annotations

import json

import os
from dataclasses import dataclass
from pathlib import Path

from minterpr.errors import InputError, RunError
from minterpr.runtime.run import load_run


@dataclass(frozen=True)
class ModelEntry:
    """One model ``minterpr models`` lists."""

    name: str  # how to pass it as --run: "shipped:NAME" or its path
    kind: str  # "shipped", "run" (a training run directory) or "export" (a model directory)
    path: Path  # where it lies
    fingerprint: str | None  # the model fingerprint galleries record; None when it cannot be loaded
    image_encoder: str | None  # the image encoder of its config
    problem: str | None = None  # why it cannot be loaded (one line), else None
    role: str = (
        "attribute"  # "attribute" (the retrieval model: --run) or "appearance" (same-person vectors: --appearance)
    )
    summary: str | None = None  # what it is for (zoo.json's one line, shipped models only)
    size_bytes: int | None = None  # bytes of its files (weights, config, notes); None for a run directory
    image_int8: bool = False  # it holds an int8 image tower (`--image-precision int8`; models quantize)


def describe_models(roots: "list[str | os.PathLike[str]]", *, fingerprints: bool = True) -> list[ModelEntry]:
    """The shipped models, then every run directory and exported model directory directly under
    ``roots`` (or a root that is one itself), each loaded once for its fingerprint (unless
    ``fingerprints`` is false). A model that does not load is listed with its problem."""
    from minterpr.models.model_dir import is_model_dir
    from minterpr.models.zoo import APPEARANCE_KIND, shipped_models, shipped_models_dir

    found: list[tuple[str, str, Path]] = []
    for name in sorted(shipped_models()):
        found.append((f"shipped:{name}", "shipped", shipped_models_dir() / name))
    shipped_paths = {path.resolve() for _, _, path in found}
    for root in map(Path, roots):
        candidates = (
            [root]
            if (root / "model.pt").is_file() or is_model_dir(root)
            else sorted(p for p in root.iterdir() if p.is_dir())
            if root.is_dir()
            else []
        )
        for path in candidates:
            if path.resolve() in shipped_paths:
                continue
            if (path / "model.pt").is_file():
                found.append((str(path), "run", path))
            elif is_model_dir(path):
                found.append((str(path), "export", path))
    zoo = shipped_models()
    entries = []
    for name, kind, path in found:
        shipped = zoo.get(path.name, {}) if kind == "shipped" else {}
        size = sum(p.stat().st_size for p in path.iterdir() if p.is_file()) if kind != "run" and path.is_dir() else None
        if shipped.get("kind") == APPEARANCE_KIND:
            entries.append(_appearance_entry(name, path, fingerprints, shipped.get("summary"), size))
            continue
        try:
            run = load_run(name)
        except (RunError, InputError) as err:
            entries.append(ModelEntry(name, kind, path, None, None, str(err).splitlines()[0]))
            continue
        entries.append(
            ModelEntry(
                name,
                kind,
                path,
                run.fingerprint if fingerprints else None,
                run.model.config.image_encoder,
                summary=shipped.get("summary"),
                size_bytes=size,
                image_int8=kind != "run" and _has_int8(path),
            )
        )
    return entries


def _has_int8(path: Path) -> bool:
    """Whether a loaded model directory's config.json names an int8 image tower (checked when used)."""
    from minterpr.models.onnx_int8 import INT8_KEY

    return INT8_KEY in json.loads((path / "config.json").read_text(encoding="utf-8"))


def _appearance_entry(name: str, path: Path, fingerprints: bool, summary: str | None, size: int | None) -> ModelEntry:
    """The entry of a shipped appearance model, loaded (and checked) like ``--appearance`` loads it."""
    from minterpr.runtime.appearance import load_appearance

    try:
        looks = load_appearance(name)
    except (RunError, InputError) as err:
        return ModelEntry(name, "shipped", path, None, None, str(err).splitlines()[0], "appearance", summary, size)
    config = looks.model.config
    return ModelEntry(
        name,
        "shipped",
        path,
        looks.fingerprint if fingerprints else None,
        f"osnet_{config.width}",
        None,
        "appearance",
        summary,
        size,
    )
