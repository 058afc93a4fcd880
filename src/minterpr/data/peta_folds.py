"""Cross-camera protocol on PETA: leave camera sets (PETA subsets) out.

A *fold* holds out one or more PETA subsets: its **test** split is every labelled image of the
held-out subsets, and **train** / **val** are identity-disjoint parts of the *other* subsets
(val is for model selection, calibration and thresholds only). No camera, scene or person of
the test split is seen in training or selection, so the test figures predict how a new site
goes. ``minterpr data peta --hold-out SUBSET`` builds a fold (:func:`build_peta_dataset
<minterpr.data.peta_dialogues.build_peta_dataset>`); docs/attributes.md explains the three
folds of :data:`FOLDS`.

Val takes ``val_fraction`` of the identities of *every* remaining subset (drawn with the seed;
at least one, never all), so selection sees every kind of camera training sees. A val identity keeps at most
``max_val_images`` images (evenly spaced in file order): TownCentre's video gives ~31 frames
per person, and without the cap 18 people would be 45 % of val. Its other images are used
nowhere (moving them to train would break identity-disjointness).

Example:
    >>> from minterpr.types import GalleryImage
    >>> images = [GalleryImage(f"{s}/archive/{i}_{k}.jpg", f"peta-{s.lower()}:{i}")
    ...           for s in ("GRID", "MIT", "CUHK") for i in range(10) for k in range(2)]
    >>> splits = split_held_out(images, ["GRID"], seed=0, val_fraction=0.1)
    >>> {split: len(imgs) for split, imgs in splits.items()}
    {'train': 36, 'val': 4, 'test': 20}
    >>> sorted({subset_of(im) for im in splits["test"]})
    ['GRID']
    >>> resolve_hold_out(["grid", "i-lid"], ["GRID", "MIT", "i-LID"])
    ['GRID', 'i-LID']
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Iterable, Sequence

from minterpr.data.layout import SPLITS
from minterpr.data.formats.peta import peta_namespace
from minterpr.errors import InputError
from minterpr.types import GalleryImage

# The folds docs/attributes.md reports, by name -> held-out subsets (--hold-out per subset).
FOLDS: dict[str, tuple[str, ...]] = {
    "outdoor_lowres": ("MIT",),  # outdoor street, every crop 128x64, one image per person
    "indoor": ("GRID",),  # underground station, 6 cameras, persons seen by two of them
    "large_mixed": ("CUHK",),  # 4,563 people on a campus, many cameras and views, 160x80
}
DEFAULT_VAL_FRACTION = 0.1  # share of each remaining subset's identities that go to val
DEFAULT_MAX_VAL_IMAGES = 8  # images kept per val identity


def subset_of(image: GalleryImage) -> str:
    """The PETA subset of an image whose path is ``[images/]<subset>/archive/<file>``."""
    parts = image.path.split("/")
    return parts[parts.index("archive") - 1] if "archive" in parts[1:] else parts[0]


def resolve_hold_out(names: Iterable[str], available: Sequence[str]) -> list[str]:
    """Subset names as the release spells them, matched without case or punctuation
    (``grid`` -> ``GRID``, ``ilid`` -> ``i-LID``); in release order, each once. InputError for
    an unknown name or for holding out every subset."""
    by_key = {peta_namespace(name): name for name in available}
    chosen: list[str] = []
    for name in names:
        for part in (p.strip() for p in name.split(",")):
            if not part:
                continue
            if peta_namespace(part) not in by_key:
                raise InputError(f"--hold-out {part!r}: no such PETA subset here; choose from {', '.join(available)}")
            if by_key[peta_namespace(part)] not in chosen:
                chosen.append(by_key[peta_namespace(part)])
    if not chosen:
        raise InputError("--hold-out: no subset named")
    if set(chosen) == set(available):
        raise InputError(f"--hold-out: every subset ({', '.join(available)}) is held out: nothing left to train on")
    return [name for name in available if name in chosen]


def split_held_out(
    images: Sequence[GalleryImage],
    hold_out: Sequence[str],
    *,
    seed: int = 0,
    val_fraction: float = DEFAULT_VAL_FRACTION,
    max_val_images: int = DEFAULT_MAX_VAL_IMAGES,
) -> dict[str, list[GalleryImage]]:
    """Train / val / test of a fold: test = every image of the ``hold_out`` subsets; val = whole
    identities of each other subset, ``val_fraction`` of them (rounded, >= 1), at most
    ``max_val_images`` per identity (the others are left out); train = the rest.
    Identity-disjoint (person ids are namespaced per subset). Input order is kept in each split."""
    if not 0.0 < val_fraction < 1.0:
        raise InputError(f"val_fraction must be between 0 and 1, got {val_fraction}")
    held = set(hold_out)
    by_subset: dict[str, set[str]] = defaultdict(set)  # subset -> its person ids
    for image in images:
        if subset_of(image) not in held:
            by_subset[subset_of(image)].add(image.person_id)
    rng = random.Random(seed)
    val: set[str] = set()
    for subset in sorted(by_subset):
        people = sorted(by_subset[subset])
        rng.shuffle(people)
        count = min(max(1, round(val_fraction * len(people))), len(people) - 1)  # train keeps every subset
        val.update(people[:count])
    splits: dict[str, list[GalleryImage]] = {s: [] for s in SPLITS}
    val_images: dict[str, list[GalleryImage]] = defaultdict(list)
    for image in images:
        if subset_of(image) in held:
            splits["test"].append(image)
        elif image.person_id in val:
            val_images[image.person_id].append(image)
        else:
            splits["train"].append(image)
    kept: set[int] = set()
    for person_images in val_images.values():
        ordered = sorted(person_images, key=lambda im: im.path)
        step = max(1, len(ordered)) / min(len(ordered), max_val_images)
        kept.update(id(ordered[int(k * step)]) for k in range(min(len(ordered), max_val_images)))
    splits["val"] = [im for im in images if id(im) in kept]
    return splits


def subset_counts(images: Iterable[GalleryImage]) -> dict[str, int]:
    """Images per subset, sorted by subset name."""
    counts: dict[str, int] = defaultdict(int)
    for image in images:
        counts[subset_of(image)] += 1
    return dict(sorted(counts.items()))
