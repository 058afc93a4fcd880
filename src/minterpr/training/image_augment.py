"""Colour-true augmentation of whole batches of pedestrian crops, on uint8 tensors.

Real camera crops differ from one site to the next in framing, scale, sharpness, compression
and resolution far more than in the colours of the clothes, and colour words are what a
witness remembers best. So every transform here moves, blurs, compresses or hides pixels but
never changes a hue: horizontal flip, scale-and-shift (pad-and-crop with the border replicated),
Gaussian blur, low resolution (down- then up-sampling, as a far camera gives), JPEG
re-compression and random erasing (a patch of noise, as an occluder). One switch, off by
default, does change colours: ``colour_cast`` (per-image random channel gains and gamma, the
cast of another camera's white balance and response curve), for training that has to read
cameras it never saw (docs/attributes.md, "Camera generalisation"). The batch stays on one
device and is augmented in a few tensor operations, so augmentation costs little next to the
network; the randomness comes from one ``torch.Generator`` so a seeded run repeats exactly.

Example:
    >>> import torch
    >>> images = torch.randint(0, 256, (4, 3, 32, 16), dtype=torch.uint8)
    >>> out = augment_batch(images, AugmentConfig(), torch.Generator().manual_seed(0))
    >>> out.shape, out.dtype
    (torch.Size([4, 3, 32, 16]), torch.uint8)
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image


@dataclass
class AugmentConfig:
    """Probabilities and ranges of each transform (0 switches a transform off)."""

    flip: float = 0.5  # probability of a horizontal flip
    shift: float = 0.08  # largest shift as a fraction of the width / height (pad-and-crop)
    scale_min: float = 0.9  # smallest zoom (< 1 shows more context around the person)
    scale_max: float = 1.1  # largest zoom (> 1 crops closer)
    blur: float = 0.15  # probability of a Gaussian blur (sigma 0.5-1.5 px)
    low_resolution: float = 0.2  # probability of down-sampling by 2-4x then back (a far camera)
    jpeg: float = 0.15  # probability of JPEG re-compression at quality 20-70
    erasing: float = 0.3  # probability of erasing one rectangle (2-20 % of the area) with noise
    # probability of a camera colour cast (per-image channel gains and gamma); 0 = off, as it moves
    # hues: a style augmentation for unseen cameras, measured on the leave-one-camera-set-out folds
    colour_cast: float = 0.0
    cast_gain: float = 0.15  # largest per-channel gain change (gains in [1 - g, 1 + g])
    cast_gamma: float = 0.25  # largest log-gamma change of the whole image (gamma in [e^-g, e^g])

    def __post_init__(self) -> None:
        for name in ("flip", "blur", "low_resolution", "jpeg", "erasing", "colour_cast"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"augment.{name} is a probability in [0, 1], got {value}")
        if not 0.0 <= self.shift < 0.5:
            raise ValueError(f"augment.shift must be in [0, 0.5), got {self.shift}")
        if not 0.5 <= self.scale_min <= self.scale_max <= 2.0:
            raise ValueError(
                f"augment needs 0.5 <= scale_min <= scale_max <= 2, got {self.scale_min}, {self.scale_max}"
            )
        if not (0.0 <= self.cast_gain < 1.0 and 0.0 <= self.cast_gamma <= 1.0):
            raise ValueError(
                f"augment needs cast_gain in [0, 1) and cast_gamma in [0, 1], got {self.cast_gain}, {self.cast_gamma}"
            )


def _uniform(n: int, low: float, high: float, generator: torch.Generator) -> torch.Tensor:
    return low + (high - low) * torch.rand(n, generator=generator)


def _chosen(n: int, probability: float, generator: torch.Generator) -> torch.Tensor:
    return torch.rand(n, generator=generator) < probability  # (B,) bool


def _scale_shift(
    images: torch.Tensor, cfg: AugmentConfig, flip: torch.Tensor, generator: torch.Generator
) -> torch.Tensor:
    """One affine resampling per image: flip, zoom and shift together (border pixels replicated)."""
    b = images.shape[0]
    zoom = _uniform(b, cfg.scale_min, cfg.scale_max, generator)  # (B,)
    shift = _uniform(2 * b, -2 * cfg.shift, 2 * cfg.shift, generator).view(b, 2)  # in [-1, 1] grid units
    theta = torch.zeros(b, 2, 3)
    theta[:, 0, 0] = torch.where(flip, -1.0, 1.0) / zoom
    theta[:, 1, 1] = 1.0 / zoom
    theta[:, :, 2] = shift
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="border", align_corners=False)


def _blur(images: torch.Tensor, chosen: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    idx = chosen.nonzero().flatten()
    if idx.numel() == 0:
        return images
    sigma = _uniform(idx.numel(), 0.5, 1.5, generator)  # (b,)
    offsets = torch.arange(-2, 3, dtype=torch.float32)  # a 5-tap kernel, separable
    kernel = torch.exp(-(offsets[None] ** 2) / (2 * sigma[:, None] ** 2))
    kernel = kernel / kernel.sum(1, keepdim=True)  # (b, 5)
    picked = images[idx]  # (b, 3, H, W)
    b, c, h, w = picked.shape
    x = picked.reshape(1, b * c, h, w)
    k = kernel.repeat_interleave(c, dim=0)  # (b*3, 5): one kernel per image, shared by its channels
    x = F.conv2d(F.pad(x, (2, 2, 0, 0), mode="replicate"), k.view(b * c, 1, 1, 5), groups=b * c)
    x = F.conv2d(F.pad(x, (0, 0, 2, 2), mode="replicate"), k.view(b * c, 1, 5, 1), groups=b * c)
    out = images.clone()
    out[idx] = x.view(b, c, h, w)
    return out


def _low_resolution(images: torch.Tensor, chosen: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    out = images.clone()
    h, w = images.shape[-2:]
    for i, factor in zip(
        chosen.nonzero().flatten().tolist(), _uniform(int(chosen.sum()), 2.0, 4.0, generator).tolist()
    ):
        small = F.interpolate(
            images[i : i + 1],
            size=(max(8, round(h / factor)), max(4, round(w / factor))),
            mode="bilinear",
            align_corners=False,
            antialias=True,
        )
        out[i] = F.interpolate(small, size=(h, w), mode="bilinear", align_corners=False)[0]
    return out


def _jpeg(images: torch.Tensor, chosen: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    qualities = torch.randint(20, 71, (images.shape[0],), generator=generator)
    for i in chosen.nonzero().flatten().tolist():
        array = images[i].clamp(0, 255).round().to(torch.uint8).permute(1, 2, 0).numpy()
        buffer = io.BytesIO()
        Image.fromarray(array).save(buffer, format="JPEG", quality=int(qualities[i]))
        decoded = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
        images[i] = torch.from_numpy(decoded.copy()).permute(2, 0, 1).to(images.dtype)
    return images


def _colour_cast(
    images: torch.Tensor, chosen: torch.Tensor, cfg: AugmentConfig, generator: torch.Generator
) -> torch.Tensor:
    """Another camera's colour response: x' = 255 * (gain_c * x / 255) ** gamma, per image."""
    b = images.shape[0]
    gains = _uniform(3 * b, 1.0 - cfg.cast_gain, 1.0 + cfg.cast_gain, generator).view(b, 3, 1, 1)
    gamma = torch.exp(_uniform(b, -cfg.cast_gamma, cfg.cast_gamma, generator)).view(b, 1, 1, 1)
    cast = 255.0 * ((images / 255.0 * gains).clamp(0.0, 1.0) ** gamma)
    return torch.where(chosen.view(b, 1, 1, 1), cast, images)


def _erase(images: torch.Tensor, chosen: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    h, w = images.shape[-2:]
    for i in chosen.nonzero().flatten().tolist():
        area = float(_uniform(1, 0.02, 0.2, generator)) * h * w
        aspect = float(torch.exp(_uniform(1, -1.2, 1.2, generator)))  # log-uniform in [0.3, 3.3]
        eh, ew = min(h, max(1, round((area * aspect) ** 0.5))), min(w, max(1, round((area / aspect) ** 0.5)))
        top = int(torch.randint(0, h - eh + 1, (1,), generator=generator))
        left = int(torch.randint(0, w - ew + 1, (1,), generator=generator))
        images[i, :, top : top + eh, left : left + ew] = torch.randint(0, 256, (3, eh, ew), generator=generator).to(
            images.dtype
        )
    return images


def augment_batch(images: torch.Tensor, cfg: AugmentConfig, generator: torch.Generator) -> torch.Tensor:
    """(B, 3, H, W) uint8 -> an augmented (B, 3, H, W) uint8 batch (see the module doc)."""
    if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[1] != 3:
        raise ValueError(f"augment_batch needs a (B, 3, H, W) uint8 batch, got {tuple(images.shape)} {images.dtype}")
    b = images.shape[0]
    x = images.float()
    flip = _chosen(b, cfg.flip, generator)
    if cfg.shift > 0 or cfg.scale_min != 1.0 or cfg.scale_max != 1.0 or flip.any():
        x = _scale_shift(x, cfg, flip, generator)
    x = _low_resolution(x, _chosen(b, cfg.low_resolution, generator), generator)
    x = _blur(x, _chosen(b, cfg.blur, generator), generator)
    x = _jpeg(x, _chosen(b, cfg.jpeg, generator), generator)
    x = _erase(x, _chosen(b, cfg.erasing, generator), generator)
    if cfg.colour_cast > 0:  # drawn only when on, so every other setting's random stream is unchanged
        x = _colour_cast(x, _chosen(b, cfg.colour_cast, generator), cfg, generator)
    return x.clamp(0, 255).round().to(torch.uint8)
