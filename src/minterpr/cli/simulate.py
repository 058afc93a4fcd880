"""``minterpr simulate``: online evaluation with simulated users, per-round metrics and comparisons.

The gallery is ``DIR/gallery_<split>.jsonl`` (as ``minterpr data synth`` / ``data peta`` write
it); targets are one image per identity (``--limit N`` draws N of them, seeded), or, with
``--simulator replay``, the recorded dialogues of ``DIR/<split>.jsonl``. The model is a trained
run (``--run RUN_DIR`` or a model file, through ``minterpr.trained_run.load_run``, scoring with
the configuration stored with it) or the attribute backend over ground truth (``--backend
attribute``, optionally ``--attribute-noise``).

Example:
    $ minterpr simulate --backend attribute --data data/synth --split test --rounds 5 \\
          --questions info_gain --references diverse --simulator oracle --json out.json
    $ minterpr simulate --run runs/exp1 --data data/synth --compare --plot r1.png --limit 200
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from minterpr.data.formats.gallery import read_gallery
from minterpr.data.formats.minterpedes import read_minterpedes
from minterpr.errors import InputError
from minterpr.index.gallery_index import GalleryIndex, RetrievalBackend
from minterpr.types import GalleryImage


class CLIError(InputError):
    """A user error on the command line: ``minterpr.cli.main`` prints it as one line, exit code 2."""


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """--run / --backend / --attribute-noise / --device, shared by simulate and chat."""
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", metavar="RUN_DIR", help="a trained run directory (its model.pt) or a model file "
                                                        "(the neural pipeline)")
    which.add_argument("--backend", choices=("attribute",),
                       help="no model: the attribute backend over the gallery's ground-truth attributes")
    parser.add_argument("--attribute-noise", type=float, default=None, metavar="STD",
                        help="attribute backend: logit noise of a simulated attribute classifier (default: exact truth)")


def load_backend(args: argparse.Namespace) -> tuple[RetrievalBackend, Any]:
    """The backend chosen on the command line, and the scoring sessions should use with it
    (a :class:`~minterpr.evaluation.scoring.ScoringConfig`: the one stored with ``--run``'s
    model, chosen on val at training time, else the defaults).

    ``--run`` loads through :func:`minterpr.trained_run.load_run` (a run directory or a model
    file): a broken run raises :class:`~minterpr.errors.RunError` (one line, exit 2)."""
    from minterpr.evaluation.scoring import ScoringConfig

    if args.backend == "attribute":
        from minterpr.interaction.attribute_backend import AttributeBackend

        return AttributeBackend(noise=args.attribute_noise, seed=getattr(args, "seed", 0)), ScoringConfig()
    from minterpr.trained_run import load_run

    run = load_run(args.run, device=getattr(args, "device", "cpu"))
    return run.backend(), run.scoring_config()


def build_index(backend: RetrievalBackend, images: list[GalleryImage], root: str, *,
                complete: bool = True) -> GalleryIndex:
    """The gallery's index; ``complete``: refuse one with skipped (unreadable) images."""
    try:
        index = backend.index_images(images, root=root, progress=sys.stderr.isatty())
    except ValueError as err:
        raise CLIError(str(err)) from None
    # simulate draws its targets from the gallery list: an image left out would shift their positions
    return index.require_complete("a simulated evaluation") if complete else index


def _gallery(data_dir: Path, split: str) -> list[GalleryImage]:
    path = data_dir / f"gallery_{split}.jsonl"
    if not path.is_file():
        raise CLIError(f"gallery manifest not found: {path}")
    from minterpr.data.build import require_built_dataset

    require_built_dataset(data_dir)  # DatasetError (exit 2) naming the rebuild command: unfinished or mixed build
    return read_gallery(path)


def _rerank_config(args: argparse.Namespace, stored: Any = None) -> Any:
    """The scoring of the simulated sessions: ``stored`` (load_backend's) with the flags applied."""
    from minterpr.interaction.reranking import RerankConfig

    if args.no_rerank:
        return RerankConfig.off()
    if args.attribute_weight is not None and args.attribute_weight < 0:
        raise CLIError(f"--attribute-weight must be >= 0, got {args.attribute_weight}")
    weight = {} if args.attribute_weight is None else {"attribute_weight": args.attribute_weight}
    return dataclasses.replace(stored if stored is not None else RerankConfig(), attributes=not args.no_attributes,
                               rejection=not args.no_rejection, anchor=not args.no_anchor, **weight)


def cmd_simulate(args: argparse.Namespace) -> int:
    from minterpr.evaluation.online import compare, one_target_per_identity, simulate
    from minterpr.evaluation.report import format_comparison, format_table, plot_metric_per_round
    from minterpr.interaction.simulators import SIMULATORS

    data_dir = Path(args.data)
    gallery = _gallery(data_dir, args.split)
    if args.simulator == "replay":
        records_path = data_dir / f"{args.split}.jsonl"
        if not records_path.is_file():
            raise CLIError(f"--simulator replay needs recorded dialogues: {records_path} not found")
        samples = read_minterpedes(records_path)[: args.limit] if args.limit else read_minterpedes(records_path)
        simulator = SIMULATORS.create("replay", samples=samples)
    else:
        options: dict[str, Any] = {"dont_know_rate": args.dont_know_rate}
        if args.simulator == "oracle":
            options["wrong_answer_rate"] = args.wrong_answer_rate
        elif args.initial_slots is not None:
            options["initial_slots"] = args.initial_slots
        simulator = SIMULATORS.create(args.simulator, **options)
    backend, stored = load_backend(args)
    index = build_index(backend, gallery, str(data_dir))
    targets = simulator.targets(index) if args.simulator == "replay" else \
        one_target_per_identity(gallery, args.limit, args.seed)
    common = dict(rounds=args.rounds, simulator=simulator, num_references=args.num_references, seed=args.seed,
                  rerank=_rerank_config(args, stored),
                  protocol={"dataset": str(data_dir), "split": args.split,
                            **({"run": args.run} if args.run else {})})
    if args.compare:
        reports = compare(backend, index, targets, **common)
        for metric in ("r1", "mAP", "hits10"):
            print(format_comparison(reports, metric))
            print()
        print("protocol: " + json.dumps({k: v for k, v in next(iter(reports.values())).protocol.items()
                                         if k not in ("question_policy", "reference_policy", "schedule", "reranking")}))
        if args.json:
            path = Path(args.json)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"settings": {n: r.to_dict() for n, r in reports.items()}}, indent=2) + "\n")
        if args.plot:
            plot_metric_per_round(reports, args.plot, "r1", title="R@1 per round by interaction policy")
        return 0
    report = simulate(backend, index, targets, question_policy=args.questions, reference_policy=args.references,
                      schedule=args.schedule, **common)
    print(format_table(report))
    print(f"mean turns to rank 1: {report.extra['mean_turns_to_rank1']:.2f}   moves: {report.extra['moves']}   "
          f"confirmed: {report.extra['confirmed']:.1f}%")
    if args.json:
        report.save(args.json)
    if args.plot:
        plot_metric_per_round({f"{args.questions} + {args.references}": report}, args.plot, "r1")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    from minterpr.interaction.policies import QUESTION_POLICIES, REFERENCE_POLICIES, SCHEDULES
    from minterpr.interaction.simulators import SIMULATORS

    p = subparsers.add_parser("simulate", help="online evaluation with simulated users",
                              description="Simulate interactive searches and report per-round metrics.")
    add_backend_arguments(p)
    p.add_argument("--data", required=True, metavar="DIR", help="dataset dir with gallery_<split>.jsonl and images")
    p.add_argument("--split", default="test")
    p.add_argument("--rounds", type=int, default=5, help="interaction rounds after the description (default 5)")
    p.add_argument("--questions", default="info_gain", choices=QUESTION_POLICIES.names(), help="question policy")
    p.add_argument("--references", default="diverse", choices=REFERENCE_POLICIES.names(), help="reference policy")
    p.add_argument("--schedule", default="auto", choices=["auto", *SCHEDULES], help="which move each round")
    p.add_argument("--num-references", type=int, default=3, help="images per reference move")
    p.add_argument("--simulator", default="oracle", choices=SIMULATORS.names())
    p.add_argument("--dont-know-rate", type=float, default=0.0, help="simulated 'I don't remember' rate")
    p.add_argument("--wrong-answer-rate", type=float, default=0.0, help="oracle: rate of answers naming a wrong value")
    p.add_argument("--initial-slots", type=int, default=None, metavar="K",
                   help="witness: describe only K of the slots it knows at first (default: its whole caption)")
    p.add_argument("--no-rerank", action="store_true", help="backend scores only (all re-ranking off)")
    p.add_argument("--no-attributes", action="store_true", help="re-ranking without the attribute likelihood")
    p.add_argument("--no-rejection", action="store_true", help="re-ranking without demoting rejected images")
    p.add_argument("--no-anchor", action="store_true", help="re-ranking without anchor refinement")
    p.add_argument("--attribute-weight", type=float, metavar="W",
                   help="re-ranking: weight of the attribute log-likelihood (default: the weight stored with --run's "
                        "model, chosen on val at training time, else 0.05)")
    p.add_argument("--compare", action="store_true", help="run the standard policy comparison instead of one setting")
    p.add_argument("--json", metavar="OUT", help="write the report (with --compare: {settings: {name: report}})")
    p.add_argument("--plot", metavar="OUT.png", help="write R@1 per round as a PNG")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="evaluate N targets (seeded draw)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=cmd_simulate)  # CLIError, RunError, ...: minterpr.cli.main prints them (exit 2)
