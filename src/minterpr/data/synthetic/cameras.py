"""Synthetic surveillance cameras: each has a consistent look, so cross-camera search has a domain shift.

A :class:`CameraStyle` fixes the scene (a street, an indoor corridor or a park lawn, laid out
from the camera's own seed so every image of one camera shows the same place), the colour
response (white-balance gains, brightness, contrast, saturation), the optics (blur, noise,
JPEG quality), how people pass it (view mix, person scale) and how often something occludes them.

Example:
    >>> import numpy as np
    >>> cams = make_cameras(3, np.random.default_rng(0))
    >>> sorted(c.background for c in cams)
    ['corridor', 'grass', 'street']
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BACKGROUNDS = ("street", "corridor", "grass")
VIEWS = ("front", "back", "side")


@dataclass(frozen=True)
class CameraStyle:
    """How one camera sees the world; every image it takes shares these settings."""

    name: str  # label used in reports, e.g. "cam3"
    layout_seed: int  # seeds the scene layout (windows, doors, trees) so the place stays the same
    background: str  # scene type: "street", "corridor" or "grass"
    palette: tuple[tuple[int, int, int], ...]  # scene colours: (wall or sky, ground, accent)
    gains: tuple[float, float, float]  # white-balance gains per RGB channel (colour cast)
    brightness: float  # additive brightness shift, in 0..255 units
    contrast: float  # contrast multiplier around mid-grey (1 = unchanged)
    saturation: float  # saturation multiplier (1 = unchanged, 0 = grey)
    blur_sigma: float  # Gaussian blur radius in pixels at 256 px image height (focus, motion)
    noise_sigma: float  # sensor noise standard deviation, in 0..255 units
    jpeg_quality: tuple[int, int]  # JPEG quality range used when images are saved
    view_probs: tuple[float, float, float]  # P(front), P(back), P(side): how people walk past it
    scale: float  # typical person height as a fraction of image height
    light_gradient: float  # largest brightness ramp across the image (0 = flat lighting)
    occlusion_prob: float  # chance that a pole, a box or another person hides part of the body


_PALETTES: dict[str, tuple[tuple[tuple[int, int, int], ...], ...]] = {
    # (wall or sky, ground, accent)
    "street": (
        ((168, 150, 128), (118, 118, 114), (92, 60, 48)),
        ((190, 184, 172), (132, 130, 126), (60, 70, 90)),
        ((142, 112, 96), (104, 102, 100), (170, 170, 160)),
        ((120, 126, 134), (96, 96, 92), (178, 140, 80)),
    ),
    "corridor": (
        ((214, 206, 186), (150, 136, 118), (120, 84, 56)),
        ((206, 212, 214), (120, 124, 128), (70, 100, 130)),
        ((226, 220, 200), (172, 160, 140), (150, 60, 50)),
    ),
    "grass": (
        ((176, 200, 226), (86, 132, 60), (52, 96, 46)),
        ((200, 208, 214), (104, 140, 74), (70, 110, 56)),
        ((150, 180, 214), (72, 116, 54), (44, 88, 40)),
    ),
}


def make_cameras(n: int, rng: np.random.Generator, *, jpeg_quality: tuple[int, int] = (60, 95)) -> list[CameraStyle]:
    """Draw ``n`` distinct camera styles; scene types cycle so that each appears when ``n >= 3``.

    Each camera's JPEG range is a sub-range of ``jpeg_quality``.

    >>> import numpy as np
    >>> cams = make_cameras(6, np.random.default_rng(1), jpeg_quality=(70, 90))
    >>> all(70 <= c.jpeg_quality[0] <= c.jpeg_quality[1] <= 90 for c in cams)
    True
    """
    lo, hi = jpeg_quality
    if n < 1 or not 1 <= lo <= hi <= 100:
        raise ValueError(f"need n >= 1 and 1 <= jpeg_quality[0] <= jpeg_quality[1] <= 100, got n={n}, {jpeg_quality}")
    kinds = [BACKGROUNDS[i % len(BACKGROUNDS)] for i in range(n)]
    kinds = [kinds[int(i)] for i in rng.permutation(n)]
    cams = []
    for i, kind in enumerate(kinds):
        options = _PALETTES[kind]
        base = options[int(rng.integers(len(options)))]
        # shift the palette a little so two cameras of one kind still differ
        palette = tuple(tuple(int(np.clip(v + rng.integers(-14, 15), 0, 255)) for v in col) for col in base)
        warm = rng.normal(0.0, 0.045)  # warm (tungsten) vs cool (daylight/fluorescent) white balance
        gains = (
            float(np.clip(1.0 + warm + rng.normal(0, 0.02), 0.8, 1.2)),
            float(np.clip(1.0 + rng.normal(0, 0.025), 0.85, 1.15)),
            float(np.clip(1.0 - warm + rng.normal(0, 0.02), 0.8, 1.2)),
        )
        q_lo = int(rng.integers(lo, max(lo, (lo + hi) // 2) + 1))
        views = rng.dirichlet((3.0, 3.0, 2.0))  # some cameras mostly see people coming, others going
        cams.append(
            CameraStyle(
                name=f"cam{i}",
                layout_seed=int(rng.integers(2**31 - 1)),
                background=kind,
                palette=palette,  # type: ignore[arg-type]
                gains=gains,
                brightness=float(rng.normal(0.0, 12.0)),
                contrast=float(rng.uniform(0.8, 1.15)),
                saturation=float(rng.uniform(0.7, 1.15)),
                blur_sigma=float(rng.uniform(0.2, 1.1)),
                noise_sigma=float(rng.uniform(1.5, 6.0)),
                jpeg_quality=(q_lo, int(rng.integers(q_lo, hi + 1))),
                view_probs=tuple(float(v) for v in views / views.sum()),  # type: ignore[arg-type]
                scale=float(rng.uniform(0.78, 0.92)),
                light_gradient=float(rng.uniform(0.0, 0.25)),
                occlusion_prob=float(rng.uniform(0.03, 0.15)),
            )
        )
    return cams


def sample_view(camera: CameraStyle, rng: np.random.Generator) -> str:
    """A view drawn from the camera's view mix."""
    return VIEWS[int(rng.choice(3, p=np.asarray(camera.view_probs)))]
