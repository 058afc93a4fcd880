"""``minterpr eval``: replay recorded dialogues against a gallery with a trained model.

Loads RUN_DIR/model.pt, ranks the gallery after every round (round 0 = the description, then
one round per recorded turn; an ended dialogue keeps its last query), prints the per-round
table (R@1/5/10, mAP, mINP, Hits@k, BRI), writes the evaluation JSON with ``--json`` (``--json -``:
to stdout, the table to stderr), with ``--plot`` a per-round R@1 PNG (n and a 95 % Wilson band),
and with ``--pictures N --pictures-dir DIR`` a ranked strip for N dialogues (a seeded sample:
the turn of each round, the top-k after it, the target framed, rejected references crossed).
The gallery is ``--gallery``, else ``gallery_<split>.jsonl`` beside the dialogue file, else
every target and reference image of the dialogues. Scores are the query
cosine plus the attribute evidence at the weight chosen on val at training time; a reference
image the user rejected stays below the images not rejected (``--keep-rejected`` turns it off).

Example:
    $ minterpr eval --run runs/synth --data data/synth/test.jsonl --image-root data/synth \\
          --json runs/synth/eval_test.json --plot runs/synth/eval_test.png --pictures 8 --pictures-dir strips
    $ minterpr eval --run runs/baseline --data data/synth/test.jsonl --image-root data/synth \\
          --json baseline.json --description-only
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path
from typing import Any

from minterpr.cli.shared.common import (
    STDOUT,
    add_common_options,
    add_picture_options,
    check_picture_options,
    show_progress,
    write_json,
)
from minterpr.cli.shared.model_options import (
    RUN_HELP,
    add_batch_size_argument,
    add_image_precision_argument,
    add_text_precision_argument,
    load_pipeline_of,
)
from minterpr.cli.shared.vlm_options import add_caption_arguments, add_vlm_arguments, format_vlm_usage, vlm_config
from minterpr.errors import InputError

log = logging.getLogger(__name__)


def default_gallery(data: Path) -> Path | None:
    """``gallery_<split>.jsonl`` beside ``<split>.jsonl``, when it exists."""
    from minterpr.data.layout import gallery_file

    candidate = data.with_name(gallery_file(data.stem))
    return candidate if candidate.is_file() else None


def run(args: argparse.Namespace) -> int:
    from minterpr.errors import MinterprError

    try:
        return _run(args)
    except (BrokenPipeError, MinterprError):  # the console command reports these (one line, exit 2)
        raise
    except (ValueError, OSError, ImportError) as exc:  # a missing --data file, no matplotlib for --plot
        said = (
            f"{exc.filename}: {exc.strerror.lower()}"
            if isinstance(exc, OSError) and exc.filename and exc.strerror
            else exc
        )  # the file, not an errno
        print(f"minterpr eval: error: {said}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from minterpr.data.formats.gallery import read_gallery
    from minterpr.data.formats.minterpedes import read_minterpedes
    from minterpr.evaluation.report import format_table, plot_metric_per_round
    from minterpr.evaluation.static import evaluate_dialogues, gallery_from_samples

    check_picture_options(args)
    run_dir, data = Path(args.run), Path(args.data)
    trained = load_pipeline_of(args, batch_size=args.batch_size)  # first: a broken run fails before the data
    from minterpr.data.build import check_if_built

    check_if_built(data.parent)  # a dataset minterpr built must be finished and unchanged; other folders read as is
    samples = read_minterpedes(data)
    gallery_path = Path(args.gallery) if args.gallery else default_gallery(data)
    gallery = read_gallery(gallery_path) if gallery_path else gallery_from_samples(samples)
    reranking = trained.extras.rerank_config()  # chosen on the validation split at training time
    if args.attribute_weight is not None:
        reranking = dataclasses.replace(reranking, attribute_weight=args.attribute_weight)
    if args.keep_rejected:
        reranking = dataclasses.replace(reranking, rejection=False)
    model = trained.model
    backend = trained.backend
    backend.allow_outside_root = args.allow_outside_root  # image paths leaving --image-root are refused otherwise
    protocol = {
        "dataset": str(data.parent),
        "split": data.stem,
        "dialogues": str(data),
        "gallery": str(gallery_path) if gallery_path else "targets+references",
        "model": str(trained.model_path),
        "image_encoder": model.config.image_encoder,
        "text_encoder": model.config.text_encoder,
        "selected": trained.extras.model_selection(),
    }
    if args.text_precision != "fp32":  # what ran: fp32 where ONNX Runtime cannot (another device)
        protocol["text_precision"] = backend.text_precision
    if args.image_precision != "fp32":
        protocol["image_precision"] = backend.image_precision
    root = args.image_root or str(data.parent)
    recorder = _recorder(args, samples, gallery)
    from minterpr.interaction.vlm_turn import turn_reader

    vlm = _vlm_reader(args)
    if vlm is not None:
        protocol["vlm"] = vlm.config.to_dict()
    index = None  # without --vlm-captions the replay indexes the gallery itself, as always
    if args.vlm_captions:  # MTG: the captions' evidence beside the image model's
        from minterpr.vlm.caption import use_captions

        index, captioned = use_captions(
            backend.index_images(list(gallery), root, progress=show_progress(args)),
            args.vlm_captions,
            args.vlm_caption_weight,
        )
        protocol.update(captioned)
    report = evaluate_dialogues(
        backend,
        samples,
        gallery,
        root,
        protocol,
        max_rounds=args.max_rounds,
        description_only=args.description_only,
        progress=show_progress(args),
        reranking=reranking,
        observe=recorder,
        read_facts=None if vlm is None else turn_reader(vlm),
        index=index,
    )
    if vlm is not None:
        report.extra["vlm"] = {"total": vlm.client.usage()}
        print(format_vlm_usage({"turns": None, **report.extra["vlm"]}))
        vlm.close()
    print(format_table(report))
    if write_json(args.json, report.to_json()) not in (None, STDOUT):
        log.info("wrote %s", args.json)
    if args.plot:
        name = run_dir.name + (" (description only)" if args.description_only else "")
        plot_metric_per_round({name: report}, args.plot, "r1", title=f"R@1 per round: {data.name}")
        log.info("wrote %s", args.plot)
    if recorder is not None:
        paths = write_static_pictures(args, recorder, samples, gallery, root)
        log.info("wrote %d ranked strip(s) to %s", len(paths), args.pictures_dir)
    return 0


def _vlm_reader(args: argparse.Namespace) -> Any:
    """The reading use of --vlm-* (a replay has recorded questions and references: reading is the one use)."""
    config = vlm_config(args)
    if config is None:
        return None
    if set(config.uses) - {"reading"}:
        raise InputError(
            f"minterpr eval replays recorded turns: --vlm-uses must be reading (got {','.join(config.uses)});"
            " measure asking, anchor and rerank with minterpr simulate"
        )
    from minterpr.vlm.assist import VLMAssistant

    return VLMAssistant(config)


# ----- pictures ------------------------------------------------------------------------------------


def _recorder(args: argparse.Namespace, samples: list, gallery: list) -> Any:
    if not args.pictures:
        return None
    from minterpr.evaluation.picture_recorders import RankRecorder, sample_queries

    picks = sample_queries(len(samples), args.pictures, args.pictures_seed)
    position = {image.path: i for i, image in enumerate(gallery)}
    return RankRecorder(picks, [position.get(samples[q].target_path) for q in picks], args.pictures_top)


def write_static_pictures(
    args: argparse.Namespace, recorder: Any, samples: list, gallery: list, root: str
) -> list[Path]:
    """One strip per recorded dialogue: its replayed turns, the top-k after each, the target framed."""
    from minterpr.evaluation.pictures import StripConfig, write_ranked_strip
    from minterpr.evaluation.static import dialogue_turns

    position = {image.path: i for i, image in enumerate(gallery)}
    paths = []
    for q in recorder.queries:
        sample = samples[q]
        views = recorder.views(q, dialogue_turns(sample, args.max_rounds, args.description_only), position.get)
        target = position.get(sample.target_path)
        person = gallery[target].person_id if target is not None else sample.person_id
        ranks = " -> ".join("?" if v.target_rank is None else str(v.target_rank + 1) for v in views)
        paths.append(
            write_ranked_strip(
                Path(args.pictures_dir) / f"query_{q:05d}.png",
                views,
                gallery,
                root=root,
                target=target,
                target_person=person,
                title=f"dialogue {q}, target {person}: rank {ranks}",
                config=StripConfig(top_k=args.pictures_top),
                allow_outside_root=args.allow_outside_root,
            )
        )
    return paths


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="replay recorded dialogues and report per-round metrics",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--run", required=True, metavar="RUN", help=RUN_HELP)
    parser.add_argument("--data", required=True, metavar="DIALOGUES.jsonl", help="MInterPEDES dialogues to replay")
    parser.add_argument(
        "--image-root", metavar="ROOT", help="image paths resolve here (default: the dialogue file's folder)"
    )
    parser.add_argument(
        "--gallery",
        metavar="GALLERY.jsonl",
        help="gallery manifest (default: gallery_<split>.jsonl beside --data, else targets + references)",
    )
    parser.add_argument("--plot", metavar="OUT.png", help="also plot R@1 per round (with n and a 95 %% band)")
    parser.add_argument("--max-rounds", type=int, metavar="N", help="replay rounds 0..N-1 only")
    parser.add_argument(
        "--description-only", action="store_true", help="single-shot baseline: every round uses the description alone"
    )
    parser.add_argument(
        "--attribute-weight",
        type=float,
        metavar="W",
        help="score = cosine + W * attribute log-likelihood of the parsed facts "
        "(default: the weight stored with the model, chosen on val; 0 = embedding only)",
    )
    parser.add_argument(
        "--keep-rejected",
        action="store_true",
        help="rank reference images the user rejected like any other image (default: below the rest)",
    )
    add_batch_size_argument(parser, "images / dialogues")
    add_text_precision_argument(parser)
    add_image_precision_argument(parser)
    parser.add_argument(
        "--allow-outside-root",
        action="store_true",
        help="read image paths that leave the image root (../x.jpg, absolute paths)",
    )
    add_picture_options(parser, "dialogues")
    add_vlm_arguments(parser, uses="reading")
    add_caption_arguments(parser)
    parser.set_defaults(handler=run)
    add_common_options(
        parser,
        device=True,
        json=True,
        needs=("model",),
        outputs=("plot",),
        json_help="write the evaluation report to PATH ('-' or no value: to stdout, the table to stderr)",
    )
