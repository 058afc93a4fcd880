"""The appearance model as a shipped directory: safetensors weights and a JSON config, no pickle.

A training run keeps its appearance model in ``best.pt`` (:func:`~minterpr.models.reid.load_reid_model`,
read through :func:`~minterpr.models.io.load_torch_file`'s tensors-only loader). What ships, and what
anyone else is handed, is a folder like the attribute model's (:mod:`minterpr.models.io`):

* ``config.json``: ``{"format": "minterpr-appearance-dir", "version": 1, "reid_config": {...},
  "weights": {"file", "bytes", "sha256", "precision"}, "source": {...}}``, written last;
* ``model.safetensors``: the encoder and BNNeck (never the training identities' classifier),
  float16 or float32; loading casts them back to float32 and checks the size and SHA-256 first.

A folder that holds the attribute model instead (``minterpr-model-dir``), or a half-written one,
is refused in one line naming the file and what is missing.

Example:
    >>> import tempfile
    >>> model = ReidModel(ReidModelConfig(image_size=(64, 32))).eval()
    >>> folder = Path(tempfile.mkdtemp()) / "looks"
    >>> save_reid_dir(model, folder, precision="float16")["weights"]["precision"]
    'float16'
    >>> half = load_reid_dir(folder)
    >>> reid_half_drift(model, half, images=4) > 0.999
    True
    >>> is_reid_dir(folder), is_reid_dir(folder.parent)
    (True, False)
"""

from __future__ import annotations

import hashlib
import json
from os import PathLike
from pathlib import Path
from typing import Any, Mapping

import torch

from minterpr.errors import RunError

from .model_dir import (
    CONFIG_FILE,
    MODEL_DIR_FORMAT,
    STORAGE_DTYPES,
    WEIGHTS_FILE,
    read_model_json,
    read_pinned,
    safetensors_torch,
    write_shared,
)
from .reid import ReidModel, ReidModelConfig

REID_DIR_FORMAT = "minterpr-appearance-dir"  # config.json's format marker of an appearance model directory
REID_DIR_VERSION = 1  # bumped when the layout changes; older readers refuse newer folders in one line


def save_reid_dir(
    model: ReidModel,
    out_dir: str | PathLike[str],
    *,
    precision: str = "float32",
    source: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``model``'s search weights (encoder + BNNeck) as an appearance model directory; returns
    what ``config.json`` holds. ``source``: a JSON-able note of where it came from (checkpoint, data).
    ``config.json`` is written last, after its old copy is removed: an interrupted export leaves no model."""
    if precision not in STORAGE_DTYPES:
        raise ValueError(f"precision {precision!r}: must be one of {', '.join(STORAGE_DTYPES)}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise RunError(out, "exists and is not a folder")
    # the model card and licence note (.md) may be written before the first export
    if out.is_dir() and any(p.suffix != ".md" for p in out.iterdir()) and not (out / CONFIG_FILE).is_file():
        raise RunError(out, "is not empty and holds no exported model: choose a new or empty folder")
    store = STORAGE_DTYPES[precision]
    tensors = {
        k: v.detach().to("cpu", store if v.is_floating_point() else v.dtype).contiguous().clone()
        for k, v in model.search_state_dict().items()
    }
    weights = safetensors_torch().save(tensors, metadata={"format": REID_DIR_FORMAT})
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_FILE).unlink(missing_ok=True)
    write_shared(out / WEIGHTS_FILE, weights)
    manifest = {
        "format": REID_DIR_FORMAT,
        "version": REID_DIR_VERSION,
        "reid_config": model.config.to_dict(),
        "weights": {
            "file": WEIGHTS_FILE,
            "bytes": len(weights),
            "sha256": hashlib.sha256(weights).hexdigest(),
            "precision": precision,
        },
        "source": dict(source or {}),
    }
    write_shared(out / CONFIG_FILE, (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest


def is_reid_dir(path: str | PathLike[str]) -> bool:
    """Whether ``path`` is a folder whose ``config.json`` says it holds an appearance model."""
    config = Path(path) / CONFIG_FILE
    if not config.is_file():
        return False
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("format") == REID_DIR_FORMAT
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return False


def load_reid_dir(path: str | PathLike[str]) -> ReidModel:
    """The appearance model of a directory (eval mode, float32, CPU); RunError in one line naming the
    file for a missing, damaged or changed file, or a folder that holds another kind of model."""
    folder = Path(path)
    config_path = folder / CONFIG_FILE
    if not folder.is_dir():
        raise RunError(folder, "no such folder (an appearance model directory holds config.json and model.safetensors)")
    if not config_path.is_file():
        raise RunError(
            config_path,
            "missing: not an appearance model directory (export one with minterpr.training.publish.publish_appearance)",
        )
    manifest = read_model_json(config_path)
    kind = manifest.get("format") if isinstance(manifest, dict) else None
    if kind == MODEL_DIR_FORMAT:
        raise RunError(
            folder,
            "holds the attribute model only, no appearance model: pass it as --run, and name an "
            "appearance model with --appearance (shipped, or a reid run's best.pt)",
        )
    if kind != REID_DIR_FORMAT:
        raise RunError(config_path, f"not an appearance model directory (no format marker {REID_DIR_FORMAT!r})")
    if manifest.get("version") != REID_DIR_VERSION:
        raise RunError(
            config_path,
            f"appearance directory version {manifest.get('version')!r}; this minterpr reads version {REID_DIR_VERSION}",
        )
    raw = manifest.get("reid_config")
    if not isinstance(raw, dict):
        raise RunError(config_path, "no 'reid_config' object: the appearance model directory is damaged")
    weights_path, want = folder / WEIGHTS_FILE, manifest.get("weights") or {}
    data = read_pinned(
        weights_path,
        want,
        unreadable=": the appearance model directory is incomplete; copy or export it again",
        changed=": copy or export it again",
    )
    try:
        tensors = safetensors_torch().load(data)
        model = ReidModel(ReidModelConfig.from_dict(raw))
    except (ValueError, TypeError, KeyError) as err:
        raise RunError(config_path, f"cannot build the appearance model ({str(err).splitlines()[0]})") from None
    except Exception as err:  # noqa: BLE001 - safetensors reports damaged headers with its own error type
        raise RunError(weights_path, f"damaged safetensors file ({err})") from None
    built = model.state_dict()
    tensors = {k: v.to(built[k].dtype) if k in built and v.is_floating_point() else v for k, v in tensors.items()}
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as err:
        raise RunError(weights_path, f"weights do not fit the stored config ({str(err).splitlines()[0]})") from None
    model.encoder.set_channels_last(True)  # loading copied into the old memory layout
    return model.eval()


def load_reid_any(path: str | PathLike[str]) -> ReidModel:
    """An appearance model from a directory (:func:`load_reid_dir`) or a run's ``best.pt``."""
    from .reid import load_reid_model

    folder = Path(path)
    if folder.is_dir() and (folder / CONFIG_FILE).is_file():
        return load_reid_dir(folder)
    return load_reid_model(str(folder / "best.pt" if folder.is_dir() else folder))


@torch.no_grad()
def reid_half_drift(
    model: ReidModel, half: ReidModel, *, images: int = 16, seed: int = 0, pixels: torch.Tensor | None = None
) -> float:
    """The smallest cosine between ``model``'s and ``half``'s embeddings of ``pixels`` (default:
    ``images`` seeded random inputs at the model's size): 1.0 = the same features."""
    if pixels is None:
        height, width = model.config.image_size
        pixels = torch.randn(images, 3, height, width, generator=torch.Generator().manual_seed(seed))
    a, b = model.eval().embed(pixels), half.eval().embed(pixels)
    return float(torch.nn.functional.cosine_similarity(a, b).min())
