"""Body geometry and the drawing primitives shared by the renderer: limbs, torso outline, fabric fill.

:func:`make_body` turns a look, a view and a pose into pixel key points (head, shoulders,
hips, elbow/wrist/knee/ankle joints). Everything else is drawn relative to these points. In a
side view the person faces +x (the final image may be mirrored) and limb 0 is the far limb.

Example:
    >>> import numpy as np
    >>> from minterpr.data.synthetic.identities import sample_identity
    >>> from minterpr.data.synthetic.render_look import sample_look
    >>> look = sample_look(sample_identity(np.random.default_rng(0)), np.random.default_rng(0))
    >>> body = make_body(look, "front", cx=64.0, ground=250.0, height=220.0, stride=0.5, swing=0.3)
    >>> body.top < body.sh_y < body.crotch_y < body.ankle_y
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from minterpr.data.synthetic.render_colours import RGB
from minterpr.data.synthetic.render_look import Look

Point = tuple[float, float]


@dataclass
class Body:
    """Key points of one drawn person, in image pixels."""

    view: str  # "front", "back" or "side" (side faces +x)
    u: float  # person height in pixels: the unit of every other size
    cx: float  # body centre line
    top: float  # top of the head
    head_c: Point  # head centre
    head_r: Point  # head radii (x, y)
    neck_w: float  # neck half-width
    sh_y: float  # shoulder line
    chest_y: float
    waist_y: float
    hip_y: float  # waistband of trousers and skirts
    crotch_y: float
    knee_y: float
    ankle_y: float
    sw: float  # shoulder half-width (half-depth in a side view)
    ww: float  # waist half-width
    hw: float  # hip half-width
    arms: list[list[Point]]  # per arm: shoulder joint, elbow, wrist
    legs: list[list[Point]]  # per leg: hip joint, knee, ankle
    arm_w: tuple[float, float]  # upper-arm and forearm thickness
    leg_w: tuple[float, float, float]  # thigh, knee and ankle thickness
    skin: RGB

    def hand(self, i: int) -> Point:
        """Centre of hand ``i``, a little past the wrist along the forearm."""
        (ex, ey), (wx, wy) = self.arms[i][1], self.arms[i][2]
        d = math.hypot(wx - ex, wy - ey) or 1.0
        r = self.arm_w[1] * 0.6
        return wx + (wx - ex) / d * r, wy + (wy - ey) / d * r

    def half_width(self, y: float) -> float:
        """Torso half-width (half-depth in a side view) at height ``y``."""
        ys = (self.sh_y, self.chest_y, self.waist_y, self.hip_y, self.crotch_y + self.u)
        ws = (self.sw, self.sw * 0.94, self.ww, self.hw, self.hw * 1.05)
        return float(np.interp(y, ys, ws))

    def torso_poly(self, y0: float, y1: float, loose: float = 1.0, shoulder_inset: float = 0.0) -> list[Point]:
        """Outline of the torso between heights ``y0`` (>= shoulders) and ``y1``; wider when loose > 1.

        ``shoulder_inset`` pulls the top corners in (0.3 = sleeveless armholes).
        """
        keys = [y for y in (self.chest_y, self.waist_y, self.hip_y, self.crotch_y) if y0 < y < y1]
        ys = [y0] + keys + [y1]
        left, right = [], []
        for j, y in enumerate(ys):
            w = self.half_width(y) * loose
            if j == 0 and y0 <= self.sh_y + 1e-6:
                w *= 1.0 - shoulder_inset
            left.append((self.cx - w, y))
            right.append((self.cx + w, y))
        if y0 <= self.sh_y + 1e-6:  # round the shoulders towards the neck
            n = self.neck_w * (1.5 if self.view != "side" else 2.2)
            lift = self.u * 0.018
            left.insert(0, (self.cx - n, y0 - lift))
            right.insert(0, (self.cx + n, y0 - lift))
        return left + right[::-1]


def make_body(look: Look, view: str, *, cx: float, ground: float, height: float, stride: float, swing: float) -> Body:
    """Lay out a person standing on ``ground`` (sole line) with centre ``cx``.

    ``stride`` (0..1) spreads the legs, ``swing`` (-1..1) swings the arms (opposite to the legs).
    """
    u = height
    top = ground - u
    head_h = look.head * u
    ry = head_h / 2
    rx = ry * (0.8 if view != "side" else 0.86)
    child = look.head > 0.145
    sh_y = top + head_h + u * (0.035 if child else 0.045)
    crotch_y = top + u * (0.55 if child else 0.52)
    hip_y = crotch_y - u * 0.07
    waist_y = hip_y - u * 0.05
    ankle_y = top + u * 0.962
    knee_y = (crotch_y + ankle_y) / 2
    wf = look.width
    sw = look.shoulder * u * wf
    hw = look.hip * u * wf
    ww = min(sw, hw) * (0.86 if look.hip < look.shoulder * 0.8 else 0.82) + 0.004 * u
    arm_w = (0.058 * u * math.sqrt(wf), 0.046 * u * math.sqrt(wf))
    leg_w = (hw * 0.98, 0.06 * u * math.sqrt(wf), 0.042 * u)
    upper, fore = 0.18 * u, 0.155 * u
    if view == "side":
        sw, ww, hw = sw * 0.6, ww * 0.78, hw * 0.8  # depth instead of width
        arms, legs = [], []
        for sign in (-1.0, 1.0):  # far limb first
            a = sign * swing * 0.5
            j = (cx - 0.004 * u, sh_y + 0.03 * u)
            e = (j[0] + upper * math.sin(a), j[1] + upper * math.cos(a))
            b = a + 0.2 + 0.25 * max(a, 0.0)
            arms.append([j, e, (e[0] + fore * math.sin(b), e[1] + fore * math.cos(b))])
            phi = -sign * stride * 0.4
            h = (cx, crotch_y - 0.04 * u)
            thigh, shin = knee_y - h[1], ankle_y - knee_y
            k = (h[0] + thigh * math.sin(phi), h[1] + thigh * math.cos(phi))
            psi = phi - (0.45 * stride if phi < 0 else 0.05)  # the back leg bends, its foot lifts
            legs.append([h, k, (k[0] + shin * math.sin(psi), k[1] + shin * math.cos(psi))])
        # the legs' slant shortens them: keep the lower foot on the ground
        drop = ankle_y - max(leg[2][1] for leg in legs)
        legs = [[(x, y + drop) for x, y in leg] for leg in legs]
        arms = [[(x, y + drop) for x, y in arm] for arm in arms]
        top, sh_y, waist_y, hip_y, crotch_y, knee_y = (v + drop for v in (top, sh_y, waist_y, hip_y, crotch_y, knee_y))
        head_c = (cx + 0.014 * u, top + ry)
    else:
        arms, legs = [], []
        for sign in (-1.0, 1.0):
            s = swing * sign  # > 0: this arm swings towards the camera and looks shorter
            j = (cx + sign * (sw - arm_w[0] * 0.45), sh_y + 0.025 * u)
            e = (cx + sign * (sw + 0.006 * u), j[1] + upper - 0.02 * u * max(s, 0.0))
            wx = max(sw * 0.96, hw + fore * 0.3) + 0.012 * u - 0.025 * u * s
            arms.append([j, e, (cx + sign * wx, e[1] + fore - 0.06 * u * max(s, 0.0))])
            lift = 0.03 * u * stride * (1.0 if s > 0 else 0.0)  # the back leg's heel is up
            spread = 0.01 * u * stride
            legs.append(
                [
                    (cx + sign * hw * 0.48, crotch_y - 0.03 * u),
                    (cx + sign * hw * 0.47, knee_y - lift * 0.3),
                    (cx + sign * (hw * 0.5 + spread), ankle_y - lift),
                ]
            )
        head_c = (cx, top + ry)
    return Body(
        view=view,
        u=u,
        cx=cx,
        top=top,
        head_c=head_c,
        head_r=(rx, ry),
        neck_w=0.031 * u * math.sqrt(wf),
        sh_y=sh_y,
        chest_y=sh_y + 0.09 * u,
        waist_y=waist_y,
        hip_y=hip_y,
        crotch_y=crotch_y,
        knee_y=knee_y,
        ankle_y=ankle_y if view != "side" else max(leg[2][1] for leg in legs),
        sw=sw,
        ww=ww,
        hw=hw,
        arms=arms,
        legs=legs,
        arm_w=arm_w,
        leg_w=leg_w,
        skin=look.skin,
    )


def _lerp(p: Point, q: Point, t: float) -> Point:
    return p[0] + (q[0] - p[0]) * t, p[1] + (q[1] - p[1]) * t


def limb_part(points: list[Point], widths: list[float], t0: float, t1: float) -> tuple[list[Point], list[float]]:
    """The stretch of a limb between fractions ``t0`` and ``t1`` of its length, with widths."""
    seg = [math.hypot(b[0] - a[0], b[1] - a[1]) for a, b in zip(points, points[1:])]
    total = sum(seg) or 1.0
    cum = [0.0]
    for s in seg:
        cum.append(cum[-1] + s / total)

    def at(t: float) -> tuple[Point, float]:
        for i in range(len(seg)):
            if t <= cum[i + 1] or i == len(seg) - 1:
                f = (t - cum[i]) / max(cum[i + 1] - cum[i], 1e-9)
                f = min(max(f, 0.0), 1.0)
                return _lerp(points[i], points[i + 1], f), widths[i] + (widths[i + 1] - widths[i]) * f
        raise AssertionError("unreachable")

    p0, w0 = at(t0)
    p1, w1 = at(t1)
    inner = [(points[i], widths[i]) for i in range(1, len(points) - 1) if t0 < cum[i] < t1]
    pts = [p0] + [p for p, _ in inner] + [p1]
    ws = [w0] + [w for _, w in inner] + [w1]
    return pts, ws


def draw_limb(
    draw: ImageDraw.ImageDraw,
    points: list[Point],
    widths: list[float],
    fill: int | RGB,
    t0: float = 0.0,
    t1: float = 1.0,
    round_ends: bool = True,
) -> None:
    """Fill a tapered limb (quads between joints, discs at the joints) between fractions t0..t1."""
    if t1 <= t0:
        return
    pts, ws = limb_part(points, widths, t0, t1)
    for (a, wa), (b, wb) in zip(zip(pts, ws), zip(pts[1:], ws[1:])):
        dx, dy = b[0] - a[0], b[1] - a[1]
        d = math.hypot(dx, dy) or 1.0
        nx, ny = -dy / d / 2, dx / d / 2
        draw.polygon(
            [
                (a[0] + nx * wa, a[1] + ny * wa),
                (b[0] + nx * wb, b[1] + ny * wb),
                (b[0] - nx * wb, b[1] - ny * wb),
                (a[0] - nx * wa, a[1] - ny * wa),
            ],
            fill=fill,
        )
    joints = list(zip(pts, ws))[1:-1] if not round_ends else list(zip(pts, ws))
    for (x, y), w in joints:
        r = w / 2
        draw.ellipse([x - r, y - r, x + r, y + r], fill=fill)


def paint(
    canvas: Image.Image,
    mask: Image.Image,
    colour: RGB,
    body: Body,
    *,
    accent: RGB | None = None,
    pattern: str = "plain",
    texture: str = "",
    period: float = 1.0,
) -> None:
    """Fill the white area of ``mask`` with fabric: colour, pattern, texture and round-body shading.

    ``pattern``: "plain", "thin_stripes", "thick_stripes" or "plaid" (in ``accent``, or a darker or
    lighter shade of ``colour`` when there is no accent); ``texture``: "" or "denim".
    """
    box = mask.getbbox()
    if box is None:
        return
    x0, y0, x1, y1 = box
    ys = np.arange(y0, y1, dtype=np.float32)[:, None]  # (h, 1)
    xs = np.arange(x0, x1, dtype=np.float32)[None, :]  # (1, w)
    base = np.asarray(colour, dtype=np.float32)
    if accent is None:
        lum = 0.299 * base[0] + 0.587 * base[1] + 0.114 * base[2]
        alt = base * 0.55 if lum > 110 else base + (255 - base) * 0.45
    else:
        alt = np.asarray(accent, dtype=np.float32)
    u = body.u
    out = np.broadcast_to(base, (y1 - y0, x1 - x0, 3)).copy()  # (h, w, 3)
    if pattern in ("thin_stripes", "thick_stripes"):
        p = max(3.0, (0.024 if pattern == "thin_stripes" else 0.07) * u * period)
        on = ((ys - body.top) % p) < p * (0.45 if pattern == "thin_stripes" else 0.5)  # (h, 1)
        out = np.where(on[..., None], alt, out)
    elif pattern == "plaid":
        p = max(4.0, 0.055 * u * period)
        hy = ((ys - body.top) % p) < p * 0.4  # (h, 1)
        vx = ((xs - body.cx) % p) < p * 0.4  # (1, w)
        both = (hy & vx)[..., None]
        one = (hy ^ vx)[..., None]
        out = np.where(both, alt, np.where(one, 0.5 * (alt + base), out))
        line = ((ys - body.top) % p < 1.0) | ((xs - body.cx) % p < 1.0)
        out = np.where(line[..., None], out * 0.6, out)
    if texture == "denim":  # diagonal twill and faded thighs
        twill = (((xs + ys) % 3) < 1).astype(np.float32)[..., None]
        out = out * (0.93 + 0.12 * twill)
        fade = np.exp(-(((ys - (body.crotch_y + body.knee_y) / 2) / (0.08 * u)) ** 2))[..., None]
        out = out + (255 - out) * 0.12 * fade
    half = max(body.sw, body.hw) * (1.15 if body.view != "side" else 1.6)
    shading = 1.06 - 0.3 * np.clip(((xs - body.cx) / half) ** 2, 0.0, 1.2)  # (1, w): rounder body
    out = np.clip(out * shading[..., None], 0, 255).astype(np.uint8)
    canvas.paste(Image.fromarray(out, "RGB"), (x0, y0), mask.crop(box))


def new_mask(size: tuple[int, int]) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    """A blank (black) mask of the canvas size (W, H) and a drawer for it."""
    m = Image.new("L", size, 0)
    return m, ImageDraw.Draw(m)
