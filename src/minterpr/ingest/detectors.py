"""People detectors for ingestion: a registry and OpenCV's HOG people detector (the contract they
keep is :mod:`minterpr.ingest.detection`).

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
* ``onnx``: an ONNX detection model on ONNX Runtime, its output read by a decoder named after
  its format (``decoder=yolox|yolov5|yolov8|nanodet|boxes``; :mod:`minterpr.ingest.onnx_detector`).
* ``yolox-nano``: the ``onnx`` detector on YOLOX-nano from the model cache (``minterpr models
  fetch yolox-nano``; :mod:`minterpr.ingest.detector_zoo`), at its measured settings.

Ingestion also takes ``auto`` (YOLOX-nano when fetched, else HOG) and ``onnx:PATH``
(:func:`minterpr.ingest.detector_zoo.resolve_detector`).

Example:
    >>> import numpy as np
    >>> detector = DETECTORS.create("hog")
    >>> found = detector.detect(np.zeros((240, 320, 3), np.uint8))
    >>> found.boxes.shape, found.scores.shape
    ((0, 4), (0,))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minterpr.errors import InputError
from minterpr.ingest.detection import Detections, Detector, check_frame, finish
from minterpr.registry import Registry

OPENCV_HINT = "the people detector needs OpenCV: pip install 'minterpr[ingest]' (opencv-python-headless<5)"


DETECTORS: Registry[Detector] = Registry("people detector")


class HogDetector:
    """OpenCV's default HOG people detector (see the module doc).

    ``scale``: pyramid step (1.05 finds more, 1.1 is ~2x faster); ``win_stride``: window step in
    pixels; ``hit_threshold``: least SVM margin; ``upscale``: frames are enlarged by this first
    (small people); ``nms_iou``: overlap above which the weaker of two boxes is dropped.
    """

    name = "hog"

    def __init__(
        self,
        *,
        scale: float = 1.05,
        win_stride: int = 8,
        padding: int = 8,
        hit_threshold: float = 0.0,
        upscale: float = 1.0,
        nms_iou: float = 0.5,
    ) -> None:
        try:
            import cv2
        except ImportError:
            raise InputError(OPENCV_HINT) from None
        if not hasattr(cv2, "HOGDescriptor"):
            raise InputError(
                f"OpenCV {cv2.__version__} has no HOG people detector (removed in 5.x): "
                "pip install 'opencv-python-headless<5'"
            )
        if not scale > 1.0 or win_stride < 1 or padding < 0 or not upscale > 0:
            raise InputError(
                f"hog: need scale > 1, win_stride >= 1, padding >= 0, upscale > 0 "
                f"(got {scale}, {win_stride}, {padding}, {upscale})"
            )
        self._cv2 = cv2
        self.hog = cv2.HOGDescriptor()
        self.hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
        self.options = {
            "scale": float(scale),
            "win_stride": int(win_stride),
            "padding": int(padding),
            "hit_threshold": float(hit_threshold),
            "upscale": float(upscale),
            "nms_iou": float(nms_iou),
        }

    def identity(self) -> dict[str, Any]:
        return {"detector": self.name, "opencv": self._cv2.__version__.split(".")[0], **self.options}

    def detect(self, frame: np.ndarray) -> Detections:
        frame = check_frame(frame)
        height, width = frame.shape[:2]
        o = self.options
        image = frame
        if o["upscale"] != 1.0:
            image = self._cv2.resize(
                frame, None, fx=o["upscale"], fy=o["upscale"], interpolation=self._cv2.INTER_LINEAR
            )
        if image.shape[0] < 128 or image.shape[1] < 64:  # smaller than one detection window
            return Detections.empty()
        stride = (o["win_stride"], o["win_stride"])
        rects, weights = self.hog.detectMultiScale(
            image,
            hitThreshold=o["hit_threshold"],
            winStride=stride,
            padding=(o["padding"], o["padding"]),
            scale=o["scale"],
        )
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


@DETECTORS.register("yolox-nano")
def make_yolox_nano(**options: Any) -> Detector:
    from minterpr.ingest.detector_zoo import catalogue_detector_options
    from minterpr.ingest.onnx_detector import OnnxDetector

    detector = OnnxDetector(**catalogue_detector_options("yolox-nano", options))
    detector.name = "yolox-nano"  # its identity names the catalogue model, not only the plug-in
    return detector
