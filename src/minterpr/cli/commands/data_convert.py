"""``minterpr data convert``: a text-based person search dataset in minterpr's training layout.

Reads CUHK-PEDES (``reid_raw.json``), ICFG-PEDES (``ICFG-PEDES.json``), RSTPReid
(``data_captions.json``), TBPS-CLIP style files (``{train,val,test}_reid.json``, several files
or their folder) or ChatPedes annotations, checks every record and every image, keeps the
official splits (identity-disjoint, checked; ICFG-PEDES's val is drawn from its training
identities) and writes ``train/val/test.jsonl`` dialogues, ``gallery_<split>.jsonl`` manifests
and the build marker (:mod:`minterpr.data.convert`). The images folder is linked, not copied.
A bad record exits 2 with ``FILE:RECORD: field: reason``.

Example:
    $ minterpr data convert --from cuhk-pedes --annotations CUHK-PEDES/reid_raw.json \\
          --images CUHK-PEDES/imgs --out data/cuhk-pedes
    $ minterpr train --config tiny --data data/cuhk-pedes --out runs/cuhk --set data.kind=custom
    $ minterpr eval --run runs/cuhk --data data/cuhk-pedes/test.jsonl --json eval.json --description-only
"""

from __future__ import annotations

import argparse
from pathlib import Path

from minterpr.cli.shared.common import add_common_options, show_progress


def cmd_convert(args: argparse.Namespace) -> int:
    from minterpr.data.convert import ConvertConfig, convert_dataset

    config = ConvertConfig(
        args.source_format,
        tuple(args.annotations),
        args.images,
        seed=args.seed,
        val_fraction=args.val_fraction,
        synthesise_dialogues=args.synthesise_dialogues,
        max_qa_turns=args.max_qa_turns,
        max_image_turns=args.max_image_turns,
    )
    marker = convert_dataset(config, args.out, progress=show_progress(args))
    print(
        f"dataset written to {Path(args.out)} ({marker['name']}; dialogues: "
        f"{marker['dialogues'] if isinstance(marker['dialogues'], str) else 'synthesised from the captions'})"
    )
    print(f"{'split':6} {'images':>8} {'ids':>7} {'records':>9}")
    for split, counts in marker["splits"].items():
        print(f"{split:6} {counts['images']:8,} {counts['identities']:7,} {counts['records']:9,}")
    if isinstance(marker["val_split"], dict):
        print(f"val: {marker['val_split']['identities']:,} identities drawn from train (the source has no val split)")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    from minterpr.data.convert import CONVERT_FORMATS

    parser = subparsers.add_parser(
        "convert",
        help="convert CUHK-PEDES, ICFG-PEDES, RSTPReid, TBPS or ChatPedes into the training layout",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--from", dest="source_format", required=True, choices=CONVERT_FORMATS, help="the annotations' format"
    )
    parser.add_argument(
        "--annotations",
        required=True,
        nargs="+",
        metavar="FILE",
        help="annotation file(s); tbps and chatpedes: one per split (or a folder of them)",
    )
    parser.add_argument(
        "--images",
        required=True,
        metavar="DIR",
        help="the image folder the annotations' paths are relative to (linked, not copied)",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="output dataset directory")
    parser.add_argument("--seed", type=int, default=0, help="seed of a drawn val split and of synthesised dialogues")
    parser.add_argument(
        "--val-fraction",
        type=float,
        default=0.1,
        help="share of training identities moved to val when the source has none (default 0.1)",
    )
    parser.add_argument(
        "--synthesise-dialogues",
        action="store_true",
        help="caption datasets: each caption opens a dialogue with Q&A and reference turns built "
        "from facts parsed out of the captions (default: the caption alone, round 0)",
    )
    parser.add_argument("--max-qa-turns", type=int, default=3, help="with --synthesise-dialogues: Q&A turns, 1..N")
    parser.add_argument(
        "--max-image-turns", type=int, default=3, help="with --synthesise-dialogues: reference-image turns, 1..N"
    )
    parser.set_defaults(handler=cmd_convert)
    add_common_options(parser)
