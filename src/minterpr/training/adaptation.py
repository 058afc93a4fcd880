"""Adapting a trained model to a new site without labels: confident self-answers as pseudo-labels.

CTGI's multi-turn generation turns a model's answers to the ontology's questions into captions
for images that have none. Here that idea serves domain adaptation: for every unlabelled crop
of the new site the model answers each slot's question itself ("what colour is the top?",
"is there a bag?"), only the answers it is confident of are kept (``confidence``), and the image
side is fine-tuned on those pseudo-attributes (with :class:`~minterpr.training.image_tuning.ImageTuner`:
the same balanced loss, augmentation, progress bars and resume). The site's cameras, lighting
and resolution are then seen in training, while the labels stay the model's own best ones.

Before any of that, :func:`adapt_batch_norm` (AdaBN, Li et al. 2016) can re-estimate the image
encoder's BatchNorm statistics on the new site's crops: a camera's brightness, contrast and blur
shift the statistics every layer normalises with, and matching them costs one forward pass
without labels. ``minterpr adapt --method`` chooses ``bn`` (that alone), ``pseudo`` (the
pseudo-labels alone) or ``bn+pseudo`` (statistics first, so the pseudo-labels come from the
adapted model, and again after fine-tuning, whose training mode mixes the sites' statistics).

A single-valued slot (gender, top type) is kept when its most probable value reaches
``confidence`` (a one-hot target); a multi-valued slot (colours, carried items) keeps every
label whose probability is at least ``confidence`` (a positive) or at most ``1 - confidence``
(a negative) and masks the uncertain ones. A crop with no confident answer is left out.

Example:
    >>> import numpy as np
    >>> from minterpr.language.ontology import ONTOLOGY
    >>> probs = np.full((1, len(ONTOLOGY.flat_labels())), 0.5, np.float32)
    >>> gender = ONTOLOGY.slot_columns()["gender"]
    >>> probs[0, gender] = [0.95, 0.05]
    >>> targets, mask = pseudo_labels(probs, confidence=0.9)
    >>> targets[0, gender].tolist(), bool(mask[0].sum() == 2)
    ([1.0, 0.0], True)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from minterpr.data.layout import IMAGE_SUFFIXES
from minterpr.language.ontology import ONTOLOGY
from minterpr.types import GalleryImage

from .config import ImageTuningConfig
from .image_augment import AugmentConfig
from .labelled_images import LabelledImages


@dataclass
class AdaptationConfig:
    """How ``minterpr adapt`` pseudo-labels the new site's crops and fine-tunes on them."""

    confidence: float = 0.9  # keep an answer when the model is at least this sure of it
    # fine-tuning on the pseudo-labelled crops (a short, gentle pass: the labels are the model's own)
    tuning: ImageTuningConfig = field(
        default_factory=lambda: ImageTuningConfig(
            epochs=2, lr=3e-4, encoder_lr_scale=0.2, warmup_steps=20, id_weight=0.0, augment=AugmentConfig()
        )
    )

    def __post_init__(self) -> None:
        if not 0.5 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0.5, 1), got {self.confidence}")


def pseudo_labels(probs: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """(N, L) attribute probabilities -> (N, L) float32 targets and bool masks of the confident answers."""
    probs = np.asarray(probs, dtype=np.float32)
    targets = np.zeros_like(probs)
    mask = np.zeros(probs.shape, dtype=bool)
    for slot, columns in ONTOLOGY.slot_columns().items():
        p = probs[:, columns]  # (N, V)
        if ONTOLOGY.slot(slot).multi:
            sure_yes, sure_no = p >= confidence, p <= 1.0 - confidence
            targets[:, columns] = sure_yes
            mask[:, columns] = sure_yes | sure_no
        else:
            sure = p.max(axis=1) >= confidence  # (N,)
            one_hot = (p == p.max(axis=1, keepdims=True)) & sure[:, None]
            targets[:, columns] = one_hot
            mask[:, columns] = sure[:, None]
    return targets, mask


@dataclass
class PseudoLabelStats:
    """What the model was sure of: images kept, and the share of each slot answered."""

    images: int  # unlabelled crops read
    kept: int  # crops with at least one confident answer
    slot_share: dict[str, float]  # slot -> share of kept crops where it was answered

    def to_dict(self) -> dict[str, Any]:
        return {
            "images": self.images,
            "kept": self.kept,
            "slot_share": {k: round(v, 4) for k, v in self.slot_share.items()},
        }


def pseudo_labelled(
    pixels: torch.Tensor, probs: np.ndarray, paths: list[str], confidence: float
) -> tuple[LabelledImages, PseudoLabelStats]:
    """The crops with at least one confident answer, as training images without identities."""
    targets, mask = pseudo_labels(probs, confidence)
    keep = mask.any(axis=1)
    rows = np.flatnonzero(keep)
    columns = ONTOLOGY.slot_columns()
    share = {
        slot: float(mask[rows][:, cols].any(axis=1).mean()) if len(rows) else 0.0 for slot, cols in columns.items()
    }
    images = [GalleryImage(path=paths[i], person_id=f"unlabelled:{i}") for i in rows]
    data = LabelledImages(
        pixels[torch.from_numpy(rows)],
        torch.from_numpy(targets[rows]),
        torch.from_numpy(mask[rows]),
        torch.full((len(rows),), -1, dtype=torch.long),
        images,
    )
    return data, PseudoLabelStats(len(paths), int(keep.sum()), share)


@torch.no_grad()
def adapt_batch_norm(model: Any, pixels: torch.Tensor, batch_size: int = 64) -> int:
    """AdaBN: replace the image encoder's BatchNorm running statistics by those of ``pixels``.

    ``pixels`` are (N, 3, H, W) uint8 crops of the new site at the model's input size. Every
    BatchNorm of the image encoder (frozen stages too: the shift starts at the first
    convolution) gets the mean over all crops, each crop weighing the same whatever the batches,
    and the size-weighted mean of the batches' variances; weights, the head and dropout are
    untouched. Returns the number of layers re-estimated; the model is left in eval mode.

    Example:
        >>> from minterpr.models import create_model
        >>> model = create_model("tiny")
        >>> crops = torch.randint(0, 256, (6, 3, *model.config.image_size), dtype=torch.uint8)
        >>> adapt_batch_norm(model, crops, batch_size=4) > 0
        True
    """
    from .labelled_images import normalise

    layers = [m for m in model.image_encoder.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not layers or not len(pixels):
        return 0
    model.eval()
    momenta = [layer.momentum for layer in layers]
    for layer in layers:
        layer.reset_running_stats()
        layer.train()
    try:
        for start in range(0, len(pixels), batch_size):
            size = len(pixels[start : start + batch_size])
            for layer in layers:  # running = (1 - m)·running + m·batch: a running mean weighted by batch size
                layer.momentum = size / (start + size)
            model.encode_images(normalise(pixels[start : start + batch_size], model).to(model.device))
    finally:
        for layer, momentum in zip(layers, momenta):
            layer.momentum = momentum
        model.eval()
    return len(layers)


def list_crops(folder: Path) -> list[str]:
    """Image files under ``folder`` (recursively, through linked folders too), as sorted paths relative to it."""
    found = []
    for root, _, files in os.walk(folder, followlinks=True):
        found += [
            str((Path(root) / name).relative_to(folder))
            for name in files
            if Path(name).suffix.lower() in IMAGE_SUFFIXES
        ]
    return sorted(found)
