"""Search on a hand-labelled real video: a gallery of the labelled boxes, witnesses from the labels.

:func:`label_gallery` cuts every labelled box that counts (not ``ignore``) out of the video into
``out_dir`` (JPEG, quality 95): one gallery image per box, its identity the labelled person, its
attributes that person's labelled attributes (None for people without any). The boxes are the
labeller's, not a detector's: the search figures measure the model, apart from detection.

:func:`detector_gallery` cuts instead what a detector finds on the labelled frames and ingestion's
crop filter keeps (crowded, small, blurry boxes dropped, :func:`~minterpr.ingest.tracking.crop_flags`):
a crop matched one-to-one at IoU >= 0.5 to a labelled box is that person, any other crop a
distractor of its own (``unmatched:...``): the search figures of a gallery as that detector cuts it.

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

import numpy as np

from minterpr.errors import DatasetError
from minterpr.fileio import atomic_write
from minterpr.ingest.labels import StreetLabels, load_labels
from minterpr.ingest.sources import iter_frames, open_source
from minterpr.ingest.tracking import crop_box
from minterpr.types import GalleryImage

__all__ = ["detector_gallery", "label_gallery", "load_labels", "witness_search", "witness_targets"]
CAMERA = "street:cam1"  # the camera id of the label gallery's images


def crop_name(frame: int, person: str) -> str:
    """The file name of a labelled box's crop.

    >>> crop_name(30, "p05")
    'f0030_p05.jpg'
    """
    return f"f{frame:04d}_{person}.jpg"


def label_gallery(
    labels: StreetLabels, video: str | os.PathLike[str], out_dir: str | os.PathLike[str]
) -> list[GalleryImage]:
    """The labelled boxes as gallery images under ``out_dir`` (crops written when missing)."""
    from PIL import Image

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    info = open_source(video)
    if (info.width, info.height) != (labels.video.get("width"), labels.video.get("height")):
        raise DatasetError(
            info.path,
            f"is {info.width}x{info.height}, the labels are of a "
            f"{labels.video.get('width')}x{labels.video.get('height')} video",
        )
    wanted = {f: [b for b in boxes if not b.ignore] for f, boxes in labels.frames.items()}
    missing = {f for f, boxes in wanted.items() if any(not (out / crop_name(f, b.person)).is_file() for b in boxes)}
    if missing:
        last = max(missing)
        for index, frame in iter_frames(info):
            if index in missing and frame is not None:
                for b in wanted[index]:
                    x1, y1, x2, y2 = crop_box(b.box, frame.shape[1], frame.shape[0])
                    image = Image.fromarray(frame[y1:y2, x1:x2, ::-1].copy())
                    atomic_write(
                        out / crop_name(index, b.person),
                        lambda f, image=image: image.save(f, format="JPEG", quality=95),
                        durable=False,
                    )
            if index >= last:
                break
    images = []
    for f, boxes in wanted.items():
        for b in boxes:
            attributes = dict(labels.people[b.person].attributes) or None
            images.append(GalleryImage(crop_name(f, b.person), b.person, CAMERA, attributes=attributes))
    return images


def detector_gallery(
    labels: StreetLabels,
    video: str | os.PathLike[str],
    detector: Any,
    out_dir: str | os.PathLike[str],
    *,
    standardise: bool = False,
) -> tuple[list[GalleryImage], dict[str, float]]:
    """The crops ``detector`` (a :class:`~minterpr.ingest.detectors.Detector`) finds on the labelled
    frames and the crop filter keeps, under ``out_dir`` (see the module doc); (images, path -> box height).
    ``standardise``: match at IoU of the Caltech-standardised boxes (for HOG's boxes, a third taller
    than the person: :func:`~minterpr.ingest.street_eval.detection_report`)."""
    import numpy as np
    from PIL import Image

    from minterpr.ingest.street_eval import match_boxes
    from minterpr.ingest.tracking import CropFilter, covered_share, crop_flags, measure_sharpness

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    images: list[GalleryImage] = []
    heights: dict[str, float] = {}
    last = max(labels.frames)
    for index, frame in iter_frames(open_source(video)):
        if index in labels.frames and frame is not None:
            found = detector.detect(frame)
            boxes = np.asarray(found.boxes, np.float64).reshape(-1, 4)
            crowd = found.crowd if found.crowd is not None else np.zeros(len(boxes))  # marks of suppressed neighbours
            covered = np.maximum(covered_share(boxes), crowd) if len(boxes) else np.zeros(0)
            people = labels.frames[index]
            pairs = match_boxes([p.box for p in people], boxes, standardise=standardise)  # detection -> labelled box
            for k, box in enumerate(boxes):  # ingestion's crop filter: what would become a crop
                if crop_flags(box, measure_sharpness(frame, box), float(covered[k]), CropFilter()):
                    continue
                owner = people[pairs[k]] if k in pairs else None
                person = owner.person if owner is not None and not owner.ignore else f"unmatched:{index}:{k}"
                name = f"f{index:04d}_d{k:02d}.jpg"
                x1, y1, x2, y2 = crop_box(box, frame.shape[1], frame.shape[0])
                image = Image.fromarray(frame[y1:y2, x1:x2, ::-1].copy())
                atomic_write(out / name, lambda f, image=image: image.save(f, format="JPEG", quality=95), durable=False)
                known = labels.people.get(person)
                attributes = dict(getattr(known, "attributes", None) or {}) or None  # None: nothing labelled
                images.append(GalleryImage(name, person, CAMERA, attributes=attributes))
                heights[name] = float(box[3] - box[1])
        if index >= last:
            break
    return images, heights


def witness_targets(
    labels: StreetLabels, images: list[GalleryImage], heights: dict[str, float] | None = None
) -> list[GalleryImage]:
    """One target per described person: their tallest crop (first of equals); ``heights``: path ->
    box height (default: the labelled boxes', for :func:`label_gallery`'s images)."""
    height = (
        heights
        if heights is not None
        else {crop_name(f, b.person): b.box[3] - b.box[1] for f, boxes in labels.frames.items() for b in boxes}
    )
    targets = []
    for person in labels.described():
        own = [i for i in images if i.person_id == person]
        if own:
            targets.append(max(own, key=lambda i: height[i.path]))
    return targets


def witness_search(
    run: Any,
    labels: StreetLabels,
    images: list[GalleryImage],
    root: str | os.PathLike[str],
    *,
    rounds: int = 2,
    seed: int = 0,
    heights: dict[str, float] | None = None,
    appearance: Any = None,
    policy_temperature: float | None = None,
    label_reading: tuple[float, float] | None = None,
    identity_appearance: float | None = None,
) -> Any:
    """Simulated witness searches (see the module doc) with a loaded run
    (:func:`minterpr.runtime.run.load_run`), at its fitted match temperature as its page would;
    the :class:`~minterpr.evaluation.report.EvaluationReport` (``extra["moves"]``: moves by kind;
    ``extra["ranks"]``: each described person -> the 0-based rank of their best crop after each round,
    which tells a miss that never came near from one that fell).
    ``appearance``: an appearance model (:func:`minterpr.runtime.appearance.load_appearance`) whose
    vectors the gallery carries, as ingestion stores them; its fingerprint goes into the protocol.
    ``policy_temperature``: the policies' temperature (None: theirs,
    :data:`~minterpr.interaction.policies.TEMPERATURE`).
    ``label_reading``: (confidence, errors) to read the labelled people's labelled slots from the
    labels, a ceiling for the attribute model (:mod:`minterpr.evaluation.label_reading`).
    ``identity_appearance``: the weight of the crops' identities in their appearance vectors, a ceiling
    for the appearance model (:mod:`minterpr.evaluation.identity_appearance`; needs ``appearance``)."""
    from minterpr.evaluation.online import simulate
    from minterpr.interaction.simulators import WitnessSimulator

    backend = run.backend()
    index = backend.index_images(images, root=os.fspath(root), progress=False).require_complete("the street benchmark")
    if appearance is not None:
        index = appearance.add_to(index)
    if label_reading is not None or identity_appearance is not None:
        from minterpr.evaluation.ceilings import Ceilings

        known = {pid: dict(person.attributes) for pid, person in labels.people.items()}
        index = Ceilings(label_reading, identity_appearance).apply(index, attributes=known)
    targets = witness_targets(labels, images, heights)
    if not targets:
        raise DatasetError("labels", "no described person has a labelled crop")
    captions = {t.path: labels.people[t.person_id].description or "" for t in targets}
    knowledge = {t.path: dict(labels.people[t.person_id].attributes) for t in targets}
    witness = WitnessSimulator(captions=captions, knowledge=knowledge)
    people = np.asarray(index.person_ids)
    own = [np.flatnonzero(people == t.person_id) for t in targets]
    ranks: dict[str, list[int]] = {t.person_id: [] for t in targets}

    def observe(_round: int, sessions: Any) -> None:
        for target, rows, session in zip(targets, own, sessions):
            found = np.flatnonzero(np.isin(session.step.ranking, rows))  # ranking: gallery rows, best first
            ranks[target.person_id].append(int(found[0]) if len(found) else len(people))

    report = simulate(
        backend,
        index,
        targets,
        rounds=rounds,
        simulator=witness,
        seed=seed,
        reranking=run.rerank_config(),
        match_temperature=run.extras.match_temperature(),
        policy_temperature=policy_temperature,
        protocol={
            "dataset": "street labels",
            "targets": len(targets),
            "appearance": None if appearance is None else appearance.fingerprint,
            "label_reading": label_reading,
            "identity_appearance": identity_appearance,
        },
        observe=observe,
    )
    report.extra["ranks"] = ranks
    return report
