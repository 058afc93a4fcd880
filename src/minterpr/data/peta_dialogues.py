"""PETA dialogues on real images: identity-disjoint splits, gallery manifests, MInterPEDES files.

``build_peta_dataset(peta_root, out_dir)`` reads every PETA subset, namespaces identities per
subset, splits identities (not images) into train / val / test, and writes the dataset layout of
:mod:`minterpr.data.build`. ``out_dir/images`` is a symbolic link to the PETA release, so no
image is copied. Val and test draw their identities from the multi-camera subsets (3DPeS,
GRID, i-LID, CAVIAR4REID, SARC3D): there an identity is seen by several cameras or views, so
the image retrieved may come from another camera than the one the witness remembers.

``hold_out=[subset, ...]`` builds a cross-camera fold instead (:mod:`minterpr.data.peta_folds`):
test = every image of those subsets, train / val = identity-disjoint parts of the others.

Example:
    >>> build_peta_dataset("../shared/data/peta", "outputs/peta")  # doctest: +SKIP
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from minterpr.data.build import begin_build, dialogue_config_dict, finish_build, peta_rebuild_args, write_split
from minterpr.data.layout import IMAGES_DIR, SPLITS, split_files
from minterpr.data.dialogue_synthesis import DialogueSynthesisConfig
from minterpr.data.formats.peta import peta_subsets, read_peta, resolve_peta_root
from minterpr.data.peta_folds import resolve_hold_out, split_held_out, subset_counts
from minterpr.errors import DatasetError
from minterpr.types import GalleryImage

# Subsets whose identities are seen by more than one camera or view.
MULTI_CAMERA_SUBSETS = ("3dpes", "grid", "i-lid", "ilid", "caviar4reid", "sarc3d")


def _is_multi_camera(person_id: str) -> bool:
    namespace = person_id.split(":", 1)[0].lower()
    return any(namespace.endswith(name) for name in MULTI_CAMERA_SUBSETS)


def split_identities(
    images: list[GalleryImage], *, seed: int = 0, val_fraction: float = 0.15, test_fraction: float = 0.25
) -> dict[str, list[GalleryImage]]:
    """Identity-disjoint splits. Val/test take identities with >= 2 images from multi-camera
    subsets first, sized as fractions of those; every other identity trains."""
    by_person: dict[str, list[GalleryImage]] = defaultdict(list)
    for image in images:
        by_person[image.person_id].append(image)
    rng = random.Random(seed)
    multi = sorted(p for p, imgs in by_person.items() if len(imgs) >= 2 and _is_multi_camera(p))
    rng.shuffle(multi)
    n_test = int(round(len(multi) * test_fraction / (val_fraction + test_fraction) * 0.8))
    n_val = int(round(len(multi) * val_fraction / (val_fraction + test_fraction) * 0.8))
    test, val = set(multi[:n_test]), set(multi[n_test : n_test + n_val])
    splits: dict[str, list[GalleryImage]] = {s: [] for s in SPLITS}
    for person, imgs in sorted(by_person.items()):
        split = "test" if person in test else "val" if person in val else "train"
        splits[split].extend(imgs)
    return splits


def build_peta_dataset(
    peta_root: str | Path,
    out_dir: str | Path,
    *,
    seed: int = 0,
    dialogues: DialogueSynthesisConfig | None = None,
    progress: bool = False,
    hold_out: Sequence[str] = (),
) -> dict:
    """Build PETA dialogues into ``out_dir``; returns the dataset info written to dataset.json.

    ``hold_out``: PETA subsets whose images form the whole test split (a cross-camera fold,
    :func:`minterpr.data.peta_folds.split_held_out`; names matched without case or punctuation);
    empty = the default split (:func:`split_identities`). dataset.json then also holds
    ``hold_out``, ``unused_images`` (val identities' images beyond the per-identity cap) and,
    per split, ``subsets`` (images per subset).

    The folder is marked *in progress* first and *finished* last (:mod:`minterpr.data.build`);
    a rerun rebuilds every file. The fingerprint covers the linked release's files too, so
    readers refuse the dataset when the release changes under it."""
    root = resolve_peta_root(peta_root).resolve()
    held = resolve_hold_out(hold_out, peta_subsets(root)) if hold_out else []
    out = Path(out_dir)
    config = dialogues or DialogueSynthesisConfig(seed=seed)
    link = out / IMAGES_DIR
    if link.is_symlink() or link.exists():
        if not link.is_symlink() or link.resolve() != root:
            raise DatasetError(out, f"{link} exists and is not a link to {root}: move it away or choose another --out")
    rebuild = peta_rebuild_args(str(root), seed, dialogue_config_dict(config))
    rebuild += [x for subset in held for x in ("--hold-out", subset)]
    begin_build(out, rebuild)
    if not link.is_symlink():
        link.symlink_to(root, target_is_directory=True)
    images = [img for img in read_peta(root) if img.attributes]
    # Paths become relative to out_dir through the images/ link.
    images = [replace(img, path=f"{IMAGES_DIR}/{img.path}") for img in images]
    splits = split_held_out(images, held, seed=seed) if held else split_identities(images, seed=seed)
    info: dict = {
        "name": "peta",
        "source": str(root),
        "seed": seed,
        "dialogues": dialogue_config_dict(config),
        "splits": {},
    }
    if held:  # val identities keep at most DEFAULT_MAX_VAL_IMAGES images: the rest are used nowhere
        info["hold_out"] = held
        info["unused_images"] = len(images) - sum(len(part) for part in splits.values())
    for split in SPLITS:
        if progress:
            print(f"writing {split}: {len(splits[split])} images", flush=True)
        info["splits"][split] = write_split(
            out, split, splits[split], replace(config, seed=config.seed + SPLITS.index(split)), namespace="peta"
        )
        if held:
            info["splits"][split]["subsets"] = subset_counts(splits[split])
    return finish_build(out, info, rebuild, split_files())
