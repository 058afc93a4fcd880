"""Search on a hand-labelled real video: a gallery of the labelled boxes, witnesses from the labels.

:func:`label_gallery` cuts every labelled box that counts (not ``ignore``) out of the video into
``out_dir`` (JPEG, quality 95): one gallery image per box, its identity the labelled person, its
attributes that person's labelled attributes (None for people without any). The boxes are the
labeller's, not a detector's: the search figures measure the model, apart from detection.

:func:`witness_search` simulates one search per described person, aimed at their tallest crop:
the witness opens with the person's description, answers the system's questions from the
labelled attributes ("not sure" where the labels say nothing) and, shown images, corrects from
the labels of the person shown (:class:`~minterpr.interaction.simulators.WitnessSimulator` with
``captions`` and ``knowledge``); it does not recognise faces. Recall is by identity: any crop of
the person at rank 1 (R@1) or in the top 5 (R@5).

Example (with a video and a trained run):
    >>> labels = load_labels("benchmarks/data/vtest_labels.json")  # doctest: +SKIP
    >>> images = label_gallery(labels, "../shared/data/video/vtest.avi", "/tmp/vtest_crops")  # doctest: +SKIP
    >>> report = witness_search(load_run("outputs/demo/run"), labels, images, "/tmp/vtest_crops")  # doctest: +SKIP
    >>> [r["r1"] for r in report.rounds]  # doctest: +SKIP
    [23.1, 30.8, 38.5]
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from minterpr.errors import DatasetError
from minterpr.fileio import atomic_write
from minterpr.ingest.labels import StreetLabels, load_labels
from minterpr.ingest.sources import iter_frames, open_source
from minterpr.ingest.tracking import crop_box
from minterpr.types import GalleryImage

__all__ = ["label_gallery", "load_labels", "witness_search", "witness_targets"]
CAMERA = "street:cam1"  # the camera id of the label gallery's images


def crop_name(frame: int, person: str) -> str:
    """The file name of a labelled box's crop.

    >>> crop_name(30, "p05")
    'f0030_p05.jpg'
    """
    return f"f{frame:04d}_{person}.jpg"


def label_gallery(labels: StreetLabels, video: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[GalleryImage]:
    """The labelled boxes as gallery images under ``out_dir`` (crops written when missing)."""
    from PIL import Image

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    info = open_source(video)
    if (info.width, info.height) != (labels.video.get("width"), labels.video.get("height")):
        raise DatasetError(info.path, f"is {info.width}x{info.height}, the labels are of a "
                                      f"{labels.video.get('width')}x{labels.video.get('height')} video")
    wanted = {f: [b for b in boxes if not b.ignore] for f, boxes in labels.frames.items()}
    missing = {f for f, boxes in wanted.items() if any(not (out / crop_name(f, b.person)).is_file() for b in boxes)}
    if missing:
        last = max(missing)
        for index, frame in iter_frames(info):
            if index in missing and frame is not None:
                for b in wanted[index]:
                    x1, y1, x2, y2 = crop_box(b.box, frame.shape[1], frame.shape[0])
                    image = Image.fromarray(frame[y1:y2, x1:x2, ::-1].copy())
                    atomic_write(out / crop_name(index, b.person),
                                 lambda f, image=image: image.save(f, format="JPEG", quality=95), durable=False)
            if index >= last:
                break
    images = []
    for f, boxes in wanted.items():
        for b in boxes:
            attributes = dict(labels.people[b.person].attributes) or None
            images.append(GalleryImage(crop_name(f, b.person), b.person, CAMERA, attributes=attributes))
    return images


def witness_targets(labels: StreetLabels, images: list[GalleryImage]) -> list[GalleryImage]:
    """One target per described person: their tallest labelled crop (first of equals)."""
    height = {crop_name(f, b.person): b.box[3] - b.box[1] for f, boxes in labels.frames.items() for b in boxes}
    targets = []
    for person in labels.described():
        own = [i for i in images if i.person_id == person]
        if own:
            targets.append(max(own, key=lambda i: height[i.path]))
    return targets


def witness_search(run: Any, labels: StreetLabels, images: list[GalleryImage], root: str | os.PathLike[str], *,
                   rounds: int = 2, seed: int = 0) -> Any:
    """Simulated witness searches (see the module doc) with a loaded run
    (:func:`minterpr.runtime.run.load_run`); the :class:`~minterpr.evaluation.report.EvaluationReport`."""
    from minterpr.evaluation.online import simulate
    from minterpr.interaction.simulators import WitnessSimulator

    backend = run.backend()
    index = backend.index_images(images, root=os.fspath(root), progress=False).require_complete("the street benchmark")
    targets = witness_targets(labels, images)
    if not targets:
        raise DatasetError("labels", "no described person has a labelled crop")
    captions = {t.path: labels.people[t.person_id].description or "" for t in targets}
    knowledge = {t.path: dict(labels.people[t.person_id].attributes) for t in targets}
    witness = WitnessSimulator(captions=captions, knowledge=knowledge)
    return simulate(backend, index, targets, rounds=rounds, simulator=witness, seed=seed,
                    reranking=run.rerank_config(), protocol={"dataset": "street labels", "targets": len(targets)})
