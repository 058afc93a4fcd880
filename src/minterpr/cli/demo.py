"""``minterpr demo``: the whole system end to end on the synthetic world, cached between runs.

1. builds a small synthetic world and its dialogues (skipped when already built),
2. trains the default model on it (skipped when already trained with the same settings),
3. runs the online evaluation: simulated users answer questions and judge reference images for
   five rounds; prints the per-round table, a policy comparison and the plot's path.
"""
from __future__ import annotations

import argparse
import json
import os
import logging
import shutil
import sys
import time
from pathlib import Path

from minterpr.cli.common import STDOUT, add_common_options, show_progress, write_json

log = logging.getLogger(__name__)

# Small enough to build, train and evaluate in a few minutes on 2 CPU cores.
DEMO_IDENTITIES = {"train_identities": 500, "val_identities": 100, "test_identities": 300}
DEMO_IMAGE_SIZE = (256, 128)  # the default model's input size
DEMO_TRAIN_OVERRIDES = ("stages.0.epochs=4", "stages.1.epochs=2", "stages.2.epochs=2")
DEMO_SETTINGS = {  # name -> simulate() options; the first is the headline result
    "info_gain questions + diverse references": {"question_policy": "info_gain", "reference_policy": "diverse",
                                                 "schedule": "auto"},
    "random questions only": {"question_policy": "random", "schedule": "questions"},
    "info_gain questions only": {"question_policy": "info_gain", "schedule": "questions"},
}


def _say(message: str) -> None:
    log.info("[demo] %s", message)


def build_data(out: Path, seed: int, progress: bool = True) -> Path:
    from minterpr.data.synthetic.dataset import SyntheticDatasetConfig, build_synthetic_dataset
    from minterpr.data.synthetic.world import SyntheticWorldConfig

    data_dir = out / "data"
    world = SyntheticWorldConfig(seed=seed, image_size=DEMO_IMAGE_SIZE, **DEMO_IDENTITIES)
    started = time.time()
    info = build_synthetic_dataset(data_dir, SyntheticDatasetConfig(world=world), progress=progress)
    test = info["splits"]["test"]
    _say(f"data: {data_dir} ({test['images']} test images of {test['identities']} people; "
         f"{time.time() - started:.0f} s)")
    return data_dir


def _portable_stamp(config: dict, data_dir: Path, out: Path) -> str:
    """The run's settings as a stamp that does not depend on where the cache lies: the data folder is
    named relative to ``out``, so a copied or moved demo cache is still the same cache."""
    data = config.get("data")
    if isinstance(data, dict) and data.get("root") is not None and Path(str(data["root"])) == data_dir:
        try:
            data["root"] = os.path.join("<demo-out>", os.path.relpath(data_dir, out))
        except ValueError:  # another drive: leave it as it is
            pass
    return json.dumps(config, sort_keys=True, default=str)


def train_model(out: Path, data_dir: Path, seed: int, config: str = "synthetic", device: str | None = None,
                progress: bool = True) -> Path:
    from minterpr.training.config import load_config
    from minterpr.training.trainer import train

    run_dir = out / "run"
    overrides = DEMO_TRAIN_OVERRIDES if config == "synthetic" else ()
    settings = [f"data.root={data_dir}", f"seed={seed}", *overrides]
    cfg = load_config(config, settings)
    legacy = json.dumps(cfg.to_dict(), sort_keys=True, default=str)  # stamps before they were portable
    wanted = _portable_stamp(cfg.to_dict(), data_dir, out)
    if device is not None:  # not part of the stamp: the same model, trained anywhere (checked as --set would be)
        cfg = load_config(config, [*settings, f"device={device}"])
    cfg.progress = cfg.progress and progress
    stamp = run_dir / "demo_config.json"  # the settings of the run in run_dir (written before training)
    finished = run_dir / "demo_finished.json"  # the same, written once training and the weight choice ended
    if (run_dir / "model.pt").is_file() and finished.is_file() and finished.read_text() in (wanted, legacy):
        _say(f"model: {run_dir / 'model.pt'} (cached)")
        return run_dir
    started = time.time()
    resume = (run_dir / "last.pt").is_file() and stamp.is_file() and stamp.read_text() in (wanted, legacy)
    if not resume and run_dir.exists():  # a run of other settings (e.g. an older minterpr): start afresh
        _say(f"model: {run_dir} holds a run with other settings; training a new one")
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(wanted)
    result = train(cfg, run_dir, resume=resume)
    if cfg.calibrate_attributes or cfg.select_attribute_weight:  # as `minterpr train` does
        from minterpr.cli.train import describe_choices
        from minterpr.training.post_training import calibrate_and_choose_weight

        _say(describe_choices(calibrate_and_choose_weight(cfg, result.model_path)))
    finished.write_text(wanted)
    _say(f"model: {run_dir / 'model.pt'} (trained in {time.time() - started:.0f} s)")
    return run_dir


def evaluate(run_dir: Path, data_dir: Path, args: argparse.Namespace) -> dict:
    from minterpr.data.formats.gallery import read_gallery
    from minterpr.evaluation.online import compare, one_target_per_identity
    from minterpr.evaluation.report import format_comparison, format_table, plot_metric_per_round
    from minterpr.runtime.run import load_run

    run = load_run(run_dir, device=args.device or "cpu")  # a broken cached run: RunError, one line naming the file
    backend = run.backend()
    gallery = read_gallery(data_dir / "gallery_test.jsonl")
    index = backend.index_images(gallery, root=str(data_dir), progress=show_progress(args))
    index.require_complete("the demo")
    targets = one_target_per_identity(gallery, limit=args.limit, seed=args.seed)
    _say(f"simulating {len(targets)} searches x {args.rounds} rounds over {len(gallery)} gallery images "
         "(oracle user: answers from the target's true attributes)")
    reports = compare(backend, index, targets, DEMO_SETTINGS, rounds=args.rounds, simulator="oracle",
                      seed=args.seed, rerank=run.scoring_config())
    headline = next(iter(reports))
    print()
    print(format_table(reports[headline]))
    print()
    print("R@1 (%) per round, by policy:")
    print(format_comparison(reports, metric="r1"))
    plot = run_dir.parent / "demo_r1_per_round.png"
    try:
        plot_metric_per_round(reports, plot, metric="r1")
        _say(f"plot: {plot}")
    except ImportError as err:  # matplotlib is an optional extra
        _say(f"no plot ({err})")
    if write_json(args.json, reports[headline].to_json()) not in (None, STDOUT):
        _say(f"evaluation JSON: {args.json}")
    return reports


def cmd_demo(args: argparse.Namespace) -> int:
    out = Path(args.out)
    started = time.time()
    try:
        data_dir = build_data(out, args.seed, show_progress(args))
        run_dir = train_model(out, data_dir, args.seed, args.config, args.device, show_progress(args))
        evaluate(run_dir, data_dir, args)
    except ImportError as err:
        print(f"minterpr demo: {err}", file=sys.stderr)
        return 2
    _say(f"done in {time.time() - started:.0f} s; everything is cached under {out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="build, train and evaluate end to end on the synthetic world",
                                   description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/demo", metavar="DIR", help="cache directory (default outputs/demo)")
    parser.add_argument("--rounds", type=int, default=5, help="interaction rounds after the description (default 5)")
    parser.add_argument("--limit", type=int, default=100, help="simulated searches, one per identity (default 100)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default="synthetic", help="training config name or YAML (default synthetic)")
    parser.set_defaults(handler=cmd_demo)
    add_common_options(parser, device=True, json=True, device_default=None, needs=("model",),
                       json_help="write the evaluation JSON of the headline setting to PATH ('-' or no value: "
                                 "to stdout, the tables to stderr)")
