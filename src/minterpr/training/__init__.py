"""Training: configs, data and feature caches, progressive stages, checkpoints (needs torch).

Example:
    >>> from minterpr.training import load_config
    >>> [stage.name for stage in load_config("tiny").stages]
    ['attributes', 'alignment', 'dialogue']
"""

from __future__ import annotations

from .config import ConfigError, DataConfig, StageConfig, TrainConfig, load_config, save_config
from .trainer import TrainResult, Trainer, train

__all__ = [
    "ConfigError",
    "DataConfig",
    "StageConfig",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "load_config",
    "save_config",
    "train",
]
