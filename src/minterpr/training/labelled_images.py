"""Labelled images held in memory as the image side reads them, for image tuning and adaptation.

They are decoded once at the model's input size (uint8, with inference's resampling filter); each batch
is then resized down and normalised on the fly, and :func:`predict_probabilities` reads them in eval mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from minterpr.data.formats.gallery import read_gallery
from minterpr.data.images import load_rgb
from minterpr.models import RetrievalModel
from minterpr.types import GalleryImage

from .data import attribute_targets


@dataclass
class LabelledImages:
    """Decoded images with their labels: what one epoch iterates over."""

    pixels: torch.Tensor  # (N, 3, H, W) uint8 at the model's input size
    targets: torch.Tensor  # (N, L) float attribute targets over ONTOLOGY.flat_labels()
    mask: torch.Tensor  # (N, L) bool, label known
    person_index: torch.Tensor  # (N,) long dense identity, -1 = unknown (extra images without identities)
    images: list[GalleryImage]  # the manifest entries, in row order

    def __len__(self) -> int:
        return len(self.images)


def concat_labelled(parts: Sequence[LabelledImages]) -> LabelledImages:
    """Several :class:`LabelledImages` as one (rows in order)."""
    if len(parts) == 1:
        return parts[0]
    return LabelledImages(
        torch.cat([p.pixels for p in parts]),
        torch.cat([p.targets for p in parts]),
        torch.cat([p.mask for p in parts]),
        torch.cat([p.person_index for p in parts]),
        [image for p in parts for image in p.images],
    )


def decode_images(
    images: Sequence[GalleryImage],
    root: Path,
    size: tuple[int, int],
    resize: Callable[[Any], Any],
    *,
    desc: str = "decoding",
    progress: bool = True,
) -> torch.Tensor:
    """(N, 3, H, W) uint8 of ``images`` resized as the model's preprocessing does (``resize``: PIL -> PIL)."""
    height, width = size
    out = torch.empty(len(images), 3, height, width, dtype=torch.uint8)
    for i, image in enumerate(tqdm(images, desc=desc, disable=not progress, unit="img", leave=False)):
        rgb = resize(load_rgb(root / image.path))
        out[i] = torch.from_numpy(np.asarray(rgb, dtype=np.uint8).copy()).permute(2, 0, 1)
    return out


def labelled_images(
    images: Sequence[GalleryImage],
    root: Path,
    model: RetrievalModel,
    identities: dict[str, int],
    *,
    desc: str,
    progress: bool,
) -> LabelledImages:
    """Decode and label ``images`` (paths relative to ``root``)."""
    preprocess = model.preprocess
    size = tuple(preprocess.size)
    resize = resize_like(preprocess)
    targets, mask = attribute_targets(images)
    return LabelledImages(
        decode_images(images, root, size, resize, desc=desc, progress=progress),  # type: ignore[arg-type]
        torch.from_numpy(targets),
        torch.from_numpy(mask),
        torch.tensor([identities.get(image.person_id, -1) for image in images], dtype=torch.long),
        list(images),
    )


def resize_like(preprocess: Any) -> Callable[[Any], Any]:
    """PIL image -> PIL image at the preprocessing's size, with its resampling filter."""
    from minterpr.models.encoders.preprocess import PIL_FILTERS  # the very filter inference uses

    height, width = preprocess.size
    return lambda image: image.resize((width, height), PIL_FILTERS[preprocess.interpolation])


def resize_batch(pixels: torch.Tensor, size: tuple[int, int] | None) -> torch.Tensor:
    """(B, 3, H, W) uint8 -> (B, 3, h, w) uint8, down-sampled (antialiased bilinear); None = unchanged."""
    if size is None or tuple(pixels.shape[-2:]) == tuple(size):
        return pixels
    small = F.interpolate(pixels.float(), size=tuple(size), mode="bilinear", antialias=True, align_corners=False)
    return small.round_().clamp_(0, 255).to(torch.uint8)


def normalise(pixels: torch.Tensor, model: RetrievalModel) -> torch.Tensor:
    """(B, 3, H, W) uint8 -> the normalised float input :meth:`RetrievalModel.encode_images` expects."""
    preprocess = model.preprocess
    mean = torch.tensor(preprocess.mean, dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(preprocess.std, dtype=torch.float32).view(1, 3, 1, 1)
    return (pixels.float() / 255.0 - mean) / std


def extra_gallery(spec: str) -> tuple[list[GalleryImage], Path]:
    """``"MANIFEST"`` or ``"MANIFEST=IMAGE_ROOT"`` -> (images with labels, image root; default: the manifest's folder)."""
    manifest, _, root = spec.partition("=")
    path = Path(manifest)
    images = [image for image in read_gallery(path) if image.attributes]
    return images, Path(root) if root else path.parent


@torch.no_grad()
def predict_probabilities(model: RetrievalModel, pixels: torch.Tensor, batch_size: int = 128) -> np.ndarray:
    """(N, 3, H, W) uint8 -> (N, L) attribute probabilities of the model in eval mode (flip TTA if configured)."""
    was_training = model.training
    model.eval()
    try:
        chunks = [
            torch.sigmoid(
                model.encode_images(normalise(pixels[i : i + batch_size], model).to(model.device))[
                    "attribute_logits"
                ].float()
            ).cpu()
            for i in range(0, len(pixels), batch_size)
        ]
    finally:
        model.train(was_training)
    return torch.cat(chunks).numpy() if chunks else np.zeros((0, model.image_head.attributes.label_bias.numel()))
