"""Draw footwear from the attribute labels: boot shafts up the shin, and shoes by type and colour.

Boot shafts go under the trousers and over bare legs, shoes last; :mod:`minterpr.data.synthetic.render`
orders the passes.

Example:
    >>> import numpy as np
    >>> from PIL import Image
    >>> from minterpr.data.synthetic.identities import sample_identity
    >>> from minterpr.data.synthetic.render_look import sample_look
    >>> from minterpr.data.synthetic.render_body import make_body
    >>> attrs = sample_identity(np.random.default_rng(0)); look = sample_look(attrs, np.random.default_rng(0))
    >>> body = make_body(look, "side", cx=64.0, ground=250.0, height=220.0, stride=0.5, swing=0.3)
    >>> img = Image.new("RGB", (128, 256)); draw_shoes(img, body, attrs, look, legs=(0, 1))
    >>> img.getbbox() is not None  # something was drawn
    True
"""

from __future__ import annotations

from typing import Mapping, Sequence

from PIL import Image, ImageDraw

from minterpr.data.synthetic.render_body import Body, draw_limb
from minterpr.data.synthetic.render_colours import scale
from minterpr.data.synthetic.render_garments import slot_value
from minterpr.data.synthetic.render_look import Look, garment_colours

Attrs = Mapping[str, tuple[str, ...]]


def draw_boot_shafts(img: Image.Image, body: Body, attrs: Attrs, look: Look, legs: Sequence[int]) -> None:
    """Boot shafts up the shin (drawn under trousers, over bare legs)."""
    if slot_value(attrs, "footwear_type", "shoes") != "boots":
        return
    main, _ = garment_colours(look, attrs, "footwear_colour")
    d = ImageDraw.Draw(img)
    for i in legs:
        draw_limb(d, body.legs[i], [w * 1.18 for w in body.leg_w], main, 0.72, 1.0)


def draw_shoes(img: Image.Image, body: Body, attrs: Attrs, look: Look, legs: Sequence[int]) -> None:
    """Footwear by type and colour: sneakers with soles, glossy leather shoes, boots, sandals."""
    kind = slot_value(attrs, "footwear_type", "shoes")
    main, accent = garment_colours(look, attrs, "footwear_colour")
    if kind == "stockings":
        main, accent = scale(main, 0.75), None  # flat shoes that match the stockings
    u = body.u
    d = ImageDraw.Draw(img)
    for i in legs:
        ax, ay = body.legs[i][2]
        if body.view == "side":
            poly = [
                (ax - 0.028 * u, ay - 0.016 * u),
                (ax + 0.018 * u, ay - 0.008 * u),
                (ax + 0.07 * u, ay + 0.018 * u),
                (ax + 0.072 * u, ay + 0.036 * u),
                (ax - 0.032 * u, ay + 0.036 * u),
            ]
            sole = [
                (ax - 0.032 * u, ay + 0.026 * u),
                (ax + 0.072 * u, ay + 0.026 * u),
                (ax + 0.072 * u, ay + 0.036 * u),
                (ax - 0.032 * u, ay + 0.036 * u),
            ]
        else:
            fw = 0.033 * u * (0.9 if kind == "leather_shoes" else 1.0)
            poly = [
                (ax - fw, ay + 0.01 * u),
                (ax - fw * 0.75, ay - 0.008 * u),
                (ax + fw * 0.75, ay - 0.008 * u),
                (ax + fw, ay + 0.01 * u),
                (ax + fw, ay + 0.036 * u),
                (ax - fw, ay + 0.036 * u),
            ]
            sole = [
                (ax - fw, ay + 0.027 * u),
                (ax + fw, ay + 0.027 * u),
                (ax + fw, ay + 0.036 * u),
                (ax - fw, ay + 0.036 * u),
            ]
        if kind == "sandals":
            d.polygon(poly, fill=body.skin)
            d.polygon(sole, fill=main)
            for k in (0.0, 0.013):
                d.line(
                    [(poly[0][0], ay + k * u), (poly[3][0], ay + k * u + 0.004 * u)],
                    fill=main,
                    width=max(1, round(0.007 * u)),
                )
            continue
        d.polygon(poly, fill=main)
        if kind == "sneakers":
            d.polygon(sole, fill=accent if accent is not None else scale(main, 1.5))
        elif kind == "leather_shoes":
            r = max(0.7, 0.005 * u)
            hx, hy = (ax + 0.04 * u, ay + 0.012 * u) if body.view == "side" else (ax, ay + 0.008 * u)
            d.ellipse([hx - r, hy - r, hx + r, hy + r], fill=scale(main, 1.9))
        elif accent is not None:
            d.polygon(sole, fill=accent)
