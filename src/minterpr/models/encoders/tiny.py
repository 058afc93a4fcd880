"""Tiny members for fast tests: ``tiny_cnn`` (random CNN) and :func:`save_tiny_clip`.

It has the same interface as the real backbones (stages, stem/head split, stripes) at a
fraction of the cost, so pipelines can be tested end to end in milliseconds.

Example:
    >>> import torch
    >>> enc = create_tiny_cnn(width=8).eval()
    >>> out = enc(torch.zeros(2, 3, 64, 32))
    >>> out["global"].shape, out["stripes"].shape
    (torch.Size([2, 32]), torch.Size([2, 6, 32]))
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path

import torch
from torch import nn

from .base import IMAGE_ENCODERS, StagedImageEncoder
from .blocks import ConvBNAct, init_conv_weights
from .preprocess import ImagePreprocess


class TinyCNN(StagedImageEncoder):
    """stem (3x3 s2) -> stage1 (3x3 s2) -> stage2 (3x3 s2) -> head (1x1), widths w, 2w, 4w, 4w."""

    def __init__(
        self,
        *,
        width: int = 8,
        preprocess: ImagePreprocess | None = None,
        num_stripes: int = 6,
        stripe_columns: int = 1,
        stripe_stage: int | str | None = None,
        split_stage: int | str = 0,
        embed_dim: int | None = None,
        channels_last: bool = False,
    ) -> None:
        super().__init__(preprocess or ImagePreprocess(), num_stripes=num_stripes, stripe_columns=stripe_columns)
        widths = [width, 2 * width, 4 * width, 4 * width]
        self.stages = nn.ModuleList(
            [
                ConvBNAct(3, widths[0], 3, stride=2),
                ConvBNAct(widths[0], widths[1], 3, stride=2),
                ConvBNAct(widths[1], widths[2], 3, stride=2),
                ConvBNAct(widths[2], widths[3], 1),
            ]
        )
        self.stage_names = ["stem", "stage1", "stage2", "head"]
        self.stage_channels = widths
        init_conv_weights(self)
        self._finish(
            embed_dim=embed_dim, stripe_stage=stripe_stage, split_stage=split_stage, channels_last=channels_last
        )


@IMAGE_ENCODERS.register("tiny_cnn")
def create_tiny_cnn(*, pretrained: bool | None = None, **kwargs: object) -> TinyCNN:
    """Random-init tiny CNN; it has no weights, so ``pretrained=True`` is an error."""
    if pretrained:
        raise ValueError("tiny_cnn has no pretrained weights; use pretrained=False or None")
    return TinyCNN(**kwargs)  # type: ignore[arg-type]


# characters of the tiny CLIP vocabulary: enough for lower-cased English descriptions
_TINY_CLIP_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'-"


def save_tiny_clip(
    directory: str | PathLike[str],
    *,
    max_positions: int = 77,
    hidden_size: int = 32,
    projection_dim: int = 16,
    seed: int = 0,
) -> Path:
    """Write a tiny random CLIP (model + character-level BPE tokenizer) with ``save_pretrained``.

    It lets the ``clip`` encoders run offline in tests and smoke runs: the directory has
    the same files as a real CLIP checkpoint, so ``create_*_encoder("clip", model_dir=...)``
    loads it through the same code. One token per character; words end in ``</w>``.

    Example:
        >>> import tempfile
        >>> from minterpr.models.encoders import create_text_encoder
        >>> path = save_tiny_clip(tempfile.mkdtemp())
        >>> create_text_encoder("clip", model_dir=path).max_length
        248
    """
    from .text import import_transformers

    transformers = import_transformers()
    vocab: dict[str, int] = {}
    for suffix in ("", "</w>"):
        for char in _TINY_CLIP_CHARS:
            vocab[char + suffix] = len(vocab)
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    tokenizer = transformers.CLIPTokenizer(vocab=vocab, merges=[])
    layers = dict(
        hidden_size=hidden_size, intermediate_size=2 * hidden_size, num_hidden_layers=2, num_attention_heads=2
    )
    config = transformers.CLIPConfig(
        text_config=dict(
            vocab_size=len(vocab),
            max_position_embeddings=max_positions,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            **layers,
        ),
        vision_config=dict(image_size=32, patch_size=8, **layers),
        projection_dim=projection_dim,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = transformers.CLIPModel(config)
    path = Path(directory)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
