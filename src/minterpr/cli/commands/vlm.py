"""``minterpr vlm caption`` (the ``--vlm-*`` options it shares with ``simulate``, ``eval``, ``chat``
and ``serve`` live in :mod:`minterpr.cli.shared.vlm_options`).

``minterpr vlm caption`` asks every crop of a gallery manifest (or of a gallery store, ``--index``)
the ontology's questions (CTGI's MTG) and appends captions and per-slot evidence to a JSONL file (a
store's own ``vlm_captions.jsonl`` by default), resuming where a stopped run ended.

Example:
    $ minterpr vlm caption --gallery data/synth/gallery_test.jsonl --root data/synth \\
          --out data/synth/mtg_test.jsonl --vlm-url http://localhost:11434/v1 --vlm-model qwen2.5vl:7b
    $ minterpr vlm caption --index galleries/street --vlm-url http://localhost:11434/v1 --vlm-model qwen2.5vl:7b
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from minterpr.cli.shared.common import add_common_options, write_json
from minterpr.cli.shared.vlm_options import add_vlm_arguments, vlm_config
from minterpr.errors import InputError

GIVE_UP_AFTER = 5  # crops in a row without a usable answer after which a run stops (serving/caption_jobs.py's too)
_NO_LIMIT = 2**62  # a budget no flag set: none


def cmd_caption(args: argparse.Namespace) -> int:
    from minterpr.data.formats.gallery import read_gallery
    from minterpr.vlm.caption import CAPTIONS_FILE, caption_gallery
    from minterpr.vlm.client import VLMClient

    config = vlm_config(args, "caption")
    if config is None:
        raise InputError("minterpr vlm caption needs --vlm-url and --vlm-model")
    if args.give_up_after < 1:
        raise InputError(f"--give-up-after must be >= 1, got {args.give_up_after}")
    # a run's budgets are the ones its flags set: a session's defaults would stop a large gallery
    # part-way whatever --vlm-max-calls said
    config = dataclasses.replace(
        config,
        max_calls=args.vlm_max_calls if args.vlm_max_calls is not None else _NO_LIMIT,
        max_total_tokens=args.vlm_max_tokens if args.vlm_max_tokens is not None else _NO_LIMIT,
    )
    if args.index is not None:  # a gallery store: its crops, its root, its own captions file (what serve reads)
        from minterpr.index.store.gallery_store import load_gallery

        index = load_gallery(args.index, fused=False)
        images, root = index.images, args.root or index.root
        out = args.out or str(Path(args.index) / CAPTIONS_FILE)
    else:
        if args.out is None:
            raise InputError("minterpr vlm caption --gallery needs --out CAPTIONS.jsonl (where the records go)")
        images, root, out = read_gallery(args.gallery), args.root or str(Path(args.gallery).parent), args.out

    def progress(done: int, total: int) -> None:
        if not args.quiet:
            print(f"\rcaptioned {done}/{total}", end="", file=sys.stderr, flush=True)

    with VLMClient(config) as client:
        report = caption_gallery(
            images,
            root,
            client,
            out,
            batch_size=args.batch_size,
            limit=args.limit,
            progress=progress,
            give_up_after=args.give_up_after,
        )
    if not args.quiet:
        print(file=sys.stderr)
    usage = report["usage"]
    print(
        f"captioned {report['captioned']} crops ({report['skipped']} already done, {report['nothing_seen']} with "
        f"nothing seen, {report['failed']} failed, {report['unreadable']} unreadable) in {report['seconds']:.1f} s: {usage['calls']} calls, "
        f"{usage['prompt_tokens'] + usage['completion_tokens']:,} tokens -> {out}"
    )
    if report["stopped"]:
        print(f"stopped: {report['stopped']} (run again to continue)")
    write_json(args.json, report)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "vlm",
        help="a vision-language model at ingestion (MTG captions)",
        description="Use an OpenAI-compatible vision-language model (docs/vlm.md).",
    )
    parser.set_defaults(group_parser=parser)
    sub = parser.add_subparsers(dest="vlm_command", metavar="VLM_COMMAND")
    caption = sub.add_parser(
        "caption",
        help="caption every crop of a gallery from the model's answers (resumable)",
        description="Ask each crop the ontology's questions; append caption and evidence.",
    )
    which = caption.add_mutually_exclusive_group(required=True)
    which.add_argument("--gallery", metavar="GALLERY.jsonl", help="the gallery manifest")
    which.add_argument(
        "--index",
        metavar="STORE",
        help="a gallery store (minterpr index build, an ingestion): its "
        "captions go into the store, where serve --vlm-captions reads them",
    )
    caption.add_argument(
        "--root", metavar="DIR", help="the image root (default: the manifest's folder, the store's root)"
    )
    caption.add_argument(
        "--out",
        metavar="CAPTIONS.jsonl",
        help="where records go (appended; resumed; default with --index: STORE/vlm_captions.jsonl)",
    )
    caption.add_argument("--batch-size", type=int, default=16, help="crops written per batch (default 16)")
    caption.add_argument("--limit", type=int, default=None, metavar="N", help="caption at most N more crops")
    caption.add_argument(
        "--give-up-after",
        type=int,
        default=GIVE_UP_AFTER,
        metavar="N",
        help=f"stop after N crops in a row without a usable answer (default {GIVE_UP_AFTER}, as the "
        "service's captioning job); run again to resume",
    )
    add_vlm_arguments(caption, uses=None)
    caption.set_defaults(handler=cmd_caption)
    add_common_options(caption, json=True)
