"""``minterpr simulate``: online evaluation with simulated users, per-round metrics and comparisons.

The gallery is ``DIR/gallery_<split>.jsonl`` (as ``minterpr data synth`` / ``data peta`` write
it); targets are one image per identity (``--limit N`` draws N of them, seeded), or, with
``--simulator replay``, the recorded dialogues of ``DIR/<split>.jsonl``. The model is a trained
run (``--run RUN_DIR`` or a model file, through ``load_pipeline``, scoring with
the configuration stored with it) or the attribute backend over ground truth (``--backend
attribute``, optionally ``--attribute-noise``). ``--pictures N --pictures-dir DIR`` draws a
ranked strip for N of the targets (a seeded sample): each round's turn, the session's top-k
after it, the target framed green, the references the simulated user rejected crossed red.

Example:
    $ minterpr simulate --backend attribute --data data/synth --split test --rounds 5 \\
          --questions info_gain --references diverse --simulator oracle --json out.json
    $ minterpr simulate --run runs/exp1 --data data/synth --compare --plot r1.png --limit 200
    $ minterpr simulate --run runs/exp1 --data data/synth --limit 100 --pictures 5 --pictures-dir strips
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re
from pathlib import Path
from typing import Any

from minterpr.cli.shared.common import (
    STDOUT,
    CLIError,
    add_common_options,
    add_picture_options,
    check_picture_options,
    show_progress,
    write_json,
)
from minterpr.cli.shared.model_options import add_backend_arguments, build_index, check_backend_arguments, load_backend
from minterpr.cli.shared.vlm_options import add_caption_arguments, add_vlm_arguments, format_vlm_usage, vlm_config
from minterpr.data.formats.minterpedes import read_minterpedes
from minterpr.index.gallery_index import GalleryIndex
from minterpr.types import GalleryImage

log = logging.getLogger(__name__)


def _gallery(data_dir: Path, split: str) -> list[GalleryImage]:
    from minterpr.data.dataset import BuiltDataset

    data = BuiltDataset(data_dir)
    path = data.gallery_path(split)
    if not path.is_file():
        raise CLIError(f"gallery manifest not found: {path}")
    data.require()  # DatasetError (exit 2) naming the rebuild command: unfinished or mixed build
    return data.gallery(split)


def _rerank_config(args: argparse.Namespace, stored: Any = None) -> Any:
    """The scoring of the simulated sessions: ``stored`` (load_backend's) with the flags applied."""
    from minterpr.interaction.reranking import RerankConfig

    if args.no_rerank:
        return RerankConfig.off()
    if args.attribute_weight is not None and args.attribute_weight < 0:
        raise CLIError(f"--attribute-weight must be >= 0, got {args.attribute_weight}")
    weight = {} if args.attribute_weight is None else {"attribute_weight": args.attribute_weight}
    return dataclasses.replace(
        stored if stored is not None else RerankConfig(),
        attributes=not args.no_attributes,
        rejection=not args.no_rejection,
        anchor=not args.no_anchor,
        **weight,
    )


def cmd_simulate(args: argparse.Namespace) -> int:
    from minterpr.evaluation.online import compare, one_target_per_identity, simulate
    from minterpr.evaluation.report import format_comparison, format_table, plot_metric_per_round
    from minterpr.interaction.simulators import SIMULATORS

    check_picture_options(args)
    check_backend_arguments(args)
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
    backend, extras = load_backend(args)
    from minterpr.interaction.policies import policy_temperature

    # a bad value fails before the gallery is embedded; None: the policies' own
    temperature = (
        None
        if args.policy_temperature is None
        else policy_temperature(args.policy_temperature, extras.match_temperature())
    )
    index = build_index(backend, gallery, str(data_dir), progress=show_progress(args))
    if args.appearance:  # image-to-image comparisons on the appearance model's vectors (interaction/reranking.py)
        from minterpr.runtime.appearance import load_appearance

        index = load_appearance(args.appearance).add_to(
            index, allow_outside_root=getattr(backend, "allow_outside_root", False)
        )
    from minterpr.vlm.caption import use_captions

    # MTG: the captions' evidence beside the image model's (minterpr vlm caption); off: the index as it is
    index, captioned = use_captions(index, args.vlm_captions, args.vlm_caption_weight)
    targets = (
        simulator.targets(index)
        if args.simulator == "replay"
        else one_target_per_identity(gallery, args.limit, args.seed)
    )
    common = dict(
        rounds=args.rounds,
        simulator=simulator,
        num_references=args.num_references,
        seed=args.seed,
        reranking=_rerank_config(args, extras.rerank_config()),
        protocol={
            "dataset": str(data_dir),
            "split": args.split,
            **({"run": args.run} if args.run else {}),
            **({"appearance": args.appearance} if args.appearance else {}),
            **captioned,
        },
    )
    common["vlm"] = vlm_config(args)
    common["policy_temperature"] = temperature
    pictures = _Pictures(args, index, targets)
    if args.compare:
        reports = compare(backend, index, targets, observers=pictures.observer, **common)
        for metric in ("r1", "mAP", "hits10"):
            print(format_comparison(reports, metric))
            print()
        print(
            "protocol: "
            + json.dumps(
                {
                    k: v
                    for k, v in next(iter(reports.values())).protocol.items()
                    if k not in ("question_policy", "reference_policy", "schedule", "reranking")
                }
            )
        )
        _wrote(write_json(args.json, {"settings": {n: r.to_dict() for n, r in reports.items()}}))
        if args.plot:
            _wrote(plot_metric_per_round(reports, args.plot, "r1", title="R@1 per round by interaction policy"))
        pictures.write()
        return 0
    name = f"{args.questions} + {args.references}"
    report = simulate(
        backend,
        index,
        targets,
        question_policy=args.questions,
        reference_policy=args.references,
        schedule=args.schedule,
        observe=pictures.observer(name),
        **common,
    )
    print(format_table(report))
    print(
        f"mean turns to rank 1: {report.extra['mean_turns_to_rank1']:.2f}   moves: {report.extra['moves']}   "
        f"confirmed: {report.extra['confirmed']:.1f}%"
    )
    if "vlm" in report.extra:
        print(format_vlm_usage(report.extra["vlm"]))
    _wrote(write_json(args.json, report.to_json()))
    if args.plot:
        _wrote(plot_metric_per_round({name: report}, args.plot, "r1"))
    pictures.write()
    return 0


def _wrote(path: Any) -> None:
    if path is not None and path != STDOUT:
        log.info("wrote %s", path)


class _Pictures:
    """``--pictures N``: a recorder per simulated setting, and their strips written afterwards."""

    def __init__(self, args: argparse.Namespace, index: GalleryIndex, targets: list[GalleryImage]) -> None:
        self.args, self.index, self.targets = args, index, targets
        self.recorders: dict[str, Any] = {}
        self.picks: list[int] = []
        if args.pictures:
            from minterpr.evaluation.picture_recorders import sample_queries

            self.picks = sample_queries(len(targets), args.pictures, args.pictures_seed)

    def observer(self, name: str) -> Any:
        if not self.picks:
            return None
        from minterpr.evaluation.picture_recorders import SessionRecorder

        where = [self.index.index_of(self.targets[q].path) for q in self.picks]
        self.recorders[name] = SessionRecorder(self.picks, where, self.args.pictures_top)
        return self.recorders[name]

    def write(self) -> None:
        from minterpr.evaluation.pictures import StripConfig, write_ranked_strip

        count = 0
        for setting, recorder in self.recorders.items():
            folder = Path(self.args.pictures_dir)
            if len(self.recorders) > 1:  # --compare: one folder per setting
                folder = folder / re.sub(r"[^A-Za-z0-9]+", "_", setting).strip("_")
            for q, target in zip(recorder.queries, recorder.targets):
                views = recorder.rows[q]
                ranks = " -> ".join("?" if v.target_rank is None else str(v.target_rank + 1) for v in views)
                write_ranked_strip(
                    folder / f"query_{q:05d}.png",
                    views,
                    self.index.images,
                    root=self.index.root,
                    target=target,
                    target_person=self.targets[q].person_id,
                    title=f"{setting}, target {self.targets[q].person_id}: rank {ranks}",
                    config=StripConfig(top_k=self.args.pictures_top),
                )
                count += 1
        if count:
            log.info("wrote %d ranked strip(s) to %s", count, self.args.pictures_dir)


def register(subparsers: argparse._SubParsersAction) -> None:
    from minterpr.interaction.policies import QUESTION_POLICIES, REFERENCE_POLICIES, TEMPERATURE
    from minterpr.interaction.schedule import SCHEDULES
    from minterpr.interaction.simulators import SIMULATORS

    p = subparsers.add_parser(
        "simulate",
        help="online evaluation with simulated users",
        description="Simulate interactive searches and report per-round metrics.",
    )
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
    p.add_argument(
        "--initial-slots",
        type=int,
        default=None,
        metavar="K",
        help="witness: describe only K of the slots it knows at first (default: its whole caption)",
    )
    p.add_argument("--no-rerank", action="store_true", help="backend scores only (all re-ranking off)")
    p.add_argument("--no-attributes", action="store_true", help="re-ranking without the attribute likelihood")
    p.add_argument("--no-rejection", action="store_true", help="re-ranking without demoting rejected images")
    p.add_argument("--no-anchor", action="store_true", help="re-ranking without anchor refinement")
    p.add_argument(
        "--attribute-weight",
        type=float,
        metavar="W",
        help="re-ranking: weight of the attribute log-likelihood (default: the weight stored with --run's "
        "model, chosen on val at training time, else 0.05)",
    )
    p.add_argument(
        "--policy-temperature",
        metavar="T|fitted",
        help="softmax temperature of the candidate distribution the policies and the auto schedule choose "
        f"moves by: a number, or 'fitted' for --run's fitted match temperature (default: {TEMPERATURE})",
    )
    p.add_argument("--compare", action="store_true", help="run the standard policy comparison instead of one setting")
    p.add_argument("--plot", metavar="OUT.png", help="write R@1 per round as a PNG (with n and a 95 %% band)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="evaluate N targets (seeded draw)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--appearance",
        metavar="BEST_PT",
        help="an appearance model (with its same_person.json, `minterpr calibrate appearance`): "
        "references, duplicates and example images compare people by its vectors",
    )
    add_picture_options(p, "targets (with --compare: per setting, in DIR/<setting>/)")
    add_vlm_arguments(p)
    add_caption_arguments(p)
    p.set_defaults(handler=cmd_simulate)  # CLIError, RunError, ...: minterpr.cli.main prints them (exit 2)
    add_common_options(
        p,
        device=True,
        json=True,
        json_help="write the report to PATH (with --compare: {settings: {name: report}}); "
        "'-' or no value: to stdout, the tables to stderr",
    )
