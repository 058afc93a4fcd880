"""Deprecated: the old home of ``load_run``, ``TrainedRun``, ``RunExtras`` and ``export_run``
(now ``export_model_dir``); import them from :mod:`minterpr.runtime` (see docs/extending.md).
Kept for one release."""
from __future__ import annotations

import warnings
from typing import Any

_MOVED = {"RunExtras": "RunExtras", "TrainedRun": "TrainedRun", "export_run": "export_model_dir",
          "load_run": "load_run"}  # old name here -> its name in minterpr.runtime


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module 'minterpr.trained_run' has no attribute {name!r}")
    warnings.warn(f"minterpr.trained_run.{name} moved to minterpr.runtime.{_MOVED[name]}", DeprecationWarning,
                  stacklevel=2)
    import minterpr.runtime

    return getattr(minterpr.runtime, _MOVED[name])
