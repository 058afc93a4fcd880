"""The frozen text encoder on ONNX Runtime: the fast CPU path for a search turn's new utterance.

A session turn runs the text encoder on one short utterance (earlier ones are cached by the
backend). On CPU, eager PyTorch spends most of that in framework overhead around MiniLM's six
small layers; ONNX Runtime runs the same float32 graph ~2-3x faster with the same features (max
|difference| ~1e-6; ``benchmarks/bench_text_encode.py``).

:func:`export_onnx_text_encoder` writes ``input_ids (B, T), attention_mask (B, T) -> features (B, Dt)``
(the BERT model + masked mean pooling, exactly ``model.text_encoder(tokens)["global"]``) with
dynamic batch and sequence axes; tokenisation stays in Python (the model's own tokenizer). The
export records :func:`text_fingerprint` in the ONNX metadata and is checked against PyTorch on
texts of several lengths before use (:class:`~minterpr.errors.RunError` above
:data:`CHECK_TOLERANCE`). :func:`load_text_engine` with a ``cache`` path reuses an export written
there only when its fingerprint matches; :class:`TextFeaturizer` picks the engine for a backend.

Example:
    >>> from minterpr.models import create_model
    >>> model = create_model("tiny").eval()
    >>> featurize = TextFeaturizer(model, "torch")
    >>> featurize(["a man in red", "white shoes"]).shape, featurize.engine_name
    (torch.Size([2, 32]), 'torch')
"""

from __future__ import annotations

import copy
import hashlib
import io
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch
from torch import nn

from minterpr.errors import RunError
from minterpr.models.onnx_export import (
    OPSET,
    LazyOnnxEngine,
    load_checked_engine,
    sibling_onnx_path,
    with_fingerprint,
)
from minterpr.models.onnx_session import INSTALL_HINT, cpu_session

if TYPE_CHECKING:
    from .query_model import RetrievalModel

EXPORT_VERSION = "1"  # bump when the exported graph changes for the same weights
FINGERPRINT_KEY = "minterpr.text_fingerprint"
CHECK_TOLERANCE = 1e-4  # largest |ONNX - PyTorch| accepted on the check texts (float32 gives ~1e-6)
CHECK_TEXTS = (
    "no",
    "a young woman in a long red coat with black trousers, carrying a grey shoulder bag",
    "what colour are the shoes? white",
)  # lengths 3..~20 tokens, padded together once
# the text encoder's weights on ONNX Runtime (int8: opt-in, see quantize_onnx_text_encoder)
PRECISIONS = ("fp32", "int8")
INT8_MIN_COSINE = 0.95  # lowest cosine int8 vs PyTorch features accepted on CHECK_TEXTS (MiniLM: >= 0.97)


def text_fingerprint(model: "RetrievalModel") -> str:
    """sha256 of what the text features depend on: the text encoder's weights and buffers, its
    pooling options and :data:`EXPORT_VERSION`.

    Example:
        >>> from minterpr.models import create_model
        >>> a, b = create_model("tiny"), create_model("tiny")
        >>> text_fingerprint(a) == text_fingerprint(a), text_fingerprint(a) == text_fingerprint(b)
        (True, False)
    """
    encoder = model.text_encoder
    digest = hashlib.sha256(f"v{EXPORT_VERSION};{getattr(encoder, 'normalize', None)}".encode())
    for name, tensor in sorted(encoder.state_dict().items()):
        data = tensor.detach().cpu().contiguous()
        digest.update(f"{name};{data.dtype};{tuple(data.shape)};".encode())
        digest.update(data.numpy().tobytes() if data.dtype != torch.bfloat16 else data.float().numpy().tobytes())
    return digest.hexdigest()


class _TextTower(nn.Module):
    """(input_ids, attention_mask) -> pooled features of a text encoder: the graph that is exported."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        tokens = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": torch.zeros_like(input_ids),
        }  # single sentences: segment 0
        return self.encoder(tokens)["global"]  # (B, Dt)


def export_onnx_text_encoder(model: "RetrievalModel", fingerprint: str | None = None) -> bytes:
    """The ONNX bytes of ``model``'s text encoder (batch and sequence axes dynamic), its
    fingerprint in the metadata (:func:`text_fingerprint` unless given)."""
    encoder = copy.deepcopy(model.text_encoder).cpu().float().eval()
    bert = getattr(encoder, "model", None)
    if bert is not None and hasattr(bert, "set_attn_implementation"):
        bert.set_attn_implementation("eager")  # traces to plain MatMul/Softmax with a dynamic length
    tokens = encoder.tokenize(list(CHECK_TEXTS[1:]))  # two texts, padded: the mask path is traced
    example = (tokens["input_ids"], tokens["attention_mask"])
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about shapes the dynamic axes cover
        torch.onnx.export(
            _TextTower(encoder),
            example,
            buffer,
            input_names=["input_ids", "attention_mask"],
            output_names=["features"],
            opset_version=OPSET,
            dynamo=False,
            dynamic_axes={
                "input_ids": {0: "batch", 1: "length"},
                "attention_mask": {0: "batch", 1: "length"},
                "features": {0: "batch"},
            },
        )
    return with_fingerprint(buffer.getvalue(), FINGERPRINT_KEY, fingerprint or text_fingerprint(model))


class OnnxTextEngine:
    """An ONNX Runtime session of an exported text encoder: ``engine(tokens)`` -> (B, Dt) float32
    numpy features. Thread-safe (ONNX Runtime's ``run`` may be called from several threads)."""

    def __init__(self, model_bytes: bytes, *, threads: int | None = None) -> None:
        self.session, self.fingerprint = cpu_session(model_bytes, FINGERPRINT_KEY, threads)

    def __call__(self, tokens: dict[str, torch.Tensor]) -> np.ndarray:
        feeds = {
            name: np.ascontiguousarray(tokens[name].cpu().numpy(), dtype=np.int64)
            for name in ("input_ids", "attention_mask")
        }
        return self.session.run(None, feeds)[0]


def check_text_engine(engine: OnnxTextEngine, model: "RetrievalModel", precision: str = "fp32") -> float:
    """How far the engine's features of :data:`CHECK_TEXTS` (batched, so with padding, and one
    alone) are from PyTorch's: fp32, the max |difference| (RunError above :data:`CHECK_TOLERANCE`);
    int8, 1 - the lowest cosine (RunError below :data:`INT8_MIN_COSINE`)."""
    encoder = model.text_encoder
    was_training = encoder.training
    difference, cosine = 0.0, 1.0
    try:
        encoder.eval()
        for texts in (list(CHECK_TEXTS), [CHECK_TEXTS[0]]):
            tokens = encoder.tokenize(texts)
            with torch.inference_mode():
                reference = encoder({k: v.to(model.device) for k, v in tokens.items()})["global"].float().cpu().numpy()
            got = engine(tokens)
            difference = max(difference, float(np.abs(got - reference).max()))
            norms = np.linalg.norm(got, axis=1) * np.linalg.norm(reference, axis=1)
            cosine = min(cosine, float(((got * reference).sum(1) / np.maximum(norms, 1e-12)).min()))
    finally:
        encoder.train(was_training)
    if precision == "int8":
        if not cosine >= INT8_MIN_COSINE:
            raise RunError(
                "onnx export",
                f"the int8 text encoder's features are too far from the model's (cosine "
                f"{cosine:.3f} < {INT8_MIN_COSINE}): use text precision fp32",
            )
        return 1.0 - cosine
    if not difference <= CHECK_TOLERANCE:
        raise RunError(
            "onnx export",
            f"the ONNX text encoder differs from the PyTorch model by {difference:.3g} "
            f"(> {CHECK_TOLERANCE}): use engine='torch'",
        )
    return difference


def quantize_onnx_text_encoder(model_bytes: bytes, fingerprint: str) -> bytes:
    """An exported text encoder with int8 weights in its matrix products (per output channel;
    activations quantised on the fly), ``fingerprint`` recorded. About 4x smaller and 1.5-2x
    faster on one CPU thread; the features move (cosine ~0.97-0.99 to fp32), so rankings may
    change a little: measured in docs/benchmarks.md ("Turn latency")."""
    from minterpr.models.onnx_int8 import quantize_in_files

    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:  # pragma: no cover - the [onnx] extra is installed in development
        raise ImportError(f"text precision int8 needs onnxruntime's quantization tools: {INSTALL_HINT}") from None
    quantised = quantize_in_files(
        model_bytes,
        lambda source, target: quantize_dynamic(
            source, target, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"]
        ),
    )
    return with_fingerprint(quantised, FINGERPRINT_KEY, fingerprint)


def load_text_engine(
    model: "RetrievalModel",
    cache: str | os.PathLike[str] | None = None,
    *,
    threads: int | None = None,
    precision: str = "fp32",
) -> OnnxTextEngine:
    """An :class:`OnnxTextEngine` computing ``model.text_features``, checked against the model;
    ``precision`` "int8" quantises the export (:func:`quantize_onnx_text_encoder`).

    ``cache``: an ``.onnx`` file to reuse when its recorded fingerprint is the model's (and the
    precision's), (re)written atomically otherwise; None exports in memory (a few seconds for MiniLM).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"text precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    fingerprint = text_fingerprint(model) + ("" if precision == "fp32" else f"+{precision}")

    def export() -> bytes:
        data = export_onnx_text_encoder(model, fingerprint)
        return data if precision == "fp32" else quantize_onnx_text_encoder(data, fingerprint)

    return load_checked_engine(
        cache,
        fingerprint,
        lambda data: OnnxTextEngine(data, threads=threads),
        export,
        lambda e: check_text_engine(e, model, precision),
    )


class TextFeaturizer(LazyOnnxEngine):
    """``featurize(texts)`` -> (n, Dt) float32 text features on the model's device, like
    :meth:`RetrievalModel.text_features`, on ``engine`` "torch" (the reference), "onnx" or "auto"
    (ONNX Runtime on a CPU device when installed and the export passes its check, else torch).
    The engine is resolved (and exported) at the first call, once, under a lock; ``cache`` is an
    ``.onnx`` file for that export. ``precision``: "fp32" (the same features as torch) or "int8"
    (opt-in, ONNX Runtime only: faster, the features move a little; where torch runs, for "auto"
    off the CPU, it is fp32). Thread-safe.
    """

    what = "text"

    def __init__(
        self,
        model: "RetrievalModel",
        engine: str,
        *,
        cache: str | os.PathLike[str] | None = None,
        batch_size: int = 256,
        precision: str = "fp32",
    ) -> None:
        super().__init__(model, engine, cache=cache)
        if precision not in PRECISIONS:
            raise ValueError(f"text precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if precision != "fp32" and engine == "torch":
            raise ValueError(f"text precision {precision} runs on ONNX Runtime: use engine 'onnx' or 'auto'")
        self.precision = precision  # as asked; precision_name says what runs once resolved
        self.batch_size = batch_size  # texts per encoder call (similar lengths batched together)

    @property
    def precision_name(self) -> str:
        """ "fp32" or "int8": the precision the features are computed in once resolved."""
        return self.precision if self.engine_name == "onnx" else "fp32"

    def _load_onnx(self) -> OnnxTextEngine:
        return load_text_engine(self.model, self.cache, precision=self.precision)

    def __call__(self, texts: Sequence[str]) -> torch.Tensor:
        texts = list(texts)
        if self.engine_name == "torch" or not texts:
            with torch.inference_mode():
                return self.model.text_features(texts, batch_size=self.batch_size)
        assert self._onnx is not None
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # as RetrievalModel.text_features
        features = np.empty((len(texts), self.model.text_dim), np.float32)
        for start in range(0, len(texts), self.batch_size):
            rows = order[start : start + self.batch_size]
            features[rows] = self._onnx(self.model.text_encoder.tokenize([texts[i] for i in rows]))
        return torch.from_numpy(features)


def text_cache_path(image_cache: str | os.PathLike[str] | None, precision: str = "fp32") -> Path | None:
    """Where the text export is kept next to an image export file: ``x.onnx`` -> ``x.text.onnx``
    (``x.text-int8.onnx`` for int8: both may be kept).

    Example:
        >>> str(text_cache_path("cache/image.onnx")), text_cache_path(None)
        ('cache/image.text.onnx', None)
        >>> str(text_cache_path("cache/image.onnx", "int8"))
        'cache/image.text-int8.onnx'
    """
    return sibling_onnx_path(image_cache, "text" if precision == "fp32" else f"text-{precision}")
