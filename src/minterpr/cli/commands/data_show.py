"""``minterpr data show``: render one MInterPEDES record (target, references, dialogue) as a PNG.

Exit 2 with a one-line reason for a missing file, an index out of range (the message says how
many records there are), a malformed record, a missing or unreadable image (named), or an
image path that leaves the image root (``--allow-outside-root`` reads it anyway).

Example:
    $ minterpr data show data/synth/test.jsonl --index 3 --out record3.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from minterpr.cli.shared.common import add_common_options
from minterpr.data.errors import DataError
from minterpr.errors import ImageError, InputError


def cmd_show(args: argparse.Namespace) -> int:
    from minterpr.data.render_record import RenderConfig, gallery_identities, read_record, render_record

    def fail(message: str) -> int:
        print(f"minterpr data show: error: {message}", file=sys.stderr)
        return 2

    path = Path(args.file)
    if not path.is_file():
        return fail(f"{args.file}: no such file")
    if args.image_root is not None and not Path(args.image_root).is_dir():
        return fail(f"{args.image_root}: --image-root is not a directory")
    try:
        sample, count = read_record(path, args.index)
    except IndexError as exc:
        return fail(str(exc))
    except DataError as exc:
        return fail(f"{exc.format()} (`minterpr data validate {args.file}` lists every bad record)")
    try:
        identities = gallery_identities(path)
    except DataError:
        identities = {}  # a broken manifest only loses the identity labels, not the picture
    root = Path(args.image_root) if args.image_root is not None else path.parent
    config = RenderConfig(width=args.width)
    try:
        out = render_record(
            sample, root, args.out, config, identities=identities, allow_outside_root=args.allow_outside_root
        )
    except (FileNotFoundError, ImageError) as exc:
        return fail(str(exc))
    except InputError as exc:
        return fail(f"{args.file}: record {args.index}: {exc}")
    dialogue = sample.dialogue
    print(
        f"record {args.index} of {count:,} ({sample.target_path}, {len(dialogue.qa_turns)} text turn(s), "
        f"{len(dialogue.reference_turns)} reference turn(s)) written to {out}"
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    show = subparsers.add_parser(
        "show",
        help="render one dialogue record as a PNG",
        description="Draw record K of a MInterPEDES file: the target image, each reference "
        "image with its feedback, and the dialogue text.",
    )
    show.add_argument("file", metavar="FILE", help="a MInterPEDES .jsonl file")
    show.add_argument("--index", type=int, default=0, metavar="K", help="0-based record index (default 0)")
    show.add_argument("--out", required=True, metavar="PNG", help="output image")
    show.add_argument(
        "--image-root", metavar="DIR", help="directory image paths are relative to (default: the file's directory)"
    )
    show.add_argument("--width", type=int, default=900, help="picture width in pixels (default 900)")
    show.add_argument(
        "--allow-outside-root",
        action="store_true",
        help="read image paths that leave the image root (../x.jpg, absolute paths)",
    )
    show.set_defaults(handler=cmd_show)
    add_common_options(show)
