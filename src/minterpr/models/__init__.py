"""The retrieval model: encoders, query model, losses, checkpoints (needs ``pip install 'minterpr[model]'``).

A saved model is loaded with what training chose for it by :func:`minterpr.load_pipeline` (the one
public loader); :func:`minterpr.models.io.load_model`, the bare model alone, is internal.

Example:
    >>> import torch
    >>> model = create_model("tiny").eval()
    >>> model.encode_images(torch.randn(2, 3, 64, 32))["embedding"].shape
    torch.Size([2, 32])
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError("minterpr.models needs torch: pip install 'minterpr[model]'") from error

from .config import MODEL_CONFIGS, ModelConfig
from .io import read_checkpoint, save_model, update_extra
from .losses import LossWeights, compute_losses
from .query_model import RetrievalModel, create_model

__all__ = [
    "MODEL_CONFIGS",
    "LossWeights",
    "ModelConfig",
    "RetrievalModel",
    "compute_losses",
    "create_model",
    "read_checkpoint",
    "save_model",
    "update_extra",
]
