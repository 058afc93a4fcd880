"""The appearance model on ONNX Runtime: the fast CPU path for gallery crops' same-person vectors.

:func:`export_onnx_reid` writes ``pixels (B, 3, H, W) -> appearance (B, A)``: exactly
:meth:`ReidModel.embed <minterpr.models.reid.ReidModel.embed>` (OSNet with its BatchNorms folded
into the convolutions, the BNNeck, the mirror image's features added when the model flip-tests,
L2 normalisation), from a copy of the model; the model itself is left untouched. The batch axis
is dynamic, the image size the model's. Like the attribute model's image tower
(:mod:`minterpr.models.onnx_export`), every export records the model's fingerprint in its
metadata, a cached file is reused only when it records the same one, and every engine is
checked against PyTorch on a random batch before use (:class:`~minterpr.errors.RunError` above
:data:`CHECK_TOLERANCE`; float32 agrees to ~1e-6).

Example:
    >>> import torch
    >>> from minterpr.models.reid import ReidModel, ReidModelConfig
    >>> model = ReidModel(ReidModelConfig(image_size=(64, 32))).eval()
    >>> engine = load_reid_engine(model)  # doctest: +SKIP
    >>> engine(torch.zeros(2, 3, 64, 32)).shape  # doctest: +SKIP
    (2, 512)
"""

from __future__ import annotations

import copy
import io
import os
import warnings
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from minterpr.errors import RunError

from .onnx_export import EXPORT_LOCK, OPSET, LazyOnnxEngine, load_checked_engine, with_fingerprint
from .onnx_session import ImageSession
from .reid import ReidModel

EXPORT_VERSION = "1"  # bump when the exported graph changes for the same weights
FINGERPRINT_KEY = "minterpr.appearance_fingerprint"
CHECK_TOLERANCE = 1e-4  # largest |ONNX - PyTorch| accepted on the check batch (unit vectors; float32 gives ~1e-6)


class _Embed(nn.Module):
    """``ReidModel.embed`` as a traceable forward (no decorator, no training branch)."""

    def __init__(self, model: ReidModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        encoder, neck = self.model.encoder, self.model.neck
        feature = neck(encoder(pixels)["global"])
        if self.model.config.flip_test:
            feature = feature + neck(encoder(pixels.flip(-1))["global"])
        return F.normalize(feature, dim=1)


def reid_export_fingerprint(model: ReidModel) -> str:
    """What a cached export must record: the model's fingerprint and this module's export version."""
    from .fingerprint import model_fingerprint

    return f"{model_fingerprint(model)}:v{EXPORT_VERSION}"


def export_onnx_reid(model: ReidModel, fingerprint: str | None = None) -> bytes:
    """The ONNX bytes of ``model.embed`` (module doc), ``fingerprint`` in its metadata."""
    height, width = model.config.image_size
    copy_ = copy.deepcopy(model).cpu().float().eval()
    if hasattr(copy_.encoder, "fuse_batchnorm"):
        copy_.encoder.fuse_batchnorm()
    if hasattr(copy_.encoder, "set_channels_last"):
        copy_.encoder.set_channels_last(False)  # ONNX Runtime chooses its own layout
    buffer = io.BytesIO()
    with EXPORT_LOCK, warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about constant shapes: the image size is fixed
        torch.onnx.export(
            _Embed(copy_),
            (torch.zeros(2, 3, height, width),),
            buffer,
            input_names=["pixels"],
            output_names=["appearance"],
            opset_version=OPSET,
            dynamo=False,
            dynamic_axes={"pixels": {0: "batch"}, "appearance": {0: "batch"}},
        )
    return with_fingerprint(buffer.getvalue(), FINGERPRINT_KEY, fingerprint or reid_export_fingerprint(model))


class OnnxReidEngine(ImageSession):
    """An ONNX Runtime session of an exported appearance model: ``engine(pixels)`` -> (B, A) float32;
    ``lane()``: its one-thread twin."""

    fingerprint_key = FINGERPRINT_KEY

    def __call__(self, pixels: torch.Tensor | np.ndarray) -> np.ndarray:
        array = pixels.detach().cpu().float().numpy() if isinstance(pixels, torch.Tensor) else pixels
        return self.session.run(None, {"pixels": np.ascontiguousarray(array, dtype=np.float32)})[0]


def check_reid_engine(engine: OnnxReidEngine, model: ReidModel, *, seed: int = 0) -> float:
    """Max |ONNX - PyTorch| on a random batch; RunError above :data:`CHECK_TOLERANCE`."""
    height, width = model.config.image_size
    pixels = torch.randn(3, 3, height, width, generator=torch.Generator().manual_seed(seed))
    reference = model.eval().embed(pixels).float().cpu().numpy()
    difference = float(np.abs(engine(pixels) - reference).max())
    if not difference <= CHECK_TOLERANCE:
        raise RunError(
            "onnx export",
            f"the ONNX appearance model differs from the PyTorch one by {difference:.3g} "
            f"(> {CHECK_TOLERANCE}): use engine='torch'",
        )
    return difference


def load_reid_engine(
    model: ReidModel, cache: str | os.PathLike[str] | None = None, *, threads: int | None = None
) -> OnnxReidEngine:
    """An :class:`OnnxReidEngine` computing ``model.embed``, checked against it; ``cache``: an ``.onnx``
    file reused when it records this model's fingerprint, (re)written atomically otherwise."""
    fingerprint = reid_export_fingerprint(model)
    return load_checked_engine(
        cache,
        fingerprint,
        lambda data: OnnxReidEngine(data, threads=threads),
        lambda: export_onnx_reid(model, fingerprint),
        lambda e: check_reid_engine(e, model),
    )


class ReidEngine(LazyOnnxEngine):
    """The appearance model's engine choice (torch, onnx or auto: ONNX Runtime on the CPU where installed)."""

    what = "appearance vectors"

    def _load_onnx(self) -> Any:
        return load_reid_engine(self.model, self.cache)  # type: ignore[arg-type]
