"""CLIP image and text encoders from a local ``transformers`` CLIP directory, with Long-CLIP stretching.

CLIP's text transformer has 77 learned positions. Person descriptions (and the
multi-turn dialogues folded into one query) are often longer, so, as Long-CLIP
(Zhang et al., ECCV 2024) and CTGI do, the position table is *stretched* instead of
truncating the text:

* rows 0..keep-1 (keep = 20) are copied unchanged — CLIP trained the early positions
  well, and short texts then encode exactly as before;
* row j >= keep takes the value at fractional source position
  ``keep + (j - keep) / r`` with ``r = (N - keep) / (L - keep)``, linearly interpolated
  between the two neighbouring learned rows. For L = 77 -> N = 248 (the default), r = 4:
  source rows 20..76 each give 4 rows (w/4 blends, w = 0..3), and the last 4 rows
  extrapolate along the last learned step, row 76 + w/4 * (row76 - row75): exactly
  Long-CLIP's ``4*L - 3*keep`` table.

The tokenizer truncates at the stretched length. Long-CLIP fine-tunes with the kept rows
fixed; ``freeze_kept_positions=True`` reproduces that (their gradient is zeroed).

Example:
    >>> import torch
    >>> table = torch.arange(77.0).unsqueeze(1)  # (77, 1)
    >>> new = stretch_position_table(table, 248)
    >>> new.shape, new[19, 0].item(), new[21, 0].item(), new[247, 0].item()
    (torch.Size([248, 1]), 19.0, 20.25, 76.75)
"""

from __future__ import annotations

import json
import math
from os import PathLike
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .base import IMAGE_ENCODERS, TEXT_ENCODERS, StagedImageEncoder, TextEncoder, stripe_pool
from .preprocess import ImagePreprocess
from .text import import_transformers

OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
LONG_CLIP_POSITIONS = 248  # 4 * 77 - 3 * 20
KEEP_POSITIONS = 20


def stretch_position_table(table: torch.Tensor, new_length: int, keep: int = KEEP_POSITIONS) -> torch.Tensor:
    """(L, D) learned positions -> (new_length, D), Long-CLIP style (see the module docstring)."""
    length = table.shape[0]
    if new_length < length:
        raise ValueError(f"cannot stretch {length} positions down to {new_length}")
    if not 2 <= keep + 2 <= length:
        raise ValueError(f"keep={keep} must leave at least 2 learned rows to interpolate (L={length})")
    if new_length == length:
        return table.clone()
    ratio = (new_length - keep) / (length - keep)
    source = keep + (torch.arange(new_length - keep, dtype=torch.float64) / ratio)  # fractional rows
    lower = source.floor().long().clamp(max=length - 2)  # past the end: extrapolate the last step
    frac = (source - lower).to(table.dtype).unsqueeze(1)  # (N - keep, 1), >= 1 when extrapolating
    stretched = table[lower] + frac * (table[lower + 1] - table[lower])
    return torch.cat([table[:keep], stretched], dim=0)


def local_clip_dir(model_dir: str | PathLike[str]) -> Path:
    """A CLIP directory's local path; ``hf-hub:ORG/NAME[@REV]`` resolves through the hub's cache
    (:func:`minterpr.models.zoo.hub_snapshot`: ``HF_HUB_OFFLINE=1`` reads the cache only)."""
    from minterpr.models.zoo import HUB_PREFIX, hub_snapshot

    return hub_snapshot(model_dir) if str(model_dir).startswith(HUB_PREFIX) else Path(model_dir)


def _load_clip(model_dir: str | PathLike[str], pretrained: bool) -> Any:
    transformers = import_transformers()
    if pretrained:
        return transformers.CLIPModel.from_pretrained(str(model_dir), local_files_only=True)
    config = transformers.CLIPConfig.from_pretrained(str(model_dir), local_files_only=True)
    return transformers.CLIPModel(config)


def _clip_preprocess(model_dir: Path, size: tuple[int, int]) -> ImagePreprocess:
    """Mean/std from the directory's preprocessor_config.json when present (OpenAI's otherwise)."""
    mean, std = OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
    config_path = model_dir / "preprocessor_config.json"
    if config_path.is_file():
        config = json.loads(config_path.read_text())
        mean = tuple(config.get("image_mean", mean))  # type: ignore[assignment]
        std = tuple(config.get("image_std", std))  # type: ignore[assignment]
    return ImagePreprocess(size=size, mean=mean, std=std, interpolation="bicubic")


class _PatchEmbed(nn.Module):
    """Patchify + [CLS] + positions (resized once to the person-shaped grid) + pre-LayerNorm."""

    def __init__(self, vision_model: nn.Module, grid: tuple[int, int]) -> None:
        super().__init__()
        embeddings = vision_model.embeddings
        self.patch_embedding = embeddings.patch_embedding  # Conv2d(3, D, p, stride=p)
        self.class_embedding = embeddings.class_embedding  # (D,)
        self.pre_layrnorm = vision_model.pre_layrnorm
        table = embeddings.position_embedding.weight.detach()  # (1 + g0*g0, D)
        side = math.isqrt(table.shape[0] - 1)
        patches = table[1:].reshape(1, side, side, -1).permute(0, 3, 1, 2)  # (1, D, g0, g0)
        if (side, side) != grid:  # bicubic, like transformers' interpolate_pos_encoding
            patches = F.interpolate(patches, size=grid, mode="bicubic", align_corners=False)
        resized = torch.cat([table[:1], patches.permute(0, 2, 3, 1).reshape(grid[0] * grid[1], -1)])
        self.position_embedding = nn.Parameter(resized.clone())  # (1 + gh*gw, D)
        self.grid = grid

    def forward(self, images: torch.Tensor) -> torch.Tensor:  # (B, 3, H, W) -> (B, 1 + N, D)
        patches = self.patch_embedding(images.to(self.patch_embedding.weight.dtype))  # (B, D, gh, gw)
        if tuple(patches.shape[-2:]) != self.grid:
            raise ValueError(f"CLIP encoder built for a {self.grid} patch grid, got {tuple(patches.shape[-2:])}")
        tokens = patches.flatten(2).transpose(1, 2)  # (B, N, D)
        cls = self.class_embedding.expand(tokens.shape[0], 1, -1)
        return self.pre_layrnorm(torch.cat([cls, tokens], dim=1) + self.position_embedding)


class _Layer(nn.Module):
    """One transformer layer as a stage (no attention mask: every patch sees every patch)."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:  # (B, 1 + N, D)
        return self.layer(hidden, None)


class CLIPImageEncoder(StagedImageEncoder):
    """CLIP ViT as stages ``embed, layer0..layer{L-1}``; global = projected [CLS], stripes = projected bands."""

    def __init__(
        self,
        clip_model: Any,
        *,
        preprocess: ImagePreprocess,
        num_stripes: int = 6,
        stripe_columns: int = 1,
        stripe_stage: int | str | None = None,
        split_stage: int | str = 0,
        embed_dim: int | None = None,
    ) -> None:
        super().__init__(preprocess, num_stripes=num_stripes, stripe_columns=stripe_columns)
        vision = clip_model.vision_model
        patch = int(vision.config.patch_size)
        height, width = preprocess.size
        if height % patch or width % patch:
            raise ValueError(f"image size {preprocess.size} must be a multiple of the patch size {patch}")
        hidden = int(vision.config.hidden_size)
        layers = [_Layer(layer) for layer in vision.encoder.layers]
        self.stages = nn.ModuleList([_PatchEmbed(vision, (height // patch, width // patch)), *layers])
        self.stage_names = ["embed"] + [f"layer{i}" for i in range(len(layers))]
        self.stage_channels = [hidden] * len(self.stages)
        self.post_layernorm = vision.post_layernorm
        self.visual_projection = clip_model.visual_projection  # (D_vision -> projection_dim), no bias
        projected = int(clip_model.config.projection_dim)
        self._finish(
            embed_dim=embed_dim,
            stripe_stage=stripe_stage,
            split_stage=split_stage,
            channels_last=False,  # no convolution worth a layout change
            stripe_channels=projected,
            global_channels=projected,
        )

    def _project(self, tokens: torch.Tensor) -> torch.Tensor:  # (..., D_vision) -> (..., projection_dim)
        return self.visual_projection(self.post_layernorm(tokens))

    def pool(self, final: torch.Tensor, stripe_source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[CLS] of the last layer -> (B, E); patch tokens of the stripe layer -> (B, P*Q, E)."""
        grid = self.stages[0].grid
        patches = stripe_source[:, 1:]  # (B, N, D)
        feature_map = patches.transpose(1, 2).reshape(patches.shape[0], -1, *grid)  # (B, D, gh, gw)
        cells = stripe_pool(feature_map, self.num_stripes, self.stripe_columns)  # (B, P*Q, D)
        return self._project(final[:, 0]), self._project(cells)


class CLIPTextEncoder(TextEncoder):
    """CLIP text transformer + projection; "global" is the projected end-of-text state."""

    def __init__(
        self,
        clip_model: Any,
        tokenizer: Any,
        *,
        max_positions: int = LONG_CLIP_POSITIONS,
        keep_positions: int = KEEP_POSITIONS,
        freeze_kept_positions: bool = False,
        padding: Literal["longest", "max_length"] = "longest",
    ) -> None:
        super().__init__()
        self.text_model = clip_model.text_model
        self.text_projection = clip_model.text_projection  # (D_text -> projection_dim), no bias
        self.tokenizer = tokenizer  # CLIP BPE tokenizer of the directory
        self.padding = padding  # "longest" pads to the batch, "max_length" to max_length
        self.keep_positions = keep_positions  # rows copied unchanged by the stretch
        embeddings = self.text_model.embeddings
        original = embeddings.position_embedding.weight.detach()  # (77, D)
        if max_positions != original.shape[0]:
            table = stretch_position_table(original, max_positions, keep_positions)
            embeddings.position_embedding = nn.Embedding.from_pretrained(table, freeze=False)
            embeddings.register_buffer("position_ids", torch.arange(max_positions).unsqueeze(0), persistent=False)
            self.text_model.config.max_position_embeddings = max_positions
        if freeze_kept_positions:
            mask = torch.ones(max_positions, 1)
            mask[:keep_positions] = 0.0
            embeddings.position_embedding.weight.register_hook(lambda grad: grad * mask.to(grad))
        self.max_length = max_positions  # the tokenizer truncates where the table ends
        self.out_dim = int(clip_model.config.projection_dim)

    @property
    def num_positions(self) -> int:
        return int(self.text_model.embeddings.position_embedding.weight.shape[0])

    def tokenize(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        """Texts -> {"input_ids": (B, T), "attention_mask": (B, T)}, T <= max_length."""
        encoded = self.tokenizer(
            list(texts), padding=self.padding, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}

    def forward(self, tokens: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Tokens -> {"global": (B, E), "tokens": (B, T, E), "mask": (B, T) bool}, all projected."""
        out = self.text_model(input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"])
        return {
            "global": self.text_projection(out.pooler_output),  # (B, E), state at end-of-text
            "tokens": self.text_projection(out.last_hidden_state),  # (B, T, E)
            "mask": tokens["attention_mask"].bool(),
        }


@IMAGE_ENCODERS.register("clip")
def create_clip_image_encoder(
    *,
    model_dir: str | PathLike[str],
    pretrained: bool | None = None,
    image_size: tuple[int, int] = (256, 128),
    **kwargs: object,
) -> CLIPImageEncoder:
    """CLIP vision tower from a local ``save_pretrained`` directory or ``hf-hub:ORG/NAME[@REV]``
    (e.g. ``hf-hub:openai/clip-vit-base-patch16``, through the hub's cache), at a person-shaped size.

    ``pretrained=False`` builds the same architecture with random weights.
    """
    model_dir = local_clip_dir(model_dir)
    model = _load_clip(model_dir, pretrained is None or pretrained)
    preprocess = _clip_preprocess(Path(model_dir), tuple(image_size))  # type: ignore[arg-type]
    return CLIPImageEncoder(model, preprocess=preprocess, **kwargs)  # type: ignore[arg-type]


@TEXT_ENCODERS.register("clip")
def create_clip_text_encoder(
    *,
    model_dir: str | PathLike[str],
    pretrained: bool | None = None,
    max_positions: int = LONG_CLIP_POSITIONS,
    **kwargs: object,
) -> CLIPTextEncoder:
    """CLIP text tower from a local directory, positions stretched to ``max_positions``.

    ``max_positions`` equal to the checkpoint's (77) keeps CLIP unchanged (truncation at 77).
    ``model_dir`` may name a hub model as the image tower's does.
    """
    model_dir = local_clip_dir(model_dir)
    model = _load_clip(model_dir, pretrained is None or pretrained)
    tokenizer = import_transformers().AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    return CLIPTextEncoder(model, tokenizer, max_positions=max_positions, **kwargs)  # type: ignore[arg-type]
