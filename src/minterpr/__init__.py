"""minterpr: interactive, multi-turn, multimodal person retrieval.

The package root stays light: it imports no torch. Heavy factories load their modules lazily.
"""
from __future__ import annotations

__version__ = "0.1.0"
