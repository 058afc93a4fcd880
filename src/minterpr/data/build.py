"""Write a dataset directory: gallery manifests, MInterPEDES dialogues, ambiguity figures.

Every dataset minterpr builds (the synthetic world, PETA dialogues) has the same layout, so
training, evaluation and simulation read them alike::

    DIR/dataset.json            what was built, from what, with which settings
    DIR/images/...              the images (for PETA a link to the PETA release)
    DIR/gallery_<split>.jsonl   every image of the split with identity, camera, attributes
    DIR/<split>.jsonl           MInterPEDES dialogues whose targets are that split's images
    DIR/ambiguity.json          how ambiguous descriptions are before and after text turns

Gallery paths are relative to DIR, so DIR is the image root.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import asdict
from pathlib import Path
from typing import Mapping, Sequence

from minterpr.data.dialogue_synthesis import DialogueSynthesisConfig, ambiguity, synthesize_records
from minterpr.data.formats.gallery import write_gallery
from minterpr.data.formats.jsonl import atomic_writer
from minterpr.data.formats.minterpedes import write_minterpedes
from minterpr.types import GalleryImage, RetrievalSample, split_person_id

SPLITS = ("train", "val", "test")
DATASET_FILE = "dataset.json"


def _integer_ids(images: Sequence[GalleryImage]) -> dict[str, int]:
    """Dense integer ids for MInterPEDES's ``id`` field, in first-seen order."""
    ids: dict[str, int] = {}
    for image in images:
        ids.setdefault(image.person_id, len(ids))
    return ids


def write_split(out_dir: Path, split: str, gallery: Sequence[GalleryImage], config: DialogueSynthesisConfig, *,
                namespace: str, targets: Sequence[GalleryImage] | None = None) -> dict[str, float]:
    """Write ``gallery_<split>.jsonl`` and ``<split>.jsonl``; return counts and ambiguity (percent)."""
    write_gallery(gallery, out_dir / f"gallery_{split}.jsonl")
    targets = list(gallery if targets is None else targets)
    records = synthesize_records(targets, gallery, config)
    int_ids = _integer_ids(gallery)
    samples = []
    for record in records:
        sample = record.sample
        local = split_person_id(sample.person_id)[1]
        # MInterPEDES ids are integers: keep them when they are, else use the dense map (the
        # gallery manifest keeps the real namespaced identity of every target path).
        number = int(local) if namespace == split_person_id(sample.person_id)[0] and local.isdigit() else int_ids[sample.person_id]
        samples.append(RetrievalSample(sample.target_path, f"{namespace}:{number}", sample.dialogue))
    write_minterpedes(samples, out_dir / f"{split}.jsonl", namespace=namespace)
    return {
        "images": len(gallery), "identities": len(int_ids), "records": len(samples),
        "ambiguity_description": round(ambiguity(records, gallery, rounds=1), 2),
        "ambiguity_after_text_turns": round(ambiguity(records, gallery), 2),
    }


def write_dataset_info(out_dir: Path, info: Mapping[str, object]) -> None:
    """Write DIR/dataset.json atomically (written last: its presence means the build finished)."""
    with atomic_writer(out_dir / DATASET_FILE) as f:
        f.write(json.dumps(info, indent=2, sort_keys=True) + "\n")


def read_dataset_info(data_dir: str | os.PathLike[str]) -> dict:
    """The dataset.json of a built dataset; FileNotFoundError says how to build one."""
    path = Path(data_dir) / DATASET_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: build a dataset with `minterpr data synth --out {data_dir}` "
                                f"or `minterpr data peta --root PETA --out {data_dir}`")
    return json.loads(path.read_text(encoding="utf-8"))


def dialogue_config_dict(config: DialogueSynthesisConfig) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)
