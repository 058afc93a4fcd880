"""``minterpr demo``: the whole system end to end on the synthetic world, cached between runs.

1. builds a small synthetic world and its dialogues (skipped when already built),
2. trains the default model on it (skipped when already trained with the same settings),
3. runs the online evaluation: simulated users answer questions and judge reference images for
   five rounds; prints the per-round table, a policy comparison and the plot's path.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from minterpr.cli.shared.common import STDOUT, add_common_options, show_progress, write_json
from minterpr.cli.shared.demo_world import build_data, say, train_model
from minterpr.cli.shared.model_options import load_pipeline_of

log = logging.getLogger(__name__)

# Small enough to build, train and evaluate in a few minutes on 2 CPU cores.
DEMO_SETTINGS = {  # name -> simulate() options; the first is the headline result
    "info_gain questions + diverse references": {
        "question_policy": "info_gain",
        "reference_policy": "diverse",
        "schedule": "auto",
    },
    "random questions only": {"question_policy": "random", "schedule": "questions"},
    "info_gain questions only": {"question_policy": "info_gain", "schedule": "questions"},
}


def evaluate(run_dir: Path, data_dir: Path, args: argparse.Namespace) -> dict:
    from minterpr.data.dataset import BuiltDataset
    from minterpr.evaluation.online import compare, one_target_per_identity
    from minterpr.evaluation.report import format_comparison, format_table, plot_metric_per_round

    pipeline = load_pipeline_of(args, run_dir)  # a broken cached run: RunError, one line naming the file
    backend = pipeline.backend
    gallery = BuiltDataset(data_dir).gallery("test")
    index = backend.index_images(gallery, root=str(data_dir), progress=show_progress(args))
    index.require_complete("the demo")
    targets = one_target_per_identity(gallery, limit=args.limit, seed=args.seed)
    say(
        f"simulating {len(targets)} searches x {args.rounds} rounds over {len(gallery)} gallery images "
        "(oracle user: answers from the target's true attributes)"
    )
    reports = compare(
        backend,
        index,
        targets,
        DEMO_SETTINGS,
        rounds=args.rounds,
        simulator="oracle",
        seed=args.seed,
        reranking=pipeline.rerank_config(),
    )
    headline = next(iter(reports))
    print()
    print(format_table(reports[headline]))
    print()
    print("R@1 (%) per round, by policy:")
    print(format_comparison(reports, metric="r1"))
    plot = run_dir.parent / "demo_r1_per_round.png"
    try:
        plot_metric_per_round(reports, plot, metric="r1")
        say(f"plot: {plot}")
    except ImportError as err:  # matplotlib is an optional extra
        say(f"no plot ({err})")
    # the headline's report, with every setting's under "settings": the README's table is made from it
    # (minterpr.evaluation.demo_table, benchmarks/readme_demo_table.py)
    results = {**reports[headline].to_dict(), "settings": {name: report.to_dict() for name, report in reports.items()}}
    if write_json(args.json, json.dumps(results, indent=2, allow_nan=False)) not in (None, STDOUT):
        say(f"evaluation JSON: {args.json}")
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
    say(f"done in {time.time() - started:.0f} s; everything is cached under {out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="build, train and evaluate end to end on the synthetic world",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", default="outputs/demo", metavar="DIR", help="cache directory (default outputs/demo)")
    parser.add_argument("--rounds", type=int, default=5, help="interaction rounds after the description (default 5)")
    parser.add_argument("--limit", type=int, default=100, help="simulated searches, one per identity (default 100)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default="synthetic", help="training config name or YAML (default synthetic)")
    parser.set_defaults(handler=cmd_demo)
    add_common_options(
        parser,
        device=True,
        json=True,
        device_default=None,
        needs=("model",),
        json_help="write the evaluation JSON of the headline setting to PATH ('-' or no value: "
        "to stdout, the tables to stderr)",
    )
