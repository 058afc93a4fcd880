"""The image side of a retrieval model on ONNX Runtime: the fast CPU path for gallery encoding.

:func:`export_onnx_image_tower` writes ``pixels (B, 3, H, W) -> embedding (B, D), attribute_logits
(B, L)`` (image encoder + colour branch + heads, exactly :meth:`RetrievalModel.encode_images`)
as ONNX, from a copy of the model with every BatchNorm folded into its convolution; the model
itself is left untouched. The batch axis is dynamic, the image size is the model's
``config.image_size`` (gallery preprocessing always resizes to it). On 2 CPU cores ONNX Runtime
runs the EfficientNet-Lite0 model's image side 2.5-4x faster than eager PyTorch with the same
float32 results (max |difference| ~1e-6; ``benchmarks/bench_encode.py``).

Every export records the model's :func:`image_fingerprint` in the ONNX metadata and is checked
against PyTorch on a random batch before it is used (:class:`~minterpr.errors.RunError` when they
disagree). :func:`load_image_engine` with a ``cache`` path reuses an export written there
(through :mod:`minterpr.fileio`) only when its fingerprint matches the model; one written for
other weights is replaced.

Example:
    >>> import torch
    >>> from minterpr.models import create_model
    >>> model = create_model("tiny", num_stripes=2).eval()
    >>> engine = load_image_engine(model)  # doctest: +SKIP
    >>> embedding, logits = engine(torch.randn(3, 3, *model.config.image_size))  # doctest: +SKIP
    >>> embedding.shape  # doctest: +SKIP
    (3, 32)
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import io
import logging
import math
import os
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from minterpr.errors import InputError, RunError
from minterpr.fileio import atomic_write

from .encoders.blocks import TFSameConv2d
from .onnx_session import INSTALL_HINT, ImageSession

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from .query_model import RetrievalModel

EXPORT_VERSION = "1"  # bump when the exported graph changes for the same weights
OPSET = 17
FINGERPRINT_KEY = "minterpr.image_fingerprint"
CHECK_TOLERANCE = 1e-3  # largest |ONNX - PyTorch| accepted on the check batch (float32 gives ~1e-6)

EXPORT_LOCK = threading.Lock()  # the export patches torch.nn.functional while tracing


def image_fingerprint(model: "RetrievalModel") -> str:
    """sha256 of everything the image tower's output depends on: the image-side weights and
    buffers (the text encoder is left out), the image size and :data:`EXPORT_VERSION`.

    Example:
        >>> from minterpr.models import create_model
        >>> a, b = create_model("tiny"), create_model("tiny")
        >>> image_fingerprint(a) == image_fingerprint(a), image_fingerprint(a) == image_fingerprint(b)
        (True, False)
    """
    digest = hashlib.sha256(f"v{EXPORT_VERSION};{tuple(model.config.image_size)}".encode())
    for name, tensor in sorted(model.state_dict().items()):
        if name.startswith("text_encoder."):
            continue
        data = tensor.detach().cpu().contiguous()
        digest.update(f"{name};{data.dtype};{tuple(data.shape)};".encode())
        digest.update(data.numpy().tobytes() if data.dtype != torch.bfloat16 else data.float().numpy().tobytes())
    return digest.hexdigest()


class _ImageTower(nn.Module):
    """pixels -> (embedding, attribute_logits) of a model: the graph that is exported."""

    def __init__(self, model: "RetrievalModel") -> None:
        super().__init__()
        self.model = model

    def forward(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.model.encode_images(pixels)
        return out["embedding"], out["attribute_logits"]


def _static_padding(module: nn.Module, sizes: dict[nn.Module, tuple[int, int]]) -> None:
    """Replace every TF-"same" conv by constant zero padding + conv (the padding it computed for
    the input size it saw), so the traced graph keeps static spatial shapes."""
    for name, child in module.named_children():
        if isinstance(child, TFSameConv2d):
            height, width = sizes[child]
            pads: list[int] = []
            for size, k, s in (
                (width, child.kernel_size[1], child.stride[1]),
                (height, child.kernel_size[0], child.stride[0]),
            ):
                total = max((math.ceil(size / s) - 1) * s + k - size, 0)
                pads += [total // 2, total - total // 2]
            conv = nn.Conv2d(
                child.in_channels,
                child.out_channels,
                child.kernel_size,
                stride=child.stride,
                groups=child.groups,
                bias=child.bias is not None,
            )
            conv.load_state_dict(child.state_dict())
            setattr(module, name, nn.Sequential(nn.ZeroPad2d(pads), conv))
        else:
            _static_padding(child, sizes)


def _pooling_matrix(size: int, out: int) -> torch.Tensor:
    """(out, size) matrix of adaptive average pooling along one axis: row i averages
    [floor(i * size / out), ceil((i + 1) * size / out)), the windows torch uses."""
    matrix = torch.zeros(out, size)
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


@contextlib.contextmanager
def _exportable_adaptive_pool() -> Iterator[None]:
    """While tracing, ``F.adaptive_avg_pool2d`` becomes a plain average pool when the sizes divide
    evenly, else two matrix products with the same windows (the exporter cannot convert adaptive
    pooling itself); both are exact."""
    original = F.adaptive_avg_pool2d

    def pool(x: torch.Tensor, output_size: int | tuple[int, int]) -> torch.Tensor:
        if not torch.jit.is_tracing():
            return original(x, output_size)
        out_h, out_w = (output_size, output_size) if isinstance(output_size, int) else output_size
        height, width = int(x.shape[-2]), int(x.shape[-1])
        if (height, width) == (out_h, out_w):
            return x
        if height % out_h == 0 and width % out_w == 0:
            return F.avg_pool2d(x, (height // out_h, width // out_w))
        # uneven windows (160x80 -> 64x32): adaptive pooling is linear, one averaging matrix per axis
        rows, cols = _pooling_matrix(height, out_h).to(x), _pooling_matrix(width, out_w).to(x)
        return torch.matmul(torch.matmul(rows, x), cols.t())  # (out_h, H) @ (.., H, W) @ (W, out_w)

    F.adaptive_avg_pool2d = pool
    try:
        yield
    finally:
        F.adaptive_avg_pool2d = original


def export_onnx_image_tower(model: "RetrievalModel", fingerprint: str | None = None) -> bytes:
    """The ONNX bytes of ``model``'s image tower (BatchNorm folded, batch axis dynamic), its
    fingerprint in the metadata (:func:`image_fingerprint` unless given)."""
    height, width = model.config.image_size
    tower = copy.deepcopy(model, memo={id(model.text_encoder): model.text_encoder}).cpu().float().eval()
    encoder = tower.image_encoder
    if hasattr(encoder, "fuse_batchnorm"):
        encoder.fuse_batchnorm()
    if hasattr(encoder, "set_channels_last"):
        encoder.set_channels_last(False)  # ONNX Runtime chooses its own layout
    sizes: dict[nn.Module, tuple[int, int]] = {}
    hooks = [
        m.register_forward_pre_hook(lambda m, inp: sizes.__setitem__(m, tuple(inp[0].shape[-2:])))
        for m in tower.modules()
        if isinstance(m, TFSameConv2d)
    ]
    example = torch.zeros(2, 3, height, width)
    with torch.no_grad():
        tower.encode_images(example)
    for hook in hooks:
        hook.remove()
    _static_padding(tower, sizes)
    buffer = io.BytesIO()
    with EXPORT_LOCK, _exportable_adaptive_pool(), warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about constant shapes: the image size is fixed
        torch.onnx.export(
            _ImageTower(tower),
            (example,),
            buffer,
            input_names=["pixels"],
            output_names=["embedding", "attribute_logits"],
            opset_version=OPSET,
            dynamo=False,
            dynamic_axes={"pixels": {0: "batch"}, "embedding": {0: "batch"}, "attribute_logits": {0: "batch"}},
        )
    return with_fingerprint(buffer.getvalue(), FINGERPRINT_KEY, fingerprint or image_fingerprint(model))


def with_fingerprint(model_bytes: bytes, key: str, fingerprint: str) -> bytes:
    """The ONNX graph ``model_bytes`` with ``fingerprint`` recorded in its metadata under ``key``."""
    try:
        import onnx
    except ImportError:  # pragma: no cover - the [onnx] extra is installed in development
        raise ImportError(f"exporting to ONNX needs the onnx package: {INSTALL_HINT}") from None
    graph = onnx.load_from_string(model_bytes)
    entry = graph.metadata_props.add()
    entry.key, entry.value = key, fingerprint
    return graph.SerializeToString()


class OnnxImageEngine(ImageSession):
    """An ONNX Runtime session of an exported image tower: ``engine(pixels)`` ->
    (embedding (B, D), attribute_logits (B, L)) float32 numpy arrays. Thread-safe (one session,
    ONNX Runtime's ``run`` may be called from several threads); ``lane()``: its one-thread twin."""

    fingerprint_key = FINGERPRINT_KEY

    def __call__(self, pixels: torch.Tensor | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        array = pixels.detach().cpu().float().numpy() if isinstance(pixels, torch.Tensor) else pixels
        embedding, logits = self.session.run(None, {"pixels": np.ascontiguousarray(array, dtype=np.float32)})
        return embedding, logits


def check_engine(engine: OnnxImageEngine, model: "RetrievalModel", *, seed: int = 0) -> float:
    """Max |ONNX - PyTorch| of the embeddings and logits on a random batch; RunError above
    :data:`CHECK_TOLERANCE` (the export then does not compute what the model does)."""
    height, width = model.config.image_size
    pixels = torch.randn(3, 3, height, width, generator=torch.Generator().manual_seed(seed))
    was_training = model.training
    try:
        with torch.inference_mode():
            reference = model.eval().encode_images(pixels.to(model.device))
    finally:
        model.train(was_training)
    embedding, logits = engine(pixels)
    difference = max(
        float(np.abs(embedding - reference["embedding"].float().cpu().numpy()).max()),
        float(np.abs(logits - reference["attribute_logits"].float().cpu().numpy()).max()),
    )
    if not difference <= CHECK_TOLERANCE:
        raise RunError(
            "onnx export",
            f"the ONNX image tower differs from the PyTorch model by {difference:.3g} "
            f"(> {CHECK_TOLERANCE}): use engine='torch'",
        )
    return difference


def load_image_engine(
    model: "RetrievalModel", cache: str | os.PathLike[str] | None = None, *, threads: int | None = None
) -> OnnxImageEngine:
    """An :class:`OnnxImageEngine` computing ``model.encode_images``, checked against the model.

    ``cache``: an ``.onnx`` file to reuse; it is used only when its recorded fingerprint is the
    model's, and (re)written atomically otherwise. None exports in memory (well under a second
    for EfficientNet-Lite0).
    """
    fingerprint = image_fingerprint(model)
    return load_checked_engine(
        cache,
        fingerprint,
        lambda data: OnnxImageEngine(data, threads=threads),
        lambda: export_onnx_image_tower(model, fingerprint),
        lambda e: check_engine(e, model),
    )


def choose_engine(engine: str, device: Any, load: Callable[[], Any], what: str) -> Any | None:
    """The ONNX engine ``load()`` builds, or None where torch computes ``what``: "torch" -> None;
    "onnx" -> ``load()`` (InputError off the CPU); "auto" -> ``load()`` on a CPU device with
    onnxruntime installed, None otherwise and whenever the export fails (logged: the reference
    engine then runs)."""
    on_cpu = str(device) == "cpu"
    if engine == "onnx":
        if not on_cpu:
            raise InputError(f"engine='onnx' runs on the CPU only; the device is {device}")
        return load()
    if engine != "auto" or not on_cpu or importlib.util.find_spec("onnxruntime") is None:
        return None
    try:  # any reason the export cannot be used means the reference engine
        return load()
    except Exception as exc:  # noqa: BLE001
        logger.info("engine='auto' computes %s with torch: the ONNX export failed (%s)", what, exc)
        return None


# the reference, ONNX Runtime, or ONNX Runtime where it can run; the parts below take one with no
# default: the defaults are the runtime's (runtime.neural_backend.REFERENCE_ENGINE and RUN_ENGINE)
ENGINES = ("torch", "onnx", "auto")


class LazyOnnxEngine:
    """What a part of the model that runs on torch or ONNX Runtime shares: ``engine`` as asked
    (one of :data:`ENGINES`), resolved once, at the first use and under a lock, into
    :attr:`engine_name` and ``_onnx`` (the ONNX engine; None where torch runs). Subclasses give
    ``_load_onnx`` (export or reuse, then check) and ``what`` (for the log line when "auto"
    falls back to torch). ``cache``: the ``.onnx`` file for the export (None: in memory)."""

    what = "model"

    def __init__(self, model: "RetrievalModel", engine: str, *, cache: str | os.PathLike[str] | None = None) -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        self.model = model
        self.engine = engine  # as asked; engine_name says what runs once resolved
        self.cache = cache
        self._onnx: Any | None = None
        self._resolved: str | None = "torch" if engine == "torch" else None
        self._lock = threading.Lock()

    @property
    def engine_name(self) -> str:
        """ "torch" or "onnx": what computes this part (resolving "auto" builds the export)."""
        if self._resolved is None:
            with self._lock:
                if self._resolved is None:
                    self._onnx = choose_engine(self.engine, self.model.device, self._load_onnx, self.what)
                    self._resolved = "torch" if self._onnx is None else "onnx"
        return self._resolved

    @property
    def onnx(self) -> Any | None:
        """The ONNX engine once resolved (None where torch runs)."""
        _ = self.engine_name
        return self._onnx

    def _load_onnx(self) -> Any:
        raise NotImplementedError


def sibling_onnx_path(image_cache: str | os.PathLike[str] | None, part: str) -> Path | None:
    """Where the export of another part of the model is kept next to an image export file:
    ``x.onnx`` -> ``x.<part>.onnx`` (None without an image cache: that part exports in memory).

    Example:
        >>> str(sibling_onnx_path("cache/image.onnx", "text")), sibling_onnx_path(None, "text")
        ('cache/image.text.onnx', None)
    """
    if image_cache is None:
        return None
    path = Path(image_cache)
    return path.with_name(f"{path.stem}.{part}{path.suffix or '.onnx'}")


def load_checked_engine(
    cache: str | os.PathLike[str] | None,
    fingerprint: str,
    open_engine: Callable[[bytes], Any],
    export: Callable[[], bytes],
    check: Callable[[Any], float],
) -> Any:
    """The engine of the ``cache`` file when it opens and records ``fingerprint``, else a fresh
    ``export()`` (written to ``cache`` atomically when given); ``check``ed either way. Shared by
    the image tower and the text encoder (:mod:`minterpr.models.onnx_text`)."""
    if cache is not None and Path(cache).is_file():
        try:
            engine = open_engine(Path(cache).read_bytes())
        except Exception:  # noqa: BLE001 - a corrupt or foreign file is rebuilt below
            engine = None
        if engine is not None and engine.fingerprint == fingerprint:
            check(engine)
            return engine
    data = export()
    if cache is not None:
        atomic_write(cache, lambda f: f.write(data))
    engine = open_engine(data)
    check(engine)
    return engine
