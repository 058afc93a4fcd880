"""How a gallery store's ``images.json`` holds its images: by column, attribute sets listed once.

One list per field (path, person_id, camera_id, view), the distinct attribute sets listed once (as
positions in a list of distinct ``(slot, values)`` pairs) with each image's position among them (the
images of one person share theirs), and the free metadata one list per key: parsing 100k JSON
records of 20 fields each takes seconds, a few long lists of strings and numbers a tenth of that.
:func:`image_columns` writes the columns, :func:`read_image_columns` reads and checks them.
"""

from __future__ import annotations

import json
from itertools import chain
from pathlib import Path
from typing import Any, Mapping, Sequence

from minterpr.types import GalleryImage

IMAGES = "images.json"  # the file, in a store folder
COLUMNS = ("path", "person_id", "camera_id", "view")  # GalleryImage's plain fields, one list each in images.json


def image_columns(images: Sequence[GalleryImage], metadata: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """``images.json``: ``{"path": [...], "person_id": [...], "camera_id": [...], "view": [...],
    "attributes": [set position or null, ...], "attribute_sets": [[pair position, ...], ...],
    "attribute_pairs": [[slot, [values]], ...], "meta": {key: [value or null, ...]}}`` (a null
    metadata value is an absent key).

    >>> image_columns([GalleryImage("a.jpg", "x:1", attributes={"gender": ("male",)})], [{"frame": 3}])["meta"]
    {'frame': [3]}
    """
    columns: dict[str, Any] = {name: [getattr(image, name) for image in images] for name in COLUMNS}
    pairs: dict[tuple[str, tuple[str, ...]], int] = {}  # (slot, values) -> its position in attribute_pairs
    sets: dict[tuple[int, ...], int] = {}  # attribute set (pair positions) -> its position in attribute_sets
    columns["attributes"] = [
        None
        if image.attributes is None
        else sets.setdefault(
            tuple(pairs.setdefault((slot, tuple(values)), len(pairs)) for slot, values in image.attributes.items()),
            len(sets),
        )
        for image in images
    ]
    columns["attribute_sets"] = [list(key) for key in sets]
    columns["attribute_pairs"] = [[slot, list(values)] for slot, values in pairs]
    meta: dict[str, list[Any]] = {}
    for k, record in enumerate(metadata or ()):
        for key, value in record.items():
            if key not in meta:
                meta[key] = [None] * len(images)
            meta[key][k] = value
    columns["meta"] = meta
    return columns


def read_image_columns(path: Path, count: int, fail: Any) -> tuple[list[GalleryImage], dict[str, list[Any]]]:
    """The images and their free metadata columns from ``images.json`` (:func:`image_columns`)."""
    try:
        columns = json.loads(path.read_text(encoding="utf-8"))
        pairs = [(str(slot), tuple(values)) for slot, values in columns["attribute_pairs"]]
        codes = columns["attribute_sets"]
        if min(chain.from_iterable(codes), default=0) < 0:  # too large or not a number: IndexError, TypeError
            raise ValueError("'attribute_sets' must list positions in 'attribute_pairs'")
        sets = [dict(map(pairs.__getitem__, set_codes)) for set_codes in codes]
        lists = [columns[name] for name in (*COLUMNS, "attributes")]
        meta = {key: values for key, values in columns["meta"].items()}
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
        raise fail(f"unreadable {IMAGES} ({type(err).__name__}: {err})") from None
    for name, values in [*zip((*COLUMNS, "attributes"), lists), *meta.items()]:
        if not isinstance(values, list) or len(values) != count:
            raise fail(f"{IMAGES}: {name!r} is not a list of {count} values (the manifest's image count)")
    positions = lists[-1]
    for position in positions:  # the check costs 10 ms for 100k images
        if position is not None and (type(position) is not int or not 0 <= position < len(sets)):
            raise fail(f"{IMAGES}: attribute set {position!r} is not a position in 'attribute_sets'")
    # an attribute set is shared by the images that have it: read-only, as the index is
    images = [
        GalleryImage(path, pid, camera, view, None if position is None else sets[position])
        for path, pid, camera, view, position in zip(*lists)
    ]
    return images, meta
