"""Crash-safe training checkpoints and random-number-generator states.

A checkpoint is written with :func:`minterpr.fileio.atomic_write` (a temporary file, fsync'ed,
then ``os.replace``'d): a run killed at any moment, even in the middle of a write, leaves either
the old or the new complete checkpoint, never a torn one.

Checkpoints hold tensors and plain data only (the random states too: numpy's as a tensor, not an
ndarray), so ``--resume`` loads them with ``weights_only=True``: a crafted ``last.pt`` cannot run
code. Checkpoints written before that change held numpy's state as an ndarray; they still load,
through the one allow-listed numpy array type (:func:`minterpr.models.io.load_torch_file`).

Example:
    >>> import tempfile, torch
    >>> path = Path(tempfile.mkdtemp()) / "last.pt"
    >>> _ = save_checkpoint({"step": 3, "w": torch.ones(2)}, path)
    >>> load_checkpoint(path)["step"]
    3
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from minterpr.errors import RunError
from minterpr.models.io import FORMAT as MODEL_FORMAT

from .config import TrainConfig
from .config_yaml import ConfigError
from minterpr.fileio import atomic_write
from minterpr.models.io import load_torch_file

CHECKPOINT_FORMAT = 1  # bumped when the training-state layout changes


def save_checkpoint(state: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Atomically ``torch.save`` a training state dict (tensors and plain data)."""
    return atomic_write(path, lambda f: torch.save(dict(state), f))


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` (on the CPU, weights only).

    Raises :class:`~minterpr.errors.RunError` for a missing, empty, truncated or foreign file
    (one holding pickled objects other than tensors and plain data is never unpickled)."""
    state = load_torch_file(path, "cpu")
    if not isinstance(state, dict):
        raise RunError(path, f"not a training checkpoint (a torch file holding a {type(state).__name__})")
    return state


def copy_atomic(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """Copy a file so that ``dst`` is never seen half-written."""
    with open(src, "rb") as source:
        return atomic_write(dst, lambda f: shutil.copyfileobj(source, f))


def capture_rng_state() -> dict[str, Any]:
    """The states of Python's, numpy's and torch's global generators (CUDA ones when used), as
    tensors and plain data (loadable with ``weights_only=True``)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    numpy_state = (kind, torch.from_numpy(np.asarray(keys, dtype=np.int64)), int(pos), int(has_gauss), float(cached))
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state` (also reads the ndarray form of older checkpoints)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    keys = keys.numpy() if isinstance(keys, torch.Tensor) else np.asarray(keys)
    np.random.set_state((kind, keys.astype(np.uint32), int(pos), int(has_gauss), float(cached)))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


# fields that do not change the computed weights, so a resumed run may set them anew
RESUME_MUTABLE = ("progress", "workers", "log_every", "device", "cache_dir")

# what last.pt holds besides the loop state of initial_state()
CHECKPOINT_KEYS = ("format", "config", "model", "rng", "optimizer", "scheduler", "optimizer_stage")


def initial_state() -> dict[str, Any]:
    """The loop's position and records before the first step (checkpointed with the weights)."""
    return {
        "stage_index": 0,
        "epoch": 0,
        "step_in_epoch": 0,
        "global_step": 0,
        "order": None,
        "best": None,
        "history": [],
        "done": False,
        "loss_sums": {},
        "items_seen": 0,
    }  # running loss sums of the epoch


def check_resumable(ckpt: dict[str, Any], cfg: TrainConfig, run_dir: Path, last_path: Path) -> None:
    """Refuse a ``last.pt`` that is not a resumable checkpoint of this config (RunError naming the
    file; ConfigError naming the fields that differ beyond RESUME_MUTABLE)."""
    if ckpt.get("format") == MODEL_FORMAT:
        raise RunError(
            last_path,
            "is a model file (as model.pt), not a training checkpoint: it cannot be resumed; train into a new --out",
        )
    if ckpt.get("format") != CHECKPOINT_FORMAT:
        raise RunError(
            last_path,
            f"unsupported training checkpoint format {ckpt.get('format')!r} "
            f"(this minterpr resumes format {CHECKPOINT_FORMAT})",
        )
    missing = [k for k in (*CHECKPOINT_KEYS, *initial_state()) if k not in ckpt]
    if missing:
        raise RunError(last_path, f"incomplete training checkpoint: no {', '.join(missing)}")
    if not isinstance(ckpt["config"], dict) or not isinstance(ckpt["model"], dict):
        raise RunError(last_path, "malformed training checkpoint: its config or model is not a dict")
    saved, now = ckpt["config"], cfg.to_dict()
    # a field added to TrainConfig after the checkpoint was written counts at its default
    saved = {**{k: v for k, v in TrainConfig().to_dict().items() if k not in saved}, **saved}
    differing = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k) and k not in RESUME_MUTABLE)
    if differing:
        raise ConfigError(
            f"cannot resume {run_dir}: the config differs from the checkpoint's in "
            f"{', '.join(differing)} (resume without --config to use the run's config.yaml; "
            f"only {', '.join(RESUME_MUTABLE)} may change)"
        )
