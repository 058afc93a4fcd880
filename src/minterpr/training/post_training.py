"""After training: calibrate the attribute probabilities and choose the attribute-evidence weight.

Both run on the selection split (never test) and are stored with the model as typed extras
(:class:`~minterpr.interaction.fitted.RunExtras`: ``"calibration"``, ``"scoring"``,
``"scoring_selection"``), which :func:`~minterpr.runtime.run.load_run` reads back; ``minterpr
train`` and ``minterpr demo`` run :func:`calibrate_and_choose_weight` after training. Loading a
model never imports this module.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from minterpr.interaction.fitted import CalibrationRecord, RunExtras, WeightSelection
from minterpr.runtime.run import load_run
from minterpr.training.config import TrainConfig

__all__ = ["calibrate_and_choose_weight"]


def label_aucs(probs: Any, targets: Any, mask: Any) -> dict[str, float]:
    """Label ("slot:value") -> ROC AUC (%) of ``probs`` against the annotated ``targets`` ((N, L) over
    ``ONTOLOGY.flat_labels()``); labels without positives or negatives are left out. Stored in the
    calibration record: the page does not show a label under ``MIN_LABEL_AUC`` as evidence.

    Example:
        >>> import numpy as np
        >>> from minterpr.language.ontology import ONTOLOGY
        >>> n, labels = 4, len(ONTOLOGY.flat_labels())
        >>> targets = np.zeros((n, labels)); targets[:2, 0] = 1
        >>> probs = np.zeros((n, labels)); probs[:, 0] = [0.9, 0.8, 0.1, 0.2]
        >>> mask = np.zeros((n, labels), bool); mask[:, 0] = True
        >>> label_aucs(probs, targets, mask)
        {'gender:male': 100.0}
    """
    from minterpr.evaluation.attribute_metrics import auc_scores
    from minterpr.interaction.explain import label_key
    from minterpr.language.ontology import ONTOLOGY

    scores = auc_scores(probs, targets, mask)
    return {
        label_key(slot, value): round(float(a), 2)
        for (slot, value), a in zip(ONTOLOGY.flat_labels(), scores)
        if a is not None
    }


def calibrate_and_choose_weight(cfg: TrainConfig, model_path: str | os.PathLike[str]) -> RunExtras:
    """The post-training step, on the selection split (never test), stored in ``model_path``:

    1. ``cfg.calibrate_attributes``: fit one temperature per attribute slot to the split's gallery
       labels (:mod:`minterpr.training.calibration`; the model's ``attribute_temperature``);
    2. ``cfg.select_attribute_weight``: pick the static score's attribute-evidence weight with
       the calibrated probabilities (extra ``"scoring"``, used by eval and sessions).

    The split is encoded once for both, from the run's feature caches when it has them
    (``minterpr.training.stages.encode_split``, as validation does). Returns the model's extras
    as now stored (those of a disabled step are as they were).
    """
    import torch

    from minterpr.evaluation.weight_selection import select_attribute_weight
    from minterpr.index.gallery_index import GalleryIndex
    from minterpr.models.io import save_model
    from minterpr.training.calibration import calibration_nll, fit_slot_temperatures
    from minterpr.training.data import attribute_targets, load_split
    from minterpr.training.stages import FeatureSource, encode_split

    split = load_split(cfg.data, cfg.selection_split)  # the config refuses "test"
    run = load_run(model_path, device=cfg.device)
    model, device = run.model, next(run.model.parameters()).device
    cache_dir = Path(cfg.cache_dir) if cfg.cache_dir else run.model_path.parent / "cache"  # as the trainer's
    source = FeatureSource(model, cfg, cache_dir, device, cfg.progress)
    encoded = encode_split(model, split, source, cfg.eval_batch_size)
    logits = encoded.gallery_attribute_logits  # (N, L)
    extras = run.extras
    if cfg.calibrate_attributes:
        targets, mask = attribute_targets(split.gallery)
        temperatures = fit_slot_temperatures(logits, targets, mask)
        model.set_attribute_temperature(temperatures)
        before, after = calibration_nll(logits, targets, mask), calibration_nll(logits, targets, mask, temperatures)
        with torch.inference_mode():
            calibrated = model.attribute_probabilities(torch.from_numpy(logits).to(device)).cpu().numpy()
        extras = dataclasses.replace(
            extras,
            calibration=CalibrationRecord(
                cfg.selection_split,
                dict(temperatures),
                float(sum(before.values())),
                float(sum(after.values())),
                label_aucs(calibrated, targets, mask),
            ),
        )
    if cfg.select_attribute_weight:
        with torch.inference_mode():
            probs = model.attribute_probabilities(torch.from_numpy(logits).to(device)).cpu().numpy()
        index = GalleryIndex(
            list(split.gallery), encoded.gallery_embeddings, attribute_probs=probs, root=str(split.image_root)
        )
        best, tried = select_attribute_weight(
            None, split.samples, split.gallery, split.image_root, index=index, queries=encoded.queries
        )
        extras = dataclasses.replace(
            extras,
            scoring=best,
            selection=WeightSelection(cfg.selection_split, {str(w): float(r1) for w, r1 in tried.items()}),
        )
    save_model(model, run.model_path, extra=extras.to_dict())
    return extras


def store_match_calibration(path: str | os.PathLike[str], record: Any) -> RunExtras:
    """Write a :class:`~minterpr.interaction.match.MatchCalibration` into the model at ``path``
    (a run directory's ``model.pt``, a model file, or an exported model directory's ``extras.json``;
    its weights and ``config.json`` untouched, so a shipped model's pin holds). Returns the extras
    as now stored.

    Example:
        >>> import tempfile
        >>> from minterpr.interaction.match import MatchCalibration
        >>> from minterpr.models import create_model, save_model
        >>> run_dir = Path(tempfile.mkdtemp())
        >>> save_model(create_model("tiny"), run_dir / "model.pt", extra={"epoch": 2})
        >>> record = MatchCalibration("val", 0.05, 10, 40, 3.0, 2.5, 0.2, 0.05, {"simulator": "oracle"})
        >>> store_match_calibration(run_dir, record).match.temperature, load_run(run_dir).extras.other
        (0.05, {'epoch': 2})
    """
    return store_record(path, record)


def store_presence_model(path: str | os.PathLike[str], record: Any) -> RunExtras:
    """Write a :class:`~minterpr.interaction.presence.PresenceModel` into the model at ``path``,
    as :func:`store_match_calibration` writes its record (extra ``"presence_model"``).

    Example:
        >>> import tempfile
        >>> from minterpr.interaction.presence import FEATURE_NAMES, PresenceModel
        >>> from minterpr.models import create_model, save_model
        >>> run_dir = Path(tempfile.mkdtemp())
        >>> save_model(create_model("tiny"), run_dir / "model.pt", extra={"epoch": 2})
        >>> record = PresenceModel("val", dict.fromkeys(FEATURE_NAMES, 0.5), 1.0, 0.3, 10, 40, 90.0, 5.0, {})
        >>> store_presence_model(run_dir, record).presence.threshold, load_run(run_dir).extras.other
        (0.3, {'epoch': 2})
    """
    return store_record(path, record)


def store_record(path: str | os.PathLike[str], record: Any) -> RunExtras:
    """Store a fitted ``record`` (any class of :data:`~minterpr.interaction.fitted.RECORDS`) with the
    model at ``path``, under its row's key, the rest of the extras unchanged; TypeError for an object
    that is not such a record."""
    row = RunExtras.row_of(record)
    import json

    from minterpr.fileio import atomic_write_text
    from minterpr.models.io import update_extra
    from minterpr.models.model_dir import EXTRAS_FILE
    from minterpr.runtime.run import model_path_of

    model_path, _ = model_path_of(path)
    extras = dataclasses.replace(load_run(model_path).extras, **{row.field: record})
    if model_path.is_dir():  # an exported model directory: its extras are a JSON file beside the weights
        target = model_path / EXTRAS_FILE
        mode = target.stat().st_mode & 0o777
        atomic_write_text(target, json.dumps(extras.to_dict(), indent=1, sort_keys=True) + "\n")
        os.chmod(target, mode)
    else:
        update_extra(model_path, {row.key: record.to_dict()})
    return extras
