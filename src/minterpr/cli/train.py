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
from typing import TYPE_CHECKING

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
    if cfg.select_attribute_weight:
        try:
            weight, tried = choose_attribute_weight(cfg, result.model_path)
        except (ValueError, OSError) as exc:
            print(f"minterpr train: error while choosing the attribute weight: {exc}", file=sys.stderr)
            return 2
        table = ", ".join(f"w={w:g}: {r1:.1f}" for w, r1 in tried.items())
        print(f"attribute weight {weight:g} chosen on {cfg.selection_split} (R@1 after the last round: {table})")
    return 0


def choose_attribute_weight(cfg: "TrainConfig", model_path: Path) -> tuple[float, dict[float, float]]:
    """Pick the static score's attribute-evidence weight on the selection split; store it in model.pt.

    ``minterpr eval`` reads it back (checkpoint extra ``"scoring"``) unless ``--attribute-weight``
    overrides it. Returns the weight and R@1 after the last round for every candidate.
    """
    from minterpr.evaluation.static import select_attribute_weight
    from minterpr.index.neural_backend import NeuralBackend
    from minterpr.models import load_model, update_extra
    from minterpr.training.data import load_split
    from minterpr.training.trainer import resolve_device

    split = load_split(cfg.data, cfg.selection_split)  # the config refuses "test"
    device = resolve_device(cfg.device)
    backend = NeuralBackend(load_model(model_path, map_location=device), device=device,
                            batch_size=cfg.eval_batch_size)
    best, tried = select_attribute_weight(backend, split.samples, split.gallery, split.image_root,
                                          progress=cfg.progress)
    update_extra(model_path, {"scoring": best.to_dict(),
                              "scoring_selection": {"split": cfg.selection_split,
                                                    "r1_last_by_weight": {str(w): r1 for w, r1 in tried.items()}}})
    return best.attribute_weight, tried


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
