"""``minterpr train``: train a retrieval model with progressive stages (see minterpr.training).

The config is a YAML path or a shipped name (tiny, synthetic, synthetic_baseline, peta, clip);
``--set key.path=value`` overrides any field (``--set stages.2.epochs=3``,
``--set stages=[attributes,alignment]``) and ``--data DIR`` sets ``data.root``.
``--resume`` continues RUN_DIR exactly where it stopped (the config then defaults to the run's
own RUN_DIR/config.yaml; only progress, workers, log_every and device may change). ``--device``
is ``--set device=...``; ``--quiet`` is ``--set progress=false`` (no progress bars, no console
log lines; RUN_DIR/train.log is written either way).

Example:
    $ minterpr train --config synthetic --data data/synth --out runs/synth
    $ minterpr train --out runs/synth --resume
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from minterpr.cli.shared.common import add_common_options
from minterpr.cli.shared.model_options import describe_choices
from minterpr.errors import InputError


def train_config(args: argparse.Namespace):  # -> TrainConfig
    from minterpr.training.config import load_config

    overrides = list(args.set or [])
    if getattr(args, "device", None) is not None:  # as --set device=...: validated with the config
        overrides.append(f"device={args.device}")
    if getattr(args, "quiet", False):  # no progress bars (as --set progress=false)
        overrides.append("progress=false")
    if args.config is not None:
        cfg = load_config(args.config, overrides)  # on --resume, the trainer checks it matches the run's
    else:
        saved = Path(args.out) / "config.yaml"
        if not args.resume:
            raise InputError("--config is required (a YAML file or one of the shipped names)")
        if not saved.is_file():
            raise FileNotFoundError(f"--resume without --config needs {saved}")
        cfg = load_config(saved, overrides)
    if args.data:  # not through YAML (a folder named "2024" stays a string); absolute, so --resume works anywhere
        cfg.data.root = str(Path(args.data).resolve())
    return cfg


def _reid_task(args: argparse.Namespace) -> bool:
    """True when the config (or, on --resume without one, the run's own) declares ``task: reid``."""
    from minterpr.training.reid_config import TASK, read_task

    source = args.config if args.config is not None else Path(args.out) / "config.yaml"
    if args.config is None and not Path(source).is_file():
        return False  # train_config explains what is missing
    return read_task(source) == TASK


def _run_reid(args: argparse.Namespace) -> int:
    from minterpr.training.reid import train_reid_from_file

    overrides = [] if args.resume and args.config is None else list(args.set or [])
    if getattr(args, "device", None) is not None:  # may change on --resume, as for the retrieval model
        overrides.append(f"device={args.device}")
    result = train_reid_from_file(args.config, args.out, overrides, resume=args.resume)
    print(
        f"model: {result.run_dir / 'best.pt'} (epoch {result.best_epoch + 1}: val rank-1 "
        f"{result.best.get('rank1', 0):.1f}, mAP {result.best.get('mAP', 0):.1f})"
    )
    print(f"reid: {result.images_per_second:.1f} training crops/s")
    return 0


def run(args: argparse.Namespace) -> int:
    from minterpr.training.config import ConfigError
    from minterpr.training.trainer import train

    try:
        if _reid_task(args):
            return _run_reid(args)
        cfg = train_config(args)
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
        from minterpr.training.post_training import calibrate_and_choose_weight

        try:
            extras = calibrate_and_choose_weight(cfg, result.model_path)
        except BrokenPipeError:
            raise
        except (ValueError, OSError) as exc:
            print(f"minterpr train: error while calibrating on {cfg.selection_split}: {exc}", file=sys.stderr)
            return 2
        print(describe_choices(extras))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a retrieval model (progressive stages)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config",
        metavar="FILE_OR_NAME",
        help="YAML config file or shipped name (tiny, synthetic, synthetic_baseline, peta, clip)",
    )
    parser.add_argument("--out", required=True, metavar="RUN_DIR", help="run directory (checkpoints, logs, model.pt)")
    parser.add_argument("--resume", action="store_true", help="continue RUN_DIR from its last checkpoint")
    parser.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a config field (repeatable), e.g. --set stages.0.epochs=2",
    )
    parser.add_argument("--data", metavar="DIR", help="dataset directory (sets data.root)")
    parser.set_defaults(handler=run)
    add_common_options(parser, device=True, device_default=None, needs=("model",))
