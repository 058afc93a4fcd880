"""``minterpr eval``: replay recorded dialogues against a gallery with a trained model.

Loads RUN_DIR/model.pt, ranks the gallery after every round (round 0 = the description, then
one round per recorded turn; an ended dialogue keeps its last query), prints the per-round
table (R@1/5/10, mAP, mINP, Hits@k, BRI), writes the evaluation JSON and, with ``--plot``, a
per-round R@1 PNG. The gallery is ``--gallery``, else ``gallery_<split>.jsonl`` beside the
dialogue file, else every target and reference image of the dialogues. Scores are the query
cosine plus the attribute evidence at the weight chosen on val at training time; a reference
image the user rejected stays below the images not rejected (``--keep-rejected`` turns it off).

Example:
    $ minterpr eval --run runs/synth --data data/synth/test.jsonl --image-root data/synth \\
          --json runs/synth/eval_test.json --plot runs/synth/eval_test.png
    $ minterpr eval --run runs/baseline --data data/synth/test.jsonl --image-root data/synth \\
          --json baseline.json --description-only
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path


def default_gallery(data: Path) -> Path | None:
    """``gallery_<split>.jsonl`` beside ``<split>.jsonl``, when it exists."""
    candidate = data.with_name(f"gallery_{data.stem}.jsonl")
    return candidate if candidate.is_file() else None


def run(args: argparse.Namespace) -> int:
    from minterpr.errors import MinterprError

    try:
        return _run(args)
    except (BrokenPipeError, MinterprError):  # the console command reports these (one line, exit 2)
        raise
    except (ValueError, OSError, ImportError) as exc:  # a missing --data file, no matplotlib for --plot
        print(f"minterpr eval: error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from minterpr.data.formats.gallery import read_gallery
    from minterpr.data.formats.minterpedes import read_minterpedes
    from minterpr.evaluation.report import format_table, plot_metric_per_round
    from minterpr.evaluation.static import evaluate_dialogues, gallery_from_samples
    from minterpr.trained_run import load_run

    run_dir, data = Path(args.run), Path(args.data)
    trained = load_run(run_dir, device=args.device)  # first: a broken run fails before the data is read
    from minterpr.data.build import check_if_built

    check_if_built(data.parent)  # a dataset minterpr built must be finished and unchanged; other folders read as is
    samples = read_minterpedes(data)
    gallery_path = Path(args.gallery) if args.gallery else default_gallery(data)
    gallery = read_gallery(gallery_path) if gallery_path else gallery_from_samples(samples)
    scoring = trained.extras.scoring_config()  # chosen on the validation split at training time
    if args.attribute_weight is not None:
        scoring = dataclasses.replace(scoring, attribute_weight=args.attribute_weight)
    if args.keep_rejected:
        scoring = dataclasses.replace(scoring, rejection=False)
    model = trained.model
    backend = trained.backend(args.batch_size)
    backend.allow_outside_root = args.allow_outside_root  # image paths leaving --image-root are refused otherwise
    protocol = {
        "dataset": str(data.parent), "split": data.stem, "dialogues": str(data),
        "gallery": str(gallery_path) if gallery_path else "targets+references",
        "model": str(trained.model_path), "image_encoder": model.config.image_encoder,
        "text_encoder": model.config.text_encoder, "selected": trained.extras.model_selection(),
    }
    report = evaluate_dialogues(backend, samples, gallery, args.image_root or str(data.parent), protocol,
                                max_rounds=args.max_rounds, description_only=args.description_only,
                                progress=not args.quiet, scoring=scoring)
    print(format_table(report))
    report.save(args.json)
    print(f"wrote {args.json}")
    if args.plot:
        name = run_dir.name + (" (description only)" if args.description_only else "")
        plot_metric_per_round({name: report}, args.plot, "r1", title=f"R@1 per round: {data.name}")
        print(f"wrote {args.plot}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("eval", help="replay recorded dialogues and report per-round metrics",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, metavar="RUN_DIR", help="run directory (its model.pt) or a model file")
    parser.add_argument("--data", required=True, metavar="DIALOGUES.jsonl", help="MInterPEDES dialogues to replay")
    parser.add_argument("--image-root", metavar="ROOT",
                        help="image paths resolve here (default: the dialogue file's folder)")
    parser.add_argument("--gallery", metavar="GALLERY.jsonl",
                        help="gallery manifest (default: gallery_<split>.jsonl beside --data, "
                             "else targets + references)")
    parser.add_argument("--json", required=True, metavar="OUT.json", help="write the evaluation report here")
    parser.add_argument("--plot", metavar="OUT.png", help="also plot R@1 per round")
    parser.add_argument("--max-rounds", type=int, metavar="N", help="replay rounds 0..N-1 only")
    parser.add_argument("--description-only", action="store_true",
                        help="single-shot baseline: every round uses the description alone")
    parser.add_argument("--attribute-weight", type=float, metavar="W",
                        help="score = cosine + W * attribute log-likelihood of the parsed facts "
                             "(default: the weight stored with the model, chosen on val; 0 = embedding only)")
    parser.add_argument("--keep-rejected", action="store_true",
                        help="rank reference images the user rejected like any other image (default: below the rest)")
    parser.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    parser.add_argument("--batch-size", type=int, default=64, help="images / dialogues per forward pass")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--allow-outside-root", action="store_true",
                        help="read image paths that leave the image root (../x.jpg, absolute paths)")
    parser.set_defaults(handler=run)
