"""A fixed colour branch: how much of each named colour every region of the image holds.

ImageNet features from the late stages of a CNN are largely colour invariant, yet a
witness mostly remembers colours ("red jacket, blue jeans"). A linear probe on this branch's
stripe histograms reads garment colour far better than the same probe on frozen late-stage
CNN features (docs/benchmarks.md, "the colour probe behind the branch"). So the model reads colour from the pixels
directly, as classic re-identification features (ELF, LOMO) did.

Each pixel is converted to CIE Lab and softly assigned to a palette of named colours
(a softmax over negative squared Lab distances), giving a (B, K, H, W) map. The branch
has no parameters: its output depends on the pixels only, so it is cached with the
frozen stem and the learned layers on top of it (in :class:`~minterpr.models.heads.ImageHead`)
see the same input every epoch.

Example:
    >>> import torch
    >>> branch = ColourBranch(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
    >>> red = torch.tensor([0.8, -0.9, -0.9]).view(1, 3, 1, 1).expand(1, 3, 8, 4)  # normalised
    >>> histogram = branch(red).mean(dim=(2, 3))  # (1, K)
    >>> PALETTE_NAMES[int(histogram.argmax())]
    'red'
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

# Named colour prototypes (sRGB 0-255). More than the ontology's 11 colours: dark and light
# shades of one name (navy and light blue are both "blue") fall on different prototypes, and
# the learned head maps them to names, which also lets it learn a camera's colour cast.
PALETTE: dict[str, tuple[int, int, int]] = {
    "black": (20, 20, 20),
    "dark_grey": (70, 70, 70),
    "grey": (128, 128, 128),
    "light_grey": (190, 190, 190),
    "white": (240, 240, 240),
    "red": (200, 30, 30),
    "dark_red": (120, 20, 30),
    "orange": (240, 130, 30),
    "yellow": (240, 220, 40),
    "brown": (120, 75, 40),
    "beige": (200, 175, 130),
    "green": (40, 150, 50),
    "dark_green": (30, 80, 40),
    "blue": (40, 80, 200),
    "navy": (25, 35, 90),
    "light_blue": (120, 170, 230),
    "purple": (120, 50, 150),
    "pink": (240, 140, 180),
}
PALETTE_NAMES: tuple[str, ...] = tuple(PALETTE)

_SRGB_TO_XYZ = ((0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505))
_D65_WHITE = (0.95047, 1.0, 1.08883)


def rgb_to_lab(rgb: torch.Tensor) -> torch.Tensor:
    """(..., 3) sRGB in [0, 1] -> (..., 3) CIE Lab (D65): L in [0, 100], a/b roughly [-128, 127].

    Example:
        >>> rgb_to_lab(torch.tensor([1.0, 1.0, 1.0])).round().abs().tolist()  # abs: b rounds to -0.
        [100.0, 0.0, 0.0]
    """
    rgb = rgb.clamp(0.0, 1.0)
    linear = torch.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    matrix = torch.tensor(_SRGB_TO_XYZ, dtype=rgb.dtype, device=rgb.device)
    xyz = linear @ matrix.T / torch.tensor(_D65_WHITE, dtype=rgb.dtype, device=rgb.device)
    f = torch.where(xyz > 0.008856, xyz.clamp(min=1e-6) ** (1.0 / 3.0), 7.787 * xyz + 16.0 / 116.0)
    return torch.stack(
        [116.0 * f[..., 1] - 16.0, 500.0 * (f[..., 0] - f[..., 1]), 200.0 * (f[..., 1] - f[..., 2])], dim=-1
    )


class ColourBranch(nn.Module):
    """Normalised pixels (B, 3, H, W) -> soft palette memberships (B, K, H, W), summing to 1 per pixel.

    ``mean``/``std`` are the encoder's input normalisation, undone to recover sRGB;
    ``sigma`` is the Lab distance scale of the soft assignment: small values give hard
    nearest-prototype votes, 12 lets a shade between two prototypes count for both.
    """

    def __init__(
        self, *, mean: Sequence[float], std: Sequence[float], sigma: float = 12.0, grid: tuple[int, int] = (64, 32)
    ) -> None:
        super().__init__()
        if sigma <= 0:
            raise ValueError(f"sigma must be > 0, got {sigma}")
        if min(grid) < 1:
            raise ValueError(f"grid must be a positive (H, W) pair, got {grid}")
        self.sigma = float(sigma)
        # larger inputs are average-pooled to at most this (H, W) first: stripe histograms barely
        # change, and at 256x128 the per-pixel Lab conversion otherwise costs as much as the CNN
        self.grid = (int(grid[0]), int(grid[1]))
        self.register_buffer("mean", torch.tensor(list(mean), dtype=torch.float32).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(list(std), dtype=torch.float32).view(1, 3, 1, 1), persistent=False)
        palette = torch.tensor(list(PALETTE.values()), dtype=torch.float32) / 255.0
        self.register_buffer("palette_lab", rgb_to_lab(palette), persistent=False)  # (K, 3)

    @property
    def num_colours(self) -> int:
        """K, the number of palette entries (channels of the output)."""
        return int(self.palette_lab.shape[0])

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> (B, K, h, w) with (h, w) = (H, W) capped at ``grid``."""
        pixels = pixels.float()
        h, w = min(pixels.shape[-2], self.grid[0]), min(pixels.shape[-1], self.grid[1])
        if (h, w) != tuple(pixels.shape[-2:]):
            pixels = F.adaptive_avg_pool2d(pixels, (h, w))
        rgb = pixels * self.std + self.mean  # (B, 3, h, w) in [0, 1]
        lab = rgb_to_lab(rgb.permute(0, 2, 3, 1))  # (B, h, w, 3)
        # squared distances as |x|^2 - 2 x.p + |p|^2: one matmul instead of a (B, h, w, K, 3) tensor
        palette = self.palette_lab  # (K, 3)
        distance2 = lab.pow(2).sum(-1, keepdim=True) - 2.0 * lab @ palette.T + palette.pow(2).sum(-1)
        membership = torch.softmax(-distance2.clamp(min=0) / (2.0 * self.sigma**2), dim=-1)  # (B, h, w, K)
        return membership.permute(0, 3, 1, 2).contiguous()  # (B, K, h, w)
