"""People detectors for ingestion: one contract, a registry, OpenCV's HOG people detector.

A detector is made by name from :data:`DETECTORS` (``DETECTORS.create("hog")``,
``DETECTORS.create("onnx", model="det.onnx")``) and turns one frame — an (H, W, 3) uint8
BGR array, OpenCV's order — into :class:`Detections`: (n, 4) float64 boxes ``x1, y1, x2, y2``
in the frame's pixels (inside it, ``x1 < x2``, ``y1 < y2``) and (n,) float64 scores in [0, 1],
best first, the same for the same frame. ``identity()`` is a JSON dict of everything that
changes its output (an ingestion job records it and refuses to resume with another).
tests/test_ingest_detectors.py holds the contract every registered detector passes.

* ``hog``: OpenCV's HOG + linear SVM people detector (Dalal & Triggs; ``opencv-python-headless<5``,
  nothing to download). It finds upright people at least ~96 px tall (its window is 64 x 128);
  ``upscale`` enlarges frames first for smaller people. Its SVM margins ``w`` become scores
  ``1 - exp(-w)``. About 0.1 s for a 768 x 576 frame on one core.
* ``onnx``: a user-supplied ONNX detection model on ONNX Runtime (:mod:`minterpr.ingest.onnx_detector`).

Example:
    >>> import numpy as np
    >>> detector = DETECTORS.create("hog")
    >>> found = detector.detect(np.zeros((240, 320, 3), np.uint8))
    >>> found.boxes.shape, found.scores.shape
    ((0, 4), (0,))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from minterpr.errors import InputError
from minterpr.registry import Registry

OPENCV_HINT = "the people detector needs OpenCV: pip install 'minterpr[ingest]' (opencv-python-headless<5)"


@dataclass(frozen=True)
class Detections:
    """People found in one frame, best first."""

    boxes: np.ndarray  # (n, 4) float64 x1, y1, x2, y2 in frame pixels
    scores: np.ndarray  # (n,) float64 confidence in [0, 1]

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


DETECTORS: Registry[Detector] = Registry("people detector")


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


def finish(boxes: np.ndarray, scores: np.ndarray, width: int, height: int, *, min_score: float = 0.0,
           nms_iou: float = 0.5, min_size: float = 2.0) -> Detections:
    """Clip to the frame, drop low scores and slivers, non-maximum suppression, best first
    (ties by position, so the order is deterministic)."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    scores = np.nan_to_num(np.asarray(scores, np.float64).reshape(-1), nan=0.0)
    boxes = np.clip(boxes, 0, [width, height, width, height])
    keep = (scores >= min_score) & (boxes[:, 2] - boxes[:, 0] >= min_size) & (boxes[:, 3] - boxes[:, 1] >= min_size)
    boxes, scores = boxes[keep], np.clip(scores[keep], 0.0, 1.0)
    order = np.lexsort((boxes[:, 1], boxes[:, 0], -scores))
    boxes, scores = boxes[order], scores[order]
    chosen: list[int] = []
    overlaps = iou_matrix(boxes, boxes)
    for i in range(len(boxes)):
        if all(overlaps[i, j] <= nms_iou for j in chosen):
            chosen.append(i)
    return Detections(boxes[chosen], scores[chosen])


class HogDetector:
    """OpenCV's default HOG people detector (see the module doc).

    ``scale``: pyramid step (1.05 finds more, 1.1 is ~2x faster); ``win_stride``: window step in
    pixels; ``hit_threshold``: least SVM margin; ``upscale``: frames are enlarged by this first
    (small people); ``nms_iou``: overlap above which the weaker of two boxes is dropped.
    """

    name = "hog"

    def __init__(self, *, scale: float = 1.05, win_stride: int = 8, padding: int = 8, hit_threshold: float = 0.0,
                 upscale: float = 1.0, nms_iou: float = 0.5) -> None:
        try:
            import cv2
        except ImportError:
            raise InputError(OPENCV_HINT) from None
        if not hasattr(cv2, "HOGDescriptor"):
            raise InputError(f"OpenCV {cv2.__version__} has no HOG people detector (removed in 5.x): "
                             "pip install 'opencv-python-headless<5'")
        if not scale > 1.0 or win_stride < 1 or padding < 0 or not upscale > 0:
            raise InputError(f"hog: need scale > 1, win_stride >= 1, padding >= 0, upscale > 0 "
                             f"(got {scale}, {win_stride}, {padding}, {upscale})")
        self._cv2 = cv2
        self.hog = cv2.HOGDescriptor()
        self.hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
        self.options = {"scale": float(scale), "win_stride": int(win_stride), "padding": int(padding),
                        "hit_threshold": float(hit_threshold), "upscale": float(upscale), "nms_iou": float(nms_iou)}

    def identity(self) -> dict[str, Any]:
        return {"detector": self.name, "opencv": self._cv2.__version__.split(".")[0], **self.options}

    def detect(self, frame: np.ndarray) -> Detections:
        frame = check_frame(frame)
        height, width = frame.shape[:2]
        o = self.options
        image = frame
        if o["upscale"] != 1.0:
            image = self._cv2.resize(frame, None, fx=o["upscale"], fy=o["upscale"], interpolation=self._cv2.INTER_LINEAR)
        if image.shape[0] < 128 or image.shape[1] < 64:  # smaller than one detection window
            return Detections.empty()
        stride = (o["win_stride"], o["win_stride"])
        rects, weights = self.hog.detectMultiScale(image, hitThreshold=o["hit_threshold"], winStride=stride,
                                                   padding=(o["padding"], o["padding"]), scale=o["scale"])
        if len(rects) == 0:
            return Detections.empty()
        rects = np.asarray(rects, np.float64).reshape(-1, 4) / o["upscale"]
        boxes = np.concatenate([rects[:, :2], rects[:, :2] + rects[:, 2:]], axis=1)
        scores = 1.0 - np.exp(-np.clip(np.asarray(weights, np.float64).reshape(-1), 0.0, None))
        return finish(boxes, scores, width, height, nms_iou=o["nms_iou"])


@DETECTORS.register("hog")
def make_hog(**options: Any) -> Detector:
    return HogDetector(**options)


@DETECTORS.register("onnx")
def make_onnx(**options: Any) -> Detector:
    from minterpr.ingest.onnx_detector import OnnxDetector

    return OnnxDetector(**options)
