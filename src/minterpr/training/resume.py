"""Resuming a run from RUN_DIR/last.pt: whether the folder can be continued, what last.pt holds, its weights read back.

:mod:`minterpr.training.checkpoint` writes and reads checkpoints crash-safely; here is what a
training run puts in one and the rules ``--resume`` follows with the run folder it finds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from minterpr.errors import RunError
from minterpr.models import RetrievalModel
from minterpr.models.io import state_mismatch

from .checkpoint import CHECKPOINT_FORMAT, capture_rng_state, load_checkpoint
from .config import TrainConfig


def resume_checkpoint(run_dir: Path, resume: bool) -> dict[str, Any] | None:
    """RUN_DIR/last.pt to continue from (None: start the run afresh); refuses a folder that cannot be
    continued exactly (``resume``) or that would be overwritten (not ``resume``)."""
    last_path = run_dir / "last.pt"
    if resume and not last_path.is_file():
        if not (run_dir / "config.yaml").is_file():
            raise RunError(run_dir, "--resume: not a training run (no config.yaml, no last.pt)")
        # both are written after the first last.pt (best.pt may be older: a kill between the two)
        trained = [n for n in ("model.pt", "metrics.jsonl") if (run_dir / n).is_file()]
        if trained:  # last.pt was there and is gone: starting over would overwrite what the run made
            raise RunError(
                run_dir,
                f"--resume: last.pt is missing but the run has {', '.join(trained)}: "
                "its training state is gone and cannot be continued exactly; train "
                "into a new --out (or delete this run to start it over)",
            )
        resume = False  # killed before its first checkpoint: nothing to continue, start over
    if not resume and last_path.is_file():
        raise FileExistsError(f"{last_path} exists: pass --resume to continue that run, or use another --out")
    # read before the data: a broken or foreign last.pt is reported at once (and never unpickled)
    return load_checkpoint(last_path) if resume else None


def training_state(
    cfg: TrainConfig, state: dict[str, Any], model: RetrievalModel, optimizer: Any, scheduler: Any
) -> dict[str, Any]:
    """What last.pt holds: the config, the loop's ``state``, the weights, the random states, the optimiser's."""
    return {
        "format": CHECKPOINT_FORMAT,
        "config": cfg.to_dict(),
        **state,
        "model": model.state_dict(),
        "rng": capture_rng_state(),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "scheduler": None if scheduler is None else scheduler.state_dict(),
        "optimizer_stage": state["stage_index"],
    }


def load_run_weights(model: RetrievalModel, checkpoint: dict[str, Any], last_path: Path) -> None:
    """Load last.pt's weights into ``model``; RunError when they do not fit its config."""
    try:
        model.load_state_dict(checkpoint["model"])
    except (RuntimeError, TypeError, ValueError, AttributeError, KeyError):
        raise RunError(
            last_path,
            f"the model weights do not fit the run's model config: {state_mismatch(model, checkpoint['model'])}",
        ) from None
