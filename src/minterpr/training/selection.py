"""Model selection: which validated epoch a run keeps (``best.pt``) and the model it ends with (``model.pt``).

Each validated epoch is scored on the config's ``selection_metric``; the best one so far is saved to
RUN_DIR/best.pt, and model.pt is a copy of it, or the last weights when nothing was validated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from minterpr.models import RetrievalModel, save_model

from .checkpoint import copy_atomic
from .config import parse_selection_metric


class ModelSelection:
    """Scores validation metrics on ``selection_metric`` and keeps RUN_DIR/best.pt and model.pt.

    Example:
        >>> selection = ModelSelection("r1@0", Path("runs/x"))
        >>> selection.value({"rounds": [{"r1": 40.0}, {"r1": 55.0}], "bri": 0.3})
        40.0
    """

    def __init__(self, metric: str, run_dir: Path) -> None:
        self.metric, self.run_dir = metric, run_dir
        self.key, self.where, self.higher = parse_selection_metric(metric)

    def value(self, metrics: dict[str, Any]) -> float:
        """The selection metric's value in validation ``metrics``."""
        if self.key == "bri":
            return float(metrics["bri"])
        rounds = metrics["rounds"]
        return float(rounds[-1 if self.where is None else min(self.where, len(rounds) - 1)][self.key])

    def judge(
        self, model: RetrievalModel, metrics: dict[str, Any], best: dict[str, Any] | None, epoch: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The epoch record's validation fields, and the new best when the epoch (``{"stage", "stage_index",
        "epoch"}``) beats ``best`` (its weights then saved to best.pt), else None."""
        value = self.value(metrics)
        improved = best is None or (value > best["value"] if self.higher else value < best["value"])
        kept = {"rounds": metrics["rounds"], "bri": metrics["bri"]}
        fields = {"val": kept, "selection": {self.metric: value}, "best": improved}
        if not improved:
            return fields, None
        best = {**epoch, "value": value, "metrics": dict(kept)}
        save_model(model, self.run_dir / "best.pt", extra={**best, "selection_metric": self.metric})
        return fields, best

    def finish(self, model: RetrievalModel, best: dict[str, Any] | None, last_stage: str) -> str:
        """Write RUN_DIR/model.pt (best.pt, else the last weights); returns what was chosen, in words."""
        model_path = self.run_dir / "model.pt"
        if best is not None:
            copy_atomic(self.run_dir / "best.pt", model_path)
            return f"best {self.metric}={best['value']:.3f} at {best['stage']} epoch {best['epoch'] + 1}"
        save_model(model, model_path, extra={"stage": last_stage, "selected": "last"})
        return "last weights: nothing was validated"
