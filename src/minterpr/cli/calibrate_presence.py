"""``minterpr calibrate-presence``: fit "probably not in this footage" on validation searches.

Searches ``--searches`` targets of the ``--split`` gallery of ``--data`` (never test: it measures the
result) twice each with a simulated oracle user (it describes the target, answers, rules out the
images shown with what differs and confirms the target when it is shown; up to ``--turns`` turns):
over the whole gallery and over the gallery with the target's images removed. Fits the logistic
presence model over the session's signals (how well the best remaining image fits the facts, how
many fit, the images ruled out, how much the best one stands out, the gallery's size;
:mod:`minterpr.interaction.presence_model`; also over a third and a half of the split's people,
so the size varies), chooses the threshold under which the page says
"probably not in this footage" (at most ``--max-false`` of the present searches flagged) and
stores it with the model (extra ``"presence_model"``: a run's model.pt, or an exported model
directory's extras.json; the weights are untouched). Run ``minterpr calibrate-match`` first: the
features read the match at the model's fitted temperature. Measured on test by
``benchmarks/bench_presence.py`` (docs/benchmarks.md "Probably not in this footage").

Example:
    $ minterpr calibrate-presence --run outputs/demo/run --data outputs/demo/data
    $ minterpr calibrate-presence --run models/peta-pa100k-lite2 --data data/peta_cw --searches 60 --json -
"""
from __future__ import annotations

import argparse
import json
import logging

from minterpr.cli.common import STDOUT, add_common_options, load_model, show_progress, write_json

COMMAND = "minterpr calibrate-presence"
log = logging.getLogger(__name__)


def run(args: argparse.Namespace) -> int:
    from minterpr.data.dataset import BuiltDataset
    from minterpr.errors import InputError
    from minterpr.evaluation.presence_calibration import calibrate_presence
    from minterpr.training.post_training import store_presence_model

    if args.split == "test":
        raise InputError("--split test: the presence model is fitted on validation searches; test measures it")
    pipeline = load_model(args)  # first: a broken run fails before the data is read
    split = BuiltDataset(args.data).split(args.split)
    index = pipeline.index_images(split.gallery, root=str(split.image_root), progress=show_progress(args))
    index.require_complete(f"{COMMAND} ({args.data}, {args.split})")
    options = {"reranking": pipeline.rerank_config(), "match_temperature": pipeline.extras.match_temperature()}
    record = calibrate_presence(pipeline.backend, index, split=args.split, searches=args.searches, turns=args.turns,
                                seed=args.seed, max_false=args.max_false, session_options=options)
    if not args.dry_run:
        store_presence_model(pipeline.model_path or args.run, record)
    print(f"presence model fitted on {record.split} ({record.searches} targets, {record.steps} steps): threshold "
          f"{record.threshold:.3g}; there {record.absent_flagged_pct:.1f} % of absent-target searches flagged "
          f"within {args.turns} turns, {record.present_flagged_pct:.1f} % of present ones"
          + ("; not stored (--dry-run)" if args.dry_run else f"; stored in {pipeline.model_path or args.run}"))
    if write_json(args.json, json.dumps(record.to_dict(), indent=2)) not in (None, STDOUT):
        log.info("wrote %s", args.json)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("calibrate-presence", help='fit "probably not in this footage" on validation searches',
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, metavar="RUN_DIR",
                        help="run directory, model file or exported model directory (the record is stored there)")
    parser.add_argument("--data", required=True, metavar="DATASET_DIR", help="a built dataset (its gallery splits)")
    parser.add_argument("--split", default="val", help="the split searched (default: val; test is refused)")
    parser.add_argument("--searches", type=int, default=100, help="target identities, each searched present and absent")
    parser.add_argument("--turns", type=int, default=5, help="turns after the description per search")
    parser.add_argument("--max-false", type=float, default=0.05,
                        help="share of present-target searches the threshold may flag (default 0.05)")
    parser.add_argument("--seed", type=int, default=0, help="draws the targets and the users' words")
    parser.add_argument("--dry-run", action="store_true", help="fit and report only; store nothing")
    parser.set_defaults(handler=run)
    add_common_options(parser, device=True, json=True, needs=("model",))
