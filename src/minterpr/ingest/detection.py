"""What a people detector gives ingestion: :class:`Detections` of one frame, the :class:`Detector`
protocol, and the shared steps every detector ends with (:func:`check_frame`, :func:`finish`:
clipping, thresholds, non-maximum suppression). The registered detectors are
:mod:`minterpr.ingest.detectors` and :mod:`minterpr.ingest.onnx_detector`.

Example:
    >>> found = finish(np.array([[0, 0, 10, 20], [1, 0, 11, 20]]), np.array([0.9, 0.8]), 100, 100)
    >>> len(found), found.scores.tolist(), found.crowd.tolist()
    (1, [0.9], [0.0])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from minterpr.errors import InputError

__all__ = ["Detections", "Detector", "check_frame", "finish", "iou_matrix"]


@dataclass(frozen=True)
class Detections:
    """People found in one frame, best first."""

    boxes: np.ndarray  # (n, 4) float64 x1, y1, x2, y2 in frame pixels
    scores: np.ndarray  # (n,) float64 confidence in [0, 1]
    # (n,) per box, 1.0 when NMS suppressed a box overlapping it with IoU under CROWD_IOU (a second
    # person standing close: two people, one box), else 0.0; None from detectors that cannot tell
    crowd: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.scores)

    @staticmethod
    def empty() -> "Detections":
        return Detections(np.zeros((0, 4), np.float64), np.zeros(0, np.float64))


class Detector(Protocol):
    """What ingestion needs from a people detector (see the module doc)."""

    name: str

    def detect(self, frame: np.ndarray) -> Detections:
        """(H, W, 3) uint8 BGR frame -> the people in it."""
        ...

    def identity(self) -> dict[str, Any]:
        """JSON dict of the settings (and model) that decide the detections."""
        ...


def check_frame(frame: Any) -> np.ndarray:
    """``frame`` as an (H, W, 3) uint8 array; InputError otherwise."""
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        what = f"{frame.dtype} {frame.shape}" if isinstance(frame, np.ndarray) else type(frame).__name__
        raise InputError(f"a frame must be an (H, W, 3) uint8 BGR array, got {what}")
    return frame


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(n, m) intersection over union of (n, 4) and (m, 4) xyxy boxes.

    >>> iou_matrix(np.array([[0, 0, 2, 2]], float), np.array([[1, 0, 3, 2], [5, 5, 6, 6]], float)).round(3).tolist()
    [[0.333, 0.0]]
    """
    a, b = np.asarray(a, np.float64).reshape(-1, 4), np.asarray(b, np.float64).reshape(-1, 4)
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = lambda r: (r[:, 2] - r[:, 0]) * (r[:, 3] - r[:, 1])  # noqa: E731
    union = area(a)[:, None] + area(b)[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


# A box NMS suppresses that overlaps the one kept with IoU under this is taken for a second
# person beside it (the kept box is then crowd-marked), not a duplicate of the same person: on
# the street labels with YOLOX-nano, 0.8 leaves 1 of 136 boxes showing two people where NMS at 0.8
# itself would keep (precision 0.71), against 5 of 179 without the mark (docs/ingest.md)
CROWD_IOU = 0.8


def finish(
    boxes: np.ndarray,
    scores: np.ndarray,
    width: int,
    height: int,
    *,
    min_score: float = 0.0,
    nms_iou: float = 0.5,
    min_size: float = 2.0,
) -> Detections:
    """Clip to the frame, drop low scores and slivers, non-maximum suppression, best first
    (ties by position, so the order is deterministic); ``crowd`` marks the boxes that suppressed
    one overlapping them with IoU under :data:`CROWD_IOU`."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    scores = np.nan_to_num(np.asarray(scores, np.float64).reshape(-1), nan=0.0)
    boxes = np.clip(boxes, 0, [width, height, width, height])
    keep = (scores >= min_score) & (boxes[:, 2] - boxes[:, 0] >= min_size) & (boxes[:, 3] - boxes[:, 1] >= min_size)
    boxes, scores = boxes[keep], np.clip(scores[keep], 0.0, 1.0)
    order = np.lexsort((boxes[:, 1], boxes[:, 0], -scores))
    boxes, scores = boxes[order], scores[order]
    chosen: list[int] = []
    crowd = np.zeros(len(boxes))
    overlaps = iou_matrix(boxes, boxes)
    for i in range(len(boxes)):
        over = [j for j in chosen if overlaps[i, j] > nms_iou]
        if not over:
            chosen.append(i)
        for j in over:
            if overlaps[i, j] < CROWD_IOU:
                crowd[j] = 1.0
    return Detections(boxes[chosen], scores[chosen], crowd[chosen])
