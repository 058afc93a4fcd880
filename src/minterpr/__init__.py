"""minterpr: interactive, multi-turn, multimodal person retrieval.

The package root stays light: it imports no torch. ``load_pipeline`` loads its modules when
first used.

Example:
    >>> import minterpr
    >>> minterpr.__version__
    '0.1.0'
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "load_pipeline", "Pipeline"]


def __getattr__(name: str) -> Any:
    # Lazy: `from minterpr import load_pipeline` must not import torch at `import minterpr`.
    if name in ("load_pipeline", "Pipeline"):
        from minterpr.runtime import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'minterpr' has no attribute {name!r}")
