"""Re-identification data: identity-labelled crops with their camera, parsed and split.

Readers only parse (fast-reid's rule): :func:`read_cuhk03` reads the CUHK03 folder layout
(``images/PPPP_NN.jpg``: identity ``PPPP``, shots 00-04 from one camera of the pair, 05-09 from
the other), :func:`read_gallery_identities` takes the identities with at least two crops from a
gallery manifest (PETA's built ``gallery_train.jsonl``). :func:`split_identities` makes a seeded,
identity-disjoint split; :func:`query_gallery_split` picks the field's queries (one crop per
identity and camera, CUHK03-NP's protocol). Manifests are JSON lines of :class:`ReidImage`.

Example:
    >>> images = [ReidImage(f"i/{p:04d}_{s:02d}.jpg", f"cuhk03:{p:04d}", str(s // 5)) for p in range(4) for s in range(10)]
    >>> train, test = split_identities(images, test_identities=2, seed=0)
    >>> len(train), len(test), {i.person_id for i in train} & {i.person_id for i in test}
    (20, 20, set())
    >>> query, gallery = query_gallery_split(test, seed=0)
    >>> len(query), len(gallery)  # one query per identity and camera
    (4, 16)
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from dataclasses import asdict, dataclass
from os import PathLike
from pathlib import Path
from typing import Iterable, Sequence

from minterpr.data.errors import DataError
from minterpr.fileio import atomic_write_text

CUHK03_NAME = re.compile(r"(\d{4})_(\d{2})\.(?:jpg|jpeg|png)", re.IGNORECASE)
CUHK03_SHOTS_PER_CAMERA = 5  # shots 00-04 from one camera of the pair, 05-09 from the other
# PETA subsets whose file names carry the camera (PETA's label files do not): 3DPeS
# "<id>_<cam>_FRAME_<n>_RGB.bmp", GRID "<id>_<cam>_...", CAVIAR4REID "<id>_<n>" with shots
# 1-10 from one camera and 11-20 from the other
PETA_CAMERA_NAMES = (
    ("3DPeS", re.compile(r"\d+_(\d+)_FRAME_")),
    ("GRID", re.compile(r"\d{4}_(\d+)_")),
)
CAVIAR_SHOT = re.compile(r"\d{4}_(\d{3})\.")
CAVIAR_SHOTS_PER_CAMERA = 10


@dataclass(frozen=True)
class ReidImage:
    """One identity-labelled crop."""

    path: str  # image file (absolute, or relative to the manifest's folder)
    person_id: str  # namespaced identity ("cuhk03:0012", "peta-grid:0069")
    camera: str  # camera within the identity's data set; "" when unknown (never a cross-camera pair)


def read_cuhk03(root: str | PathLike[str]) -> list[ReidImage]:
    """Every crop of a CUHK03 folder (``root/images/PPPP_NN.jpg``), sorted by file name."""
    folder = Path(root) / "images"
    if not folder.is_dir():
        raise DataError(str(folder), 0, "images", "no such folder (expected CUHK03's images/PPPP_NN.jpg)")
    images = []
    for path in sorted(folder.iterdir()):
        match = CUHK03_NAME.fullmatch(path.name)
        if match is None:
            continue
        camera = str(int(match[2]) // CUHK03_SHOTS_PER_CAMERA)
        images.append(ReidImage(str(path.resolve()), f"cuhk03:{match[1]}", camera))
    if not images:
        raise DataError(str(folder), 0, "images", "no CUHK03 crops named PPPP_NN.jpg")
    return images


def peta_camera(path: str) -> str:
    """The camera a PETA crop's file name gives ("" for the subsets whose names carry none).

    Example:
        >>> peta_camera("images/GRID/archive/0001_2_25023_116_134_128_330.jpeg")
        '2'
        >>> peta_camera("images/CAVIAR4REID/archive/0001_013.jpg"), peta_camera("images/MIT/archive/001.jpg")
        ('1', '')
    """
    parts = Path(path).parts
    name = parts[-1]
    for subset, pattern in PETA_CAMERA_NAMES:
        if subset in parts and (match := pattern.match(name)):
            return match[1]
    if "CAVIAR4REID" in parts and (match := CAVIAR_SHOT.match(name)):
        return str((int(match[1]) - 1) // CAVIAR_SHOTS_PER_CAMERA)
    return ""


def read_gallery_identities(
    manifest: str | PathLike[str], *, min_images: int = 2, camera_from_name: bool = False
) -> list[ReidImage]:
    """Crops of the identities with at least ``min_images`` in a gallery manifest (JSON lines
    with ``path``, ``person_id`` and ``camera_id``); relative paths resolve from its folder.
    ``camera_from_name``: where ``camera_id`` is null, read it from a PETA file name."""
    manifest = Path(manifest)
    base = manifest.resolve().parent  # absolute: the paths go into manifests read from elsewhere
    rows: list[ReidImage] = []
    try:
        lines = manifest.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise DataError(str(manifest), 0, "file", f"cannot read ({err.strerror or err})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            path, person = record["path"], record["person_id"]
        except (ValueError, KeyError, TypeError) as err:
            raise DataError(str(manifest), number, "path/person_id", f"not a gallery record ({err})") from None
        if not isinstance(path, str) or not isinstance(person, str):
            raise DataError(str(manifest), number, "path/person_id", "must be strings")
        camera = record.get("camera_id")
        full = path if Path(path).is_absolute() else str(base / path)
        if camera is None:
            camera = peta_camera(path) if camera_from_name else ""
        rows.append(ReidImage(full, person, str(camera)))
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        counts[row.person_id] += 1
    return [row for row in rows if counts[row.person_id] >= min_images]


def by_identity(images: Iterable[ReidImage]) -> dict[str, list[ReidImage]]:
    """person_id -> its crops, in first-seen order."""
    groups: dict[str, list[ReidImage]] = defaultdict(list)
    for image in images:
        groups[image.person_id].append(image)
    return dict(groups)


def split_identities(
    images: Sequence[ReidImage], *, test_identities: int, seed: int
) -> tuple[list[ReidImage], list[ReidImage]]:
    """(rest, test): ``test_identities`` identities drawn by ``seed``, all of their crops in test."""
    people = sorted(by_identity(images))
    if not 0 < test_identities < len(people):
        raise ValueError(f"test_identities must be in [1, {len(people) - 1}], got {test_identities}")
    chosen = set(random.Random(seed).sample(people, test_identities))
    return ([i for i in images if i.person_id not in chosen], [i for i in images if i.person_id in chosen])


def query_gallery_split(images: Sequence[ReidImage], *, seed: int) -> tuple[list[ReidImage], list[ReidImage]]:
    """One query crop per identity and camera (drawn by ``seed``), the rest the gallery.

    Only identities seen by two or more known cameras give queries, and a camera gives one only
    while the gallery keeps a crop of that person from another camera (same-camera matches are
    left out when scoring): single-shot sets such as GRID (one crop per camera) give one query
    per person, the other camera's crop staying in the gallery.

    Example:
        >>> grid = [ReidImage(f"{p}_{c}.jpg", p, c) for p in ("a", "b") for c in ("1", "2")]
        >>> [q.path for q in query_gallery_split(grid, seed=0)[0]]
        ['a_1.jpg', 'b_1.jpg']
    """
    rng = random.Random(seed)
    queries: set[str] = set()
    for person, crops in sorted(by_identity(images).items()):
        cameras: dict[str, list[ReidImage]] = defaultdict(list)
        for crop in crops:
            cameras[crop.camera].append(crop)
        if len(cameras) < 2 or "" in cameras:
            continue
        for camera in sorted(cameras):
            pick = rng.choice(cameras[camera]).path  # drawn for every camera: the same draws whatever is kept
            elsewhere = any(c.camera != camera and c.path not in queries for c in crops)
            if elsewhere:
                queries.add(pick)
    return [i for i in images if i.path in queries], [i for i in images if i.path not in queries]


def split_labels(
    query: Sequence[ReidImage], gallery: Sequence[ReidImage]
) -> tuple[list[str], list[str], list[str], list[str]]:
    """The identities and cameras of a query/gallery split, in the order
    :func:`minterpr.evaluation.reid.reid_metrics` takes them after the features.

    >>> split_labels([ReidImage("a.jpg", "p", "1")], [ReidImage("b.jpg", "p", "2")])
    (['p'], ['p'], ['1'], ['2'])
    """
    return (
        [i.person_id for i in query],
        [i.person_id for i in gallery],
        [i.camera for i in query],
        [i.camera for i in gallery],
    )


def write_manifest(images: Iterable[ReidImage], path: str | PathLike[str]) -> Path:
    """JSON lines of :class:`ReidImage`, written atomically."""
    text = "".join(json.dumps(asdict(image)) + "\n" for image in images)
    return atomic_write_text(path, text)


def read_manifest(path: str | PathLike[str]) -> list[ReidImage]:
    """A manifest written by :func:`write_manifest`; errors name the file, line and field."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise DataError(str(path), 0, "file", f"cannot read ({err.strerror or err})") from None
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise DataError(str(path), line, "record", f"not UTF-8 text (byte {err.start}): not a manifest") from None
    images = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as err:
            raise DataError(str(path), number, "record", f"not JSON ({err})") from None
        if not isinstance(record, dict):
            raise DataError(str(path), number, "record", "expected an object with path, person_id and camera")
        for field in ("path", "person_id", "camera"):
            if not isinstance(record.get(field), str):
                raise DataError(str(path), number, field, "must be a string")
        full = record["path"] if Path(record["path"]).is_absolute() else str(path.parent / record["path"])
        images.append(ReidImage(full, record["person_id"], record["camera"]))
    if not images:
        raise DataError(str(path), 0, "file", "no images")
    return images
