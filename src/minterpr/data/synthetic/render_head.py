"""Draw the neck, head, face, hair, headwear and accessories.

Hair has two layers: the long hair that falls behind the head and over the shoulders
(:func:`draw_hair_behind`, drawn before the head in a front or side view and over the back in a
back view) and the cap of hair on the skull (:func:`draw_head`). Faces are drawn only from the
front and the side; accessories only where the camera would see them (glasses from the front
and side, a mask's loops from the back).

Example:
    >>> import numpy as np
    >>> from PIL import Image
    >>> from minterpr.data.synthetic.identities import sample_identity
    >>> from minterpr.data.synthetic.render_look import sample_look
    >>> from minterpr.data.synthetic.render_body import make_body
    >>> attrs = sample_identity(np.random.default_rng(0)); look = sample_look(attrs, np.random.default_rng(0))
    >>> body = make_body(look, "front", cx=64.0, ground=250.0, height=220.0, stride=0.5, swing=0.3)
    >>> img = Image.new("RGB", (128, 256)); draw_head(img, body, attrs, look)
"""

from __future__ import annotations

from typing import Mapping

from PIL import Image, ImageDraw

from minterpr.data.synthetic.render_body import Body
from minterpr.data.synthetic.render_colours import RGB, scale
from minterpr.data.synthetic.render_look import Look, garment_colours

Attrs = Mapping[str, tuple[str, ...]]


def _hair(attrs: Attrs, look: Look) -> tuple[str, RGB]:
    return attrs.get("hair_length", ("short",))[0], garment_colours(look, attrs, "hair_colour")[0]


def draw_hair_behind(img: Image.Image, body: Body, attrs: Attrs, look: Look, part: str = "back") -> None:
    """Long hair: ``"back"`` = the mass behind the head (over the back in a back view),
    ``"strands"`` = the locks that fall over the shoulders in front (front view only)."""
    length, colour = _hair(attrs, look)
    if length != "long" or (part == "strands" and body.view != "front"):
        return
    d = ImageDraw.Draw(img)
    (hx, hy), (rx, ry) = body.head_c, body.head_r
    fall = body.sh_y + (0.07 if body.view != "back" else 0.11) * body.u * look.hair_volume
    w = rx * (1.25 if body.view != "side" else 1.0) * look.hair_volume**0.5
    if part == "strands":
        for s in (-1, 1):
            d.polygon(
                [
                    (hx + s * rx * 0.75, hy - ry * 0.3),
                    (hx + s * w, hy - ry * 0.3),
                    (hx + s * w * 1.08, fall),
                    (hx + s * rx * 0.9, fall - 0.01 * body.u),
                    (hx + s * rx * 0.8, hy + ry * 0.6),
                ],
                fill=colour,
            )
        return
    if body.view == "side":
        x0 = hx - rx * 1.05
        d.polygon(
            [
                (hx - rx * 0.2, hy - ry * 0.8),
                (x0, hy - ry * 0.2),
                (x0 - 0.012 * body.u, fall),
                (hx - rx * 0.2, fall - 0.02 * body.u),
                (hx + rx * 0.0, hy),
            ],
            fill=colour,
        )
        return
    d.rounded_rectangle([hx - w, hy - ry * 0.5, hx + w, fall], radius=max(1.0, rx * 0.6), fill=colour)
    if body.view == "back":  # parting shadow down the middle
        d.line([(hx, hy - ry * 0.3), (hx, fall - 0.02 * body.u)], fill=scale(colour, 0.8), width=1)


def draw_head(img: Image.Image, body: Body, attrs: Attrs, look: Look) -> None:
    """Neck, head, hair cap and (front/side) face."""
    d = ImageDraw.Draw(img)
    (hx, hy), (rx, ry) = body.head_c, body.head_r
    u, skin = body.u, body.skin
    length, hair = _hair(attrs, look)
    nw = body.neck_w
    nx = body.cx if body.view != "side" else body.cx + 0.006 * u
    d.rectangle([nx - nw, hy + ry * 0.4, nx + nw, body.sh_y + 0.012 * u], fill=scale(skin, 0.9))
    d.ellipse([hx - rx, hy - ry, hx + rx, hy + ry], fill=skin)
    bald = length == "bald"
    if body.view == "back":
        if not bald:
            d.ellipse([hx - rx * 1.04, hy - ry * 1.05, hx + rx * 1.04, hy + ry * 0.85], fill=hair)
        else:
            d.ellipse([hx - rx * 0.4, hy - ry * 0.8, hx + rx * 0.3, hy - ry * 0.4], fill=scale(skin, 1.15))
        for s in (-1, 1):  # ears
            d.ellipse(
                [hx + s * rx - rx * 0.14, hy - ry * 0.1, hx + s * rx + rx * 0.14, hy + ry * 0.25],
                fill=scale(skin, 0.92),
            )
        return
    if body.view == "side":
        d.polygon(
            [(hx + rx * 0.9, hy - ry * 0.05), (hx + rx * 1.18, hy + ry * 0.22), (hx + rx * 0.9, hy + ry * 0.3)],
            fill=skin,
        )  # nose
        if not bald:
            d.chord(
                [hx - rx * 1.05, hy - ry * 1.06, hx + rx * 1.02, hy + ry * (0.7 if length == "short" else 0.9)],
                150,
                350,
                fill=hair,
            )
            d.pieslice([hx - rx * 1.05, hy - ry * 1.06, hx + rx * 0.9, hy + ry * 0.95], 90, 270, fill=hair)
        d.ellipse([hx - rx * 0.18, hy - ry * 0.05, hx + rx * 0.08, hy + ry * 0.3], fill=scale(skin, 0.9))  # ear
        if rx < 7:
            d.point([(hx + rx * 0.55, hy - ry * 0.02)], fill=scale(skin, 0.45))
        else:
            e = rx * 0.11
            d.ellipse(
                [hx + rx * 0.55 - e, hy - ry * 0.02 - e, hx + rx * 0.55 + e, hy - ry * 0.02 + e], fill=(30, 24, 22)
            )
        d.line([(hx + rx * 0.55, hy + ry * 0.52), (hx + rx * 0.85, hy + ry * 0.5)], fill=scale(skin, 0.7), width=1)
        return
    # front
    if not bald:
        fringe = 0.62 if look.extras.get("fringe", 0.0) else 0.8
        d.chord([hx - rx * 1.07, hy - ry * 1.08, hx + rx * 1.07, hy - ry + 2 * ry * fringe], 180, 360, fill=hair)
        for s in (-1, 1):  # sideburns / sides of the hair
            d.rectangle(
                [hx + s * rx * 1.0 - rx * 0.16, hy - ry * 0.5, hx + s * rx * 1.0 + rx * 0.12, hy + ry * 0.05], fill=hair
            )
    else:
        d.ellipse([hx - rx * 0.4, hy - ry * 0.85, hx + rx * 0.2, hy - ry * 0.55], fill=scale(skin, 1.15))
    e = rx * 0.12
    for s in (-1, 1):
        ex, ey = hx + s * rx * 0.4, hy + ry * 0.02
        if rx < 7:  # a small head: one-pixel eyes, no brows (they would merge into a dark band)
            d.point([(ex, ey)], fill=scale(skin, 0.45))
            continue
        d.ellipse([ex - e, ey - e, ex + e, ey + e], fill=(30, 24, 22))
        if not bald:
            d.line([(ex - e * 1.6, ey - e * 2.2), (ex + e * 1.6, ey - e * 2.4)], fill=scale(hair, 0.8), width=1)
    d.line([(hx, hy + ry * 0.15), (hx, hy + ry * 0.35)], fill=scale(skin, 0.8), width=1)  # nose
    d.line([(hx - rx * 0.28, hy + ry * 0.58), (hx + rx * 0.28, hy + ry * 0.58)], fill=scale(skin, 0.62), width=1)
    if look.extras.get("beard", 0.0) and not bald:
        d.chord([hx - rx * 0.95, hy - ry * 0.2, hx + rx * 0.95, hy + ry * 1.02], 20, 160, fill=hair)


def draw_headwear(img: Image.Image, body: Body, attrs: Attrs, look: Look) -> None:
    """Hat or cap (style from the look) and hair band."""
    worn = attrs.get("headwear", ("none",))
    d = ImageDraw.Draw(img)
    (hx, hy), (rx, ry) = body.head_c, body.head_r
    if "hat" in worn:
        c = look.hat_colour
        d.chord([hx - rx * 1.1, hy - ry * 1.18, hx + rx * 1.1, hy + ry * 0.1], 180, 360, fill=c)
        brim = scale(c, 0.75)
        style = int(look.extras.get("stripe", 1.0) * 10) % 3  # 0 cap, 1 beanie, 2 brimmed hat
        if style == 2:
            d.ellipse([hx - rx * 1.6, hy - ry * 0.62, hx + rx * 1.6, hy - ry * 0.36], fill=brim)
        elif style == 0:
            if body.view == "front":
                d.ellipse([hx - rx * 1.1, hy - ry * 0.6, hx + rx * 1.1, hy - ry * 0.3], fill=brim)
            elif body.view == "side":
                d.polygon(
                    [
                        (hx + rx * 0.4, hy - ry * 0.55),
                        (hx + rx * 1.75, hy - ry * 0.42),
                        (hx + rx * 0.4, hy - ry * 0.32),
                    ],
                    fill=brim,
                )
        else:
            d.rectangle([hx - rx * 1.1, hy - ry * 0.55, hx + rx * 1.1, hy - ry * 0.4], fill=brim)
    if "hair_band" in worn:
        colour = look.scarf_colour
        w = max(1, round(ry * 0.16))
        if body.view == "side":
            d.line([(hx - rx * 0.2, hy - ry * 1.0), (hx + rx * 0.5, hy - ry * 0.5)], fill=colour, width=w)
        else:
            d.arc([hx - rx * 1.05, hy - ry * 1.05, hx + rx * 1.05, hy + ry * 0.4], 195, 345, fill=colour, width=w)


def draw_accessories(img: Image.Image, body: Body, attrs: Attrs, look: Look) -> None:
    """Glasses, sunglasses, headphones, scarf, kerchief, face mask, shawl."""
    worn = set(attrs.get("accessories", ("none",)))
    if worn == {"none"}:
        return
    d = ImageDraw.Draw(img)
    (hx, hy), (rx, ry) = body.head_c, body.head_r
    u, cx, view = body.u, body.cx, body.view
    if "shawl" in worn:
        c = look.scarf_colour
        top = body.sh_y - 0.012 * u
        if view == "back":
            d.polygon([(cx - body.sw * 1.05, top), (cx + body.sw * 1.05, top), (cx, body.waist_y)], fill=c)
        elif view == "side":  # draped over the shoulder, hanging at the front and the back
            d.polygon(
                [
                    (cx - body.sw * 1.1, top),
                    (cx + body.sw * 1.1, top),
                    (cx + body.sw * 1.15, body.chest_y + 0.04 * u),
                    (cx, body.chest_y),
                    (cx - body.sw * 1.15, body.chest_y + 0.06 * u),
                ],
                fill=c,
            )
        else:  # a V-shaped drape over both shoulders
            n = body.neck_w * 1.3
            d.polygon(
                [
                    (cx - body.sw * 1.08, top),
                    (cx - n, top - 0.006 * u),
                    (cx + n, top - 0.006 * u),
                    (cx + body.sw * 1.08, top),
                    (cx + body.sw * 1.1, body.chest_y + 0.02 * u),
                    (cx, body.chest_y + 0.08 * u),
                    (cx - body.sw * 1.1, body.chest_y + 0.02 * u),
                ],
                fill=c,
            )
            d.polygon(
                [(cx - n, top), (cx + n, top), (cx, body.sh_y + 0.05 * u)],
                fill=garment_colours(look, attrs, "upper_colour")[0],
            )
    if "scarf" in worn or "kerchief" in worn:
        c = look.scarf_colour if "shawl" not in worn else scale(look.scarf_colour, 0.6)
        if "scarf" in worn:
            d.rounded_rectangle(
                [
                    cx - body.neck_w * 1.9,
                    body.sh_y - 0.03 * u,
                    cx + body.neck_w * 1.9 + (0.01 * u if view == "side" else 0),
                    body.sh_y + 0.022 * u,
                ],
                radius=0.01 * u,
                fill=c,
            )
            if view != "back":
                x = cx + (0.02 * u if view == "front" else body.sw * 0.7)
                d.rectangle([x - 0.016 * u, body.sh_y, x + 0.016 * u, body.chest_y + 0.04 * u], fill=scale(c, 0.9))
        if "kerchief" in worn and view != "back":
            x = cx + (body.sw * 0.6 if view == "side" else 0.0)
            d.polygon(
                [
                    (x - body.neck_w * 1.4, body.sh_y - 0.015 * u),
                    (x + body.neck_w * 1.4, body.sh_y - 0.015 * u),
                    (x, body.sh_y + 0.045 * u),
                ],
                fill=scale(c, 1.2),
            )
    if "face_mask" in worn:
        c = (160, 200, 230) if look.logo_shape != 2 else (238, 238, 236)
        if view == "front":
            d.rounded_rectangle(
                [hx - rx * 0.72, hy + ry * 0.2, hx + rx * 0.72, hy + ry * 0.85], radius=rx * 0.25, fill=c
            )
        elif view == "side":
            d.polygon(
                [
                    (hx + rx * 0.25, hy + ry * 0.15),
                    (hx + rx * 1.12, hy + ry * 0.2),
                    (hx + rx * 0.9, hy + ry * 0.85),
                    (hx + rx * 0.25, hy + ry * 0.8),
                ],
                fill=c,
            )
            d.line([(hx + rx * 0.25, hy + ry * 0.3), (hx - rx * 0.05, hy + ry * 0.1)], fill=c, width=1)
        else:
            for s in (-1, 1):
                d.line([(hx + s * rx * 0.9, hy + ry * 0.1), (hx + s * rx * 0.55, hy + ry * 0.45)], fill=c, width=1)
    for kind in ("glasses", "sunglasses"):
        if kind not in worn or view == "back":
            continue
        frame = (20, 20, 22)
        e = rx * 0.28
        ey = hy + ry * 0.02
        if view == "front":
            for s in (-1, 1):
                box = [hx + s * rx * 0.4 - e, ey - e * 0.75, hx + s * rx * 0.4 + e, ey + e * 0.75]
                if kind == "sunglasses":
                    d.rounded_rectangle(box, radius=e * 0.4, fill=frame)
                else:
                    d.rectangle(box, outline=frame, width=1)
            d.line([(hx - rx * 0.12, ey), (hx + rx * 0.12, ey)], fill=frame, width=1)
        else:
            box = [hx + rx * 0.45, ey - e * 0.75, hx + rx * 0.95, ey + e * 0.75]
            d.rectangle(box, fill=frame if kind == "sunglasses" else None, outline=frame, width=1)
            d.line([(hx + rx * 0.45, ey), (hx - rx * 0.1, ey)], fill=frame, width=1)
    if "headphones" in worn:
        c = (28, 28, 30) if look.logo_shape != 1 else (230, 230, 228)
        band = max(1, round(ry * 0.14))
        if view == "side":
            d.arc([hx - rx * 1.1, hy - ry * 1.15, hx + rx * 0.9, hy + ry * 0.6], 200, 300, fill=c, width=band)
            d.ellipse([hx - rx * 0.35, hy - ry * 0.22, hx + rx * 0.15, hy + ry * 0.38], fill=c)
        else:
            d.arc([hx - rx * 1.12, hy - ry * 1.15, hx + rx * 1.12, hy + ry * 0.7], 180, 360, fill=c, width=band)
            for s in (-1, 1):
                d.ellipse([hx + s * rx - rx * 0.24, hy - ry * 0.18, hx + s * rx + rx * 0.24, hy + ry * 0.38], fill=c)
