"""A short video of the synthetic world with known tracks: people walking across a camera's scene.

People of the synthetic world (:mod:`minterpr.data.synthetic`) are rendered as cut-out sprites
and composited, frame by frame, walking across one camera's background at their own height,
speed and direction; the ground truth is every person's box in every frame with how much of
it is visible (people pass in front of each other). The tests and ``bench_ingest.py`` measure
detection recall, track purity and crops per track on it (:mod:`minterpr.ingest.evaluate`).

A sprite's cut-out comes from three renders of the same person with the same random state
(so the same pose and pixels): two scenes whose colours all differ (every background pixel
changes) and one laid out differently (the fixed-colour poles move): a pixel equal in all
three is the person's. A neutral camera (no blur, noise or colour change) keeps the person's
pixels identical across the three.

Example:
    >>> import tempfile, os
    >>> truth = render_video(os.path.join(tempfile.mkdtemp(), "walk.mp4"),
    ...                      SyntheticVideoConfig(people=1, frames=4, size=(240, 320), person_height=150))
    >>> len(truth.frames), truth.people, all(person == 0 for frame in truth.boxes for person, _, _ in frame)
    (4, 1, True)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from minterpr.data.synthetic import make_cameras, render_person, sample_identity, sample_look
from minterpr.data.synthetic.cameras import CameraStyle
from minterpr.data.synthetic.render_scene import background


@dataclass(frozen=True)
class SyntheticVideoConfig:
    """The video: its size, its people and how they move."""

    people: int = 4  # people walking across
    frames: int = 80  # frames in the video
    fps: float = 10.0  # frames per second
    size: tuple[int, int] = (480, 640)  # (H, W) in pixels
    person_height: int = (
        200  # how tall the nearest people are, in pixels; farther ones are smaller (HOG finds these best: ~100-250)
    )
    views: tuple[str, ...] = ("front", "back")  # person k is seen from views[k % len(views)] (walking
    #   diagonally); HOG finds front and back views of the synthetic people about twice as often as side ones
    speed: tuple[float, float] = (5.0, 9.0)  # walking speed range, pixels per frame
    poses: int = 6  # distinct renders per person, cycled while walking (the gait)
    frames_per_pose: int = 2  # frames each pose is shown
    seed: int = 0  # everything is drawn from it
    codec: str = "mpeg4"  # PyAV encoder of the file (mpeg4: in every FFmpeg build)


@dataclass(frozen=True)
class GroundTruth:
    """Where everybody is: ``boxes[f]`` = [(person, (x1, y1, x2, y2), visible fraction), ...]."""

    boxes: list[list[tuple[int, tuple[int, int, int, int], float]]]  # per frame, the people in it
    people: int  # people in the video (ids 0..people-1)
    fps: float

    @property
    def frames(self) -> range:
        return range(len(self.boxes))


def _neutral(layout_seed: int, palette: tuple[tuple[int, int, int], ...]) -> CameraStyle:
    return CameraStyle(
        name="key",
        layout_seed=layout_seed,
        background="street",
        palette=palette,  # type: ignore[arg-type]
        gains=(1.0, 1.0, 1.0),
        brightness=0.0,
        contrast=1.0,
        saturation=1.0,
        blur_sigma=0.0,
        noise_sigma=0.0,
        jpeg_quality=(95, 95),
        view_probs=(0.0, 0.0, 1.0),
        scale=0.85,
        light_gradient=0.0,
        occlusion_prob=0.0,
    )


KEYS = (
    _neutral(11, ((250, 10, 250), (10, 250, 250), (250, 250, 10))),
    _neutral(11, ((10, 250, 10), (250, 10, 10), (10, 10, 250))),
    _neutral(12, ((250, 10, 250), (10, 250, 250), (250, 250, 10))),
)


def person_sprite(
    attributes: dict, look: object, size: tuple[int, int], seed: int, view: str = "front"
) -> tuple[np.ndarray, np.ndarray]:
    """(h, w, 3) uint8 RGB pixels and (h, w) bool mask of one person seen from ``view``."""
    renders = [
        np.asarray(
            render_person(attributes, view=view, camera=key, rng=np.random.default_rng(seed), size=size, look=look),
            dtype=np.int16,
        )
        for key in KEYS
    ]  # type: ignore[arg-type]
    mask = (np.abs(renders[0] - renders[1]).max(axis=2) <= 3) & (np.abs(renders[0] - renders[2]).max(axis=2) <= 3)
    return renders[0].astype(np.uint8), _largest_part(mask)


def _largest_part(mask: np.ndarray) -> np.ndarray:
    """The largest 8-connected part of ``mask`` (drops a distant walker the scene may have drawn)."""
    from scipy import ndimage

    labels, count = ndimage.label(mask, structure=np.ones((3, 3)))
    if count <= 1:
        return mask
    sizes = np.bincount(labels.ravel())[1:]
    return labels == (1 + int(np.argmax(sizes)))


def _writer(path: Path, config: SyntheticVideoConfig):
    import av

    container = av.open(os.fspath(path), "w")
    stream = container.add_stream(config.codec, rate=int(round(config.fps)))
    stream.height, stream.width = config.size
    stream.pix_fmt = "yuv420p"
    stream.options = {"qscale": "2"} if config.codec == "mpeg4" else {}
    return container, stream


def render_video(path: str | os.PathLike[str], config: SyntheticVideoConfig = SyntheticVideoConfig()) -> GroundTruth:
    """Write the video to ``path`` (a file; a folder: one PNG per frame) and return its ground truth."""
    from PIL import Image

    rng = np.random.default_rng(config.seed)
    height, width = config.size
    camera = make_cameras(1, rng)[0]
    scene = np.asarray(background(camera, (height, width), rng), dtype=np.uint8)
    levels = rng.permutation(np.linspace(0.62, 0.97, max(2, config.people)))[: config.people]
    walkers = []
    for person in range(config.people):
        attributes = sample_identity(rng)
        look = sample_look(attributes, rng)
        ground = float(levels[person]) * height  # where the feet walk: lower in the frame = nearer = taller
        crop_h = int(round(config.person_height * (ground / height) / 0.97 / 0.85))
        crop = (crop_h, max(16, crop_h // 2))
        view = config.views[person % len(config.views)]
        sprites = [person_sprite(attributes, look, crop, int(rng.integers(2**31)), view) for _ in range(config.poses)]
        direction = 1 if person % 2 == 0 else -1
        speed = float(rng.uniform(*config.speed)) * direction
        enter = float(rng.uniform(0, config.frames * 0.5))
        x0 = -crop[1] if direction > 0 else width
        walkers.append((ground, person, sprites, speed, enter, x0))
    walkers.sort(key=lambda w: w[0])  # farther (higher up) people are drawn first, nearer ones over them
    out = Path(path)
    folder = out.suffix == ""
    writer = None if folder else _writer(out, config)
    if folder:
        out.mkdir(parents=True, exist_ok=True)
    truth = []
    try:
        for f in range(config.frames):
            frame = scene.copy()
            owner = np.full((height, width), -1, np.int32)  # who is seen at each pixel
            placed = []
            for ground, person, sprites, speed, enter, x0 in walkers:
                if f < enter:
                    continue
                pixels, mask = sprites[int((f - enter) // config.frames_per_pose) % len(sprites)]
                x, y = int(round(x0 + speed * (f - enter))), int(round(ground)) - pixels.shape[0]
                fx1, fy1 = max(0, x), max(0, y)
                fx2, fy2 = min(width, x + pixels.shape[1]), min(height, y + pixels.shape[0])
                if fx1 >= fx2 or fy1 >= fy2:
                    continue
                part = mask[fy1 - y : fy2 - y, fx1 - x : fx2 - x]
                frame[fy1:fy2, fx1:fx2][part] = pixels[fy1 - y : fy2 - y, fx1 - x : fx2 - x][part]
                owner[fy1:fy2, fx1:fx2][part] = person
                ys, xs = np.nonzero(mask)
                full = (x + xs.min(), y + ys.min(), x + xs.max() + 1, y + ys.max() + 1)
                placed.append((person, full, int(mask.sum())))
            boxes = []
            for person, (x1, y1, x2, y2), area in placed:
                clipped = (max(0, x1), max(0, y1), min(width, x2), min(height, y2))
                if clipped[0] < clipped[2] and clipped[1] < clipped[3]:
                    seen = float((owner == person).sum()) / area
                    boxes.append((person, tuple(int(v) for v in clipped), round(seen, 3)))
            truth.append(sorted(boxes))
            if folder:
                Image.fromarray(frame).save(out / f"frame{f:05d}.png")
            else:
                import av

                assert writer is not None
                for packet in writer[1].encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                    writer[0].mux(packet)
        if writer is not None:
            for packet in writer[1].encode():
                writer[0].mux(packet)
    finally:
        if writer is not None:
            writer[0].close()
    return GroundTruth(truth, config.people, config.fps)
