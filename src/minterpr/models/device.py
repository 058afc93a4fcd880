"""Which torch device a model runs on: the one reading of a ``device`` option ("cpu", "cuda", "cuda:N", "auto"),
and how many CPU threads torch uses (``--torch-threads``, the service's ``torch_threads``).

Training and loading a trained run both resolve their device here, so "auto" and a missing CUDA
mean the same everywhere.

Example:
    >>> resolve_device("cpu")
    device(type='cpu')
"""

from __future__ import annotations

import torch

from minterpr.errors import InputError

__all__ = ["resolve_device", "set_torch_threads"]


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """ "cpu"; "cuda"/"cuda:N" only when CUDA is available (else an error); "auto" picks."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise InputError(f"device {name!r} was asked for but CUDA is not available; use device=cpu")
        return torch.device(f"cuda:{local_rank}" if name == "cuda" else name)
    return torch.device(name)


def set_torch_threads(threads: int) -> None:
    """Give torch ``threads`` intra-op threads (its default: one per core); ONNX Runtime sessions
    made later follow :func:`torch.get_num_threads`. Callers import this only when a count was
    given, so that torch stays unloaded otherwise.

    Example:
        >>> before = torch.get_num_threads()
        >>> set_torch_threads(1); torch.get_num_threads()
        1
        >>> set_torch_threads(before)
    """
    torch.set_num_threads(threads)
