"""Render one synthetic pedestrian image from attribute labels.

:func:`render_person` places a person in the camera's scene (scale and crop jitter, so the
person is not always centred or complete), draws body, clothes, hair, accessories and carried
items layer by layer for the view, sometimes occludes part of them, mirrors half of the images
and applies the camera's look. JPEG artefacts come later, when the world builder saves the image.

Example:
    >>> import numpy as np
    >>> from minterpr.data.synthetic.identities import sample_identity
    >>> from minterpr.data.synthetic.cameras import make_cameras
    >>> attrs = sample_identity(np.random.default_rng(0))
    >>> cam = make_cameras(1, np.random.default_rng(0))[0]
    >>> img = render_person(attrs, view="front", camera=cam, rng=np.random.default_rng(1))
    >>> img.size, img.mode
    ((128, 256), 'RGB')
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np
from PIL import Image

from minterpr.language.ontology import ONTOLOGY
from minterpr.data.synthetic.cameras import VIEWS, CameraStyle
from minterpr.data.synthetic.render_body import Body, make_body
from minterpr.data.synthetic.render_colours import jitter
from minterpr.data.synthetic.render_footwear import draw_boot_shafts, draw_shoes
from minterpr.data.synthetic.render_garments import draw_arms, draw_legs, draw_lower, draw_upper
from minterpr.data.synthetic.render_head import draw_accessories, draw_hair_behind, draw_head, draw_headwear
from minterpr.data.synthetic.render_items import draw_carried
from minterpr.data.synthetic.render_look import Look, garment_colours, sample_look
from minterpr.data.synthetic.render_scene import apply_camera, background, occlude

Attrs = Mapping[str, tuple[str, ...]]


def _leg_colour(body: Body, attrs: Attrs, look: Look) -> tuple[int, int, int]:
    if attrs.get("footwear_type", ("",))[0] == "stockings":
        return garment_colours(look, attrs, "footwear_colour")[0]
    return body.skin


def _draw_front_or_back(img: Image.Image, body: Body, attrs: Attrs, look: Look) -> None:
    both = (0, 1)
    front = body.view == "front"
    draw_carried(img, body, attrs, look, "behind")
    if front:
        draw_hair_behind(img, body, attrs, look, "back")
    draw_legs(img, body, _leg_colour(body, attrs, look), both)
    draw_boot_shafts(img, body, attrs, look, both)
    draw_lower(img, body, attrs, look, legs=both, hips=True)
    draw_shoes(img, body, attrs, look, both)
    draw_arms(img, body, both)
    draw_upper(img, body, attrs, look, arms=both, torso=True)
    draw_arms(img, body, both, hands_only=True)
    draw_head(img, body, attrs, look)
    draw_hair_behind(img, body, attrs, look, "strands" if front else "back")
    draw_headwear(img, body, attrs, look)
    draw_accessories(img, body, attrs, look)
    draw_carried(img, body, attrs, look, "front")


def _draw_side(img: Image.Image, body: Body, attrs: Attrs, look: Look) -> None:
    legs = _leg_colour(body, attrs, look)
    draw_carried(img, body, attrs, look, "behind")
    draw_arms(img, body, (0,))  # far arm, behind the torso
    draw_upper(img, body, attrs, look, arms=(0,), torso=False)
    draw_arms(img, body, (0,), hands_only=True)
    for i in (0, 1):  # far leg, then near leg (the near pass also draws the hips and any skirt)
        draw_legs(img, body, legs, (i,))
        draw_boot_shafts(img, body, attrs, look, (i,))
        draw_lower(img, body, attrs, look, legs=(i,), hips=i == 1)
        draw_shoes(img, body, attrs, look, (i,))
    draw_upper(img, body, attrs, look, arms=(), torso=True)
    draw_hair_behind(img, body, attrs, look, "back")
    draw_head(img, body, attrs, look)
    draw_arms(img, body, (1,))
    draw_upper(img, body, attrs, look, arms=(1,), torso=False)
    draw_arms(img, body, (1,), hands_only=True)
    draw_headwear(img, body, attrs, look)
    draw_accessories(img, body, attrs, look)
    draw_carried(img, body, attrs, look, "front")


def render_person(
    attributes: Attrs,
    *,
    view: str,
    camera: CameraStyle,
    rng: np.random.Generator,
    size: tuple[int, int] = (256, 128),
    look: Look | None = None,
) -> Image.Image:
    """Draw a pedestrian with these attributes as ``camera`` sees them from ``view``.

    ``size`` is (height, width); ``look`` fixes identity-level appearance (drawn from ``rng`` when
    None). The result is deterministic given the generator state.

    >>> import numpy as np
    >>> from minterpr.data.synthetic.cameras import make_cameras
    >>> attrs = {"gender": ("female",), "upper_type": ("tshirt",), "upper_colour": ("red",)}
    >>> cam = make_cameras(1, np.random.default_rng(0))[0]
    >>> render_person(attrs, view="back", camera=cam, rng=np.random.default_rng(0), size=(128, 64)).size
    (64, 128)
    """
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}: must be one of {', '.join(VIEWS)}")
    h, w = size
    if h < 32 or w < 16:
        raise ValueError(f"image size must be at least (32, 16), got {size}")
    attrs = ONTOLOGY.validate(dict(attributes))
    if look is None:
        look = sample_look(attrs, rng)
    # per-image shade jitter on top of the identity's shades: lighting never repeats exactly
    look = dataclasses.replace(look, shades={k: jitter(v, rng, 6) for k, v in look.shades.items()})
    img = background(camera, (h, w), rng)
    height = h * camera.scale * look.height * float(rng.uniform(0.94, 1.05))
    # feet usually inside the box, sometimes cut by its lower edge
    ground = h * (float(rng.uniform(0.95, 0.995)) if rng.random() > 0.08 else float(rng.uniform(1.0, 1.08)))
    cx = w * (0.5 + float(np.clip(rng.normal(0.0, 0.05), -0.12, 0.12)))
    stride = float(rng.uniform(0.0, 1.0))
    swing = stride * (1.0 if rng.random() < 0.5 else -1.0) * float(rng.uniform(0.5, 1.0))
    body = make_body(look, view, cx=cx, ground=ground, height=height, stride=stride, swing=swing)
    if view == "side":
        _draw_side(img, body, attrs, look)
    else:
        _draw_front_or_back(img, body, attrs, look)
    if rng.random() < camera.occlusion_prob:
        occlude(img, rng)
    if rng.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    return apply_camera(img, camera, rng)
