"""Detection and tracking quality on a hand-labelled real video (:mod:`minterpr.ingest.labels`).

* :func:`match_boxes` pairs detections with labelled boxes one-to-one at IoU >= a threshold,
  the most pairs first, then the largest total IoU (Hungarian, SciPy); :func:`match_boxes_reference`
  is the plain exhaustive search it is tested against.
* :func:`detection_report`: on the labelled frames, **recall** = labelled boxes (not ``ignore``)
  matched / all of them, **precision** = detections matched to a labelled box / detections, where
  a detection that only matches an ``ignore`` box counts on neither side. ``standardise`` first
  makes every box 0.41 times as wide as it is tall about its centre (Caltech's pedestrian
  protocol, :func:`minterpr.ingest.evaluate.standard_boxes`), for detectors whose boxes carry a
  margin of their own (HOG's are a third taller than the person).
* :func:`track_report`: the tracked detections on the labelled frames, each given the person it
  matches: **purity** = over tracks, the share of their matched-or-unmatched detections that show
  the track's majority person (an unmatched one counts as impure); **fragmentation** = mean
  number of tracks a person's matched detections fall into (1 = one track per person); **crops per
  identity**: the kept crops, each given its track's majority person, per person covered.
* :func:`crop_people_report`: how many labelled people each crop shows (a person is shown when
  at least ``min_inside`` = 0.3 of their labelled box lies inside the crop, ignore boxes
  included): the share showing **exactly one**, none (a false detection: a van, a sign) or more.

Example:
    >>> from minterpr.ingest.labels import LabelBox, StreetLabels
    >>> labels = StreetLabels({}, {"a": None, "b": None}, {0: (LabelBox("a", (0, 0, 10, 30)), LabelBox("b", (50, 0, 60, 30)))})
    >>> r = detection_report(labels, {0: [[1, 0, 11, 30], [100, 0, 110, 30]]})
    >>> r.recall, r.precision
    (0.5, 0.5)
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.ingest.detection import iou_matrix
from minterpr.ingest.evaluate import standard_boxes
from minterpr.ingest.labels import StreetLabels


def _overlap(gt: Any, dets: Any, standardise: bool) -> np.ndarray:
    gt, dets = np.asarray(gt, np.float64).reshape(-1, 4), np.asarray(dets, np.float64).reshape(-1, 4)
    if standardise:
        gt, dets = standard_boxes(gt), standard_boxes(dets)
    return iou_matrix(dets, gt)  # (detections, labelled)


def match_boxes(gt: Any, dets: Any, threshold: float = 0.5, *, standardise: bool = False) -> dict[int, int]:
    """Detection index -> labelled index, one-to-one at IoU >= ``threshold``: as many pairs as
    possible, then the largest total IoU.

    >>> match_boxes([[0, 0, 10, 10], [20, 0, 30, 10]], [[21, 0, 31, 10], [0, 0, 9, 10], [50, 50, 60, 60]])
    {0: 1, 1: 0}
    """
    from scipy.optimize import linear_sum_assignment

    overlap = _overlap(gt, dets, standardise)
    if not overlap.size:
        return {}
    # a pair is worth more than any sum of IoUs of fewer pairs: weight = n + IoU for a match
    weight = np.where(overlap >= threshold, overlap + min(overlap.shape) + 1, 0.0)
    rows, cols = linear_sum_assignment(-weight)
    return {int(r): int(c) for r, c in zip(rows, cols) if weight[r, c] > 0}


def match_boxes_reference(gt: Any, dets: Any, threshold: float = 0.5, *, standardise: bool = False) -> dict[int, int]:
    """:func:`match_boxes` by trying every one-to-one assignment (small inputs only: tests)."""
    overlap = _overlap(gt, dets, standardise)
    n_det, n_gt = overlap.shape
    best: tuple[int, float] = (0, 0.0)
    chosen: dict[int, int] = {}
    for k in range(min(n_det, n_gt), 0, -1):
        for det_ids in itertools.combinations(range(n_det), k):
            for gt_ids in itertools.permutations(range(n_gt), k):
                pairs = [(d, g) for d, g in zip(det_ids, gt_ids) if overlap[d, g] >= threshold]
                score = (len(pairs), sum(overlap[d, g] for d, g in pairs))
                if score > best:
                    best, chosen = score, dict(pairs)
    return chosen


@dataclass(frozen=True)
class DetectionReport:
    """Detections against the labels, on the labelled frames (see the module doc)."""

    frames: int  # labelled frames evaluated
    people_boxes: int  # labelled boxes that count (not ignore)
    detections: int  # detections on those frames, less those matching only an ignore box
    matched: int  # labelled boxes found
    recall: float  # matched / people_boxes
    precision: float  # matched / detections


def _frame_owners(
    labels: StreetLabels, frame: int, boxes: Any, iou: float, standardise: bool
) -> list[str | None | bool]:
    """Per detection: the person it matches, None (matches nobody) or False (only an ignore box)."""
    people = labels.frames[frame]
    pairs = match_boxes([p.box for p in people], boxes, iou, standardise=standardise)
    out: list[str | None | bool] = []
    for k in range(len(np.asarray(boxes).reshape(-1, 4))):
        if k in pairs:
            person = people[pairs[k]]
            out.append(False if person.ignore else person.person)
        else:
            out.append(None)
    return out


def detection_report(
    labels: StreetLabels, detections: Mapping[int, Any], *, iou: float = 0.5, standardise: bool = False
) -> DetectionReport:
    """``detections``: frame -> (n, 4) boxes, for every labelled frame (a missing one: none found)."""
    eligible = matched = counted = 0
    for frame, people in labels.frames.items():
        owners = _frame_owners(labels, frame, detections.get(frame, np.zeros((0, 4))), iou, standardise)
        eligible += sum(1 for p in people if not p.ignore)
        matched += sum(1 for o in owners if isinstance(o, str))
        counted += sum(1 for o in owners if o is not False)
    return DetectionReport(
        len(labels.frames),
        eligible,
        counted,
        matched,
        round(matched / max(1, eligible), 4),
        round(matched / max(1, counted), 4),
    )


@dataclass(frozen=True)
class TrackReport:
    """Tracks and crops against the labels (see the module doc)."""

    tracks: int  # tracks with a detection on a labelled frame
    purity: float  # their detections showing the track's majority person
    people: int  # labelled people matched by a tracked detection
    fragmentation: float  # mean tracks per such person (1 = unbroken)
    crops: int  # crops kept
    people_with_crops: int  # people who are some crop's track's majority person
    crops_per_identity: float  # crops of those people / people_with_crops


def track_majority(
    labels: StreetLabels, log: Sequence[tuple[Any, ...]], *, iou: float = 0.5, standardise: bool = False
) -> tuple[dict[int, list[str | None]], dict[int, str | None]]:
    """(track -> the people its labelled-frame detections show, track -> majority person or None).
    ``log``: (frame, box, score, track) rows of :func:`minterpr.ingest.video.tracked_detections`."""
    by_frame: dict[int, list[tuple[Any, int]]] = defaultdict(list)
    for frame, box, _score, track in log:
        if int(frame) in labels.frames:
            by_frame[int(frame)].append((box, int(track)))
    members: dict[int, list[str | None]] = defaultdict(list)
    for frame, rows in by_frame.items():
        owners = _frame_owners(labels, frame, [b for b, _ in rows], iou, standardise)
        for (_, track), owner in zip(rows, owners):
            if track >= 0 and owner is not False:
                members[track].append(owner if isinstance(owner, str) else None)
    majority = {}
    for track, people in members.items():
        counts = Counter(p for p in people if p is not None).most_common(1)
        majority[track] = counts[0][0] if counts else None
    return dict(members), majority


def track_report(
    labels: StreetLabels,
    log: Sequence[tuple[Any, ...]],
    crops: Sequence[tuple[int, Any, int]] = (),
    *,
    iou: float = 0.5,
    standardise: bool = False,
) -> TrackReport:
    """``crops``: (frame, box, track) of the kept crops."""
    members, majority = track_majority(labels, log, iou=iou, standardise=standardise)
    pure = sum(sum(1 for p in people if p is not None and p == majority[t]) for t, people in members.items())
    total = sum(len(people) for people in members.values())
    tracks_of: dict[str, set[int]] = defaultdict(set)
    for track, people in members.items():
        for person in people:
            if person is not None:
                tracks_of[person].add(track)
    per_person = Counter(majority.get(int(track)) for _, _, track in crops)
    per_person.pop(None, None)
    return TrackReport(
        len(members),
        round(pure / max(1, total), 4),
        len(tracks_of),
        round(sum(len(t) for t in tracks_of.values()) / max(1, len(tracks_of)), 3),
        len(crops),
        len(per_person),
        round(sum(per_person.values()) / max(1, len(per_person)), 3),
    )


@dataclass(frozen=True)
class CropPeopleReport:
    """Labelled people shown per crop (see the module doc)."""

    crops: int  # crops on labelled frames
    one: int  # showing exactly one labelled person
    none: int  # showing nobody labelled (a false detection)
    several: int  # showing two or more
    one_share: float  # one / crops


def people_shown(box: Any, people: Sequence[Any], min_inside: float = 0.3) -> int:
    """How many of ``people`` (LabelBox) have at least ``min_inside`` of their box inside ``box``.

    >>> from minterpr.ingest.labels import LabelBox
    >>> people_shown((0, 0, 10, 30), [LabelBox("a", (0, 0, 10, 30)), LabelBox("b", (8, 0, 18, 30))])
    1
    """
    x1, y1, x2, y2 = (float(v) for v in box)
    count = 0
    for person in people:
        px1, py1, px2, py2 = person.box
        inside = max(0.0, min(x2, px2) - max(x1, px1)) * max(0.0, min(y2, py2) - max(y1, py1))
        count += inside >= min_inside * max(1e-9, (px2 - px1) * (py2 - py1))
    return count


def crop_people_report(
    labels: StreetLabels, crops: Sequence[tuple[int, Any]], *, min_inside: float = 0.3
) -> CropPeopleReport:
    """``crops``: (frame, box) pairs; those on unlabelled frames are left out."""
    counts = [
        people_shown(box, labels.frames[int(frame)], min_inside) for frame, box in crops if int(frame) in labels.frames
    ]
    one = sum(1 for n in counts if n == 1)
    return CropPeopleReport(
        len(counts),
        one,
        sum(1 for n in counts if n == 0),
        sum(1 for n in counts if n > 1),
        round(one / max(1, len(counts)), 4),
    )
