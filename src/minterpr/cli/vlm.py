"""``minterpr vlm caption``, and the ``--vlm-*`` options ``simulate``, ``eval`` and ``serve`` share.

``--vlm-url URL --vlm-model NAME [--vlm-key-env VAR] --vlm-uses reading,asking,anchor,rerank`` plug
in an OpenAI-compatible endpoint (docs/vlm.md); without ``--vlm-url`` nothing changes.
``minterpr vlm caption`` asks every crop of a gallery manifest the ontology's questions (CTGI's
MTG) and appends captions and per-slot evidence to a JSONL file, resuming where a stopped run ended.

Example:
    $ minterpr vlm caption --gallery data/synth/gallery_test.jsonl --root data/synth \\
          --out data/synth/mtg_test.jsonl --vlm-url http://localhost:11434/v1 --vlm-model qwen2.5vl:7b
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from minterpr.cli.common import add_common_options, write_json
from minterpr.errors import InputError


def add_vlm_arguments(parser: argparse.ArgumentParser, *, uses: str | None = "reading,asking") -> None:
    """The endpoint options; ``uses`` is --vlm-uses' default (None: a command with one use of its own)."""
    group = parser.add_argument_group("vision-language model (optional; docs/vlm.md)")
    group.add_argument("--vlm-url", metavar="URL", help="an OpenAI-compatible base URL, e.g. http://localhost:11434/v1")
    group.add_argument("--vlm-model", metavar="NAME", help="the model name the server knows")
    group.add_argument("--vlm-key-env", metavar="VAR", help="the NAME of the environment variable holding the API key")
    if uses is not None:
        group.add_argument("--vlm-uses", default=uses, metavar="USES",
                           help=f"comma-separated: reading, asking, anchor, rerank (default: {uses})")
    group.add_argument("--vlm-deadline", type=float, default=None, metavar="S",
                       help="longest a turn (or a crop) waits for the model (default: 10)")
    group.add_argument("--vlm-cache", metavar="FILE.json", help="keep the model's answers in FILE across runs")


def vlm_config(args: argparse.Namespace, uses: str | None = None) -> Any:
    """The VLMConfig of the command line, or None without --vlm-url; InputError for half a configuration."""
    url = getattr(args, "vlm_url", None)
    if url is None:
        if getattr(args, "vlm_model", None):
            raise InputError("--vlm-model needs --vlm-url (the endpoint to ask)")
        return None
    if not getattr(args, "vlm_model", None):
        raise InputError("--vlm-url needs --vlm-model (the model name the server knows)")
    from minterpr.vlm.config import VLMConfig, parse_uses
    options: dict[str, Any] = {}
    if args.vlm_deadline is not None:
        options["turn_deadline_s"] = args.vlm_deadline
        options["timeout_s"] = args.vlm_deadline
    return VLMConfig(url, args.vlm_model, key_env=args.vlm_key_env,
                     uses=parse_uses(uses if uses is not None else args.vlm_uses), cache_path=args.vlm_cache, **options)


def format_vlm_usage(usage: dict[str, Any]) -> str:
    """One line: the model's calls, tokens, latency and fallbacks (per turn when known)."""
    if usage.get("turns"):
        t = usage["per_turn"]
        return (f"vlm: {usage['turns']} turns, per turn {t['calls']:.2f} calls ({t['cached']:.2f} cached, "
                f"{t['fallbacks']:.2f} fell back), {t['tokens']:.0f} tokens, {1000 * t['latency_s']:.1f} ms")
    t = usage["total"]
    return (f"vlm: {t['calls']} calls ({t['cached']} cached, {t['failed']} fell back), "
            f"{t['prompt_tokens'] + t['completion_tokens']:,} tokens, {t['latency_s']:.1f} s")


def cmd_caption(args: argparse.Namespace) -> int:
    from minterpr.data.formats.gallery import read_gallery
    from minterpr.vlm.caption import caption_gallery
    from minterpr.vlm.client import VLMClient

    config = vlm_config(args, "caption")
    if config is None:
        raise InputError("minterpr vlm caption needs --vlm-url and --vlm-model")
    images = read_gallery(args.gallery)
    root = args.root or str(Path(args.gallery).parent)

    def progress(done: int, total: int) -> None:
        if not args.quiet:
            print(f"\rcaptioned {done}/{total}", end="", file=sys.stderr, flush=True)

    with VLMClient(config) as client:
        report = caption_gallery(images, root, client, args.out, batch_size=args.batch_size, limit=args.limit,
                                 progress=progress)
    if not args.quiet:
        print(file=sys.stderr)
    usage = report["usage"]
    print(f"captioned {report['captioned']} crops ({report['skipped']} already done, {report['failed']} failed, "
          f"{report['unreadable']} unreadable) in {report['seconds']:.1f} s: {usage['calls']} calls, "
          f"{usage['prompt_tokens'] + usage['completion_tokens']:,} tokens -> {args.out}")
    if report["stopped"]:
        print(f"stopped: {report['stopped']} (run again to continue)")
    write_json(args.json, report)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("vlm", help="a vision-language model at ingestion (MTG captions)",
                                   description="Use an OpenAI-compatible vision-language model (docs/vlm.md).")
    parser.set_defaults(group_parser=parser)
    sub = parser.add_subparsers(dest="vlm_command", metavar="VLM_COMMAND")
    caption = sub.add_parser("caption", help="caption every crop of a gallery from the model's answers (resumable)",
                             description="Ask each crop the ontology's questions; append caption and evidence.")
    caption.add_argument("--gallery", required=True, metavar="GALLERY.jsonl", help="the gallery manifest")
    caption.add_argument("--root", metavar="DIR", help="the image root (default: the manifest's folder)")
    caption.add_argument("--out", required=True, metavar="CAPTIONS.jsonl", help="where records go (appended; resumed)")
    caption.add_argument("--batch-size", type=int, default=16, help="crops written per batch (default 16)")
    caption.add_argument("--limit", type=int, default=None, metavar="N", help="caption at most N more crops")
    add_vlm_arguments(caption, uses=None)
    caption.set_defaults(handler=cmd_caption)
    add_common_options(caption, json=True)
