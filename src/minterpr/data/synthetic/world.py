"""Build the licence-free synthetic pedestrian world: identities, cameras and rendered JPEG images.

The world has identity-disjoint train/val/test splits. Near-twins (identities that differ from
another in exactly one visible slot) are drawn *within* a split, so the test set contains twin
pairs that a short description cannot tell apart. Every identity is seen by at least two
different cameras. Images are written to ``images/<split>/<local id>_c<camera>_<k>.jpg`` under
the output folder; labels are per identity (as in PETA), not per image.

Every random choice derives from ``config.seed`` through :class:`numpy.random.SeedSequence`
keys (split, identity or image index), so the files are byte-identical for a seed whatever the
number of worker processes.

Example:
    >>> import tempfile
    >>> cfg = SyntheticWorldConfig(train_identities=4, val_identities=2, test_identities=2,
    ...                            image_size=(64, 32), workers=1)
    >>> world = build_world(tempfile.mkdtemp(), cfg, progress=False)
    >>> sorted(world), world["test"][0].person_id.startswith("synth:")
    (['test', 'train', 'val'], True)
"""

from __future__ import annotations

import io
import multiprocessing
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from PIL import Image, ImageDraw
from tqdm import tqdm

from minterpr.data.images import load_rgb
from minterpr.data.synthetic.cameras import CameraStyle, make_cameras, sample_view
from minterpr.data.synthetic.render import render_person
from minterpr.data.synthetic.render_look import Look, sample_look
from minterpr.data.synthetic.twins import sample_population_with_twins
from minterpr.errors import InputError
from minterpr.fileio import atomic_write
from minterpr.types import GalleryImage, person_id

SPLITS = ("train", "val", "test")
NAMESPACE = "synth"
_CAMERA_KEY, _POPULATION_KEY, _PLAN_KEY, _LOOK_KEY, _IMAGE_KEY = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class SyntheticWorldConfig:
    """Size and randomness of the synthetic world."""

    seed: int = 0  # master seed: identities, cameras, looks and every image derive from it
    train_identities: int = 2000  # identities in the training split
    val_identities: int = 300  # identities in the validation split
    test_identities: int = 400  # identities in the test split (the retrieval gallery)
    cameras: int = 6  # distinct camera styles (scenes, colour response, optics); at least 2
    images_per_identity: tuple[int, int] = (2, 4)  # inclusive range of images per identity; min >= 2
    image_size: tuple[int, int] = (256, 128)  # (height, width) in pixels
    twin_fraction: float = 0.3  # share of each split's identities that are near-twins of another (<= 0.5)
    jpeg_quality: tuple[int, int] = (60, 95)  # JPEG quality range; each camera uses a sub-range
    workers: int = 2  # rendering processes (1 = render in this process)

    def identities(self, split: str) -> int:
        """Number of identities in ``split``."""
        return {"train": self.train_identities, "val": self.val_identities, "test": self.test_identities}[split]


@dataclass(frozen=True)
class _Job:
    """One image to render (picklable, sent to the workers)."""

    path: str  # relative to the output folder
    attributes: Mapping[str, tuple[str, ...]]
    look_key: tuple[int, ...]  # SeedSequence key of the identity's look (its original's for a twin)
    image_key: tuple[int, ...]  # SeedSequence key of this image
    camera: int
    view: str


@dataclass
class WorldPlan:
    """Everything about the world except the pixels: identities, twins, cameras, images."""

    cameras: list[CameraStyle]
    identities: dict[str, list[dict[str, tuple[str, ...]]]]  # split -> attribute dicts
    twin_of: dict[str, list[int | None]]  # split -> index (in the split) of the identity each twin copies
    images: dict[str, list[GalleryImage]]  # split -> images, identity by identity
    jobs: list[_Job] = field(default_factory=list, repr=False)


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


def _check(config: SyntheticWorldConfig) -> None:
    lo, hi = config.images_per_identity
    if config.cameras < 2:
        raise InputError(f"cameras must be >= 2 (every identity is seen by two cameras), got {config.cameras}")
    if not 2 <= lo <= hi:
        raise InputError(f"images_per_identity must satisfy 2 <= min <= max, got {config.images_per_identity}")
    if config.workers < 1:
        raise InputError(f"workers must be >= 1, got {config.workers}")
    for split in SPLITS:
        if config.identities(split) < 0:
            raise InputError(f"{split}_identities must be >= 0, got {config.identities(split)}")


def plan_world(config: SyntheticWorldConfig) -> WorldPlan:
    """Sample identities, twins, cameras and the image list (no rendering).

    >>> plan = plan_world(SyntheticWorldConfig(train_identities=10, val_identities=2, test_identities=4))
    >>> len(plan.identities["train"]), sum(t is not None for t in plan.twin_of["train"])
    (10, 3)
    """
    _check(config)
    cameras = make_cameras(config.cameras, _rng(config.seed, _CAMERA_KEY), jpeg_quality=config.jpeg_quality)
    lo, hi = config.images_per_identity
    plan = WorldPlan(cameras=cameras, identities={}, twin_of={}, images={})
    first_local = 0  # local ids are unique across splits: train first, then val, then test
    for s, split in enumerate(SPLITS):
        people, twin_of = sample_population_with_twins(
            config.identities(split), _rng(config.seed, _POPULATION_KEY, s), twin_fraction=config.twin_fraction
        )
        plan.identities[split], plan.twin_of[split], plan.images[split] = people, twin_of, []
        rng = _rng(config.seed, _PLAN_KEY, s)
        image_index = 0
        for i, attrs in enumerate(people):
            local = first_local + i
            n = int(rng.integers(lo, hi + 1))
            # two distinct cameras first (the cross-camera guarantee), then any
            cams = [int(c) for c in rng.choice(config.cameras, size=2, replace=False)]
            cams += [int(c) for c in rng.integers(0, config.cameras, size=n - 2)]
            root = twin_of[i] if twin_of[i] is not None else i
            for k, cam in enumerate(cams):
                view = sample_view(cameras[cam], rng)
                path = f"images/{split}/{local:05d}_c{cam}_{k}.jpg"
                plan.images[split].append(
                    GalleryImage(
                        path=path,
                        person_id=person_id(NAMESPACE, local),
                        camera_id=f"{NAMESPACE}:cam{cam}",
                        view=view,
                        attributes=attrs,
                    )
                )
                plan.jobs.append(_Job(path, attrs, (_LOOK_KEY, s, root), (_IMAGE_KEY, s, image_index), cam, view))
                image_index += 1
        first_local += len(people)
    return plan


# Worker state: set once per process by _init_worker (cameras and settings are shared by all jobs).
_STATE: dict[str, object] = {}


def _init_worker(root: str, seed: int, cameras: Sequence[CameraStyle], size: tuple[int, int]) -> None:
    _STATE.update(root=root, seed=seed, cameras=list(cameras), size=size, looks={})


def _render_job(job: _Job) -> int:
    seed, size = int(_STATE["seed"]), _STATE["size"]  # type: ignore[call-overload]
    cameras: list[CameraStyle] = _STATE["cameras"]  # type: ignore[assignment]
    looks: dict[tuple, Look] = _STATE["looks"]  # type: ignore[assignment]
    key = (job.look_key, tuple(sorted(job.attributes.items())))
    look = looks.get(key)
    if look is None:
        if len(looks) > 256:  # jobs of one identity arrive together; old looks are not needed again
            looks.clear()
        look = looks[key] = sample_look(job.attributes, _rng(seed, *job.look_key))
    camera = cameras[job.camera]
    rng = _rng(seed, *job.image_key)
    img = render_person(job.attributes, view=job.view, camera=camera, rng=rng, size=size, look=look)  # type: ignore[arg-type]
    q_lo, q_hi = camera.jpeg_quality
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=int(rng.integers(q_lo, q_hi + 1)))
    data = buf.getvalue()
    # atomic, but no fsync per image (~7 ms each, +30 s to the default build): the build
    # marker's fingerprint, written after every image, holds their sizes, so an image a power
    # cut lost or cut short fails the readers' check instead
    atomic_write(Path(str(_STATE["root"]), job.path), lambda f: f.write(data), durable=False)
    return len(data)


# images/<split>/<local id>_c<camera>_<k>.jpg: what build_world writes (and may remove)
_IMAGE_NAME = re.compile(r"\d{5,}_c\d+_\d+\.jpg")


def _remove_unplanned_images(folder: Path, planned: set[str]) -> int:
    """Delete rendered images of an older build that this plan does not write (another seed or
    size leaves other names), so that the folder holds exactly this build's images."""
    removed = 0
    for entry in folder.iterdir():
        if _IMAGE_NAME.fullmatch(entry.name) and entry.name not in planned and entry.is_file():
            entry.unlink()
            removed += 1
    return removed


def build_world(
    out_dir: str | Path, config: SyntheticWorldConfig = SyntheticWorldConfig(), *, progress: bool = True
) -> dict[str, list[GalleryImage]]:
    """Render the world into ``out_dir`` and return split -> images (paths relative to ``out_dir``).

    Manifests and dialogues are not written here (see the gallery writer and the dialogue
    synthesiser). Existing files of the same names are overwritten; rendered images of another
    plan in ``images/<split>/`` are removed. Use :mod:`minterpr.data.synthetic.dataset` for a
    dataset readers accept (with its build marker).
    """
    plan = plan_world(config)
    root = Path(out_dir)
    for split in SPLITS:
        folder = root / "images" / split
        folder.mkdir(parents=True, exist_ok=True)
        _remove_unplanned_images(folder, {Path(image.path).name for image in plan.images[split]})
    args = (str(root), config.seed, plan.cameras, tuple(config.image_size))
    bar = tqdm(total=len(plan.jobs), desc="rendering synthetic world", unit="img", disable=not progress)
    try:
        if config.workers == 1:
            _init_worker(*args)
            for job in plan.jobs:
                _render_job(job)
                bar.update(1)
        else:
            # fork where the platform has it: quick to start and it does not re-run the caller's
            # __main__ (a script read from stdin cannot be re-imported by spawned workers)
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
            with ctx.Pool(config.workers, initializer=_init_worker, initargs=args) as pool:
                for _ in pool.imap_unordered(_render_job, plan.jobs, chunksize=32):
                    bar.update(1)
    finally:
        bar.close()
    return plan.images


def _label_tile(img: Image.Image, label: str, size: tuple[int, int]) -> Image.Image:
    h, w = size
    tile = Image.new("RGB", (w, h + 14), (255, 255, 255))
    tile.paste(img.convert("RGB").resize((w, h)), (0, 0))
    ImageDraw.Draw(tile).text((2, h + 1), label, fill=(0, 0, 0))
    return tile


def _tile(tiles: list[Image.Image], columns: int, out_png: str | Path) -> Path:
    if not tiles:
        raise InputError("nothing to tile: the image list is empty")
    w, h = tiles[0].size
    rows = (len(tiles) + columns - 1) // columns
    grid = Image.new("RGB", (columns * w, rows * h), (255, 255, 255))
    for i, t in enumerate(tiles):
        grid.paste(t, ((i % columns) * w, (i // columns) * h))
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    grid.save(out)
    return out


def render_grid(
    images: Sequence[GalleryImage],
    root: str | Path,
    columns: int,
    out_png: str | Path,
    tile_size: tuple[int, int] = (128, 64),
) -> Path:
    """Tile gallery images (read from ``root``) with their person ids under each into one PNG.

    ``tile_size`` is (height, width) of each image in the grid. Returns the PNG path.
    """
    tiles = []
    for g in images:
        tiles.append(_label_tile(load_rgb(Path(root) / g.path), g.person_id, tile_size))
    return _tile(tiles, columns, out_png)


def make_sample_grid(
    out_png: str | Path, seed: int = 0, *, identities: int = 16, size: tuple[int, int] = (256, 128)
) -> Path:
    """Render ``identities`` people (with near-twins) x 2 views by different cameras into one PNG.

    No world is built; use it for the README. Returns the PNG path.
    """
    people, twin_of = sample_population_with_twins(identities, _rng(seed, _POPULATION_KEY, 9), twin_fraction=0.25)
    cameras = make_cameras(6, _rng(seed, _CAMERA_KEY))
    rng = _rng(seed, _PLAN_KEY, 9)
    tiles = []
    for i, attrs in enumerate(people):
        root = twin_of[i] if twin_of[i] is not None else i
        look = sample_look(attrs, _rng(seed, _LOOK_KEY, 9, root))
        for cam in rng.choice(len(cameras), size=2, replace=False):
            view = sample_view(cameras[int(cam)], rng)
            img = render_person(attrs, view=view, camera=cameras[int(cam)], rng=rng, size=size, look=look)
            twin = f" ~{twin_of[i]}" if twin_of[i] is not None else ""
            tiles.append(_label_tile(img, f"{NAMESPACE}:{i}{twin} {view[0]}", size))
    return _tile(tiles, 8, out_png)
