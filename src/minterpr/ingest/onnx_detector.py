"""A people detector that runs an ONNX detection model on ONNX Runtime (CPU).

The model's raw output is read by a decoder named after its format (``decoder=``; the registry
:data:`minterpr.ingest.onnx_decoders.DECODERS`): ``yolox``, ``yolov5``, ``yolov8``, ``nanodet``,
or ``boxes`` (the default) for a model exported **with its post-processing inside the graph**.
``minterpr models fetch yolox-nano`` puts YOLOX-nano in the model cache, and the ``yolox-nano``
detector (:mod:`minterpr.ingest.detector_zoo`) runs it with the ``yolox`` decoder.

Input the model must take: its first input, float32 ``(1, 3, H, W)`` (NCHW). ``H, W`` are the
input's static shape, or ``input_size=(H, W)`` when it is dynamic. Each frame is converted to
RGB (``rgb=False`` keeps BGR), resized into ``H x W`` — letterboxed (aspect kept, padded with
grey 114, the YOLO convention) unless ``letterbox=False`` (stretched) — and scaled by ``scale``,
then ``(x - mean) / std`` per channel when ``mean``/``std`` are given. Each of these defaults to
the decoder's family convention (``yolox``: BGR 0-255; ``boxes``, ``yolov5``, ``yolov8``: RGB / 255).

Outputs of the ``boxes`` decoder (a leading batch axis of 1 is optional everywhere), either

* two outputs, **boxes** ``(N, 4)`` and **scores** ``(N,)`` — or ``(N, C)`` class scores, of
  which column ``person_class`` (default 0) is used: the outputs named ``boxes_output`` /
  ``scores_output`` when given, else the first two in order; or
* one output ``(N, 5)`` ``[box, score]`` or ``(N, 6)`` ``[box, score, class]`` (rows of another
  class than ``person_class`` are dropped).

Boxes are ``x1, y1, x2, y2`` (``box_format="cxcywh"``: centre, width, height) in input pixels,
or in [0, 1] of the input when ``normalized=True``. Whatever the decoder, only the person class
is read; the detector maps the boxes back to the frame (undoing the letterbox), keeps scores >=
``score_threshold`` (0.3), clips them to the frame, and runs its own NMS at ``nms_iou`` (0.5;
harmless when the graph already did).

Example (a model file of yours):
    >>> detector = OnnxDetector(model="yolov8n.onnx", decoder="yolov8")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from minterpr.errors import InputError, RunError
from minterpr.ingest.detection import Detections, check_frame, finish

ORT_HINT = "the onnx detector needs ONNX Runtime: pip install 'minterpr[ingest]' (onnxruntime)"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


class OnnxDetector:
    """See the module doc for the model's expected inputs and outputs."""

    name = "onnx"

    def __init__(
        self,
        *,
        model: str | os.PathLike[str] | None = None,
        decoder: str = "boxes",
        input_size: Sequence[int] | None = None,
        letterbox: bool | None = None,
        rgb: bool | None = None,
        scale: float | None = None,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        person_class: int = 0,
        score_threshold: float = 0.3,
        nms_iou: float = 0.5,
        threads: int = 1,
        **decoder_options: Any,
    ) -> None:
        from minterpr.ingest.onnx_decoders import DECODERS

        if model is None:
            raise InputError("the onnx detector needs model=PATH (an ONNX detection model; see docs/ingest.md)")
        try:
            made = DECODERS.create(decoder, person_class=person_class, **decoder_options)
        except TypeError as err:  # an option the decoder does not take
            raise InputError(f"onnx detector, decoder {decoder!r}: bad option ({err})") from None
        try:
            import onnxruntime as ort
        except ImportError:
            raise InputError(ORT_HINT) from None
        self.decoder = made
        self.path = Path(model)
        if not self.path.is_file():
            raise InputError(f"{self.path}: no such ONNX model file")
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(os.fspath(self.path), options, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime raises its own types for a file that is not a model
            raise RunError(self.path, f"not a loadable ONNX model ({type(err).__name__}: {err})") from None
        first = self.session.get_inputs()[0]
        self.input_name = first.name
        shape = list(first.shape)
        if len(shape) != 4 or shape[1] not in (3, "3"):
            raise RunError(self.path, f"the detector's first input must be (1, 3, H, W), it is {shape}")
        static = [d if isinstance(d, int) and d > 0 else None for d in shape[2:]]
        size = tuple(int(v) for v in input_size) if input_size is not None else tuple(static)
        if len(size) != 2 or any(v is None or v < 8 for v in size):
            raise InputError(f"{self.path}: the input size is dynamic ({shape}); give input_size=(H, W)")
        self.size = (int(size[0]), int(size[1]))
        outputs = [o.name for o in self.session.get_outputs()]
        for wanted in (made.options.get("boxes_output"), made.options.get("scores_output")):
            if wanted is not None and wanted not in outputs:
                raise InputError(f"{self.path}: no output named {wanted!r} (it has {', '.join(outputs)})")
        self.outputs = outputs
        given = {"letterbox": letterbox, "rgb": rgb, "scale": scale, "mean": mean, "std": std}
        pre = {k: (made.preprocess.get(k) if v is None else v) for k, v in given.items()}  # the family's convention
        mean, std = pre["mean"], pre["std"]
        self.mean = None if mean is None else np.asarray(mean, np.float32).reshape(1, 3, 1, 1)
        self.std = None if std is None else np.asarray(std, np.float32).reshape(1, 3, 1, 1)
        self.options = {
            "model_sha256": _file_sha256(self.path),
            "decoder": made.name,
            "input_size": list(self.size),
            "letterbox": bool(pre["letterbox"]),
            "rgb": bool(pre["rgb"]),
            "scale": float(1 / 255 if pre["scale"] is None else pre["scale"]),
            "mean": None if mean is None else [float(v) for v in mean],
            "std": None if std is None else [float(v) for v in std],
            "person_class": int(person_class),
            "score_threshold": float(score_threshold),
            "nms_iou": float(nms_iou),
            **{k: (list(v) if isinstance(v, (tuple, list)) else v) for k, v in decoder_options.items()},
        }

    def identity(self) -> dict[str, Any]:
        return {"detector": self.name, **self.options}

    def _prepare(self, frame: np.ndarray) -> tuple[np.ndarray, float, float, float, float]:
        """(1, 3, H, W) input, and the map back: frame = (input - (dx, dy)) / (sx, sy)."""
        from PIL import Image

        h_in, w_in = self.size
        height, width = frame.shape[:2]
        rgb = frame[:, :, ::-1] if self.options["rgb"] else frame
        if self.options["letterbox"]:
            s = min(w_in / width, h_in / height)
            new_w, new_h = max(1, round(width * s)), max(1, round(height * s))
            dx, dy = (w_in - new_w) // 2, (h_in - new_h) // 2
            canvas = np.full((h_in, w_in, 3), 114, np.uint8)
            canvas[dy : dy + new_h, dx : dx + new_w] = np.asarray(
                Image.fromarray(np.ascontiguousarray(rgb)).resize((new_w, new_h), Image.BILINEAR)
            )
            sx = sy = s
        else:
            canvas = np.asarray(Image.fromarray(np.ascontiguousarray(rgb)).resize((w_in, h_in), Image.BILINEAR))
            sx, sy, dx, dy = w_in / width, h_in / height, 0, 0
        x = canvas.astype(np.float32).transpose(2, 0, 1)[None] * np.float32(self.options["scale"])
        if self.mean is not None:
            x = x - self.mean
        if self.std is not None:
            x = x / self.std
        return np.ascontiguousarray(x), sx, sy, float(dx), float(dy)

    def detect(self, frame: np.ndarray) -> Detections:
        frame = check_frame(frame)
        height, width = frame.shape[:2]
        x, sx, sy, dx, dy = self._prepare(frame)
        values = self.session.run(None, {self.input_name: x})
        try:
            boxes, scores = self.decoder.decode(dict(zip(self.outputs, values)), self.size)
        except InputError as err:  # the outputs are not of the decoder's format: name the file
            raise RunError(self.path, str(err)) from None
        boxes = (boxes - [dx, dy, dx, dy]) / [sx, sy, sx, sy]
        return finish(
            boxes, scores, width, height, min_score=self.options["score_threshold"], nms_iou=self.options["nms_iou"]
        )
