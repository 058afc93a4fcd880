"""``minterpr train``: train a retrieval model with progressive stages (see minterpr.training).

The config is a YAML path or a shipped name (tiny, synthetic, synthetic_baseline, peta);
``--set key.path=value`` overrides any field (``--set stages.2.epochs=3``,
``--set stages=[attributes,alignment]``) and ``--data DIR`` sets ``data.root``.
``--resume`` continues RUN_DIR exactly where it stopped (the config then defaults to the run's
own RUN_DIR/config.yaml; only progress, workers, log_every and device may change).

Example:
    $ minterpr train --config synthetic --data data/synth --out runs/synth
    $ minterpr train --out runs/synth --resume
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI imports torch-heavy modules only when a command runs
    from minterpr.training.config import TrainConfig


def _load(args: argparse.Namespace):  # -> TrainConfig
    from minterpr.training.config import load_config

    overrides = list(args.set or [])
    if args.config is not None:
        cfg = load_config(args.config, overrides)  # on --resume, the trainer checks it matches the run's
    else:
        saved = Path(args.out) / "config.yaml"
        if not args.resume:
            raise ValueError("--config is required (a YAML file or one of the shipped names)")
        if not saved.is_file():
            raise FileNotFoundError(f"--resume without --config needs {saved}")
        cfg = load_config(saved, overrides)
    if args.data:  # not through YAML (a folder named "2024" stays a string); absolute, so --resume works anywhere
        cfg.data.root = str(Path(args.data).resolve())
    return cfg


def run(args: argparse.Namespace) -> int:
    from minterpr.training.config import ConfigError
    from minterpr.training.trainer import train

    try:
        cfg = _load(args)
        result = train(cfg, args.out, resume=args.resume)
    except BrokenPipeError:  # `minterpr ... | head`: the console command handles it
        raise
    except (ConfigError, ValueError, OSError) as exc:
        print(f"minterpr train: error: {exc}", file=sys.stderr)
        return 2
    if os.environ.get("RANK", "0") != "0":  # under torchrun only rank 0 reports
        return 0
    best = result.best
    print(f"model: {result.model_path}")
    if best is not None:
        print(f"best {cfg.selection_metric} = {best['value']:.2f} (stage {best['stage']}, epoch {best['epoch'] + 1})")
    for stage, rate in result.samples_per_second.items():
        print(f"{stage}: {rate:.1f} training samples/s")
    if cfg.calibrate_attributes or cfg.select_attribute_weight:
        try:
            chosen = calibrate_and_choose_weight(cfg, result.model_path)
        except (ValueError, OSError) as exc:
            print(f"minterpr train: error while calibrating on {cfg.selection_split}: {exc}", file=sys.stderr)
            return 2
        print(describe_choices(chosen, cfg.selection_split))
    return 0


def calibrate_and_choose_weight(cfg: "TrainConfig", model_path: Path) -> dict[str, Any]:
    """After training, on the selection split (never test), and stored in model.pt:

    1. ``cfg.calibrate_attributes``: fit one temperature per attribute slot to the split's gallery
       labels (:mod:`minterpr.training.calibration`; the model's ``attribute_temperature``);
    2. ``cfg.select_attribute_weight``: pick the static score's attribute-evidence weight with
       the calibrated probabilities (checkpoint extra ``"scoring"``, read by ``minterpr eval``
       unless ``--attribute-weight`` overrides it).

    The split is encoded once for both, from the run's feature caches when it has them
    (``minterpr.training.stages.encode_split``, as validation does). Returns the extras written
    (``"calibration"``, ``"scoring"``, ``"scoring_selection"``; those of a disabled step are absent).
    """
    import torch

    from minterpr.evaluation.static import select_attribute_weight
    from minterpr.index.gallery_index import GalleryIndex
    from minterpr.models.io import model_from_checkpoint, read_checkpoint, save_model
    from minterpr.training.calibration import calibration_nll, fit_slot_temperatures
    from minterpr.training.data import attribute_targets, load_split
    from minterpr.training.stages import FeatureSource, encode_split
    from minterpr.training.trainer import resolve_device

    split = load_split(cfg.data, cfg.selection_split)  # the config refuses "test"
    device = resolve_device(cfg.device)
    payload = read_checkpoint(model_path, map_location=device)
    model = model_from_checkpoint(payload, map_location=device)
    cache_dir = Path(cfg.cache_dir) if cfg.cache_dir else Path(model_path).parent / "cache"  # as the trainer's
    source = FeatureSource(model, cfg, cache_dir, device, cfg.progress)
    encoded = encode_split(model, split, source, cfg.eval_batch_size)
    logits = encoded.gallery_attribute_logits  # (N, L)
    chosen: dict[str, Any] = {}
    if cfg.calibrate_attributes:
        targets, mask = attribute_targets(split.gallery)
        temperatures = fit_slot_temperatures(logits, targets, mask)
        model.set_attribute_temperature(temperatures)
        before, after = calibration_nll(logits, targets, mask), calibration_nll(logits, targets, mask, temperatures)
        chosen["calibration"] = {"split": cfg.selection_split, "temperatures": temperatures,
                                 "nll_before": sum(before.values()), "nll_after": sum(after.values())}
    if cfg.select_attribute_weight:
        with torch.inference_mode():
            probs = model.attribute_probabilities(torch.from_numpy(logits).to(device)).cpu().numpy()
        index = GalleryIndex(list(split.gallery), encoded.gallery_embeddings, attribute_probs=probs,
                             root=str(split.image_root))
        best, tried = select_attribute_weight(None, split.samples, split.gallery, split.image_root,
                                              index=index, queries=encoded.queries)
        chosen["scoring"] = best.to_dict()
        chosen["scoring_selection"] = {"split": cfg.selection_split,
                                       "r1_last_by_weight": {str(w): r1 for w, r1 in tried.items()}}
    save_model(model, model_path, extra={**payload["extra"], **chosen})
    return chosen


def describe_choices(chosen: dict[str, Any], split: str) -> str:
    """One line per choice of :func:`calibrate_and_choose_weight`, for the console."""
    lines = []
    if "calibration" in chosen:
        c = chosen["calibration"]
        lines.append(f"attribute temperatures fitted on {split}: summed slot NLL {c['nll_before']:.2f} -> "
                     f"{c['nll_after']:.2f} ({len(c['temperatures'])} slots)")
    if "scoring" in chosen:
        table = ", ".join(f"w={w}: {r1:.1f}" for w, r1 in chosen["scoring_selection"]["r1_last_by_weight"].items())
        lines.append(f"attribute weight {chosen['scoring']['attribute_weight']:g} chosen on {split} "
                     f"(R@1 after the last round: {table})")
    return "\n".join(lines)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("train", help="train a retrieval model (progressive stages)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", metavar="FILE_OR_NAME",
                        help="YAML config file or shipped name (tiny, synthetic, synthetic_baseline, peta)")
    parser.add_argument("--out", required=True, metavar="RUN_DIR", help="run directory (checkpoints, logs, model.pt)")
    parser.add_argument("--resume", action="store_true", help="continue RUN_DIR from its last checkpoint")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="override a config field (repeatable), e.g. --set stages.0.epochs=2")
    parser.add_argument("--data", metavar="DIR", help="dataset directory (sets data.root)")
    parser.set_defaults(handler=run)
