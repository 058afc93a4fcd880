"""A trained run: the model read with what training chose for it (the reader behind ``load_pipeline``).

``load_run(PATH)`` takes a run directory (``minterpr train --out RUN``: its ``model.pt``), a
model file, or a model directory (``minterpr models export``: safetensors weights, JSON config and
extras; :func:`export_model_dir` writes one), and returns a :class:`TrainedRun`: the model and its
:class:`~minterpr.interaction.fitted.RunExtras`, the typed record of the checkpoint's ``extra``
(the scoring chosen on the validation split, the attribute calibration, the match temperature, the
presence model, the record of the weight choice, and the model-selection keys of training).
``load_pipeline``, ``minterpr eval``, ``simulate``, ``chat`` and ``demo`` all load through it, so
they score alike.

Anything wrong with the path or the file raises :class:`~minterpr.errors.RunError` naming the
file and what to do (a directory without ``model.pt``, an empty, truncated or foreign file, a
training checkpoint given as a model, an encoder this installation lacks, weights that do not
fit); nothing but tensors and plain data is ever unpickled.

:func:`minterpr.training.post_training.calibrate_and_choose_weight` is the post-training step that
writes the extras (``minterpr train`` and ``minterpr demo`` run it after training).

Example:
    >>> import tempfile
    >>> from minterpr.models import create_model, save_model
    >>> run_dir = Path(tempfile.mkdtemp())
    >>> save_model(create_model("tiny"), run_dir / "model.pt",
    ...            extra={"scoring": {"attribute_weight": 0.1, "prob_floor": 0.05}, "epoch": 2})
    >>> run = load_run(run_dir)
    >>> run.extras.scoring.attribute_weight, run.extras.other, run.rerank_config().prob_floor
    (0.1, {'epoch': 2}, 0.05)
    >>> load_run(run_dir / "nothing")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    minterpr.errors.RunError: .../nothing: no such run directory or model file (train one: ...)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from minterpr.errors import InputError, RunError, first_line
from minterpr.interaction.fitted import RunExtras
from minterpr.interaction.reranking import RerankConfig
from minterpr.runtime.neural_backend import DEFAULT_BATCH_SIZE, RUN_ENGINE

if TYPE_CHECKING:  # torch-heavy: imported when a run is loaded
    from minterpr.runtime.neural_backend import NeuralBackend
    from minterpr.models.query_model import RetrievalModel

TRAIN_HINT = "`minterpr train --config synthetic --data DATA --out RUN`"


@dataclass(frozen=True)
class TrainedRun:
    """A loaded model and what training chose for it."""

    model: "RetrievalModel"  # in eval mode, on the device asked for
    model_path: Path  # the file it was read from
    run_dir: Path | None  # the run directory, None when a model file was given
    extras: RunExtras  # the typed checkpoint extras

    def rerank_config(self) -> RerankConfig:
        """The scoring of sessions and evaluation: the stored one, else the defaults."""
        return self.extras.rerank_config()

    @cached_property
    def fingerprint(self) -> str:
        """The model's fingerprint (:func:`minterpr.models.fingerprint.model_fingerprint`), computed
        once: stored galleries and vector indexes record it and refuse another model's."""
        from minterpr.models.fingerprint import model_fingerprint

        return model_fingerprint(self.model)

    def backend(self, batch_size: int = DEFAULT_BATCH_SIZE, **options: Any) -> "NeuralBackend":
        """The model as a retrieval backend (indexing, query encoding) on its device; ``options``
        are NeuralBackend's keywords (``engine``: "auto" unless given, ``onnx_cache``, ...)."""
        from minterpr.runtime.neural_backend import NeuralBackend

        options.setdefault("engine", RUN_ENGINE)  # ONNX Runtime on CPU when installed: same results, faster
        if self.model_path.is_dir():  # an exported model directory: where an int8 image tower may be
            options.setdefault("model_dir", self.model_path)
        return NeuralBackend(
            self.model, device=str(next(self.model.parameters()).device), batch_size=batch_size, **options
        )


def model_path_of(path: str | os.PathLike[str]) -> tuple[Path, Path | None]:
    """``(model file, run directory or None)`` of a run directory or a model file path (or a
    shipped or hub model's name: :func:`minterpr.models.zoo.resolve_model`).

    A directory without ``model.pt`` raises :class:`RunError` saying what it holds instead
    (an unfinished run's ``last.pt`` / ``best.pt``, or nothing of a run)."""
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"a run is given by its directory or model file path, got {type(path).__name__}")
    from minterpr.models.model_dir import is_model_dir
    from minterpr.models.zoo import resolve_model

    path = resolve_model(path)  # "shipped[:NAME]" and "hf-hub:ORG/NAME[@REV]" name local folders
    if not path.exists():
        raise RunError(path, f"no such run directory or model file (train one: {TRAIN_HINT})")
    if not path.is_dir():
        return path, None
    model = path / "model.pt"
    if model.is_file():
        return model, path
    from minterpr.models.reid_dir import is_reid_dir

    if is_reid_dir(path):  # the other half of a shipped pair: one line, not a format error
        raise RunError(
            path,
            "holds the appearance model only, no attribute model: name it with --appearance "
            "(appearance=) and the attribute model with --run (e.g. shipped)",
        )
    if is_model_dir(path):  # an exported model directory: it is the model
        return path, None
    last, best = path / "last.pt", path / "best.pt"
    if last.is_file():
        reason = f"no model.pt: training did not finish? `minterpr train --out {path} --resume` continues it"
        if best.is_file():
            reason += f" ({best} holds the best weights so far: --run {best})"
    elif best.is_file():
        reason = f"no model.pt, only best.pt: pass that file itself (--run {best})"
    elif model.exists():
        reason = "model.pt is not a regular file"
    else:
        reason = (
            f"not a training run (no model.pt, last.pt or best.pt) nor an exported model directory (no "
            f"config.json); train one: {TRAIN_HINT}"
        )
    raise RunError(path, reason)


def _device(device: str) -> Any:
    from minterpr.models.device import resolve_device

    try:
        return resolve_device(str(device))
    except (ValueError, RuntimeError) as err:  # "cuda" without CUDA, a misspelt device
        message = first_line(err)
        raise InputError(message if repr(str(device)) in message else f"device {device!r}: {message}") from None


def load_run(path: str | os.PathLike[str], *, device: str = "cpu") -> TrainedRun:
    """Load a run directory (its ``model.pt``), a model file or an exported model directory on
    ``device`` (CPU by default).

    Raises :class:`RunError` (the file and what is wrong) for anything that is not a model
    written by ``minterpr train`` / ``save_model`` / ``minterpr models export``, :class:`InputError`
    for an unusable device."""
    from minterpr.models.io import model_from_checkpoint, read_checkpoint
    from minterpr.models.model_dir import EXTRAS_FILE, is_model_dir, load_model_dir

    model_path, run_dir = model_path_of(path)
    target = _device(device)
    if is_model_dir(model_path):
        model, extra = load_model_dir(model_path, target)
        return TrainedRun(model, model_path, None, RunExtras.from_dict(extra, model_path / EXTRAS_FILE))
    payload = read_checkpoint(model_path, map_location="cpu")
    extras = RunExtras.from_dict(payload["extra"], model_path)  # before the model: cheap checks first
    model = model_from_checkpoint(payload, target, source=model_path)
    return TrainedRun(model, model_path, run_dir, extras)


# float16 storage is accepted when, on seeded inputs, every image embedding keeps a cosine of at
# least this with float32's and no attribute probability moves by more than this
HALF_COSINE_MIN, HALF_PROB_MAX_ABS = 0.999, 0.01


def export_model_dir(
    path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    self_contained: bool = False,
    precision: str = "float32",
) -> dict[str, Any]:
    """Write the model of a run (directory, model file or model directory) as a shareable model
    directory (``minterpr models export``): safetensors weights, ``config.json``, the typed extras as
    ``extras.json``; pretrained encoder weights that training left unchanged are referenced by
    package and checksum unless ``self_contained``. ``precision="float16"`` stores the copied
    weights at half precision and refuses (RunError) when that moves an image embedding below
    cosine :data:`HALF_COSINE_MIN` of float32's or an attribute probability by more than
    :data:`HALF_PROB_MAX_ABS`. Returns ``config.json``'s content.

    Example:
        >>> import tempfile
        >>> from minterpr.models import create_model, save_model
        >>> run_dir, out = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp()) / "shared"
        >>> save_model(create_model("tiny"), run_dir / "model.pt", extra={"scoring": {"attribute_weight": 0.1}})
        >>> sorted(export_model_dir(run_dir, out)), sorted(p.name for p in out.iterdir())
        (['extras', 'format', 'model_config', 'pretrained', 'version', 'weights'], ['config.json', 'extras.json', 'model.safetensors'])
        >>> load_run(out).extras.scoring.attribute_weight
        0.1
    """
    from minterpr.models.model_dir import half_precision_drift, load_model_dir, save_model_dir

    from minterpr.models.onnx_int8 import int8_kept

    run = load_run(path)
    manifest = save_model_dir(
        run.model,
        out_dir,
        run.extras.to_dict(),
        reference_pretrained=not self_contained,
        precision=precision,
        keep=int8_kept(out_dir, run.model),
    )
    if precision == "float16":
        drift = half_precision_drift(run.model, load_model_dir(out_dir)[0])
        manifest["half_precision_drift"] = drift
        if (
            drift["image_cosine_min"] < HALF_COSINE_MIN
            or drift["text_cosine_min"] < HALF_COSINE_MIN
            or drift["attribute_prob_max_abs"] > HALF_PROB_MAX_ABS
        ):
            raise RunError(
                Path(out_dir),
                f"float16 storage changes this model too much ({drift}; accepted: cosine >= "
                f"{HALF_COSINE_MIN}, probabilities within {HALF_PROB_MAX_ABS}): "
                "export it at float32",
            )
    return manifest
