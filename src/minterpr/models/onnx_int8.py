"""The attribute model's image tower in int8: a pinned file in the model directory, made once.

Gallery encoding spends most of its time in the attribute model's image tower. ONNX Runtime's
static quantisation (QDQ, per-channel int8 weights, uint8 activations) runs it up to ~1.6x faster
on some 2-core CPUs and no faster on others (docs/benchmarks.md, "Int8 images"), but it needs real
crops to calibrate each activation's range, so unlike the text encoder's int8 (dynamic, made at
load time) it cannot be made where the model is loaded. :func:`quantize_model_dir` (``minterpr
models quantize DIR --data CROPS [--out COPY]``) makes it once, from crops (a dataset's val gallery
or the user's own), and writes ``image_int8.onnx`` beside ``model.safetensors``; ``config.json``'s
``"image_int8"`` entry pins its size and SHA-256 and records the float image fingerprint it was
made from, the calibration and the drift measured on crops it was not calibrated on.

:func:`load_int8_image_engine` opens it for a loaded model (``image_precision="int8"`` on
:func:`minterpr.load_pipeline`, ``--image-precision int8`` on the commands that embed galleries):
a file that is missing, changed, or made from other weights is refused with one line naming it.

Example:
    >>> int8_entry("no/such/dir")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    minterpr.errors.InputError: no/such/dir: no int8 image tower (...)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import torch

from minterpr.errors import InputError, RunError

from .model_dir import read_pinned
from .onnx_export import OnnxImageEngine, export_onnx_image_tower, image_fingerprint
from .onnx_session import INSTALL_HINT

if TYPE_CHECKING:
    from .query_model import RetrievalModel

INT8_FILE = "image_int8.onnx"  # beside model.safetensors
INT8_KEY = "image_int8"  # config.json's entry for it
PRECISIONS = ("fp32", "int8")  # the image tower's weights on ONNX Runtime
CALIBRATION_BATCH = 16  # crops per calibration step (the ranges are the same for any batching)
# a quantisation is refused when, on crops it was not calibrated on, the embedding's mean
# cosine to float32's falls below this or fewer label decisions (logit > 0) than this stay the
# same (the shipped model: 0.993 and 0.978 on PETA test, docs/benchmarks.md)
MIN_MEAN_COSINE, MIN_DECISIONS_KEPT = 0.98, 0.95
QUANTIZE_HINT = "`minterpr models quantize {dir} --data CROPS [--out COPY]`"


def quantize_in_files(model_bytes: bytes, quantize: Callable[[str, str], Any]) -> bytes:
    """The bytes ``quantize(source, target)`` (an ``onnxruntime.quantization`` function, which works on
    files) writes for ``model_bytes``, run in a scratch folder with the root logger at ERROR (the
    quantizer logs a pre-processing tip there). Shared with the text encoder's int8
    (:func:`minterpr.models.onnx_text.quantize_onnx_text_encoder`)."""
    root = logging.getLogger()
    level = root.level
    with tempfile.TemporaryDirectory(prefix="minterpr-int8-") as folder:
        source, target = Path(folder, "float.onnx"), Path(folder, "int8.onnx")
        source.write_bytes(model_bytes)
        root.setLevel(logging.ERROR)
        try:
            quantize(str(source), str(target))
        finally:
            root.setLevel(level)
        return target.read_bytes()


def quantize_static_onnx(model_bytes: bytes, calibration: np.ndarray) -> bytes:
    """``model_bytes`` (one float input (B, 3, H, W)) quantised statically, its activation ranges
    calibrated on ``calibration`` pixels (N, 3, H, W); the metadata (fingerprints) is kept."""
    try:
        import onnx
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    except ImportError:  # pragma: no cover - the [onnx] extra is installed in development
        raise ImportError(f"image precision int8 needs onnxruntime's quantization tools: {INSTALL_HINT}") from None
    graph = onnx.load_from_string(model_bytes)
    name = graph.graph.input[0].name
    steps = [
        {name: np.ascontiguousarray(calibration[i : i + CALIBRATION_BATCH], dtype=np.float32)}
        for i in range(0, len(calibration), CALIBRATION_BATCH)
    ]

    class Batches(CalibrationDataReader):
        def __init__(self) -> None:
            self.steps = iter(steps)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.steps, None)

    quantised = onnx.load_from_string(
        quantize_in_files(
            model_bytes,
            lambda source, target: quantize_static(
                source,
                target,
                Batches(),
                quant_format=QuantFormat.QDQ,
                per_channel=True,
                activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8,
            ),
        )
    )
    kept = {p.key for p in quantised.metadata_props}
    for prop in graph.metadata_props:  # the quantizer drops them
        if prop.key not in kept:
            entry = quantised.metadata_props.add()
            entry.key, entry.value = prop.key, prop.value
    return quantised.SerializeToString()


def drift(reference: tuple[np.ndarray, np.ndarray], quantised: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
    """How far int8 outputs (embedding (N, D), logits (N, L)) stray from float32's:
    ``{"cosine_min", "cosine_mean", "decisions_kept"}`` (the share of logits on the same side of 0).

    Example:
        >>> e, l = np.eye(2, dtype=np.float32), np.array([[1.0, -1.0], [2.0, 3.0]], np.float32)
        >>> drift((e, l), (e, -l))
        {'cosine_min': 1.0, 'cosine_mean': 1.0, 'decisions_kept': 0.0}
    """
    a, b = reference[0], quantised[0]
    cosine = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    kept = (reference[1] > 0) == (quantised[1] > 0)
    return {
        "cosine_min": round(float(cosine.min()), 4),
        "cosine_mean": round(float(cosine.mean()), 4),
        "decisions_kept": round(float(kept.mean()), 4),
    }


def int8_entry(model_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``config.json``'s ``"image_int8"`` entry of a model directory; InputError (one line naming
    the directory and how to make one) when it has none."""
    from .model_dir import CONFIG_FILE, read_model_json

    folder = Path(model_dir)
    if not (folder / CONFIG_FILE).is_file():
        raise InputError(
            f"{folder}: no int8 image tower (image precision int8 needs an exported model directory: "
            f"`minterpr models export RUN DIR`, then {QUANTIZE_HINT.format(dir='DIR')})"
        )
    entry = read_model_json(folder / CONFIG_FILE).get(INT8_KEY)
    if not isinstance(entry, dict):
        raise InputError(f"{folder}: no int8 image tower (make one: {QUANTIZE_HINT.format(dir=folder)})")
    return entry


def int8_engine(model: "RetrievalModel", engine: str, precision: str, model_dir: str | os.PathLike[str] | None) -> str:
    """The engine the image tower runs on at ``precision``, checked before anything loads: fp32
    keeps ``engine``; int8 needs ONNX Runtime and a model directory with an int8 tower (one line
    each otherwise), and turns "auto" into "onnx" on a CPU device (never a silent fallback)."""
    if precision not in PRECISIONS:
        raise ValueError(f"image precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "fp32":
        return engine
    if engine == "torch":
        raise ValueError(f"image precision {precision} runs on ONNX Runtime: use engine 'onnx' or 'auto'")
    if model_dir is None:
        raise InputError(
            "image precision int8 needs the model as an exported model directory that holds an int8 "
            "image tower (`minterpr models export`, then `minterpr models quantize`)"
        )
    int8_entry(model_dir)
    return "onnx" if engine == "auto" and str(model.device) == "cpu" else engine


def _pinned_file(model_dir: str | os.PathLike[str]) -> tuple[Path, dict[str, Any], bytes]:
    """(path, entry, bytes) of a model directory's int8 image tower: InputError without an entry,
    RunError (naming the file) when it cannot be read or its size or SHA-256 differ from the pinned ones."""
    entry = int8_entry(model_dir)
    path = Path(model_dir) / str(entry.get("file", INT8_FILE))
    hint = f": {QUANTIZE_HINT.format(dir=model_dir)}"
    return path, entry, read_pinned(path, entry, unreadable=hint, changed=hint, pinned="pinned in config.json")


def load_int8_image_engine(
    model: "RetrievalModel", model_dir: str | os.PathLike[str], *, threads: int | None = None
) -> OnnxImageEngine:
    """The int8 image tower of ``model_dir`` as an :class:`OnnxImageEngine` for ``model``:
    RunError (naming the file) when its size or SHA-256 differ from the pinned ones or it was
    made from weights other than ``model``'s."""
    path, _, data = _pinned_file(model_dir)
    engine = OnnxImageEngine(data, threads=threads)
    want = image_fingerprint(model)
    if engine.fingerprint != want:
        raise RunError(
            path,
            f"made from other weights (image fingerprint {str(engine.fingerprint)[:16]}, the model's is "
            f"{want[:16]}): {QUANTIZE_HINT.format(dir=model_dir)}",
        )
    return engine


def _outputs(run: Any, pixels: np.ndarray, batch: int = 32) -> tuple[np.ndarray, np.ndarray]:
    parts = [run(pixels[i : i + batch]) for i in range(0, len(pixels), batch)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def quantize_model_dir(
    model_dir: str | os.PathLike[str],
    calibration: torch.Tensor,
    held_out: torch.Tensor,
    *,
    source: str,
    model: "RetrievalModel | None" = None,
) -> dict[str, Any]:
    """Write ``image_int8.onnx`` into a model directory and its entry into ``config.json``: the
    image tower quantised with activation ranges from ``calibration`` pixels (N, 3, H, W), its
    drift measured on ``held_out`` pixels (M, 3, H, W) and refused (RunError, nothing written)
    below :data:`MIN_MEAN_COSINE` / :data:`MIN_DECISIONS_KEPT`. ``source`` says where the crops
    came from (recorded); ``model``: the directory's model when the caller has loaded it already
    (else it is loaded here). Returns the entry."""
    from .model_dir import CONFIG_FILE, load_model_dir, read_model_json, write_shared

    if len(calibration) < 1 or len(held_out) < 1:
        raise InputError("quantising needs at least one calibration crop and one held-out crop")
    folder = Path(model_dir)
    model = model if model is not None else load_model_dir(folder)[0]
    fingerprint = image_fingerprint(model)
    exported = export_onnx_image_tower(model, fingerprint)
    data = quantize_static_onnx(exported, calibration.numpy())
    measured = drift(
        _outputs(OnnxImageEngine(exported), held_out.numpy()), _outputs(OnnxImageEngine(data), held_out.numpy())
    )
    if measured["cosine_mean"] < MIN_MEAN_COSINE or measured["decisions_kept"] < MIN_DECISIONS_KEPT:
        raise RunError(
            folder,
            f"int8 changes this model too much on the held-out crops ({measured}; accepted: mean cosine >= "
            f"{MIN_MEAN_COSINE}, decisions kept >= {MIN_DECISIONS_KEPT}): keep image precision fp32",
        )
    entry = {
        "file": INT8_FILE,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "image_fingerprint": fingerprint,
        "calibration": {"crops": len(calibration), "held_out_crops": len(held_out), "source": source},
        "drift": measured,
    }
    manifest = read_model_json(folder / CONFIG_FILE)
    manifest[INT8_KEY] = entry
    write_shared(folder / INT8_FILE, data)  # the file first: an entry never names a file not there
    write_shared(folder / CONFIG_FILE, (json.dumps(manifest, indent=1) + "\n").encode())
    return entry


def int8_kept(out_dir: str | os.PathLike[str], model: "RetrievalModel") -> dict[str, Any]:
    """``{"image_int8": entry}`` of a model directory about to be exported over, when its file is
    there unchanged and was made from ``model``'s image weights (an export again of the same model
    keeps it); {} otherwise."""
    try:
        _, entry, _ = _pinned_file(out_dir)
    except (InputError, RunError):  # no entry, or a file not as pinned: nothing to keep
        return {}
    return {INT8_KEY: entry} if entry.get("image_fingerprint") == image_fingerprint(model) else {}
