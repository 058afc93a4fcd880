"""Draw carried items, each as the camera would see it from the given view.

A backpack is a big block on the back from behind, only its straps (and its top above the
shoulders) from the front, a block behind the back from the side. Items held in a hand hang from
the hand chosen by the look (:attr:`Look.bag_side`); a second hand-held item takes the other hand.
Items are drawn in two layers: ``"behind"`` the body and ``"front"`` of it.

Example:
    >>> import numpy as np
    >>> from PIL import Image
    >>> from minterpr.data.synthetic.identities import sample_identity
    >>> from minterpr.data.synthetic.render_look import sample_look
    >>> from minterpr.data.synthetic.render_body import make_body
    >>> attrs = {**sample_identity(np.random.default_rng(0)), "carried": ("backpack",)}
    >>> look = sample_look(attrs, np.random.default_rng(0))
    >>> body = make_body(look, "back", cx=64.0, ground=250.0, height=220.0, stride=0.5, swing=0.3)
    >>> img = Image.new("RGB", (128, 256)); draw_carried(img, body, attrs, look, "front")
"""

from __future__ import annotations

from typing import Mapping

from PIL import Image, ImageDraw

from minterpr.data.synthetic.render_body import Body, Point
from minterpr.data.synthetic.render_colours import RGB, scale
from minterpr.data.synthetic.render_look import Look

Attrs = Mapping[str, tuple[str, ...]]
_HELD = ("handbag", "suitcase", "luggage", "plastic_bag", "umbrella", "folder", "other")
_METAL = (150, 152, 158)


def _hands(body: Body, look: Look, items: tuple[str, ...]) -> dict[str, int]:
    """Arm index per hand-held item: the look's bag side first, then the other hand."""
    if body.view == "side":
        order = [1, 0]  # near hand first
    else:
        order = [1, 0] if look.bag_side > 0 else [0, 1]
    held = [i for i in items if i in _HELD]
    return {item: order[k % 2] for k, item in enumerate(held)}


def draw_carried(img: Image.Image, body: Body, attrs: Attrs, look: Look, layer: str) -> None:
    """Draw the carried items of one layer (``"behind"`` or ``"front"``) of the person."""
    items = tuple(attrs.get("carried", ("nothing",)))
    if items == ("nothing",):
        return
    d = ImageDraw.Draw(img)
    hands = _hands(body, look, items)
    colour = look.item_colour
    for k, item in enumerate(items):
        c = colour if k == 0 else scale(colour, 0.6 if colour[0] + colour[1] + colour[2] > 300 else 1.8)
        if item == "backpack":
            _backpack(d, body, c, layer)
        elif item == "messenger_bag" and layer == "front":
            _messenger(d, body, c, look.bag_side)
        elif item in ("baby_buggy", "shopping_trolley"):
            if (layer == "behind") == (body.view == "back"):
                _pushed(d, body, item, c)
        elif item in hands and layer == "front":
            _held(d, body, item, c, hands[item], look)


def _backpack(d: ImageDraw.ImageDraw, body: Body, c: RGB, layer: str) -> None:
    u, cx, sw = body.u, body.cx, body.sw
    dark = scale(c, 0.65)
    strap_w = max(2.0, 0.03 * u)
    if body.view == "back" and layer == "front":
        box = [cx - sw * 0.8, body.sh_y + 0.004 * u, cx + sw * 0.8, body.hip_y + 0.015 * u]
        d.rounded_rectangle(box, radius=0.03 * u, fill=c)
        d.rounded_rectangle(
            [cx - sw * 0.55, (box[1] + box[3]) / 2, cx + sw * 0.55, box[3] - 0.012 * u], radius=0.015 * u, fill=dark
        )
        d.arc(
            [cx - 0.03 * u, box[1] - 0.025 * u, cx + 0.03 * u, box[1] + 0.02 * u],
            180,
            360,
            fill=dark,
            width=max(1, round(0.006 * u)),
        )
    elif body.view == "front":
        if layer == "behind":  # the top of the pack shows above the shoulders
            d.rounded_rectangle(
                [cx - sw * 0.85, body.sh_y - 0.045 * u, cx + sw * 0.85, body.hip_y], radius=0.03 * u, fill=c
            )
        else:
            for s in (-1, 1):
                x0, x1 = cx + s * sw * 0.55, cx + s * sw * 0.62
                y1 = body.chest_y + 0.08 * u
                d.polygon(
                    [
                        (x0 - strap_w / 2, body.sh_y - 0.018 * u),
                        (x0 + strap_w / 2, body.sh_y - 0.018 * u),
                        (x1 + strap_w / 2, y1),
                        (x1 - strap_w / 2, y1),
                    ],
                    fill=scale(c, 0.85),
                )
                d.rectangle([x1 - strap_w * 0.6, y1 - 0.015 * u, x1 + strap_w * 0.6, y1], fill=dark)  # buckle
    elif body.view == "side" and layer == "front":
        back = cx - body.half_width(body.chest_y)
        d.rounded_rectangle(
            [back - 0.085 * u, body.sh_y + 0.005 * u, back + 0.02 * u, body.hip_y + 0.01 * u], radius=0.025 * u, fill=c
        )
        d.rounded_rectangle(
            [back - 0.1 * u, body.chest_y + 0.02 * u, back - 0.05 * u, body.hip_y], radius=0.012 * u, fill=dark
        )
        d.line(
            [
                (cx - sw * 0.2, body.sh_y - 0.012 * u),
                (cx + sw * 0.5, body.sh_y + 0.03 * u),
                (cx + sw * 0.3, body.chest_y + 0.06 * u),
            ],
            fill=dark,
            width=max(1, round(strap_w * 0.8)),
        )


def _messenger(d: ImageDraw.ImageDraw, body: Body, c: RGB, side: int) -> None:
    u, cx = body.u, body.cx
    dark = scale(c, 0.65)
    width = max(1, round(0.014 * u))
    if body.view == "side":
        bx = cx - 0.01 * u
        d.line([(cx - body.sw * 0.3, body.sh_y - 0.012 * u), (bx, body.hip_y - 0.02 * u)], fill=dark, width=width)
        d.rounded_rectangle(
            [bx - 0.055 * u, body.hip_y - 0.025 * u, bx + 0.055 * u, body.hip_y + 0.075 * u], radius=0.01 * u, fill=c
        )
        d.rectangle([bx - 0.055 * u, body.hip_y - 0.025 * u, bx + 0.055 * u, body.hip_y + 0.01 * u], fill=dark)
        return
    s = side if body.view == "front" else -side
    bx = cx + s * (body.hw + 0.03 * u)
    d.line([(cx - s * body.sw * 0.62, body.sh_y - 0.012 * u), (bx, body.hip_y - 0.02 * u)], fill=dark, width=width)
    d.rounded_rectangle(
        [bx - 0.05 * u, body.hip_y - 0.025 * u, bx + 0.05 * u, body.hip_y + 0.075 * u], radius=0.01 * u, fill=c
    )
    d.rectangle([bx - 0.05 * u, body.hip_y - 0.025 * u, bx + 0.05 * u, body.hip_y + 0.012 * u], fill=dark)


def _held(d: ImageDraw.ImageDraw, body: Body, item: str, c: RGB, arm: int, look: Look) -> None:
    u = body.u
    hx, hy = body.hand(arm)
    out = 0.0 if body.view == "side" else (1.0 if hx > body.cx else -1.0)  # away from the body
    dark = scale(c, 0.6)
    lw = max(1, round(0.006 * u))
    ground = body.ankle_y + 0.036 * u
    if item == "handbag":
        x = hx + out * 0.01 * u
        d.arc([x - 0.03 * u, hy - 0.02 * u, x + 0.03 * u, hy + 0.05 * u], 180, 360, fill=dark, width=lw)
        d.polygon(
            [
                (x - 0.035 * u, hy + 0.015 * u),
                (x + 0.035 * u, hy + 0.015 * u),
                (x + 0.045 * u, hy + 0.08 * u),
                (x - 0.045 * u, hy + 0.08 * u),
            ],
            fill=c,
        )
    elif item == "suitcase":
        x = hx + out * 0.05 * u
        w = 0.09 * u if body.view == "side" else 0.05 * u
        d.rectangle([hx - 0.012 * u, hy - 0.01 * u, hx + 0.012 * u, hy + 0.01 * u], fill=dark)
        d.rectangle([x - w, hy + 0.008 * u, x + w, hy + 0.13 * u], fill=c, outline=dark)
    elif item == "luggage":
        x = hx + (out * 0.09 * u if body.view != "side" else -0.16 * u)
        top = ground - 0.27 * u
        d.line([(hx, hy), (x, top)], fill=_METAL, width=lw + 1)
        d.rounded_rectangle([x - 0.075 * u, top, x + 0.075 * u, ground - 0.015 * u], radius=0.015 * u, fill=c)
        for k in (1, 2):
            d.line(
                [(x - 0.075 * u + k * 0.05 * u, top + 0.015 * u), (x - 0.075 * u + k * 0.05 * u, ground - 0.03 * u)],
                fill=dark,
                width=lw,
            )
        r = 0.012 * u
        for s in (-1, 1):
            d.ellipse([x + s * 0.05 * u - r, ground - 2 * r, x + s * 0.05 * u + r, ground], fill=(25, 25, 25))
    elif item == "plastic_bag":
        bag = (236, 236, 232) if look.logo_shape != 0 else c
        x = hx + out * 0.01 * u
        d.arc([x - 0.028 * u, hy - 0.02 * u, x + 0.028 * u, hy + 0.045 * u], 180, 360, fill=scale(bag, 0.85), width=lw)
        d.polygon(
            [
                (x - 0.035 * u, hy + 0.012 * u),
                (x + 0.035 * u, hy + 0.012 * u),
                (x + 0.05 * u, hy + 0.12 * u),
                (x - 0.05 * u, hy + 0.12 * u),
            ],
            fill=bag,
        )
    elif item == "umbrella":
        if look.umbrella_open:
            cy = body.top - 0.04 * u
            x = body.cx + (0.03 * u if body.view != "side" else 0.06 * u)
            d.line([(hx, hy), (x, cy)], fill=(40, 40, 40), width=lw)
            d.chord([x - 0.3 * u, cy - 0.09 * u, x + 0.3 * u, cy + 0.09 * u], 180, 360, fill=c)
            d.line([(x - 0.3 * u, cy), (x + 0.3 * u, cy)], fill=dark, width=lw)
        else:
            tip = (hx + out * 0.05 * u + (0.08 * u if body.view == "side" else 0.0), ground)
            d.line([(hx, hy), tip], fill=(40, 40, 40), width=lw)
            mx, my = hx + (tip[0] - hx) * 0.25, hy + (tip[1] - hy) * 0.25
            d.polygon(
                [(mx - 0.018 * u, my), (mx + 0.018 * u, my), (hx + (tip[0] - hx) * 0.85, hy + (tip[1] - hy) * 0.85)],
                fill=c,
            )
    elif item == "folder":
        x = hx + out * 0.015 * u
        w = 0.055 * u if body.view == "side" else 0.018 * u  # edge-on from the front
        d.rectangle([x - w, hy - 0.1 * u, x + w, hy + 0.03 * u], fill=c, outline=dark)
    elif item == "other":  # a phone or a bottle in the hand
        w, h = (0.014 * u, 0.03 * u) if look.logo_shape != 2 else (0.013 * u, 0.055 * u)
        d.rectangle([hx - w, hy - h, hx + w, hy + 0.01 * u], fill=(30, 30, 34) if look.logo_shape != 2 else c)


def _pushed(d: ImageDraw.ImageDraw, body: Body, item: str, c: RGB) -> None:
    """A buggy or trolley pushed in front of the person (behind them in a back view)."""
    u = body.u
    ground = body.ankle_y + 0.036 * u
    lw = max(1, round(0.007 * u))
    r = 0.025 * u
    if body.view == "side":
        x0, x1 = body.cx + 0.12 * u, body.cx + 0.42 * u
        hand: Point = body.hand(1)
    else:
        x0, x1 = body.cx - 0.17 * u, body.cx + 0.17 * u
        hand = (body.cx, body.hand(0)[1] - 0.02 * u)
    top = body.crotch_y - 0.02 * u
    bottom = body.knee_y + 0.08 * u
    for x in (x0 + r, x1 - r):
        d.ellipse([x - r, ground - 2 * r, x + r, ground], fill=(25, 25, 25))
        d.line([(x, ground - r), ((x0 + x1) / 2, bottom)], fill=_METAL, width=lw)
    if item == "baby_buggy":
        d.rounded_rectangle([x0, top, x1, bottom], radius=0.04 * u, fill=c)
        d.chord(
            [x0 + (0.1 * u if body.view == "side" else 0.0), top - 0.12 * u, x1, top + 0.1 * u],
            180,
            360,
            fill=scale(c, 0.7),
        )
    else:
        d.rectangle([x0, top, x1, bottom], outline=_METAL, width=lw)
        step = max(3.0, 0.03 * u)
        x = x0 + step
        while x < x1:
            d.line([(x, top), (x, bottom)], fill=_METAL, width=1)
            x += step
        y = top + step
        while y < bottom:
            d.line([(x0, y), (x1, y)], fill=_METAL, width=1)
            y += step
    edge = x0 if body.view == "side" else hand[0]
    d.line([hand, (edge, top)], fill=(40, 40, 40), width=lw + 1)
    if body.view != "side":
        d.line([(x0, hand[1]), (x1, hand[1])], fill=(40, 40, 40), width=lw + 1)  # the push bar
