"""A training run's image tuning: which labelled images it tunes on, handed to the tuner.

The run's training gallery (its labelled images, up to ``data.max_train_samples``) and the config's
``extra_galleries`` are tuned on, the val split selects; :mod:`minterpr.training.image_tuning` does the tuning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from minterpr.data.dataset import SplitData
from minterpr.models import RetrievalModel

from .config import TrainConfig
from .data import load_split
from .image_tuning import ImageTuner
from .labelled_images import concat_labelled, extra_gallery, labelled_images


def tune_run_images(
    cfg: TrainConfig,
    model: RetrievalModel,
    train_split: SplitData,
    val_split: SplitData | None,
    identities: dict[str, int],
    run_dir: Path,
    *,
    progress: bool,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Fine-tune ``model``'s image side in RUN_DIR/image_tuning (resumable on its own); returns the tuning record."""
    tuning = cfg.image_tuning
    assert tuning is not None
    limit = cfg.data.max_train_samples
    gallery = train_split.gallery[:limit] if limit > 0 else train_split.gallery
    parts = [
        labelled_images(
            [i for i in gallery if i.attributes],
            train_split.image_root,
            model,
            identities,
            desc="image tuning: decoding train",
            progress=progress,
        )
    ]
    for spec in tuning.extra_galleries:
        images, root = extra_gallery(spec)
        parts.append(labelled_images(images, root, model, {}, desc=f"image tuning: decoding {spec}", progress=progress))
    train = concat_labelled(parts)
    val_split = val_split or load_split(cfg.data, "val", cfg.data.max_val_samples)
    val = labelled_images(
        [i for i in val_split.gallery if i.attributes],
        val_split.image_root,
        model,
        identities,
        desc="image tuning: decoding val",
        progress=progress,
    )
    log(
        f"image tuning: {len(train)} labelled images ({len(parts) - 1} extra galleries), "
        f"{len(val)} val images, {tuning.epochs} epochs"
    )
    tuner = ImageTuner(
        model,
        tuning,
        run_dir / "image_tuning",
        train=train,
        val=val,
        seed=cfg.seed,
        balanced_attributes=cfg.loss_weights.balanced_attributes,
        progress=progress,
        log=log,
    )
    return tuner.run()
