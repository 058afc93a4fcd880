"""``minterpr adapt``: adapt a trained model to a new site from its unlabelled crops.

``--method bn`` (the default) re-estimates the image encoder's BatchNorm statistics on the
crops (AdaBN: one forward pass, no training; on PETA's left-out camera sets it was the only
method that helped, docs/benchmarks.md). ``--method pseudo``: the model answers the ontology's
questions for every crop of ``--images`` itself, keeps the answers it is sure of
(``--confidence``) and fine-tunes its image side on them (:mod:`minterpr.training.adaptation`),
optionally beside the labelled training images of its own dataset (``--source DATASET_DIR``:
keeps it from drifting; its val split then selects the epoch); ``bn+pseudo`` does both.
``--method self-train``: a mean teacher (an average of the model being trained) keeps labelling
weakly augmented crops while the model learns its confident answers from strongly augmented
ones (:mod:`minterpr.training.self_training`); the teacher is the result. ``--images`` is a folder
of crops or a gallery store (``minterpr index build`` / ``ingest`` output: its images). The
adapted model goes to ``OUT/model.pt`` with the run's scoring and calibration and an
``adaptation`` record (method, crops kept, share of each slot answered, settings). A killed
fine-tuning resumes when given the same arguments.

Example:
    $ minterpr adapt --run runs/peta --images /footage/site7/crops --out runs/peta_site7
    $ minterpr adapt --run runs/peta --method self-train --images stores/site7 --out runs/peta_site7_st
    $ minterpr eval-attributes --run runs/peta_site7 --gallery site7_labelled/gallery.jsonl --json -
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

from minterpr.cli.shared.common import add_common_options, show_progress, write_json

COMMAND = "minterpr adapt"
ADAPTATION_METHODS = ("bn", "pseudo", "bn+pseudo", "self-train")
DEFAULT_CONFIDENCE = {"self-train": 0.8}  # the teacher keeps labelling, so it may be less sure; others 0.9
log = logging.getLogger(__name__)


def run(args: argparse.Namespace) -> int:
    import torch

    from minterpr.errors import InputError
    from minterpr.models import save_model
    from minterpr.runtime.run import load_run
    from minterpr.training.adaptation import AdaptationConfig, adapt_batch_norm
    from minterpr.training.labelled_images import decode_images, resize_like
    from minterpr.types import GalleryImage

    images_dir, out = Path(args.images), Path(args.out)
    if not images_dir.is_dir():
        raise InputError(f"--images {images_dir}: not a folder of crops or a gallery store")
    confidence = args.confidence if args.confidence is not None else DEFAULT_CONFIDENCE.get(args.method, 0.9)
    if (out / "model.pt").exists():
        raise InputError(f"--out {out} already holds a model.pt: choose another folder")
    if args.epochs < 1:
        raise InputError(f"--epochs must be >= 1, got {args.epochs}")
    try:
        base = AdaptationConfig(confidence=confidence)
    except ValueError as err:
        raise InputError(f"--confidence: {err}") from None
    config = dataclasses.replace(base, tuning=dataclasses.replace(base.tuning, epochs=args.epochs))
    trained = load_run(args.run, device=args.device)
    model = trained.model
    crops_root, crops = _crops(images_dir)
    progress = show_progress(args)
    pixels = decode_images(
        [GalleryImage(path=p, person_id="unlabelled") for p in crops],
        crops_root,
        tuple(model.preprocess.size),
        resize_like(model.preprocess),
        desc="adapt: decoding crops",
        progress=progress,
    )
    bn_layers = adapt_batch_norm(model, pixels) if "bn" in args.method else 0
    if bn_layers:
        log.info("%s: BatchNorm statistics of %d layers re-estimated on %d crops", COMMAND, bn_layers, len(crops))
    stats, record = None, {}
    if args.method == "self-train":
        record = _self_train(args, model, pixels, crops, confidence, out)
    if "pseudo" in args.method:
        stats, record = _fine_tune_on_pseudo_labels(args, model, pixels, crops, config, images_dir, out, progress)
        if bn_layers:  # fine-tuning's training mode mixed both sites' statistics: the new site's again
            adapt_batch_norm(model, pixels)
    model.image_encoder.freeze(model._frozen_stages(model.config.frozen_image_stages))
    model.eval()
    extra = trained.extras.to_dict()
    extra["adaptation"] = {
        "method": args.method,
        "images": str(images_dir),
        "crops": len(crops),
        "batch_norm_layers": bn_layers,
        "source": args.source,
        "confidence": config.confidence if stats or record.get("self_training") else None,
        "epochs": args.epochs if stats or record.get("self_training") else 0,
        "self_training": record.get("self_training"),
        "pseudo_labels": stats.to_dict() if stats else None,
        "best": record.get("best"),
        "base_run": str(trained.model_path),
    }
    out.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        save_model(model, out / "model.pt", extra=extra)
    write_json(args.json, json.dumps(extra["adaptation"], indent=2))
    log.info("%s: wrote %s", COMMAND, out / "model.pt")
    return 0


def _crops(images: Path) -> tuple[Path, list[str]]:
    """``--images``: a folder of crops (recursive) or a gallery store (its images) -> (root, paths relative to it)."""
    from minterpr.errors import InputError
    from minterpr.index.store.gallery_store import MANIFEST, open_gallery
    from minterpr.training.adaptation import list_crops

    if not (images / MANIFEST).is_file():
        crops = list_crops(images)
        if not crops:
            raise InputError(f"--images {images}: no image files (.jpg, .png, .bmp, .webp) found")
        return images, crops
    index = open_gallery(images, fused=False).index
    root = Path(index.root) if index.root else images
    crops = [image.path for image in index.images if (root / image.path).is_file()]
    if not crops:
        raise InputError(f"--images {images}: none of the gallery store's {len(index.images)} images is under {root}")
    if len(crops) < len(index.images):
        log.warning(
            "%s: %d of the store's %d images are missing under %s; adapting on the rest",
            COMMAND,
            len(index.images) - len(crops),
            len(index.images),
            root,
        )
    return root, crops


def _self_train(
    args: argparse.Namespace,
    model,
    pixels,
    crops: list[str],
    confidence: float,  # noqa: ANN001
    out: Path,
) -> dict[str, Any]:
    """Mean-teacher self-training on the crops (resumable in OUT/self_training)."""
    from minterpr.errors import InputError
    from minterpr.training.self_training import SelfTrainer, SelfTrainingConfig

    try:
        config = SelfTrainingConfig(epochs=args.epochs, confidence=confidence)
    except ValueError as err:
        raise InputError(f"--confidence/--epochs: {err}") from None
    log.info(
        "%s: self-training on %d crops for %d epochs (mean teacher, confidence %.2f)",
        COMMAND,
        len(crops),
        config.epochs,
        confidence,
    )
    trainer = SelfTrainer(
        model, config, out / "self_training", pixels=pixels, paths=crops, seed=args.seed, log=log.info
    )
    return {"self_training": trainer.run()}


def _fine_tune_on_pseudo_labels(
    args: argparse.Namespace,
    model,
    pixels,
    crops: list[str],
    config,  # noqa: ANN001
    images_dir: Path,
    out: Path,
    progress: bool,
) -> tuple[Any, dict[str, Any]]:
    """Pseudo-label the crops with ``model`` and fine-tune its image side on them (+ ``--source``)."""
    from minterpr.data.dataset import BuiltDataset
    from minterpr.errors import InputError
    from minterpr.training.adaptation import pseudo_labelled
    from minterpr.training.image_tuning import ImageTuner
    from minterpr.training.labelled_images import concat_labelled, labelled_images, predict_probabilities

    probs = predict_probabilities(model, pixels)
    target, stats = pseudo_labelled(pixels, probs, crops, config.confidence)
    if len(target) == 0:
        raise InputError(
            f"the model is sure of nothing in {images_dir} at --confidence {config.confidence}: lower it (e.g. 0.8)"
        )
    parts, val = [target], None
    if args.source:
        source = Path(args.source)
        train_images = [i for i in BuiltDataset(source).gallery("train") if i.attributes]
        parts.append(labelled_images(train_images, source, model, {}, desc="adapt: decoding source", progress=progress))
        val_images = [i for i in BuiltDataset(source).gallery("val") if i.attributes]
        val = labelled_images(val_images, source, model, {}, desc="adapt: decoding source val", progress=progress)
    log.info(
        "%s: %d of %d crops have a confident answer; fine-tuning on %d images for %d epochs",
        COMMAND,
        stats.kept,
        stats.images,
        sum(len(p) for p in parts),
        config.tuning.epochs,
    )
    out.mkdir(parents=True, exist_ok=True)
    tuner = ImageTuner(
        model,
        config.tuning,
        out / "adaptation",
        train=concat_labelled(parts),
        val=val,
        seed=args.seed,
        balanced_attributes=True,
        progress=progress,
        log=log.info,
    )
    return stats, tuner.run()


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "adapt",
        help="adapt a trained model to a new site from unlabelled crops",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--run", required=True, help="trained run directory (model.pt) or model file")
    parser.add_argument(
        "--images",
        required=True,
        help="folder of unlabelled crops from the new site (recursive), or a gallery store (its images)",
    )
    parser.add_argument("--out", required=True, help="folder for the adapted model.pt (and its resumable state)")
    parser.add_argument(
        "--source",
        help="the run's dataset folder: its labelled train images join the fine-tuning, "
        "its val split selects the epoch",
    )
    parser.add_argument(
        "--method",
        choices=ADAPTATION_METHODS,
        default="bn",
        help="bn: re-estimate BatchNorm statistics on the crops (AdaBN, no training; default); "
        "pseudo: fine-tune on confident self-answers; bn+pseudo: both; "
        "self-train: a mean teacher's confident answers, relabelled as the model learns",
    )
    parser.add_argument(
        "--confidence", type=float, default=None, help="keep answers at least this sure (default 0.9; self-train: 0.8)"
    )
    parser.add_argument("--epochs", type=int, default=2, help="fine-tuning epochs (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(handler=run)
    add_common_options(
        parser,
        device=True,
        json=True,
        needs=("model",),
        json_help="write the adaptation record to PATH ('-' or no value: to stdout)",
    )
