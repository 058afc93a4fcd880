"""``minterpr chat``: search a gallery in the terminal, with the system asking and showing images.

Type a description; the top results are listed with their camera and time (when the gallery
records them), their match probability (the page's bounded similarity) and which of your words they
match or contradict, then the system's question (answer it by typing) or its reference images.
The conversation itself, its in-chat commands (``:help``) and ``--transcript`` / ``--show``:
:mod:`minterpr.cli.shared.chat_loop`.

Example:
    $ minterpr chat --backend attribute --images data/synth --split test --transcript chat.json
    $ minterpr chat --run runs/synth --index galleries/synth-test  # a store from `minterpr index build`
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path
from typing import Any, TextIO

from minterpr.cli.shared.chat_loop import HELP, ChatLoop
from minterpr.cli.shared.common import CLIError, add_common_options, show_progress
from minterpr.cli.shared.model_options import (
    add_backend_arguments,
    build_index,
    check_backend_arguments,
    gallery_images,
    load_backend,
    load_pipeline_of,
)
from minterpr.cli.shared.vlm_options import add_caption_arguments, add_vlm_arguments, vlm_config


def cmd_chat(args: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    from minterpr.interaction.session import Session

    out = stdout or sys.stdout
    check_backend_arguments(args)
    times = None
    if getattr(args, "index", None) is not None:  # a stored gallery (`minterpr index build`): no re-embedding
        backend, reranking, index = open_for_chat(args)  # refuses a store another model built
        times = store_times(args.index, len(index))
    else:
        images_dir = Path(args.images)
        if not images_dir.is_dir():
            raise CLIError(f"image directory not found: {images_dir}")
        images = gallery_images(images_dir, args.gallery, args.split)
        backend, extras = load_backend(args)
        reranking = extras.rerank_config()  # the run's stored scoring, else the defaults
        index = build_index(
            backend,
            images,
            str(images_dir),
            complete=False,  # chat reports skipped images
            progress=show_progress(args),
        )
    if args.vlm_captions:  # MTG: the captions' evidence beside the image model's (minterpr vlm caption)
        from minterpr.vlm.caption import use_captions

        index, captioned = use_captions(index, args.vlm_captions, args.vlm_caption_weight)
        print(
            f"MTG captions: {captioned.get('vlm_captioned', 0)} of {len(index)} images"
            + ("" if captioned else f" ({args.vlm_captions} holds none)"),
            file=out,
        )
    skipped = tuple(getattr(index, "skipped", ()) or ())
    if skipped:  # one line, then the chat goes on without them
        path, reason = skipped[0]
        print(f"{len(skipped)} images could not be read and were left out, e.g. {path}: {reason}", file=out)
    # the user's own terminal: example images may be any file the user can read
    options = dict(
        question_policy=args.questions,
        reference_policy=args.references,
        schedule=args.schedule,
        seed=args.seed,
        reranking=reranking,
        allow_external_images=True,
        vlm=_assistant(args),
    )
    transcript = getattr(args, "transcript", None)
    loop = ChatLoop(
        Session(backend, index, **options),
        out,
        top=args.top,
        transcript=transcript,
        show=getattr(args, "show", None),
        times=times,
    )
    if transcript is not None:
        if os.path.exists(transcript):
            loop.session = Session.load_history(transcript, backend, index, **options)
            print(f"continuing the conversation in {transcript} ({len(loop.session.history)} turns)", file=out)
            if loop.session.step is not None:
                loop.show(loop.session.step)
        loop._save(transcript)  # an unwritable FILE fails now, not after the first turn
    # bytes, decoded line by line: a line that is not UTF-8 is that line's error, not the chat's end
    lines = stdin if stdin is not None else getattr(sys.stdin, "buffer", sys.stdin)
    return loop.run(lines)


def _handler(args: argparse.Namespace) -> int:
    try:
        return cmd_chat(args)
    except CLIError as err:
        print(f"minterpr chat: error: {err}", file=sys.stderr)
        return 2


def _assistant(args: argparse.Namespace) -> Any:
    """The --vlm-* model for the session (docs/vlm.md), or None."""
    config = vlm_config(args)
    if config is None:
        return None
    from minterpr.vlm.assist import VLMAssistant

    return VLMAssistant(config)


# the in-chat commands (chat_loop's :help), for `minterpr chat --help`
_IN_CHAT = "in-chat commands (a line starting with ':'):\n" + textwrap.indent(
    textwrap.dedent(HELP.split("\n\n    While", 1)[0]).strip("\n"), "  "
)


def register(subparsers: argparse._SubParsersAction) -> None:
    from minterpr.interaction.policies import QUESTION_POLICIES, REFERENCE_POLICIES
    from minterpr.interaction.schedule import SCHEDULES

    p = subparsers.add_parser(
        "chat",
        help="interactive search in the terminal (reads standard input)",
        description="Describe a person, answer the system's questions, judge results. "
        "Reads one line at a time from standard input (a terminal, or a "
        "file / pipe: `minterpr chat ... < lines.txt`) until :quit or its end.",
        epilog=_IN_CHAT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_backend_arguments(p, default_run="shipped")  # real photos by default: the shipped real-pixel model
    add_vlm_arguments(p)
    add_caption_arguments(p)
    gallery = p.add_mutually_exclusive_group(required=True)
    gallery.add_argument("--images", metavar="DIR", help="image directory (with gallery_<split>.jsonl, or images)")
    gallery.add_argument(
        "--index",
        metavar="INDEX_DIR",
        help="a gallery store built by `minterpr index build` with --run's model (nothing is re-embedded)",
    )
    p.add_argument("--gallery", metavar="FILE", help="gallery manifest (default: DIR/gallery_<split>.jsonl)")
    p.add_argument("--split", default="test")
    p.add_argument("--top", type=int, default=5, help="results listed per turn")
    p.add_argument("--questions", default="info_gain", choices=QUESTION_POLICIES.names())
    p.add_argument("--references", default="diverse", choices=REFERENCE_POLICIES.names())
    p.add_argument("--schedule", default="auto", choices=["auto", *SCHEDULES])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--transcript",
        metavar="FILE",
        help="save the conversation to FILE after every turn (continues FILE if it exists)",
    )
    p.add_argument(
        "--show",
        metavar="DIR",
        help="after every turn, draw the ranking so far (one row per turn) as DIR/turn_<N>.png and print its path",
    )
    p.set_defaults(handler=_handler)
    add_common_options(p, device=True)


def store_times(directory: str | os.PathLike[str], count: int) -> list[str | None] | None:
    """Each image's capture time from a store's metadata (``time``), or None when it records none."""
    from minterpr.index.store.gallery_store import open_gallery

    metadata = getattr(open_gallery(directory, mmap=True, fused=False), "metadata", None)
    if not metadata or len(metadata) != count:
        return None
    times = [m.get("time") if isinstance(m, dict) else None for m in metadata]
    return [str(t) if t is not None else None for t in times] if any(t is not None for t in times) else None


def open_for_chat(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """``chat --index DIR``: (backend, scoring, index) of ``--run`` and the store, which must be
    one that model built (DatasetError otherwise: one line, exit 2)."""
    from minterpr.index.store.gallery_store import load_gallery

    if getattr(args, "backend", None) is not None or getattr(args, "run", None) is None:  # --run has a default
        raise CLIError("--index needs --run RUN: the model that built the store embeds the queries")
    if not Path(args.index).is_dir():
        raise CLIError(f"gallery store not found: {args.index} (build one with `minterpr index build`)")
    pipeline = load_pipeline_of(args)
    index = load_gallery(args.index, expected_fingerprint=pipeline.fingerprint)
    return pipeline.backend, pipeline.rerank_config(), index
