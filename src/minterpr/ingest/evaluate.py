"""How well an ingestion found and followed the people of a video with known tracks.

:func:`evaluate_tracking` compares the tracked detections of an ingestion
(:func:`minterpr.ingest.runner.tracked_detections`) and the crops it kept with a
:class:`~minterpr.ingest.synthetic_video.GroundTruth`, on the frames the ingestion processed:

* **detection recall**: of the people at least ``min_visible`` visible (occlusion and the frame
  border counted), the fraction matched by a detection, one-to-one, at IoU >= ``iou`` (0.4)
  after both boxes are made 0.41 times as wide as they are tall about their centre (the
  Caltech pedestrian benchmark's standardisation: detectors draw boxes of their own width and
  margin around a tight ground-truth box). HOG's boxes are a third taller than the person they
  hold — a perfectly placed one scores 0.75 — and placed on an 8-pixel grid of a 1.05-step
  pyramid, so 0.4 rather than Caltech's 0.5 (``recall_50``, also reported);
* **precision**: detections matched to anybody (a partly visible person included);
* **track purity**: over the kept tracks' detections, the share that belong to their track's
  majority person (an unmatched detection counts as impure);
* **crops per track**, **crop purity** (crops showing their track's majority person), the
  **people covered** (with at least one crop of theirs) and **tracks per person** (fragmentation).

Example:
    >>> from minterpr.ingest.synthetic_video import GroundTruth
    >>> truth = GroundTruth([[(0, (10, 10, 50, 130), 1.0)], [(0, (14, 10, 54, 130), 1.0)]], 1, 10.0)
    >>> log = [(0, (8, 6, 52, 134), 0.9, 0), (1, (12, 6, 56, 134), 0.9, 0)]
    >>> report = evaluate_tracking(truth, [0, 1], log, crops=[(1, (12, 6, 56, 134), 0)])
    >>> report.recall, report.purity, report.crops_per_track, report.people_covered
    (1.0, 1.0, 1.0, 1)
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from minterpr.ingest.detection import iou_matrix
from minterpr.ingest.synthetic_video import GroundTruth


@dataclass(frozen=True)
class TrackingReport:
    """Detection and tracking quality on a video with ground truth (see the module doc)."""

    frames: int  # processed frames evaluated
    people_boxes: int  # ground-truth boxes at least min_visible visible on those frames
    detections: int  # detections on those frames
    recall: float  # of people_boxes matched at IoU >= iou
    recall_50: float  # the same at IoU >= 0.5 (Caltech's threshold)
    precision: float  # of detections matched to anybody
    tracks: int  # kept tracks (at least min_track_detections detections)
    purity: float  # detections of kept tracks that show the track's majority person
    crops: int  # crops kept
    crops_per_track: float  # crops / tracks with a crop
    crop_purity: float  # crops showing their track's majority person
    people: int  # people in the video who were ever min_visible visible on a processed frame
    people_covered: int  # of those, people with at least one crop of theirs
    tracks_per_person: float  # kept tracks per covered person (1 = no fragmentation)


ASPECT = 0.41  # width / height both boxes are given before they are compared (Caltech pedestrians)


def standard_boxes(boxes: Any) -> np.ndarray:
    """(n, 4) boxes made ASPECT times as wide as tall about their centre, height kept.

    >>> standard_boxes([[0, 0, 100, 100]]).tolist()
    [[29.5, 0.0, 70.5, 100.0]]
    """
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    half = (b[:, 3] - b[:, 1]) * ASPECT / 2
    centre = (b[:, 0] + b[:, 2]) / 2
    return np.stack([centre - half, b[:, 1], centre + half, b[:, 3]], axis=1)


def _match(gt_boxes: np.ndarray, det_boxes: np.ndarray, threshold: float) -> dict[int, int]:
    """Detection index -> ground-truth index, one-to-one at standardised IoU >= threshold (Hungarian)."""
    from scipy.optimize import linear_sum_assignment

    if not len(gt_boxes) or not len(det_boxes):
        return {}
    overlap = iou_matrix(standard_boxes(det_boxes), standard_boxes(gt_boxes))
    rows, cols = linear_sum_assignment(-overlap)
    return {int(r): int(c) for r, c in zip(rows, cols) if overlap[r, c] >= threshold}


def evaluate_tracking(
    truth: GroundTruth,
    frames: Sequence[int],
    log: Sequence[tuple[Any, ...]],
    *,
    crops: Sequence[tuple[int, Sequence[float], int]] = (),
    iou: float = 0.4,
    min_visible: float = 0.6,
    min_track_detections: int = 2,
) -> TrackingReport:
    """``frames``: the processed frames; ``log``: (frame, box, score, track) detections; ``crops``:
    (frame, box, track) of the kept crops."""
    by_frame: dict[int, list[tuple[Sequence[float], int]]] = defaultdict(list)
    for frame, box, _score, track in log:
        by_frame[int(frame)].append((box, int(track)))
    owner: dict[tuple[int, int], int | None] = {}  # (frame, detection) -> person
    eligible = matched = matched_50 = detections = found = 0
    seen_people: set[int] = set()
    for frame in frames:
        people = truth.boxes[frame] if frame < len(truth.boxes) else []
        gt = np.array([p[1] for p in people], np.float64).reshape(-1, 4)
        dets = np.array([b for b, _ in by_frame.get(frame, [])], np.float64).reshape(-1, 4)
        visible = [p[2] >= min_visible for p in people]
        seen_people |= {p[0] for p, v in zip(people, visible) if v}
        pairs, pairs_50 = _match(gt, dets, iou), _match(gt, dets, 0.5)
        eligible += sum(visible)
        matched += sum(1 for g in pairs.values() if visible[g])
        matched_50 += sum(1 for g in pairs_50.values() if visible[g])
        detections += len(dets)
        found += len(pairs)
        for k in range(len(dets)):
            owner[(frame, k)] = people[pairs[k]][0] if k in pairs else None
    members: dict[int, list[int | None]] = defaultdict(list)
    for frame in frames:
        for k, (_, track) in enumerate(by_frame.get(frame, [])):
            if track >= 0:
                members[track].append(owner[(frame, k)])
    kept = {t: m for t, m in members.items() if len(m) >= min_track_detections}
    majority = {t: Counter(p for p in m if p is not None).most_common(1) for t, m in kept.items()}
    majority_person = {t: (c[0][0] if c else None) for t, c in majority.items()}
    pure = sum(c[0][1] if c else 0 for c in majority.values())
    total = sum(len(m) for m in kept.values())
    crop_ok, covered, crop_tracks = 0, set(), set()
    for frame, box, track in crops:
        crop_tracks.add(int(track))
        people = truth.boxes[frame] if frame < len(truth.boxes) else []
        gt = np.array([p[1] for p in people], np.float64).reshape(-1, 4)
        pair = _match(gt, np.asarray([box], np.float64), iou)
        person = people[pair[0]][0] if 0 in pair else None
        if person is not None and person == majority_person.get(int(track)):
            crop_ok += 1
            covered.add(person)
    person_tracks = Counter(p for t, p in majority_person.items() if p is not None and t in crop_tracks)
    return TrackingReport(
        frames=len(frames),
        people_boxes=eligible,
        detections=detections,
        recall=round(matched / max(1, eligible), 4),
        recall_50=round(matched_50 / max(1, eligible), 4),
        precision=round(found / max(1, detections), 4),
        tracks=len(kept),
        purity=round(pure / max(1, total), 4),
        crops=len(crops),
        crops_per_track=round(len(crops) / max(1, len(crop_tracks)), 3),
        crop_purity=round(crop_ok / max(1, len(crops)), 4),
        people=len(seen_people),
        people_covered=len(covered),
        tracks_per_person=round(sum(person_tracks.values()) / max(1, len(person_tracks)), 3),
    )
