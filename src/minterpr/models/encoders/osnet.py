"""OSNet, the omni-scale re-identification network (Zhou et al., ICCV 2019), as a staged encoder.

A person's identity lives in details at several scales at once (a logo, a shoe, a silhouette),
so each OSNet block runs four streams of 1-4 stacked depthwise 3x3 convolutions (receptive
fields 3 to 9) and mixes them with one shared channel gate. The network is tiny (x0.25: 0.2 M
parameters without the classifier), which is why it can run beside the attribute model on a CPU.

Widths: ``x1_0`` (64-256-384-512), ``x0_75``, ``x0_5``, ``x0_25``. Normalisation (``norm``):
``"bn"`` the original; ``"ibn"`` instance normalisation in the stem and after each block of the
first stage (OSNet-IBN: camera style - colour cast, contrast - is per-image statistics, which
instance normalisation removes); ``"ain"`` OSNet-AIN's layout, where half of the blocks end in
instance normalisation instead of BatchNorm. Stages: ``stem`` (7x7 conv + max pool, stride 4),
``stage1``/``stage2`` (blocks + 1x1 conv + 2x2 average pool), ``stage3`` (blocks), ``head``
(1x1 conv); ``"global"`` is the 512-d re-identification feature (linear + BatchNorm + ReLU over
the pooled head, as the published weights were trained).

Weights: nothing is packaged (no re-id weights install from PyPI); ``weights=PATH`` loads a
torchreid-layout state dict (``conv1.conv.weight`` ... ``fc.0.weight``; the classifier is
dropped) through an explicit key map, strictly. The file is read with ``weights_only=True``.

Example:
    >>> import torch
    >>> enc = create_osnet(width="x0_25").eval()
    >>> out = enc(torch.zeros(2, 3, 64, 32))
    >>> out["global"].shape, out["stripes"].shape
    (torch.Size([2, 512]), torch.Size([2, 6, 128]))
"""

from __future__ import annotations

import re
from os import PathLike
from typing import Literal

import torch
from torch import nn

from .base import IMAGE_ENCODERS, StagedImageEncoder, load_renamed_state_dict
from .blocks import ConvBNAct, init_conv_weights
from .preprocess import ImagePreprocess

Norm = Literal["bn", "ibn", "ain"]
NORMS = ("bn", "ibn", "ain")
# width name -> channels of the stem, stage1, stage2, stage3 (the head keeps stage3's)
OSNET_WIDTHS: dict[str, tuple[int, int, int, int]] = {
    "x1_0": (64, 256, 384, 512),
    "x0_75": (48, 192, 288, 384),
    "x0_5": (32, 128, 192, 256),
    "x0_25": (16, 64, 96, 128),
}
BLOCKS_PER_STAGE = 2
STREAMS = 4  # depths 1..4 of the stacked 3x3 convolutions: receptive fields 3, 5, 7, 9
FEATURE_DIM = 512  # the published re-id feature width


class ConvNormReLU(ConvBNAct):
    """Conv -> BatchNorm (or affine InstanceNorm) -> optional ReLU, named ``conv``/``bn`` so
    :meth:`StagedImageEncoder.fuse_batchnorm` folds the BatchNorm ones (never the instance ones)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        *,
        stride: int = 1,
        groups: int = 1,
        activation: bool = True,
        instance_norm: bool = False,
    ) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, groups=groups, activation=activation)
        if instance_norm:
            self.bn = nn.InstanceNorm2d(out_channels, affine=True)
        self.act = nn.ReLU(inplace=True) if activation else nn.Identity()  # OSNet uses ReLU, not ReLU6


class LiteConv3x3(nn.Module):
    """1x1 pointwise (no norm) -> depthwise 3x3 + BatchNorm + ReLU: one step of a stream."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.pointwise = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        self.depthwise = ConvNormReLU(out_channels, out_channels, 3, groups=out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.depthwise(self.pointwise(x))


class ChannelGate(nn.Module):
    """Squeeze-excitation gate shared by the four streams: each stream's channels weighted by
    what the image holds at that scale (the "unified aggregation gate")."""

    def __init__(self, channels: int, reduction: int = 16) -> None:
        super().__init__()
        hidden = max(channels // reduction, 1)
        self.squeeze = nn.Conv2d(channels, hidden, 1)
        self.excite = nn.Conv2d(hidden, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, H, W)
        gate = torch.sigmoid(self.excite(torch.relu(self.squeeze(x.mean((2, 3), keepdim=True)))))  # (B, C, 1, 1)
        return x * gate


class OmniScaleBlock(nn.Module):
    """Reduce 1x1 -> four streams of 1-4 LiteConv3x3 -> gate each, sum -> expand 1x1 -> + shortcut.

    ``instance_norm="after"``: OSNet-IBN's affine InstanceNorm after the residual sum;
    ``"inside"``: OSNet-AIN's block, whose expansion ends in InstanceNorm instead of BatchNorm.
    """

    def __init__(self, in_channels: int, out_channels: int, *, instance_norm: str | None = None) -> None:
        super().__init__()
        mid = out_channels // 4
        self.reduce = ConvNormReLU(in_channels, mid, 1)
        self.streams = nn.ModuleList(
            nn.Sequential(*(LiteConv3x3(mid, mid) for _ in range(depth))) for depth in range(1, STREAMS + 1)
        )
        self.gate = ChannelGate(mid)
        self.expand = ConvNormReLU(mid, out_channels, 1, activation=False, instance_norm=instance_norm == "inside")
        self.shortcut = (
            ConvNormReLU(in_channels, out_channels, 1, activation=False) if in_channels != out_channels else None
        )
        self.instance_norm = nn.InstanceNorm2d(out_channels, affine=True) if instance_norm == "after" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C_in, H, W) -> (B, C_out, H, W)
        reduced = self.reduce(x)
        mixed = sum(self.gate(stream(reduced)) for stream in self.streams)
        out = self.expand(mixed) + (self.shortcut(x) if self.shortcut is not None else x)
        if self.instance_norm is not None:
            out = self.instance_norm(out)
        return torch.relu(out)


def _block_norms(norm: Norm, stage: int) -> list[str | None]:
    """Instance normalisation of each block of stage 1..3 for a variant."""
    if norm == "ibn":
        return ["after"] * BLOCKS_PER_STAGE if stage == 1 else [None] * BLOCKS_PER_STAGE
    if norm == "ain":  # OSNet-AIN x1.0's searched layout: plain/IN-inside in stage 1, IN-inside/plain after
        return [None, "inside"] if stage == 1 else ["inside", None]
    return [None] * BLOCKS_PER_STAGE


class OSNet(StagedImageEncoder):
    """OSNet as 5 stages (stem, stage1, stage2, stage3, head) + the 512-d feature layer."""

    def __init__(
        self,
        *,
        width: str = "x0_25",
        norm: Norm = "bn",
        feature_dim: int = FEATURE_DIM,
        preprocess: ImagePreprocess | None = None,
        num_stripes: int = 6,
        stripe_columns: int = 1,
        stripe_stage: int | str | None = None,
        split_stage: int | str = 0,
        embed_dim: int | None = None,
        channels_last: bool = False,
    ) -> None:
        if width not in OSNET_WIDTHS:
            raise ValueError(f"OSNet width must be one of {', '.join(OSNET_WIDTHS)}, got {width!r}")
        if norm not in NORMS:
            raise ValueError(f"OSNet norm must be one of {', '.join(NORMS)}, got {norm!r}")
        super().__init__(preprocess or ImagePreprocess(), num_stripes=num_stripes, stripe_columns=stripe_columns)
        self.width, self.norm = width, norm
        c0, c1, c2, c3 = OSNET_WIDTHS[width]
        stem = nn.Sequential(
            ConvNormReLU(3, c0, 7, stride=2, instance_norm=norm != "bn"), nn.MaxPool2d(3, stride=2, padding=1)
        )
        stages: list[nn.Module] = [stem]
        for index, (c_in, c_out) in enumerate(((c0, c1), (c1, c2), (c2, c3)), start=1):
            norms = _block_norms(norm, index)
            blocks: list[nn.Module] = [OmniScaleBlock(c_in, c_out, instance_norm=norms[0])]
            blocks += [OmniScaleBlock(c_out, c_out, instance_norm=n) for n in norms[1:]]
            if index < 3:  # stages 1 and 2 end by halving the map (stride 8, then 16)
                blocks.append(nn.Sequential(ConvNormReLU(c_out, c_out, 1), nn.AvgPool2d(2, stride=2)))
            stages.append(nn.Sequential(*blocks))
        stages.append(ConvNormReLU(c3, c3, 1))
        self.stages = nn.ModuleList(stages)
        self.stage_names = ["stem", "stage1", "stage2", "stage3", "head"]
        self.stage_channels = [c0, c1, c2, c3, c3]
        # the feature layer of the published weights: linear + BatchNorm + ReLU over the pooled head
        self.feature = nn.Sequential(nn.Linear(c3, feature_dim), nn.BatchNorm1d(feature_dim), nn.ReLU(inplace=True))
        init_conv_weights(self)
        for module in self.modules():
            if isinstance(module, nn.InstanceNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        self._finish(
            embed_dim=embed_dim,
            stripe_stage=stripe_stage,
            split_stage=split_stage,
            channels_last=channels_last,
            global_channels=feature_dim,
        )

    def pool(self, final: torch.Tensor, stripe_source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Head map -> the 512-d feature; the stripe map -> (B, P*Q, C_s) as every encoder."""
        pooled, stripes = super().pool(final, stripe_source)  # (B, C), (B, P*Q, C_s)
        return self.feature(pooled), stripes

    def load_checkpoint(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Strictly load a torchreid-layout OSNet state dict (``norm="bn"`` or ``"ibn"``)."""
        if self.norm == "ain":
            raise ValueError("torchreid's OSNet-AIN files use another layout; only bn/ibn files load")
        weights = {key: value for key, value in state_dict.items() if not key.startswith("classifier.")}
        load_renamed_state_dict(self, weights, torchreid_key)
        self.set_channels_last(self.channels_last)  # loading copied into the old memory layout


# torchreid names -> ours, inside one block (conv2a is a single LiteConv, conv2b..d Sequentials)
_STREAM = {"conv2a": "0.0", "conv2b": "1", "conv2c": "2", "conv2d": "3"}
_LITE = {"conv1": "pointwise", "conv2": "depthwise.conv", "bn": "depthwise.bn"}
_BLOCK = {"conv1": "reduce", "conv3": "expand", "downsample": "shortcut", "IN": "instance_norm"}


def torchreid_key(key: str) -> str:
    """One torchreid OSNet key -> this module's key (KeyError for any key it does not expect).

    Example:
        >>> torchreid_key("conv2.0.conv2b.1.conv2.weight")
        'stages.1.0.streams.1.1.depthwise.conv.weight'
        >>> torchreid_key("fc.1.running_mean")
        'feature.1.running_mean'
    """
    if match := re.fullmatch(r"conv1\.(conv|bn)\.(\w+)", key):
        return f"stages.0.0.{match[1]}.{match[2]}"
    if match := re.fullmatch(r"conv1\.IN\.(\w+)", key):  # OSNet-IBN's stem norm is named IN
        return f"stages.0.0.bn.{match[1]}"
    if match := re.fullmatch(r"conv5\.(conv|bn)\.(\w+)", key):
        return f"stages.4.{match[1]}.{match[2]}"
    if match := re.fullmatch(r"fc\.([01])\.(\w+)", key):
        return f"feature.{match[1]}.{match[2]}"
    match = re.fullmatch(r"conv([234])\.(\d+)\.(.+)", key)
    if match is None:
        raise KeyError(f"unexpected OSNet checkpoint key {key!r}")
    stage, block, rest = int(match[1]) - 1, match[2], match[3]
    prefix = f"stages.{stage}.{block}"
    if m := re.fullmatch(r"0\.(conv|bn)\.(\w+)", rest):  # the transition: 1x1 conv (+ avg pool)
        return f"{prefix}.0.{m[1]}.{m[2]}"
    if m := re.fullmatch(r"(conv2[abcd])\.(?:(\d+)\.)?(conv1|conv2|bn)\.(\w+)", rest):
        stream = _STREAM[m[1]] if m[2] is None else f"{_STREAM[m[1]]}.{m[2]}"
        return f"{prefix}.streams.{stream}.{_LITE[m[3]]}.{m[4]}"
    if m := re.fullmatch(r"gate\.fc([12])\.(\w+)", rest):
        return f"{prefix}.gate.{'squeeze' if m[1] == '1' else 'excite'}.{m[2]}"
    if m := re.fullmatch(r"(conv1|conv3|downsample)\.(conv|bn)\.(\w+)", rest):
        return f"{prefix}.{_BLOCK[m[1]]}.{m[2]}.{m[3]}"
    if m := re.fullmatch(r"IN\.(\w+)", rest):
        return f"{prefix}.instance_norm.{m[1]}"
    raise KeyError(f"unexpected OSNet checkpoint key {key!r}")


def load_torchreid_weights(path: str | PathLike[str]) -> dict[str, torch.Tensor]:
    """A torchreid state dict file -> tensors (tensors only: never unpickles objects).

    A ``{"state_dict": ...}`` checkpoint and DataParallel's ``module.`` prefix are unwrapped.
    """
    import pickle

    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as err:
        raise ValueError(f"{path}: not a readable OSNet state dict ({str(err).splitlines()[0]})") from None
    if isinstance(raw, dict) and isinstance(raw.get("state_dict"), dict):
        raw = raw["state_dict"]
    if not isinstance(raw, dict) or not all(isinstance(v, torch.Tensor) for v in raw.values()):
        raise ValueError(f"{path}: not an OSNet state dict (expected a mapping of names to tensors)")
    return {key.removeprefix("module."): value for key, value in raw.items()}


@IMAGE_ENCODERS.register("osnet")
def create_osnet(
    *, pretrained: bool | None = None, weights: str | PathLike[str] | None = None, **kwargs: object
) -> OSNet:
    """OSNet (``width``, ``norm`` and the usual encoder keywords); ``weights`` = a torchreid file.

    No weights are packaged, so ``pretrained=True`` needs ``weights``; None/False without
    ``weights`` gives a randomly initialised network.
    """
    if pretrained and weights is None:
        raise ValueError("osnet has no packaged weights: pass weights=PATH (a torchreid OSNet state dict)")
    encoder = OSNet(**kwargs)  # type: ignore[arg-type]
    if weights is not None and pretrained is not False:
        try:
            encoder.load_checkpoint(load_torchreid_weights(weights))
        except (KeyError, RuntimeError) as err:
            raise ValueError(
                f"{weights}: does not fit OSNet {encoder.width}/{encoder.norm}: {str(err).splitlines()[0]}"
            ) from None
    return encoder
