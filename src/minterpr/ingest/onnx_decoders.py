"""Output decoders of the ONNX detector plug-in: a detection model's raw outputs -> person boxes.

A detector is chosen by the format of its output, not by its file. Each decoder takes the
model's outputs (name -> array) and the input's ``(H, W)`` and returns ``(n, 4)`` x1, y1, x2, y2
boxes in **input** pixels and ``(n,)`` person scores (the plug-in then undoes the letterbox,
thresholds and runs NMS: :mod:`minterpr.ingest.onnx_detector`). Rows of other classes never
become boxes: only column ``person_class`` (COCO's 0) is read. Each also names the input
conventions its family was trained with (:attr:`Decoder.preprocess`), which the plug-in uses
unless told otherwise.

* ``boxes``: post-processing inside the graph (boxes + scores, or rows ``[box, score(, class)]``;
  the plug-in's original format, see :mod:`minterpr.ingest.onnx_detector`).
* ``yolox``: YOLOX as its project exports it (``decode_in_inference=False``): ``(1, N, 5 + C)``
  per anchor point of the stride-8/16/32 grids, ``[dx, dy, log w, log h, objectness, classes]``;
  centre = (grid + d) x stride, size = exp(log size) x stride, score = objectness x class.
  Input BGR 0-255, letterboxed with grey 114.
* ``yolov5``: ``(1, N, 5 + C)`` rows ``[cx, cy, w, h, objectness, classes]`` already in input
  pixels; score = objectness x class. Input RGB / 255, letterboxed.
* ``yolov8``: ``(1, 4 + C, N)`` (or its transpose) ``[cx, cy, w, h, classes]``, no objectness
  (YOLOv8 to YOLO11 heads). Input RGB / 255, letterboxed.
* ``nanodet``: NanoDet-Plus ``(1, N, C + 4 (reg_max + 1))``: per point of the stride
  8/16/32/64 grids (row-major, points at x*stride, y*stride), sigmoid class scores, then the
  left/top/right/bottom distances as ``reg_max + 1``-bin distributions (softmax, expectation,
  x stride). Input BGR, mean (103.53, 116.28, 123.675), std (57.375, 57.12, 58.395).

Example (one YOLOX anchor on the stride-32 grid of a 64 x 64 input):
    >>> out = np.zeros((1, 8 * 8 + 4 * 4 + 2 * 2, 6), np.float32)
    >>> out[0, 80 + 3] = [0.5, 0.5, 0.0, np.log(2), 0.9, 0.8]  # grid (1, 1) of stride 32
    >>> boxes, scores = DECODERS.create("yolox").decode({"output": out}, (64, 64))
    >>> boxes[scores > 0].round(3).tolist(), scores[scores > 0].round(2).tolist()
    ([[32.0, 16.0, 64.0, 80.0]], [0.72])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.errors import InputError
from minterpr.registry import Registry

__all__ = ["DECODERS", "Decoder", "grid_points"]


@dataclass(frozen=True)
class Decoder:
    """A registered output format: ``decode(outputs, (H, W))`` -> (boxes, scores) in input pixels."""

    name: str  # the registry name
    person_class: int = 0  # the class column read (COCO: 0 = person)
    # the input conventions of the family (rgb, scale, mean, std, letterbox), overridable by the user
    preprocess: Mapping[str, Any] = field(default_factory=dict)
    strides: tuple[int, ...] = ()  # grid strides of grid-based heads (yolox, nanodet)
    reg_max: int = 7  # nanodet: the distance distribution has reg_max + 1 bins
    options: Mapping[str, Any] = field(default_factory=dict)  # the `boxes` decoder's output names etc.

    def decode(self, outputs: Mapping[str, np.ndarray], size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        return _DECODE[self.name](self, outputs, size)


DECODERS: Registry[Decoder] = Registry("ONNX output decoder")


def grid_points(size: tuple[int, int], strides: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(N, 2) x, y grid cells and (N,) strides of every stride's grid over an (H, W) input, row-major
    per stride, strides in order (the anchor order YOLOX and NanoDet concatenate their outputs in).

    >>> cells, strides = grid_points((64, 96), (32, 64))
    >>> cells.tolist(), strides.tolist()
    ([[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1], [0, 0], [1, 0]], [32, 32, 32, 32, 32, 32, 64, 64])
    """
    cells, strides_out = [], []
    for stride in strides:
        h, w = -(-size[0] // stride), -(-size[1] // stride)  # ceil: the heads pad odd sizes
        ys, xs = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
        cells.append(np.stack([xs.ravel(), ys.ravel()], axis=1))
        strides_out.append(np.full(h * w, stride))
    return np.concatenate(cells).astype(np.int64), np.concatenate(strides_out).astype(np.int64)


def _single(outputs: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    if len(outputs) != 1:
        raise InputError(f"the {name} decoder reads one output; the model has {len(outputs)} ({', '.join(outputs)})")
    value = np.asarray(next(iter(outputs.values())), np.float64)
    value = value[0] if value.ndim == 3 and value.shape[0] == 1 else value
    if value.ndim != 2:
        raise InputError(f"the {name} decoder needs a (1, N, K) output, got {np.shape(next(iter(outputs.values())))}")
    return value


def _class_column(rows: np.ndarray, first: int, decoder: Decoder, width: int) -> np.ndarray:
    if rows.shape[1] < width or not 0 <= decoder.person_class < rows.shape[1] - first:
        raise InputError(
            f"the {decoder.name} decoder: rows of {rows.shape[1]} values hold no class column "
            f"{decoder.person_class} after the first {first}"
        )
    return rows[:, first + decoder.person_class]


def _cxcywh(rows: np.ndarray) -> np.ndarray:
    cx, cy, w, h = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)


def _decode_yolox(
    d: Decoder, outputs: Mapping[str, np.ndarray], size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    rows = _single(outputs, "yolox")
    cells, strides = grid_points(size, d.strides)
    if len(rows) != len(cells):
        raise InputError(
            f"the yolox decoder: {len(rows)} rows, but strides {list(d.strides)} over the "
            f"{size[1]} x {size[0]} input make {len(cells)} anchor points (set strides or input_size)"
        )
    scores = rows[:, 4] * _class_column(rows, 5, d, 6)
    centre = (rows[:, :2] + cells) * strides[:, None]
    wh = np.exp(np.clip(rows[:, 2:4], -20, 20)) * strides[:, None]  # clipped: a stray logit must not overflow
    return _cxcywh(np.concatenate([centre, wh], axis=1)), scores


def _decode_yolov5(
    d: Decoder, outputs: Mapping[str, np.ndarray], size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    rows = _single(outputs, "yolov5")
    return _cxcywh(rows), rows[:, 4] * _class_column(rows, 5, d, 6)


def _decode_yolov8(
    d: Decoder, outputs: Mapping[str, np.ndarray], size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    rows = _single(outputs, "yolov8")
    rows = rows.T if rows.shape[0] < rows.shape[1] else rows  # (4 + C, N) as exported: fewer channels than anchors
    return _cxcywh(rows), _class_column(rows, 4, d, 5)


def _decode_nanodet(
    d: Decoder, outputs: Mapping[str, np.ndarray], size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    rows = _single(outputs, "nanodet")
    bins = d.reg_max + 1
    classes = rows.shape[1] - 4 * bins
    if classes < 1 or d.person_class >= classes:
        raise InputError(
            f"the nanodet decoder: rows of {rows.shape[1]} values do not hold classes and 4 x {bins} "
            f"distance bins (set reg_max)"
        )
    cells, strides = grid_points(size, d.strides)
    if len(rows) != len(cells):
        raise InputError(
            f"the nanodet decoder: {len(rows)} rows, but strides {list(d.strides)} over the "
            f"{size[1]} x {size[0]} input make {len(cells)} points (set strides or input_size)"
        )
    logits = rows[:, classes:].reshape(-1, 4, bins)
    logits = np.exp(logits - logits.max(axis=2, keepdims=True))
    distance = (logits / logits.sum(axis=2, keepdims=True)) @ np.arange(bins, dtype=np.float64) * strides[:, None]
    points = cells * strides[:, None]
    boxes = np.concatenate([points - distance[:, :2], points + distance[:, 2:]], axis=1)
    return boxes, rows[:, d.person_class]


def _decode_boxes(
    d: Decoder, outputs: Mapping[str, np.ndarray], size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    return boxes_scores(outputs, size, d.person_class, **d.options)


def boxes_scores(
    named: Mapping[str, np.ndarray],
    size: tuple[int, int],
    person: int = 0,
    *,
    box_format: str = "xyxy",
    normalized: bool = False,
    boxes_output: str | None = None,
    scores_output: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``boxes`` decoder (see the module doc): (n, 4) xyxy boxes in input pixels and (n,) scores."""
    outputs = list(named)
    if boxes_output is None and len(outputs) == 1:
        rows = np.asarray(named[outputs[0]], np.float64)
        rows = rows[0] if rows.ndim == 3 else rows
        if rows.ndim != 2 or rows.shape[1] not in (5, 6):
            raise InputError(f"one output must be (N, 5) or (N, 6) rows, got {rows.shape} (another decoder?)")
        if rows.shape[1] == 6:
            rows = rows[np.round(rows[:, 5]).astype(np.int64) == person]
        boxes, scores = rows[:, :4], rows[:, 4]
    else:
        boxes_name = boxes_output or outputs[0]
        scores_name = scores_output or [n for n in outputs if n != boxes_name][0]
        boxes = np.asarray(named[boxes_name], np.float64)
        scores = np.asarray(named[scores_name], np.float64)
        batched = boxes.ndim == 3  # a leading batch axis on the boxes: the scores have one too
        boxes = boxes[0] if batched else boxes
        scores = scores[0] if scores.ndim == 3 or (batched and scores.ndim == 2 and scores.shape[0] == 1) else scores
        if boxes.ndim != 2 or boxes.shape[1] != 4:
            raise InputError(f"output {boxes_name!r} must hold (N, 4) boxes, got {boxes.shape}")
        if scores.ndim == 2:
            if not 0 <= person < scores.shape[1]:
                raise InputError(f"person_class {person} is not a column of {scores_name!r} {scores.shape}")
            scores = scores[:, person]
        if scores.shape != (len(boxes),):
            raise InputError(f"{len(boxes)} boxes but scores of shape {scores.shape}")
    boxes = boxes.copy()
    if box_format == "cxcywh":
        cx, cy, w, h = boxes.T.copy()
        boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
    if normalized:
        boxes *= [size[1], size[0], size[1], size[0]]
    return boxes, scores


_DECODE = {
    "yolox": _decode_yolox,
    "yolov5": _decode_yolov5,
    "yolov8": _decode_yolov8,
    "nanodet": _decode_nanodet,
    "boxes": _decode_boxes,
}
_YOLO_INPUT = {"rgb": True, "scale": 1 / 255, "letterbox": True}


@DECODERS.register("yolox")
def make_yolox(person_class: int = 0, strides: Sequence[int] = (8, 16, 32)) -> Decoder:
    return Decoder(
        "yolox", int(person_class), {"rgb": False, "scale": 1.0, "letterbox": True}, tuple(int(s) for s in strides)
    )


@DECODERS.register("yolov5")
def make_yolov5(person_class: int = 0) -> Decoder:
    return Decoder("yolov5", int(person_class), _YOLO_INPUT)


@DECODERS.register("yolov8")
def make_yolov8(person_class: int = 0) -> Decoder:
    return Decoder("yolov8", int(person_class), _YOLO_INPUT)


@DECODERS.register("nanodet")
def make_nanodet(person_class: int = 0, strides: Sequence[int] = (8, 16, 32, 64), reg_max: int = 7) -> Decoder:
    return Decoder(
        "nanodet",
        int(person_class),
        {
            "rgb": False,
            "scale": 1.0,
            "letterbox": True,
            "mean": (103.53, 116.28, 123.675),
            "std": (57.375, 57.12, 58.395),
        },
        tuple(int(s) for s in strides),
        int(reg_max),
    )


@DECODERS.register("boxes")
def make_boxes(
    person_class: int = 0,
    box_format: str = "xyxy",
    normalized: bool = False,
    boxes_output: str | None = None,
    scores_output: str | None = None,
) -> Decoder:
    if box_format not in ("xyxy", "cxcywh"):
        raise InputError(f"onnx detector: box_format must be 'xyxy' or 'cxcywh', got {box_format!r}")
    return Decoder(
        "boxes",
        int(person_class),
        {**_YOLO_INPUT},
        options={
            "box_format": box_format,
            "normalized": bool(normalized),
            "boxes_output": boxes_output,
            "scores_output": scores_output,
        },
    )
