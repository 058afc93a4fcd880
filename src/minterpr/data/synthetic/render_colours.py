"""Ontology colour names -> RGB shades, with jitter that keeps each colour recognisable.

Each colour has a few anchor shades (navy, royal and light blue for "blue"; khaki and dark brown
for "brown"), matching the synonyms the ontology lists. An identity picks one anchor per
garment (:func:`pick_shade`), each image jitters it a little (:func:`jitter`).

Example:
    >>> import numpy as np
    >>> r, g, b = pick_shade("red", np.random.default_rng(0))
    >>> r > g and r > b
    True
"""

from __future__ import annotations

import numpy as np

RGB = tuple[int, int, int]

# Anchor shades per ontology colour; jitter around them stays inside the colour name.
_ANCHORS: dict[str, tuple[RGB, ...]] = {
    "black": ((22, 22, 24), (35, 33, 38), (28, 30, 40)),
    "white": ((238, 238, 236), (240, 234, 218), (225, 228, 234)),
    "grey": ((128, 128, 130), (88, 88, 94), (170, 170, 174), (110, 112, 118)),
    "blue": ((32, 44, 96), (40, 72, 170), (105, 150, 212), (62, 92, 140)),
    "brown": ((92, 60, 36), (176, 152, 106), (150, 108, 70), (118, 80, 50)),
    "green": ((42, 122, 54), (98, 108, 48), (30, 82, 44), (70, 168, 88)),
    "orange": ((238, 128, 30), (222, 100, 30), (245, 150, 60)),
    "pink": ((238, 150, 182), (226, 92, 152), (248, 188, 206)),
    "purple": ((108, 50, 138), (142, 82, 180), (176, 138, 206)),
    "red": ((196, 30, 36), (128, 22, 34), (226, 44, 42)),
    "yellow": ((238, 208, 42), (208, 168, 42), (244, 224, 110)),
}
# Natural hair shades differ from garment shades ("yellow" hair is blond, "red" hair is ginger).
_HAIR_ANCHORS: dict[str, tuple[RGB, ...]] = {
    "black": ((24, 20, 18), (36, 30, 26)),
    "brown": ((84, 56, 34), (118, 80, 46), (66, 44, 28)),
    "yellow": ((214, 180, 102), (228, 200, 132), (196, 160, 84)),
    "red": ((168, 70, 30), (146, 52, 24)),
    "grey": ((150, 150, 150), (126, 124, 122)),
    "white": ((226, 226, 222), (212, 212, 208)),
}
# Skin tones from light to dark; not an attribute, it varies between identities.
SKIN_TONES: tuple[RGB, ...] = (
    (246, 214, 188),
    (232, 190, 160),
    (214, 168, 132),
    (186, 136, 98),
    (150, 102, 70),
    (112, 74, 50),
    (84, 56, 40),
)
# Colours for unlabelled things (bag bodies, hats, scarves): mostly dark, some bright.
FREE_COLOURS = ("black", "black", "grey", "blue", "brown", "red", "green", "white", "yellow")


def pick_shade(colour: str, rng: np.random.Generator, *, hair: bool = False, spread: int = 14) -> RGB:
    """An identity-level shade of ``colour``: one anchor plus a moderate jitter."""
    table = _HAIR_ANCHORS if hair and colour in _HAIR_ANCHORS else _ANCHORS
    if colour not in table:
        raise KeyError(f"unknown colour {colour!r}: must be one of {', '.join(_ANCHORS)}")
    anchors = table[colour]
    base = anchors[int(rng.integers(len(anchors)))]
    return jitter(base, rng, spread)


def jitter(rgb: RGB, rng: np.random.Generator, amount: int = 8) -> RGB:
    """``rgb`` with a common brightness shift and a smaller per-channel shift (clipped to 0..255)."""
    r = rng.random(4)  # plain floats: small numpy ops would dominate the cost
    common = round((r[0] * 2.0 - 1.0) * amount)
    half = amount // 2
    return tuple(min(255, max(0, int(v + common + round((e * 2.0 - 1.0) * half)))) for v, e in zip(rgb, r[1:]))  # type: ignore[return-value]


def scale(rgb: RGB, factor: float) -> RGB:
    """Darker (factor < 1) or lighter (> 1) version of ``rgb``; lighter moves towards white."""
    if factor <= 1.0:
        return tuple(min(255, max(0, int(v * factor))) for v in rgb)  # type: ignore[return-value]
    return tuple(min(255, int(v + (255 - v) * (factor - 1.0))) for v in rgb)  # type: ignore[return-value]


def luminance(rgb: RGB) -> float:
    """Perceived brightness in 0..255 (Rec. 601 weights)."""
    return 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]


def contrast_colour(rgb: RGB) -> RGB:
    """Near-white on dark colours, near-black on light ones (for logos, buttons, zips)."""
    return (236, 236, 232) if luminance(rgb) < 120 else (26, 26, 30)
