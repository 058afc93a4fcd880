"""The identity-level look: everything about a person's appearance that the attributes leave open.

Attributes say "blue jacket"; the look says *which* blue, how tall and broad the person is,
their skin tone, which side the bag hangs on, what colour the unlabelled hat is. One look is drawn
per identity and reused for all its images, so two images of one person match across cameras
(and a near-twin shares its original's look, differing only in the changed slot).

Example:
    >>> import numpy as np
    >>> from minterpr.data.synthetic.identities import sample_identity
    >>> attrs = sample_identity(np.random.default_rng(0))
    >>> look = sample_look(attrs, np.random.default_rng(1))
    >>> 0.8 < look.height < 1.1
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from minterpr.language.ontology import COLOURS
from minterpr.data.synthetic.render_colours import FREE_COLOURS, RGB, SKIN_TONES, jitter, luminance, pick_shade

_SHADED_SLOTS = ("upper_colour", "lower_colour", "footwear_colour", "hair_colour")


@dataclass(frozen=True)
class Look:
    """Appearance choices fixed per identity (see module docstring)."""

    height: float  # person height relative to the camera's typical scale (children are smaller)
    width: float  # build: body width multiplier (slim < 1 < broad)
    shoulder: float  # shoulder half-width as a fraction of height (wider for men)
    hip: float  # hip half-width as a fraction of height (wider for women)
    head: float  # head height as a fraction of body height (larger for children)
    skin: RGB  # skin tone
    shades: Mapping[tuple[str, str], RGB]  # (slot, colour name) -> the RGB shade this person wears
    primary: Mapping[str, str]  # slot -> main colour when a garment has two (the other is the accent)
    item_colour: RGB  # bag / suitcase / buggy colour (not an attribute)
    hat_colour: RGB  # hat colour (not an attribute)
    scarf_colour: RGB  # scarf / kerchief / shawl colour (not an attribute)
    logo_colour: RGB  # logo patch colour, a contrast to the garment
    logo_shape: int  # 0 = disc, 1 = square, 2 = text lines
    bag_side: int  # +1 / -1: which side the shoulder bag, handbag and suitcase are on
    umbrella_open: bool  # an umbrella held open over the head, or closed in hand
    hair_volume: float  # hair thickness multiplier (long-hair length and width)
    extras: Mapping[str, float] = field(default_factory=dict)  # small free parameters (beard, stripe period...)


def _primary(colours: tuple[str, ...], rng: np.random.Generator, slot: str, kind: str) -> str:
    if len(colours) == 1:
        return colours[0]
    if slot == "upper_colour" and kind == "suit":
        # the suit is the darker colour; the lighter one is the shirt in the lapels' V
        return min(colours, key=lambda c: luminance(pick_shade(c, np.random.default_rng(0), spread=0)))
    return colours[int(rng.integers(len(colours)))]


def sample_look(attributes: Mapping[str, tuple[str, ...]], rng: np.random.Generator) -> Look:
    """Draw the look of an identity with these attributes (deterministic given ``rng``)."""
    gender = attributes.get("gender", ("male",))[0]
    age = attributes.get("age", ("adult",))[0]
    female = gender == "female"
    child = age == "child"
    # attribute-dependent draws use their own generators keyed by (slot, colour), so that a
    # near-twin drawn with its original's seed gets the same look except in the changed slot
    base = int(rng.integers(2**32))
    shades: dict[tuple[str, str], RGB] = {}
    primary: dict[str, str] = {}
    for s, slot in enumerate(_SHADED_SLOTS):
        for colour in attributes.get(slot, ()):
            sub = np.random.default_rng([base, s, COLOURS.index(colour)])
            shades[(slot, colour)] = pick_shade(colour, sub, hair=slot == "hair_colour")
        if attributes.get(slot):
            sub = np.random.default_rng([base, 100 + s])
            primary[slot] = _primary(attributes[slot], sub, slot, attributes.get("upper_type", ("other",))[0])
    height = (0.74 if child else 1.0) * float(rng.uniform(0.93, 1.05)) * (0.97 if female else 1.0)
    skin = jitter(SKIN_TONES[int(rng.integers(len(SKIN_TONES)))], rng, 6)
    free = [pick_shade(FREE_COLOURS[int(rng.integers(len(FREE_COLOURS)))], rng) for _ in range(3)]
    upper = attributes.get("upper_colour", ("grey",))
    garment = shades.get(("upper_colour", primary.get("upper_colour", upper[0])), (128, 128, 128))
    logo_options = [
        c
        for c in ((236, 236, 232), (26, 26, 30), (210, 40, 40), (250, 210, 40), (40, 90, 200))
        if abs(luminance(c) - luminance(garment)) > 60 or abs(c[0] - garment[0]) + abs(c[2] - garment[2]) > 200
    ]
    return Look(
        height=height,
        width=float(np.clip(rng.normal(1.0, 0.08), 0.82, 1.25)),
        shoulder=(0.118 if female else 0.138) * (0.95 if child else 1.0),
        hip=(0.104 if female else 0.092),
        head=(0.155 if child else 0.128) * float(rng.uniform(0.96, 1.04)),
        skin=skin,
        shades=shades,
        primary=primary,
        item_colour=free[0],
        hat_colour=free[1],
        scarf_colour=free[2],
        logo_colour=logo_options[int(rng.integers(len(logo_options)))] if logo_options else (236, 236, 232),
        logo_shape=int(rng.integers(3)),
        bag_side=1 if rng.random() < 0.5 else -1,
        umbrella_open=bool(rng.random() < 0.5),
        hair_volume=float(rng.uniform(0.85, 1.2)),
        extras={
            "stripe": float(rng.uniform(0.8, 1.25)),
            "beard": float(rng.random() < (0.0 if female or child else 0.15)),
            "fringe": float(rng.random() < 0.5),
            "ponytail": float(female and rng.random() < 0.25),
        },
    )


def shade(look: Look, slot: str, colour: str) -> RGB:
    """This person's shade of ``colour`` in ``slot`` (a fixed fallback when the look lacks it)."""
    found = look.shades.get((slot, colour))
    return found if found is not None else pick_shade(colour, np.random.default_rng(len(colour)), spread=0)


def garment_colours(look: Look, attributes: Mapping[str, tuple[str, ...]], slot: str) -> tuple[RGB, RGB | None]:
    """(main shade, accent shade or None) of a colour slot, main first."""
    colours = attributes.get(slot, ())
    if not colours:
        return (128, 128, 128), None
    main = look.primary.get(slot, colours[0])
    if main not in colours:  # a near-twin replaced the look's main colour
        main = colours[0]
    others = [c for c in colours if c != main]
    return shade(look, slot, main), (shade(look, slot, others[0]) if others else None)
