"""Convolution building blocks shared by the MobileNetV2 and EfficientNet-Lite encoders.

EfficientNet-Lite's MBConv without squeeze-excitation and with ReLU6 is MobileNetV2's
inverted residual; the two differ only in padding (TF "same" for the TF-trained Lite
weights, symmetric for the PyTorch-trained MobileNetV2 weights) and BatchNorm epsilon.

Example:
    >>> import torch
    >>> block = InvertedResidual(16, 24, expand_ratio=6, kernel_size=3, stride=2, tf_same_padding=True)
    >>> block(torch.zeros(1, 16, 32, 16)).shape
    torch.Size([1, 24, 16, 8])
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class TFSameConv2d(nn.Conv2d):
    """Conv2d padding like TensorFlow's ``padding="same"``: the extra pixel goes bottom/right.

    For stride 2 on an even input, TF pads (0, 1) where PyTorch's symmetric padding pads
    (1, 1); weights converted from TF see shifted features (and lose accuracy) otherwise.
    The padding is computed from the actual input so any input size works.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, groups: int = 1) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=0, groups=groups, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, H, W)
        pads: list[int] = []
        for axis in (-1, -2):  # width first: F.pad order is left, right, top, bottom
            size, k, s = x.shape[axis], self.kernel_size[axis], self.stride[axis]
            total = max((math.ceil(size / s) - 1) * s + k - size, 0)
            pads += [total // 2, total - total // 2]
        if any(pads):
            x = F.pad(x, pads)
        return super().forward(x)


class ConvBNAct(nn.Module):
    """Conv (no bias) -> BatchNorm -> optional ReLU6; submodules named ``conv`` and ``bn``."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        *,
        stride: int = 1,
        groups: int = 1,
        activation: bool = True,
        tf_same_padding: bool = False,
        bn_eps: float = 1e-5,
        bn_momentum: float = 0.1,
    ) -> None:
        super().__init__()
        if tf_same_padding and stride > 1:
            self.conv: nn.Conv2d = TFSameConv2d(in_channels, out_channels, kernel_size, stride=stride, groups=groups)
        else:
            # stride 1 with an odd kernel: symmetric k//2 padding is exactly "same"
            self.conv = nn.Conv2d(
                in_channels,
                out_channels,
                kernel_size,
                stride=stride,
                padding=kernel_size // 2,
                groups=groups,
                bias=False,
            )
        self.bn: nn.Module = nn.BatchNorm2d(out_channels, eps=bn_eps, momentum=bn_momentum)
        # in place: BatchNorm's output is not needed by its backward, saving a memory pass
        self.act = nn.ReLU6(inplace=True) if activation else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))

    @torch.no_grad()
    def fuse(self) -> None:
        """Fold the BatchNorm's running statistics into the conv (inference only)."""
        if not isinstance(self.bn, nn.BatchNorm2d):
            return  # already fused (or IBN-a, whose instance half has no statistics to fold)
        bn = self.bn
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)  # (C_out,)
        self.conv.weight.mul_(scale.view(-1, 1, 1, 1))
        self.conv.bias = nn.Parameter(bn.bias - bn.running_mean * scale)
        self.bn = nn.Identity()


class InstanceBatchNorm(nn.Module):
    """IBN-a normalisation (Pan et al., ECCV 2018): the first ``instance`` channels InstanceNorm, the rest BatchNorm.

    Instance normalisation removes each image's own channel statistics, where a camera's colour
    cast and contrast live; the BatchNorm half keeps the content statistics ImageNet taught. A
    plain BatchNorm's state dict loads into it (``weight``, ``bias``, running statistics of all
    channels): the BatchNorm half takes its channels' values, the InstanceNorm half its channels'
    affine weights, so pretrained checkpoints load unchanged.

    Example:
        >>> norm = InstanceBatchNorm(8)
        >>> norm.load_state_dict(nn.BatchNorm2d(8).state_dict())
        <All keys matched successfully>
        >>> norm(torch.randn(2, 8, 4, 4)).shape
        torch.Size([2, 8, 4, 4])
    """

    def __init__(self, channels: int, *, eps: float = 1e-5, momentum: float = 0.1, ratio: float = 0.5) -> None:
        super().__init__()
        self.instance = max(1, int(channels * ratio))  # channels instance-normalised (IBN-a: half)
        self.IN = nn.InstanceNorm2d(self.instance, eps=eps, affine=True)
        self.BN = nn.BatchNorm2d(channels - self.instance, eps=eps, momentum=momentum)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        head, tail = torch.split(x, [self.instance, x.shape[1] - self.instance], dim=1)
        return torch.cat([self.IN(head.contiguous()), self.BN(tail.contiguous())], dim=1)

    def _load_from_state_dict(
        self,
        state_dict,
        prefix,
        local_metadata,
        strict,
        missing_keys,  # noqa: ANN001
        unexpected_keys,
        error_msgs,
    ) -> None:
        if prefix + "weight" in state_dict:  # a plain BatchNorm's entries: split them between the halves
            n = self.instance
            for name in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):
                value = state_dict.pop(prefix + name, None)
                if value is None:
                    continue
                if name == "num_batches_tracked":
                    state_dict[prefix + "BN." + name] = value
                    continue
                state_dict[prefix + "BN." + name] = value[n:]
                if name in ("weight", "bias"):
                    state_dict[prefix + "IN." + name] = value[:n]
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )


class InvertedResidual(nn.Module):
    """Expand 1x1 -> depthwise kxk -> linear project 1x1, with a residual when shapes allow."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        *,
        expand_ratio: int,
        kernel_size: int,
        stride: int,
        tf_same_padding: bool = False,
        bn_eps: float = 1e-5,
        bn_momentum: float = 0.1,
        instance_norm: bool = False,
    ) -> None:
        super().__init__()
        hidden = round(in_channels * expand_ratio)
        common = dict(tf_same_padding=tf_same_padding, bn_eps=bn_eps, bn_momentum=bn_momentum)
        # expand_ratio 1 has no expansion conv (the checkpoints have none either)
        self.expand = ConvBNAct(in_channels, hidden, 1, **common) if expand_ratio != 1 else None
        self.dw = ConvBNAct(hidden, hidden, kernel_size, stride=stride, groups=hidden, **common)
        if instance_norm:  # IBN-a: the block's first norm half InstanceNorm (camera style removed early)
            first = self.expand if self.expand is not None else self.dw
            first.bn = InstanceBatchNorm(hidden, eps=bn_eps, momentum=bn_momentum)
        self.project = ConvBNAct(hidden, out_channels, 1, activation=False, **common)
        self.use_residual = stride == 1 and in_channels == out_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C_in, H, W) -> (B, C_out, H/s, W/s)
        y = self.expand(x) if self.expand is not None else x
        y = self.project(self.dw(y))
        return x + y if self.use_residual else y


def init_conv_weights(module: nn.Module) -> None:
    """He init for convs, unit BatchNorm, small linear: used when no checkpoint is loaded."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.01)
            nn.init.zeros_(m.bias)
