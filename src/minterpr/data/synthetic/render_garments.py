"""Draw skin limbs, the upper garment and the lower garment from the attribute labels.

Garments are painted through masks (:func:`~minterpr.data.synthetic.render_body.paint`) so that
patterns and the denim texture stay inside the garment outline. ``arms``/``legs`` select which
limbs to draw: a side view draws the far limbs in one pass and the torso and near limbs in another.
Footwear is drawn by :mod:`minterpr.data.synthetic.render_footwear`.

Example:
    >>> import numpy as np
    >>> from PIL import Image, ImageDraw
    >>> from minterpr.data.synthetic.identities import sample_identity
    >>> from minterpr.data.synthetic.render_look import sample_look
    >>> from minterpr.data.synthetic.render_body import make_body
    >>> attrs = sample_identity(np.random.default_rng(0)); look = sample_look(attrs, np.random.default_rng(0))
    >>> body = make_body(look, "front", cx=64.0, ground=250.0, height=220.0, stride=0.5, swing=0.3)
    >>> img = Image.new("RGB", (128, 256)); draw_upper(img, body, attrs, look, arms=(0, 1), torso=True)
"""

from __future__ import annotations

from typing import Mapping, Sequence

from PIL import Image, ImageDraw

from minterpr.data.synthetic.identities import DRESS_BODICES
from minterpr.data.synthetic.render_body import Body, Point, draw_limb, new_mask, paint
from minterpr.data.synthetic.render_colours import RGB, contrast_colour, luminance, scale
from minterpr.data.synthetic.render_look import Look, garment_colours

Attrs = Mapping[str, tuple[str, ...]]

# upper type -> (hem below the crotch line in body units, looseness)
_UPPER_CUT = {
    "tshirt": (-0.03, 1.05),
    "shirt": (-0.025, 1.04),
    "jacket": (0.025, 1.13),
    "sweater": (-0.015, 1.08),
    "suit": (0.03, 1.08),
    "vest": (-0.035, 1.02),
    "other": (0.06, 1.1),
}
_SLEEVE_T = {"long": 0.97, "short": 0.3, "sleeveless": 0.0}
# lower type -> (fraction of the leg covered, leg width multipliers at hip, knee, ankle)
_LOWER_CUT = {
    "jeans": (1.0, (1.06, 1.12, 1.35)),
    "trousers": (1.0, (1.1, 1.28, 1.6)),
    "suit_trousers": (1.0, (1.08, 1.22, 1.55)),
    "shorts": (0.42, (1.18, 1.5, 1.5)),
    "hot_pants": (0.22, (1.1, 1.3, 1.3)),
    "capri": (0.76, (1.08, 1.2, 1.35)),
}


def slot_value(attrs: Attrs, slot: str, default: str) -> str:
    return attrs.get(slot, (default,))[0]


def draw_legs(img: Image.Image, body: Body, colour: RGB, legs: Sequence[int]) -> None:
    """Bare legs (skin) or legs in stockings (their colour)."""
    d = ImageDraw.Draw(img)
    for i in legs:
        draw_limb(d, body.legs[i], list(body.leg_w), colour)


def draw_arms(img: Image.Image, body: Body, arms: Sequence[int], hands_only: bool = False) -> None:
    """Bare arms (skin) and hands; hands are drawn again after the sleeves with ``hands_only``."""
    d = ImageDraw.Draw(img)
    aw, fw = body.arm_w
    for i in arms:
        if not hands_only:
            draw_limb(d, body.arms[i], [aw, aw * 0.82, fw], body.skin)
        hx, hy = body.hand(i)
        r = fw * 0.62
        d.ellipse([hx - r, hy - r * 1.1, hx + r, hy + r * 1.1], fill=body.skin)


def _skirt_poly(body: Body, y0: float, hem: float, flare: float) -> list[Point]:
    top = body.half_width(y0) * 1.02
    lean = 0.02 * body.u if body.view == "side" else 0.0  # a skirt trails behind a walker
    return [
        (body.cx - top, y0),
        (body.cx + top, y0),
        (body.cx + flare * body.hw + lean, hem),
        (body.cx - flare * body.hw - lean, hem),
    ]


def _sleeve_widths(body: Body, loose: float) -> list[float]:
    aw, fw = body.arm_w
    return [aw * 1.3 * loose, aw * 1.08 * loose, fw * 1.25 * loose]


def draw_upper(img: Image.Image, body: Body, attrs: Attrs, look: Look, *, arms: Sequence[int], torso: bool) -> None:
    """The upper garment (or the whole dress) with sleeves, colours, pattern and type details."""
    kind = slot_value(attrs, "upper_type", "other")
    pattern = slot_value(attrs, "upper_pattern", "plain")
    sleeve_t = _SLEEVE_T[slot_value(attrs, "sleeve_length", "long")]
    main, accent = garment_colours(look, attrs, "upper_colour")
    drop, loose = _UPPER_CUT.get(kind, _UPPER_CUT["other"])
    u = body.u
    hem = body.crotch_y + drop * u
    bodice = slot_value(attrs, "lower_type", "") == "dress" and kind in DRESS_BODICES
    if bodice or (kind == "shirt" and slot_value(attrs, "upper_style", "casual") == "formal"):
        hem = body.waist_y + 0.012 * u if bodice else body.hip_y + 0.012 * u  # a dress's bodice; a tucked-in shirt
    size = img.size
    mask, md = new_mask(size)
    if torso:
        inset = 0.3 if kind == "vest" or (bodice and sleeve_t == 0.0) else 0.0
        md.polygon(body.torso_poly(body.sh_y, hem, loose if not bodice else 1.0, inset), fill=255)
    for i in arms:
        if sleeve_t > 0:
            draw_limb(md, body.arms[i], _sleeve_widths(body, loose), 255, 0.0, sleeve_t)
    plain_like = pattern in ("plain", "logo")
    paint(
        img,
        mask,
        main,
        body,
        accent=None if plain_like else accent,
        pattern=pattern,
        period=look.extras.get("stripe", 1.0),
    )
    if accent is not None and plain_like and kind not in ("jacket", "suit"):
        # colour-blocked: shoulder yoke and sleeves in the second colour
        mask2, md2 = new_mask(size)
        if torso:
            md2.polygon(body.torso_poly(body.sh_y, body.chest_y - 0.015 * u, loose * 1.01), fill=255)
        for i in arms:
            if sleeve_t > 0:
                draw_limb(md2, body.arms[i], [w * 1.02 for w in _sleeve_widths(body, loose)], 255, 0.0, sleeve_t)
        paint(img, mask2, accent, body)
    d = ImageDraw.Draw(img)
    if kind == "sweater" and sleeve_t > 0.9:
        for i in arms:  # ribbed cuffs
            draw_limb(d, body.arms[i], _sleeve_widths(body, loose), scale(main, 0.8), 0.9, sleeve_t, round_ends=False)
    if torso:
        _upper_details(d, body, attrs, look, kind, main, accent, hem, loose)


def _neckline(d: ImageDraw.ImageDraw, body: Body, v_neck: bool, colour: RGB, depth: float = 0.06) -> None:
    u, cx, nw = body.u, body.cx, body.neck_w
    y0 = body.sh_y - 0.02 * u
    if body.view == "front":
        if v_neck:
            d.polygon([(cx - nw * 1.4, y0), (cx + nw * 1.4, y0), (cx, body.sh_y + depth * u)], fill=colour)
        else:
            d.chord([cx - nw * 1.4, y0 - 0.03 * u, cx + nw * 1.4, body.sh_y + 0.025 * u], 0, 180, fill=colour)


def _upper_details(
    d: ImageDraw.ImageDraw,
    body: Body,
    attrs: Attrs,
    look: Look,
    kind: str,
    main: RGB,
    accent: RGB | None,
    hem: float,
    loose: float,
) -> None:
    u, cx, nw, view = body.u, body.cx, body.neck_w, body.view
    v_neck = slot_value(attrs, "neckline", "round") == "v_neck"
    dark, light = scale(main, 0.62), scale(main, 1.35)
    front = view == "front"
    line_w = max(1, round(0.006 * u))
    if kind == "suit":
        shirt = accent if accent is not None else ((238, 238, 236) if luminance(main) < 150 else scale(main, 1.5))
        tip = body.chest_y + 0.035 * u
        if front:
            d.polygon(
                [(cx - nw * 1.6, body.sh_y - 0.018 * u), (cx + nw * 1.6, body.sh_y - 0.018 * u), (cx, tip)], fill=shirt
            )
            tie = look.scarf_colour if accent is None else scale(main, 0.5)
            d.polygon(
                [
                    (cx - 0.008 * u, body.sh_y),
                    (cx + 0.008 * u, body.sh_y),
                    (cx + 0.012 * u, tip - 0.01 * u),
                    (cx, tip + 0.005 * u),
                    (cx - 0.012 * u, tip - 0.01 * u),
                ],
                fill=tie,
            )
            for s in (-1, 1):  # lapels
                d.line(
                    [
                        (cx + s * nw * 1.7, body.sh_y - 0.015 * u),
                        (cx + s * 0.03 * u, body.chest_y - 0.02 * u),
                        (cx, tip),
                    ],
                    fill=dark,
                    width=line_w,
                )
            for k in range(2):
                y = tip + (0.03 + 0.045 * k) * u
                r = max(1.0, 0.006 * u)
                d.ellipse([cx - r, y - r, cx + r, y + r], fill=dark)
        elif view == "side":
            d.polygon(
                [
                    (cx + body.sw * 0.5, body.sh_y),
                    (cx + body.sw * 0.95, body.sh_y + 0.01 * u),
                    (cx + body.sw * 0.9, tip),
                ],
                fill=shirt,
            )
        else:
            d.line([(cx, body.waist_y), (cx, hem)], fill=dark, width=line_w)  # back vent
        return
    if kind == "jacket":
        if front and accent is not None:  # open front: the inner layer shows
            top_w, hem_w = 0.032 * u, 0.045 * u
            d.polygon(
                [
                    (cx - top_w, body.sh_y - 0.015 * u),
                    (cx + top_w, body.sh_y - 0.015 * u),
                    (cx + hem_w, hem),
                    (cx - hem_w, hem),
                ],
                fill=accent,
            )
            _neckline(d, body, v_neck, body.skin, 0.04)
            for s in (-1, 1):
                d.line([(cx + s * top_w, body.sh_y - 0.015 * u), (cx + s * hem_w, hem)], fill=dark, width=line_w)
        elif front:
            d.line(
                [(cx, body.sh_y + 0.01 * u), (cx, hem)],
                fill=contrast_colour(main) if luminance(main) < 60 else dark,
                width=line_w,
            )
            d.chord([cx - nw * 1.6, body.sh_y - 0.035 * u, cx + nw * 1.6, body.sh_y + 0.03 * u], 0, 180, fill=dark)
        elif view == "side" and accent is not None:
            x = cx + body.half_width(body.chest_y) * loose
            d.polygon(
                [(x - 0.012 * u, body.sh_y), (x + 0.004 * u, body.sh_y), (x + 0.004 * u, hem), (x - 0.016 * u, hem)],
                fill=accent,
            )
        for s in (-1, 1) if front else ():  # pocket flaps
            d.line([(cx + s * 0.04 * u, body.hip_y), (cx + s * 0.085 * u, body.hip_y)], fill=dark, width=line_w)
        return
    if kind == "shirt" and view != "back":
        collar = light if luminance(main) < 200 else scale(main, 0.85)
        if front:
            for s in (-1, 1):
                d.polygon(
                    [
                        (cx + s * nw * 1.7, body.sh_y - 0.022 * u),
                        (cx + s * nw * 0.15, body.sh_y + 0.03 * u),
                        (cx + s * nw * 2.1, body.sh_y + 0.012 * u),
                    ],
                    fill=collar,
                )
            _neckline(d, body, v_neck, body.skin, 0.035 if v_neck else 0.0)
            r = max(0.8, 0.005 * u)
            y = body.sh_y + 0.05 * u
            while y < hem - 0.02 * u:  # buttons
                d.ellipse([cx - r, y - r, cx + r, y + r], fill=dark)
                y += 0.05 * u
        else:
            d.polygon(
                [
                    (cx + body.sw * 0.2, body.sh_y - 0.02 * u),
                    (cx + body.sw * 0.9, body.sh_y - 0.02 * u),
                    (cx + body.sw * 0.7, body.sh_y + 0.015 * u),
                ],
                fill=collar,
            )
        return
    if kind in ("tshirt", "sweater", "vest", "other") and front:
        _neckline(d, body, v_neck, body.skin)
        if kind == "sweater":
            d.arc(
                [cx - nw * 1.45, body.sh_y - 0.035 * u, cx + nw * 1.45, body.sh_y + 0.03 * u],
                0,
                180,
                fill=dark,
                width=line_w + 1,
            )
    if kind == "sweater":  # ribbed hem band
        w = body.half_width(hem) * loose
        d.rectangle([cx - w, hem - 0.022 * u, cx + w, hem], fill=scale(main, 0.8))
    if slot_value(attrs, "upper_pattern", "plain") == "logo" and front:
        _logo(d, (cx, body.chest_y + 0.012 * u), 0.05 * u, look)


def _logo(d: ImageDraw.ImageDraw, centre: Point, size: float, look: Look) -> None:
    x, y = centre
    r = size / 2
    if look.logo_shape == 0:
        d.ellipse([x - r, y - r, x + r, y + r], fill=look.logo_colour)
    elif look.logo_shape == 1:
        d.rectangle([x - r, y - r * 0.8, x + r, y + r * 0.8], fill=look.logo_colour)
        d.rectangle([x - r * 0.5, y - r * 0.4, x + r * 0.5, y + r * 0.4], fill=scale(look.logo_colour, 0.5))
    else:  # a printed word: three short bars
        for k in range(3):
            d.rectangle(
                [x - r * 1.2 + k * r * 0.85, y - r * 0.35, x - r * 1.2 + k * r * 0.85 + r * 0.65, y + r * 0.35],
                fill=look.logo_colour,
            )


def draw_lower(img: Image.Image, body: Body, attrs: Attrs, look: Look, *, legs: Sequence[int], hips: bool) -> None:
    """Trousers, shorts, skirts; a dress is a skirt from the waist that joins the top's bodice."""
    kind = slot_value(attrs, "lower_type", "trousers")
    pattern = slot_value(attrs, "lower_pattern", "plain")
    main, accent = garment_colours(look, attrs, "lower_colour")
    u = body.u
    mask, md = new_mask(img.size)
    skirt = kind in ("short_skirt", "long_skirt", "dress")
    if skirt:
        if not hips:
            return
        long = kind == "long_skirt" or (kind == "dress" and slot_value(attrs, "lower_length", "short") == "long")
        hem = body.ankle_y - 0.045 * u if long else body.knee_y - 0.045 * u
        flare = 1.75 if long else 1.42
        md.polygon(_skirt_poly(body, body.waist_y if kind == "dress" else body.hip_y - 0.012 * u, hem, flare), fill=255)
    else:
        t, mult = _LOWER_CUT.get(kind, _LOWER_CUT["trousers"])
        if hips:
            md.polygon(body.torso_poly(body.hip_y - 0.012 * u, body.crotch_y + 0.01 * u, 1.03), fill=255)
        for i in legs:
            draw_limb(md, body.legs[i], [w * m for w, m in zip(body.leg_w, mult)], 255, 0.0, t, round_ends=False)
            if hips or body.view == "side":  # round the seat and thigh top
                (x, y), r = body.legs[i][0], body.leg_w[0] * mult[0] / 2
                md.ellipse([x - r, y - r, x + r, y + r], fill=255)
    plain_like = pattern in ("plain", "logo")
    paint(
        img,
        mask,
        main,
        body,
        accent=None if plain_like else accent,
        pattern=pattern,
        texture="denim" if kind == "jeans" else "",
        period=look.extras.get("stripe", 1.0),
    )
    d = ImageDraw.Draw(img)
    line_w = max(1, round(0.006 * u))
    if accent is not None and plain_like:
        if skirt:  # a hem band in the second colour
            band = new_mask(img.size)
            band[1].polygon(_skirt_poly(body, hem - 0.05 * u, hem, flare), fill=255)
            paint(img, band[0], accent, body)
        else:  # tracksuit side stripes
            t, mult = _LOWER_CUT.get(kind, _LOWER_CUT["trousers"])
            for i in legs:
                out = 0.0 if body.view == "side" else (1.0 if body.legs[i][2][0] > body.cx else -1.0)
                pts = [(x + out * w * m * 0.36, y) for (x, y), w, m in zip(body.legs[i], body.leg_w, mult)]
                draw_limb(d, pts, [max(2.0, 0.018 * u)] * 3, accent, 0.0, t * 0.98, round_ends=False)
    if hips and not skirt and body.view != "side":  # inseam: the two legs part below the crotch
        t, _ = _LOWER_CUT.get(kind, _LOWER_CUT["trousers"])
        (lx, _), (rx, _) = body.legs[0][1], body.legs[1][1]
        y_end = body.crotch_y + (body.knee_y - body.crotch_y) * min(1.0, t * 2.2)
        d.line([(body.cx, body.crotch_y - 0.01 * u), ((lx + rx) / 2, y_end)], fill=scale(main, 0.6), width=line_w)
    if hips and not skirt and slot_value(attrs, "lower_style", "casual") == "formal":  # belt
        w = body.half_width(body.hip_y) * 1.04
        d.rectangle([body.cx - w, body.hip_y - 0.012 * u, body.cx + w, body.hip_y + 0.002 * u], fill=(30, 24, 20))
    if kind == "suit_trousers" and body.view == "front":  # pressed creases
        for i in legs:
            (x0, y0), _, (x1, y1) = body.legs[i]
            d.line([(x0, y0 + 0.04 * u), (x1, y1 - 0.01 * u)], fill=scale(main, 1.25), width=1)
    if pattern == "logo" and hips and body.view == "front":
        _logo(d, (body.legs[1][0][0], body.crotch_y + 0.04 * u), 0.035 * u, look)
