"""Crash-safe training checkpoints and random-number-generator states.

A checkpoint is written to a temporary file in the same folder, flushed and fsync'ed, then
moved over the old one with ``os.replace`` (atomic on POSIX and Windows) and the folder is
fsync'ed: a run killed at any moment, even in the middle of a write, leaves either the old or
the new complete checkpoint, never a torn one. Stale temporary files are ignored and removed.

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
import tempfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

CHECKPOINT_FORMAT = 1  # bumped when the training-state layout changes


def _fsync_dir(directory: Path) -> None:
    """Make a rename durable; some platforms cannot open directories, which is fine there."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], write: Any) -> Path:
    """Call ``write(file_object)`` on a temporary file, fsync it, then ``os.replace`` it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def save_checkpoint(state: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Atomically ``torch.save`` a training state dict."""
    return atomic_write(path, lambda f: torch.save(dict(state), f))


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` (on the CPU)."""
    # weights_only=False: the state holds RNG states and plain Python records, written by us
    return torch.load(path, map_location="cpu", weights_only=False)


def copy_atomic(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """Copy a file so that ``dst`` is never seen half-written."""
    with open(src, "rb") as source:
        return atomic_write(dst, lambda f: shutil.copyfileobj(source, f))


def remove_stale_temporaries(directory: str | os.PathLike[str]) -> int:
    """Delete ``.NAME.*.tmp`` files left by a run killed mid-write; returns how many."""
    count = 0
    for tmp in Path(directory).glob(".*.tmp"):
        tmp.unlink(missing_ok=True)
        count += 1
    return count


def capture_rng_state() -> dict[str, Any]:
    """The states of Python's, numpy's and torch's global generators (CUDA ones when used)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state`."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
