"""Camera scenes (street, corridor, park lawn), occluders and the camera's image processing.

Each camera's scene is drawn once per process from its layout seed, wider than one image; every
image crops a window from it at a random offset, so a camera shows the same place with the
person in different spots. :func:`apply_camera` adds the camera's look: lighting ramp, white
balance, brightness, contrast, saturation, blur and sensor noise.

Example:
    >>> import numpy as np
    >>> from minterpr.data.synthetic.cameras import make_cameras
    >>> cam = make_cameras(1, np.random.default_rng(0))[0]
    >>> background(cam, (128, 64), np.random.default_rng(1)).size
    (64, 128)
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw

from minterpr.data.synthetic.cameras import CameraStyle
from minterpr.data.synthetic.render_colours import FREE_COLOURS, pick_shade, scale

_WIDE = 3  # a scene is this many image widths wide


def _noise_texture(rng: np.random.Generator, h: int, w: int, sigma: float) -> np.ndarray:
    """Fine grain plus low-frequency blotches, (h, w, 1) float32."""
    fine = rng.normal(0.0, sigma, size=(h, w, 1)).astype(np.float32)
    small = rng.normal(0.0, sigma * 1.5, size=(max(2, h // 16), max(2, w // 16))).astype(np.float32)
    blotch = np.asarray(Image.fromarray(small, "F").resize((w, h), Image.BILINEAR), dtype=np.float32)[..., None]
    return fine + blotch


@lru_cache(maxsize=64)
def _scene(camera: CameraStyle, size: tuple[int, int]) -> Image.Image:
    h, w0 = size
    w = w0 * _WIDE
    rng = np.random.default_rng(camera.layout_seed)
    wall, ground, accent = camera.palette
    img = Image.new("RGB", (w, h), wall)
    d = ImageDraw.Draw(img)
    if camera.background == "street":
        horizon = int(h * rng.uniform(0.5, 0.62))
        d.rectangle([0, horizon, w, h], fill=ground)
        floors = int(rng.integers(2, 4))
        for f in range(floors):  # window rows
            y0 = int(horizon * (0.05 + f * 0.9 / floors))
            x = int(rng.integers(0, w0 // 3))
            while x < w:
                ww, wh = int(w0 * rng.uniform(0.12, 0.2)), int(horizon * 0.9 / floors * 0.6)
                d.rectangle(
                    [x, y0, x + ww, y0 + wh], fill=scale(wall, 0.45), outline=scale(wall, 0.8), width=max(1, h // 128)
                )
                x += ww + int(w0 * rng.uniform(0.12, 0.3))
        for _ in range(int(rng.integers(1, 3))):  # shop fronts and doors at street level
            x = int(rng.integers(0, w - w0 // 3))
            d.rectangle([x, int(horizon * 0.72), x + w0 // 3, horizon], fill=scale(accent, 0.8))
            d.rectangle([x, int(horizon * 0.62), x + w0 // 3, int(horizon * 0.7)], fill=accent)
        d.rectangle([0, horizon, w, horizon + max(2, h // 60)], fill=scale(ground, 1.3))  # kerb
        y, step = horizon + h // 30, h / 30
        while y < h:  # paving joints, wider apart nearer the camera
            d.line([(0, int(y)), (w, int(y))], fill=scale(ground, 0.85), width=1)
            step *= 1.35
            y += step
        for _ in range(int(rng.integers(1, 4))):  # poles and bins
            x = int(rng.integers(0, w))
            d.rectangle([x, int(h * 0.1), x + max(2, w0 // 40), horizon + h // 12], fill=(60, 62, 64))
        tex_sigma = 7.0
    elif camera.background == "corridor":
        floor = int(h * rng.uniform(0.58, 0.7))
        d.rectangle([0, 0, w, int(h * 0.08)], fill=scale(wall, 1.2))
        x = int(rng.integers(0, w0 // 2))
        while x < w:  # doors and notice boards
            dw = int(w0 * rng.uniform(0.22, 0.3))
            d.rectangle(
                [x, int(floor * 0.3), x + dw, floor], fill=accent, outline=scale(accent, 0.6), width=max(1, h // 128)
            )
            d.ellipse(
                [
                    x + dw - dw // 5,
                    int(floor * 0.65),
                    x + dw - dw // 5 + max(2, h // 80),
                    int(floor * 0.65) + max(2, h // 80),
                ],
                fill=(200, 190, 120),
            )
            bx = x + dw + int(w0 * 0.12)
            d.rectangle(
                [bx, int(floor * 0.35), bx + w0 // 6, int(floor * 0.55)],
                fill=pick_shade(FREE_COLOURS[int(rng.integers(len(FREE_COLOURS)))], rng),
            )
            x += dw + int(w0 * rng.uniform(0.5, 0.9))
        for x in range(int(rng.integers(0, w0 // 2)), w, w0):  # ceiling lights
            d.rectangle([x, int(h * 0.02), x + w0 // 3, int(h * 0.05)], fill=(250, 250, 240))
        d.rectangle([0, floor, w, h], fill=ground)
        d.rectangle([0, floor - max(2, h // 64), w, floor], fill=scale(ground, 0.55))  # skirting
        vx = w / 2
        for k in range(-8, 9):  # floor seams towards the vanishing point
            d.line([(vx + k * w0 * 0.08, floor), (vx + k * w0 * 0.9, h)], fill=scale(ground, 0.88), width=1)
        tex_sigma = 4.0
    else:  # grass: sky, tree line, lawn, a path
        treeline = int(h * rng.uniform(0.28, 0.4))
        d.rectangle([0, treeline, w, h], fill=ground)
        for _ in range(int(w / w0 * 4)):
            x, r = float(rng.uniform(0, w)), float(w0 * rng.uniform(0.12, 0.3))
            d.rectangle([x - r * 0.08, treeline - r * 0.3, x + r * 0.08, treeline + r * 0.3], fill=(78, 58, 40))
            d.ellipse(
                [x - r, treeline - r * 1.6, x + r, treeline + r * 0.1],
                fill=scale(accent, float(rng.uniform(0.8, 1.15))),
            )
        path_y = int(h * rng.uniform(0.62, 0.78))
        d.rectangle([0, path_y, w, path_y + h // 10], fill=(176, 160, 130))
        tex_sigma = 10.0
    arr = np.asarray(img, dtype=np.float32)
    arr = arr + _noise_texture(rng, h, w, tex_sigma)
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")


def background(camera: CameraStyle, size: tuple[int, int], rng: np.random.Generator) -> Image.Image:
    """A (W, H) window of the camera's scene at a random offset, sometimes with a distant walker."""
    h, w = size
    scene = _scene(camera, (h, w))
    x = int(rng.integers(0, scene.width - w + 1))
    img = scene.crop((x, 0, x + w, h))
    if rng.random() < 0.3:  # somebody far away
        d = ImageDraw.Draw(img)
        px, py, ph = float(rng.uniform(0, w)), float(h * rng.uniform(0.45, 0.65)), float(h * rng.uniform(0.15, 0.3))
        c = pick_shade(FREE_COLOURS[int(rng.integers(len(FREE_COLOURS)))], rng)
        d.rectangle([px - ph * 0.1, py - ph * 0.8, px + ph * 0.1, py], fill=c)
        d.ellipse([px - ph * 0.07, py - ph, px + ph * 0.07, py - ph * 0.8], fill=(150, 110, 80))
    return img


def occlude(img: Image.Image, rng: np.random.Generator) -> None:
    """Hide part of the person behind a pole, a parked object or another pedestrian."""
    w, h = img.size
    d = ImageDraw.Draw(img)
    kind = int(rng.integers(3))
    colour = pick_shade(FREE_COLOURS[int(rng.integers(len(FREE_COLOURS)))], rng)
    if kind == 0:  # a pole or sign post
        pw = w * rng.uniform(0.05, 0.12)
        x = rng.uniform(0.15, 0.85) * w
        d.rectangle([x - pw / 2, 0, x + pw / 2, h], fill=(70, 72, 76) if rng.random() < 0.6 else colour)
    elif kind == 1:  # a car, bin or crate in the foreground
        top = h * rng.uniform(0.68, 0.85)
        x0 = w * rng.uniform(-0.3, 0.4)
        d.rounded_rectangle([x0, top, x0 + w * rng.uniform(0.5, 1.2), h + 10], radius=h * 0.03, fill=colour)
    else:  # another pedestrian at the edge of the box
        side = rng.random() < 0.5
        bw = w * rng.uniform(0.2, 0.35)
        x0 = -bw * 0.3 if side else w - bw * 0.7
        d.rectangle([x0, h * 0.2, x0 + bw, h], fill=colour)
        d.ellipse([x0 + bw * 0.15, h * 0.05, x0 + bw * 0.85, h * 0.22], fill=(170, 125, 95))


@lru_cache(maxsize=8)
def _noise_bank(h: int, w: int) -> np.ndarray:
    """A fixed field of unit Gaussian noise, (2h, 2w, 3); images take random windows of it
    (drawing fresh normals for every image costs more than all the drawing)."""
    return np.random.default_rng(20240611).standard_normal((2 * h, 2 * w, 3), dtype=np.float32)


def _blur(arr: np.ndarray, sigma: float) -> np.ndarray:
    """Separable Gaussian blur of (H, W, 3) by repeated [a, 1-2a, a] passes (variance 2a each)."""
    var = sigma * sigma
    passes = max(1, int(np.ceil(var / 0.6)))
    a = np.float32(var / passes / 2.0)
    for _ in range(passes):
        for axis in (0, 1):
            pad = np.concatenate([arr.take([0], axis=axis), arr, arr.take([-1], axis=axis)], axis=axis)
            lo = pad[:-2] if axis == 0 else pad[:, :-2]
            mid = pad[1:-1] if axis == 0 else pad[:, 1:-1]
            hi = pad[2:] if axis == 0 else pad[:, 2:]
            arr = mid + a * (lo + hi - 2.0 * mid)
    return arr


def apply_camera(img: Image.Image, camera: CameraStyle, rng: np.random.Generator) -> Image.Image:
    """Blur, lighting ramp, white balance, brightness/contrast/saturation and noise of the camera."""
    w, h = img.size
    r = rng.random(8)
    arr = np.asarray(img, dtype=np.float32)  # (H, W, 3)
    sigma = camera.blur_sigma * (h / 256.0) * (0.7 + 0.6 * r[0])
    if sigma > 0.25:
        arr = _blur(arr, sigma)
    angle = 2 * np.pi * r[1]
    ys = np.linspace(-1.0, 1.0, h, dtype=np.float32)[:, None]
    xs = np.linspace(-1.0, 1.0, w, dtype=np.float32)[None, :]
    strength = camera.light_gradient * (0.3 + 0.7 * r[2])
    ramp = 1.0 + strength * (np.float32(np.cos(angle)) * xs + np.float32(np.sin(angle)) * ys)  # (H, W)
    gains = np.asarray(camera.gains, dtype=np.float32) * np.float32(0.98 + 0.04 * r[3])
    arr = arr * (ramp[..., None] * gains)
    lum = arr @ np.asarray([0.299, 0.587, 0.114], dtype=np.float32)  # (H, W)
    # saturation and contrast in one affine step: lum + (x - lum) * s, then (. - 128) * c + 128 + b
    c, s = np.float32(camera.contrast), np.float32(camera.saturation)
    offset = 128.0 * (1.0 - camera.contrast) + camera.brightness + 10.0 * (r[4] - 0.5)
    arr = (arr * (c * s) + (lum * (c * (1 - s)))[..., None]) + np.float32(offset)
    bank = _noise_bank(h, w)
    oy, ox = int(r[5] * h), int(r[6] * w)
    arr += bank[oy : oy + h, ox : ox + w] * np.float32(camera.noise_sigma)
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")
