"""``minterpr calibrate {match,presence,slots,appearance}``: fit a record stored with the model, on validation data.

``match`` and ``presence`` run simulated searches (an oracle user who describes a target, answers, rules out the images
shown with what differs and confirms the target when it is shown; up to ``--turns`` turns) over the
``--split`` gallery of ``--data`` (never test: it measures the result), fit their record and store
it with the model (a run's model.pt, or an exported model directory's extras.json; the weights are
untouched; :mod:`minterpr.interaction.fitted`). ``--dry-run`` fits and reports only.

* ``match``: the one softmax temperature under which an image shown at match m is the person about
  m of the time (:mod:`minterpr.evaluation.match_calibration`; extra ``"match_calibration"``).
  Sessions, the page's match figures and its "probably not in this footage" estimate then use it
  (docs/web.md, docs/benchmarks.md "Probably not in this footage").
* ``presence``: "probably not in this footage". Each target is searched twice, over the whole
  gallery and with its images removed; the logistic presence model over the session's signals
  (:mod:`minterpr.interaction.presence`; also over a third and a half of the split's people, so
  the size varies) and the threshold under which the page says it (at most ``--max-false`` of the
  present searches flagged) are fitted (extra ``"presence_model"``). Run ``calibrate match``
  first: the features read the match at the model's fitted temperature. Measured on test by
  ``benchmarks/bench_presence.py``.
* ``slots``: per-slot answer calibration (:mod:`minterpr.interaction.slot_answers`; extra
  ``"slot_answers"``): which value of a slot the model may answer, or "unsure", so that its answer
  is at least as often right as the slot's majority value on every camera set of the split. No
  searches: it reads the attribute probabilities of the split's labelled images. The search page's
  ✓ / ✗ and ``minterpr eval-attributes`` (calibrated slot accuracy) use it.

* ``appearance``: the appearance model's cosine -> same-person probability, a logistic fit on every
  pair of a val re-id manifest (no searches; ``--model BEST_PT --data VAL_MANIFEST``), written as
  ``same_person.json`` beside the model (:mod:`minterpr.interaction.appearance`), with a second fit
  on the pairs' k-reciprocal re-ranked scores (``reranked``) that "follow this person" shows for two
  crops of one gallery (:mod:`minterpr.interaction.pair_scores`). Sessions then compare images by appearance
  (:class:`~minterpr.interaction.similarities.Similarities`).

``minterpr calibrate-match`` and ``minterpr calibrate-presence`` are the same commands under their
earlier names, kept as aliases because model cards give them (models/peta-pa100k-lite2/MODEL_CARD.md).

Example:
    $ minterpr calibrate match --run outputs/demo/run --data outputs/demo/data
    $ minterpr calibrate presence --run models/peta-pa100k-lite2 --data data/peta_cw --searches 60 --json -
    $ minterpr calibrate slots --run runs/peta --data data/peta_cw
    $ minterpr calibrate appearance --model runs/reid/best.pt --data data/reid/val.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import dataclass
from typing import Any, Callable

from minterpr.cli.shared.common import STDOUT, add_common_options, show_progress, write_json
from minterpr.cli.shared.model_options import load_pipeline_of

log = logging.getLogger(__name__)


def _fit_match(pipeline: Any, index: Any, args: argparse.Namespace) -> Any:
    from minterpr.evaluation.match_calibration import calibrate_match

    return calibrate_match(
        pipeline.backend,
        index,
        split=args.split,
        searches=args.searches,
        turns=args.turns,
        seed=args.seed,
        session_options={"reranking": pipeline.rerank_config()},
    )


def _fit_presence(pipeline: Any, index: Any, args: argparse.Namespace) -> Any:
    from minterpr.evaluation.presence_calibration import calibrate_presence

    options = {"reranking": pipeline.rerank_config(), "match_temperature": pipeline.extras.match_temperature()}
    return calibrate_presence(
        pipeline.backend,
        index,
        split=args.split,
        searches=args.searches,
        turns=args.turns,
        seed=args.seed,
        max_false=args.max_false,
        session_options=options,
    )


def _match_line(record: Any, args: argparse.Namespace) -> str:
    return (
        f"match temperature fitted on {record.split} ({record.searches} searches, {record.steps} steps): "
        f"{record.temperature:.4g} (mean -log P(target) {record.nll_before:.3f} -> {record.nll_after:.3f}, "
        f"top-10 calibration error {record.ece_before:.3f} -> {record.ece_after:.3f})"
    )


def _presence_line(record: Any, args: argparse.Namespace) -> str:
    return (
        f"presence model fitted on {record.split} ({record.searches} targets, {record.steps} steps): threshold "
        f"{record.threshold:.3g}; there {record.absent_flagged_pct:.1f} % of absent-target searches flagged "
        f"within {args.turns} turns, {record.present_flagged_pct:.1f} % of present ones"
    )


def _fit_slots(pipeline: Any, index: Any, args: argparse.Namespace) -> Any:
    from minterpr.errors import InputError
    from minterpr.evaluation.attribute_metrics import attribute_targets
    from minterpr.interaction.slot_answers import fit_slot_answers, group_of

    if index.attribute_probs is None:
        raise InputError("the model has no attribute head: no slot answers to calibrate")
    targets, mask = attribute_targets(index.images)
    if not mask.any():
        raise InputError(f"{args.data}: no image of the {args.split} split has attribute labels: nothing to fit on")
    return fit_slot_answers(
        index.attribute_probs,
        targets,
        mask,
        [group_of(i.camera_id, i.person_id) for i in index.images],
        split=args.split,
    )


def _slots_line(record: Any, args: argparse.Namespace) -> str:
    rules = list(record.slots.values())
    mean = lambda key: sum(getattr(r, key) for r in rules) / max(len(rules), 1)  # noqa: E731
    changed = sum(r.prior_weight > 0 or (r.margin or 0) > 0 or r.margin is None for r in rules)
    return (
        f"slot answers fitted on {record.split} ({len(record.groups)} camera sets, {len(rules)} slots, "
        f"{changed} changed, {sum(r.margin is None for r in rules)} always unsure): mean slot accuracy "
        f"{mean('accuracy_before'):.1f} -> {mean('accuracy_after'):.1f} (majority {mean('majority_accuracy'):.1f})"
    )


@dataclass(frozen=True)
class Kind:
    """One ``calibrate`` subcommand: what it fits and how it reports it."""

    name: str  # the subcommand ("match": `minterpr calibrate match`, alias `calibrate-match`)
    what: str  # what is fitted, in the refusal of --split test
    help: str  # its line in --help
    searches: int  # --searches' default
    searches_help: str  # what --searches counts
    fit: Callable[[Any, Any, argparse.Namespace], Any]  # (pipeline, complete index, args) -> the record
    report: Callable[[Any, argparse.Namespace], str]  # the console line of a fitted record


KINDS = {
    kind.name: kind
    for kind in (
        Kind(
            "match",
            "the temperature",
            "fit the page's match temperature on validation searches",
            60,
            "simulated searches, one target identity each",
            _fit_match,
            _match_line,
        ),
        Kind(
            "presence",
            "the presence model",
            'fit "probably not in this footage" on validation searches',
            100,
            "target identities, each searched present and absent",
            _fit_presence,
            _presence_line,
        ),
        Kind(
            "slots",
            "the slot answer calibration",
            "fit per-slot answers (or 'unsure') on the validation split",
            0,
            "",
            _fit_slots,
            _slots_line,
        ),
    )
}
ALIASED = ("match", "presence")  # the earlier names `calibrate-match`, `calibrate-presence` that model cards give


def run(args: argparse.Namespace) -> int:
    from minterpr.data.dataset import BuiltDataset
    from minterpr.errors import InputError
    from minterpr.training.post_training import store_record

    kind = KINDS[args.calibrate_kind]
    if args.split == "test":
        raise InputError(f"--split test: {kind.what} is fitted on the validation split; test measures it")
    pipeline = load_pipeline_of(args)  # first: a broken run fails before the data is read
    split = BuiltDataset(args.data).split(args.split)
    index = pipeline.index_images(split.gallery, root=str(split.image_root), progress=show_progress(args))
    index.require_complete(f"minterpr calibrate {kind.name} ({args.data}, {args.split})")
    record = kind.fit(pipeline, index, args)
    if not args.dry_run:
        store_record(pipeline.model_path, record)
    print(
        kind.report(record, args)
        + ("; not stored (--dry-run)" if args.dry_run else f"; stored in {pipeline.model_path}")
    )
    if write_json(args.json, json.dumps(record.to_dict(), indent=2)) not in (None, STDOUT):
        log.info("wrote %s", args.json)
    return 0


def _add(subparsers: argparse._SubParsersAction, name: str, kind: Kind, line: str) -> None:
    parser = subparsers.add_parser(
        name, help=line, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--run",
        required=True,
        metavar="RUN_DIR",
        help="run directory, model file or exported model directory (the record is stored there)",
    )
    parser.add_argument("--data", required=True, metavar="DATASET_DIR", help="a built dataset (its gallery splits)")
    parser.add_argument("--split", default="val", help="the split searched (default: val; test is refused)")
    if kind.searches:  # the kinds fitted on simulated searches
        parser.add_argument("--searches", type=int, default=kind.searches, help=kind.searches_help)
        parser.add_argument("--turns", type=int, default=5, help="turns after the description per search")
    if kind.name == "presence":
        parser.add_argument(
            "--max-false",
            type=float,
            default=0.05,
            help="share of present-target searches the threshold may flag (default 0.05)",
        )
    if kind.searches:
        parser.add_argument("--seed", type=int, default=0, help="draws the targets and the users' words")
    parser.add_argument("--dry-run", action="store_true", help="fit and report only; store nothing")
    parser.set_defaults(handler=run, calibrate_kind=kind.name)
    add_common_options(parser, device=True, json=True, needs=("model",))


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser(
        "calibrate",
        help="fit a record stored with the model on validation data (match, presence, slots, appearance)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    group.set_defaults(group_parser=group)
    sub = group.add_subparsers(dest="calibrate_command", metavar="CALIBRATE_COMMAND")
    for kind in KINDS.values():
        _add(sub, kind.name, kind, kind.help)
    _add_appearance(sub)
    for kind in (KINDS[name] for name in ALIASED):  # the earlier names, which model cards give: the same commands
        _add(subparsers, f"calibrate-{kind.name}", kind, f"alias of `minterpr calibrate {kind.name}`")


# ----- calibrate appearance: the appearance model's same-person probability (no searches) -----------------


def run_appearance(args: argparse.Namespace) -> int:
    """Fit the cosine -> same-person probability of an appearance model on a val re-id manifest and
    store it beside the model (same_person.json, :mod:`minterpr.interaction.appearance`)."""
    import sys

    from minterpr.data.errors import DataError
    from minterpr.data.reid import read_manifest
    from minterpr.errors import MinterprError
    from minterpr.interaction.appearance import write_same_person
    from minterpr.models.device import resolve_device
    from minterpr.models.reid_dir import load_reid_any
    from minterpr.training.reid import fit_same_person_on

    command = "minterpr calibrate appearance"
    if args.split == "test":
        print(
            f"{command}: error: --split test: the same-person probability is fitted on val; test measures it",
            file=sys.stderr,
        )
        return 2
    try:
        images = read_manifest(args.data)
        model = load_reid_any(args.model).to(resolve_device(args.device))
        record = fit_same_person_on(model, images, batch_size=args.batch_size, split=args.split, centred=args.centred)
        path = None if args.dry_run else write_same_person(args.model, record)
    except (DataError, MinterprError, ValueError, OSError) as err:
        print(f"{command}: error: {err}", file=sys.stderr)
        return 2
    if args.json != STDOUT:
        print(
            f"same-person probability fitted on {record.split} ({len(images)} crops, {record.pairs} pairs, "
            f"base rate {record.base_rate:.4g}): P = sigmoid({record.scale:.4g} * cosine + {record.bias:.4g}), "
            f"AUC {record.auc:.1f} %"
            + (", vectors compared about their gallery's centre" if record.centred else "")
            + ("; not stored (--dry-run)" if path is None else f"; stored in {path}")
        )
        if record.reranked is None:
            print(f"no re-ranked fit: {len(images)} crops are more than re-ranking compares at once")
        else:
            r = record.reranked
            print(
                f"between crops of one gallery, re-ranked ({r.rerank.label()}): "
                f"P = sigmoid({r.scale:.4g} * (1 - distance) + {r.bias:.4g}), AUC {r.auc:.1f} %"
            )
    write_json(args.json, json.dumps(record.to_dict(), indent=2))
    return 0


def _add_appearance(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "appearance",
        help="fit the appearance model's same-person probability on a val re-id manifest",
        description=run_appearance.__doc__,
    )
    parser.add_argument(
        "--model",
        required=True,
        metavar="MODEL",
        help="the appearance model (a model directory such as models/osnet-x0_25-reid, a reid run's best.pt or "
        "its run directory); same_person.json is written beside it",
    )
    parser.add_argument(
        "--data",
        required=True,
        metavar="VAL_MANIFEST",
        help="a re-id manifest of the validation identities (minterpr data reid's val.jsonl)",
    )
    parser.add_argument("--split", default="val", help="the manifest's split, recorded (default: val; test is refused)")
    parser.add_argument("--batch-size", type=int, default=128, help="crops per forward pass (default 128)")
    parser.add_argument(
        "--centred",
        action="store_true",
        help="fit on vectors less their centre; galleries then compare their crops about their own centre "
        "(opt-in: measured in docs/benchmarks.md, 'Appearance about the gallery's centre')",
    )
    parser.add_argument("--dry-run", action="store_true", help="fit and report only; store nothing")
    parser.set_defaults(handler=run_appearance)
    add_common_options(parser, device=True, json=True, needs=("model",))
