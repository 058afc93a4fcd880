"""``minterpr calibrate-match``: fit the temperature of the match the page shows, on validation searches.

Runs ``--searches`` simulated searches (an oracle user who describes a target, answers, rules out
the images shown with what differs and confirms the target when it is shown; up to ``--turns``
turns) over the ``--split`` gallery of ``--data`` (never test: it measures the result), fits the one
softmax temperature under which an image shown at match m is the person about m of the time
(:mod:`minterpr.evaluation.match_calibration`) and stores it with the model (extra
``"match_calibration"``: a run's model.pt, or an exported model directory's extras.json; the weights
are untouched). Sessions, the page's match figures and its "probably not in this footage" estimate
then use it (docs/web.md, docs/benchmarks.md "Probably not in this footage").

Example:
    $ minterpr calibrate-match --run outputs/demo/run --data outputs/demo/data
    $ minterpr calibrate-match --run models/peta-pa100k-lite2 --data data/peta_cw --searches 40 --json -
"""
from __future__ import annotations

import argparse
import json
import logging

from minterpr.cli.common import STDOUT, add_common_options, load_model, show_progress, write_json

COMMAND = "minterpr calibrate-match"
log = logging.getLogger(__name__)


def run(args: argparse.Namespace) -> int:
    from minterpr.data.dataset import BuiltDataset
    from minterpr.errors import InputError
    from minterpr.evaluation.match_calibration import calibrate_match
    from minterpr.training.post_training import store_match_calibration

    if args.split == "test":
        raise InputError("--split test: the temperature is fitted on validation searches; test measures it")
    pipeline = load_model(args)  # first: a broken run fails before the data is read
    split = BuiltDataset(args.data).split(args.split)
    index = pipeline.index_images(split.gallery, root=str(split.image_root), progress=show_progress(args))
    index.require_complete(f"{COMMAND} ({args.data}, {args.split})")
    record = calibrate_match(pipeline.backend, index, split=args.split, searches=args.searches, turns=args.turns,
                             seed=args.seed, session_options={"reranking": pipeline.rerank_config()})
    if not args.dry_run:
        store_match_calibration(pipeline.model_path or args.run, record)
    print(f"match temperature fitted on {record.split} ({record.searches} searches, {record.steps} steps): "
          f"{record.temperature:.4g} (mean -log P(target) {record.nll_before:.3f} -> {record.nll_after:.3f}, "
          f"top-10 calibration error {record.ece_before:.3f} -> {record.ece_after:.3f})"
          + ("; not stored (--dry-run)" if args.dry_run else f"; stored in {pipeline.model_path or args.run}"))
    if write_json(args.json, json.dumps(record.to_dict(), indent=2)) not in (None, STDOUT):
        log.info("wrote %s", args.json)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("calibrate-match", help="fit the page's match temperature on validation searches",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, metavar="RUN_DIR",
                        help="run directory, model file or exported model directory (the record is stored there)")
    parser.add_argument("--data", required=True, metavar="DATASET_DIR", help="a built dataset (its gallery splits)")
    parser.add_argument("--split", default="val", help="the split searched (default: val; test is refused)")
    parser.add_argument("--searches", type=int, default=60, help="simulated searches, one target identity each")
    parser.add_argument("--turns", type=int, default=5, help="turns after the description per search")
    parser.add_argument("--seed", type=int, default=0, help="draws the targets and the users' words")
    parser.add_argument("--dry-run", action="store_true", help="fit and report only; store nothing")
    parser.set_defaults(handler=run)
    add_common_options(parser, device=True, json=True, needs=("model",))
