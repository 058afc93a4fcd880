"""Deprecated: the old home of ``load_run``, ``TrainedRun``, ``RunExtras`` and ``export_run``;
import them from :mod:`minterpr.runtime` (see docs/extending.md). Kept for one release."""
from __future__ import annotations

import warnings
from typing import Any

_MOVED = ("RunExtras", "TrainedRun", "export_run", "load_run")


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module 'minterpr.trained_run' has no attribute {name!r}")
    warnings.warn(f"minterpr.trained_run.{name} moved to minterpr.runtime.{name}", DeprecationWarning, stacklevel=2)
    import minterpr.runtime

    return getattr(minterpr.runtime, name)
