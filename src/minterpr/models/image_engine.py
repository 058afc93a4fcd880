"""The image tower's engine for a backend: torch, ONNX Runtime in fp32, or the int8 file.

:class:`ImageTowerEngine` resolves ``engine`` ("torch", "onnx", "auto") and ``precision``
("fp32", "int8") once, at the first image, into what encodes gallery images: the model itself,
its checked ONNX export (:mod:`minterpr.models.onnx_export`) or the int8 image tower of its model
directory (:mod:`minterpr.models.onnx_int8`).

Example:
    >>> from minterpr.models import create_model
    >>> ImageTowerEngine(create_model("tiny"), "torch").engine_name
    'torch'
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .onnx_export import LazyOnnxEngine, OnnxImageEngine, load_image_engine
from .onnx_int8 import int8_engine, load_int8_image_engine

if TYPE_CHECKING:
    from .query_model import RetrievalModel


class ImageTowerEngine(LazyOnnxEngine):
    """The image tower's engine choice for a backend: :func:`load_image_engine` when ONNX runs.
    ``precision`` "int8" runs the int8 file of ``model_dir`` (:mod:`minterpr.models.onnx_int8`;
    checked here, at once, that the directory has one): ONNX Runtime on a CPU device, where
    "auto" then means "onnx" (a changed or foreign file is an error, never a silent fallback);
    off the CPU "auto" runs torch in fp32, as the text encoder's int8 does."""

    what = "images"

    def __init__(
        self,
        model: "RetrievalModel",
        engine: str,
        *,
        cache: str | os.PathLike[str] | None = None,
        precision: str = "fp32",
        model_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        engine = int8_engine(model, engine, precision, model_dir)
        super().__init__(model, engine, cache=cache)
        self.precision, self.model_dir = precision, model_dir

    @property
    def precision_name(self) -> str:
        """ "fp32" or "int8": the precision images are encoded in once resolved."""
        return self.precision if self.engine_name == "onnx" else "fp32"

    def _load_onnx(self) -> OnnxImageEngine:
        if self.precision == "int8":
            return load_int8_image_engine(self.model, self.model_dir)  # type: ignore[arg-type]
        return load_image_engine(self.model, self.cache)
