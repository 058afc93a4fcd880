"""``minterpr eval-attributes``: pedestrian attribute recognition (PAR) of a trained model.

Encodes the labelled images of a gallery manifest with the run's image tower, reads the
attribute head's (calibrated) probabilities, and reports what Jia et al. 2021 report: label
mA, instance accuracy / precision / recall / F1, a per-label table, and per slot the head's
most probable value against always answering the majority value
(:mod:`minterpr.evaluation.attribute_metrics`; the JSON shape is in docs/attributes.md).
Images whose ``attributes`` are null count nowhere and are not encoded.

Thresholds: ``--thresholds 0.5`` (default; any number in (0, 1)) predicts a label when
p > that number; ``--thresholds val`` fits one threshold per label on a *validation* gallery
(``--val-gallery``, default ``gallery_val.jsonl`` beside ``--gallery``) and applies them to
``--gallery``; the two must be different files.

Slot answers: with a per-slot answer calibration stored with the model (``minterpr calibrate
slots``), the report adds ``slot_answers``: per slot the raw most probable value's accuracy, the
calibrated answer's (unsure counts as the stored majority value), the share answered and the
majority baseline, and their means (the table's last line).

Example:
    $ minterpr eval-attributes --run runs/peta --gallery data/peta/gallery_test.jsonl --json peta_attrs.json
    $ minterpr eval-attributes --run runs/peta --gallery data/pa100k/gallery_test.jsonl --json - --quiet
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from minterpr.cli.shared.common import STDOUT, add_common_options, show_progress, write_json
from minterpr.cli.shared.model_options import RUN_HELP, add_batch_size_argument, load_pipeline_of

log = logging.getLogger(__name__)

COMMAND = "minterpr eval-attributes"


def thresholds_arg(text: str) -> float | str:
    """``val`` or a number strictly between 0 and 1 (argparse type)."""
    if text == "val":
        return text
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number between 0 and 1 (e.g. 0.5) or 'val'")
    return value


def run(args: argparse.Namespace) -> int:
    from minterpr.errors import MinterprError

    try:
        return _run(args)
    except (BrokenPipeError, MinterprError):  # the console command reports these (one line, exit 2)
        raise
    except (ValueError, OSError) as exc:  # a missing manifest, an unwritable --json
        print(f"{COMMAND}: error: {exc}", file=sys.stderr)
        return 2


def _labelled_probs(backend: Any, manifest: Path, image_root: str, progress: bool) -> tuple[list, Any]:
    """(labelled images, (N, L) probabilities) of one gallery manifest; every image must be read."""
    import numpy as np

    from minterpr.data.build import check_if_built
    from minterpr.data.formats.gallery import read_gallery
    from minterpr.errors import InputError

    if not manifest.is_file():
        raise InputError(f"{manifest}: no such gallery manifest (a dataset's gallery_<split>.jsonl)")
    check_if_built(manifest.parent)  # a dataset minterpr built must be finished and unchanged
    images = [image for image in read_gallery(manifest) if image.attributes]
    if not images:
        raise InputError(
            f"{manifest}: no image has attribute labels (every 'attributes' is null or empty): nothing to evaluate"
        )
    index = backend.index_images(images, root=image_root, progress=progress)
    index.require_complete(f"{COMMAND} ({manifest})")
    if index.attribute_probs is None:
        raise InputError("the model has no attribute head: nothing to evaluate")
    return index.images, np.asarray(index.attribute_probs, dtype=np.float64)


def _run(args: argparse.Namespace) -> int:
    from minterpr.data.layout import gallery_file
    from minterpr.errors import InputError
    from minterpr.evaluation.attribute_metrics import attribute_metrics, format_attribute_table
    from minterpr.evaluation.attribute_thresholds import balanced_thresholds

    gallery = Path(args.gallery)
    trained = load_pipeline_of(args, batch_size=args.batch_size)  # first: a broken run fails before the data is read
    backend = trained.backend
    backend.allow_outside_root = args.allow_outside_root
    root = args.image_root or str(gallery.parent)
    protocol: dict[str, Any] = {
        "gallery": str(gallery),
        "image_root": root,
        "model": str(trained.model_path),
        "image_encoder": trained.model.config.image_encoder,
        "selected": trained.extras.model_selection(),
        "calibrated_on": trained.extras.calibration.split if trained.extras.calibration else None,
    }
    threshold: Any = args.thresholds
    if args.thresholds == "val":
        val = Path(args.val_gallery) if args.val_gallery else gallery.with_name(gallery_file("val"))
        if not val.is_file():
            raise InputError(f"--thresholds val: {val}: no such validation gallery (give one with --val-gallery)")
        if val.resolve() == gallery.resolve():
            raise InputError(
                f"--thresholds val: {val} is the gallery being evaluated; thresholds fitted on it "
                "would see the answers: use a validation split (--val-gallery)"
            )
        val_root = args.val_image_root or args.image_root or str(val.parent)
        val_images, val_probs = _labelled_probs(backend, val, val_root, show_progress(args))
        threshold = balanced_thresholds(val_probs, val_images)
        protocol["thresholds"] = {"mode": "val", "val_gallery": str(val), "val_images": len(val_images)}
    else:
        protocol["thresholds"] = {"mode": "fixed", "value": threshold}
    images, probs = _labelled_probs(backend, gallery, root, show_progress(args))
    result = attribute_metrics(probs, images, threshold)
    report = {"protocol": protocol, **result.to_dict()}
    table = format_attribute_table(result, title=f"{gallery} ({Path(args.run).name})")
    if trained.extras.slot_answers is not None:
        report["slot_answers"], line = _slot_answers(trained.extras.slot_answers, probs, images)
        table += "\n" + line
    print(table)  # to stderr with --json - (the JSON alone on stdout)
    if write_json(args.json, json.dumps(report, indent=2, allow_nan=False)) not in (None, STDOUT):
        log.info("wrote %s", args.json)
    return 0


def _slot_answers(record: Any, probs: Any, images: list) -> tuple[dict[str, Any], str]:
    """The report's ``slot_answers`` and its table line: raw against calibrated slot answers."""
    import dataclasses

    from minterpr.evaluation.attribute_metrics import attribute_targets
    from minterpr.interaction.slot_answers import mean_scores, score_slot_answers

    scores = score_slot_answers(record, probs, *attribute_targets(images))
    mean = mean_scores(scores)
    line = (
        "no slot of the calibration is labelled here"
        if not scores
        else f"slot answers (calibrated on {record.split}): mean slot accuracy raw {mean['raw']:.1f}, calibrated "
        f"{mean['calibrated']:.1f} ({mean['answered']:.1f} % answered, the rest unsure), majority "
        f"{mean['majority']:.1f} over {mean['slots']} slots"
    )
    return {
        "fitted_on": record.split,
        "mean": mean,
        "slots": {slot: dataclasses.asdict(score) for slot, score in scores.items()},
    }, line


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval-attributes",
        help="attribute recognition: mA, instance F1, per slot",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--run", required=True, metavar="RUN", help=RUN_HELP)
    parser.add_argument(
        "--gallery", required=True, metavar="GALLERY.jsonl", help="gallery manifest whose labelled images are evaluated"
    )
    parser.add_argument(
        "--image-root", metavar="ROOT", help="image paths resolve here (default: the manifest's folder)"
    )
    parser.add_argument(
        "--thresholds",
        type=thresholds_arg,
        default=0.5,
        metavar="0.5|val",
        help="p > T predicts a label (default 0.5), or 'val': per-label thresholds "
        "maximising (TPR+TNR)/2 on the validation gallery",
    )
    parser.add_argument(
        "--val-gallery",
        metavar="GALLERY.jsonl",
        help="validation gallery for --thresholds val (default: gallery_val.jsonl beside --gallery)",
    )
    parser.add_argument(
        "--val-image-root",
        metavar="ROOT",
        help="image root of --val-gallery (default: as --image-root, else its folder)",
    )
    add_batch_size_argument(parser, "images")
    parser.add_argument(
        "--allow-outside-root",
        action="store_true",
        help="read image paths that leave the image root (../x.jpg, absolute paths)",
    )
    parser.set_defaults(handler=run)
    add_common_options(
        parser,
        device=True,
        json=True,
        needs=("model",),
        json_help="write the report to PATH ('-' or no value: to stdout, the table to stderr)",
    )
