"""``minterpr data synth``, ``data peta``, ``data pa100k``: build datasets in minterpr's layout;
``data mark``: fingerprint a folder assembled by hand.

Every build marks its folder *in progress* first and *finished* last, with a fingerprint of the
files (:mod:`minterpr.data.build`); readers refuse an unfinished or changed build and name the
command that rebuilds it. Rerunning a build over a broken one rebuilds it; ``synth`` reuses a
finished build with the same settings when its fingerprint verifies.

Example:
    $ minterpr data synth --out /tmp/tiny --train-identities 20 --val-identities 6 --test-identities 8
    $ minterpr data mark my_dataset
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from minterpr.cli.shared.common import add_common_options, show_progress, write_json
from minterpr.data.dialogue_synthesis import DialogueSynthesisConfig


def _dialogue_config(args: argparse.Namespace) -> DialogueSynthesisConfig:
    return DialogueSynthesisConfig(
        seed=args.seed,
        max_qa_turns=args.max_qa_turns,
        max_image_turns=args.max_image_turns,
        min_qa_turns=min(1, args.max_qa_turns),
        min_image_turns=min(1, args.max_image_turns),
        description_style=args.description_style,
    )


def _print_summary(out: Path, info: dict) -> None:
    print(f"dataset written to {out}")
    print(f"{'split':6} {'images':>7} {'ids':>6} {'records':>8} {'ambiguous@desc':>15} {'ambiguous@text':>15}")
    for split, s in info["splits"].items():
        print(
            f"{split:6} {s['images']:7,} {s['identities']:6,} {s['records']:8,} "
            f"{s['ambiguity_description']:14.1f}% {s['ambiguity_after_text_turns']:14.1f}%"
        )
    print("ambiguous = targets whose stated attributes also fit >= 5 other identities of the split")


def _marker_identity(out: Path) -> tuple[int, int] | None:
    """Inode and mtime of DIR/dataset.json: unchanged after a build means it was reused."""
    try:
        stat = os.stat(out / "dataset.json")
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def cmd_synth(args: argparse.Namespace) -> int:
    from minterpr.data.synthetic.dataset import SyntheticDatasetConfig, build_synthetic_dataset
    from minterpr.data.synthetic.world import SyntheticWorldConfig

    world = SyntheticWorldConfig(
        seed=args.seed,
        train_identities=args.train_identities,
        val_identities=args.val_identities,
        test_identities=args.test_identities,
        cameras=args.cameras,
        image_size=(args.height, args.width),
        workers=args.workers,
    )
    config = SyntheticDatasetConfig(world=world, dialogues=_dialogue_config(args))
    before = _marker_identity(Path(args.out))
    info = build_synthetic_dataset(args.out, config, progress=show_progress(args), force=args.force)
    if before is not None and before == _marker_identity(Path(args.out)):
        print(f"{args.out} already holds this build (fingerprint verified); --force rebuilds it")
        return 0
    _print_summary(Path(args.out), info)
    return 0


def cmd_peta(args: argparse.Namespace) -> int:
    from minterpr.data.peta_dialogues import build_peta_dataset

    if not Path(args.root).exists():
        print(f"minterpr data peta: error: {args.root}: no such directory", file=sys.stderr)
        return 2
    info = build_peta_dataset(
        args.root,
        args.out,
        seed=args.seed,
        dialogues=_dialogue_config(args),
        progress=show_progress(args),
        hold_out=args.hold_out or (),
    )
    _print_summary(Path(args.out), info)
    write_json(args.json, json.dumps(info, indent=2))
    return 0


def cmd_pa100k(args: argparse.Namespace) -> int:
    from minterpr.data.layout import gallery_file
    from minterpr.data.pa100k_gallery import build_pa100k_gallery

    info = build_pa100k_gallery(args.root, args.out)
    if not args.quiet:
        print(f"gallery manifests written to {args.out}")
        for split, s in info["splits"].items():
            print(f"{split:6} {s['images']:7,} images  ({gallery_file(split)})")
    return 0


def cmd_mark(args: argparse.Namespace) -> int:
    from minterpr.data.build import mark_dataset

    marker = mark_dataset(args.dir)
    images = marker["fingerprint"].get("images")
    print(
        f"{args.dir}: marked: {len(marker['fingerprint']['files'])} files"
        + (f", {images['files']:,} files under {images['folder']}/" if images else "")
        + "; commands that need a built dataset now read it, and refuse it once a file changes"
    )
    return 0


def _add_dialogue_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, metavar="DIR", help="output dataset directory")
    parser.add_argument("--seed", type=int, default=0, help="seed (same seed, byte-identical files)")
    parser.add_argument("--max-qa-turns", type=int, default=3, help="text Q&A turns per dialogue: 1..N (default 3)")
    parser.add_argument("--max-image-turns", type=int, default=3, help="reference-image turns: 1..N (default 3)")
    parser.add_argument(
        "--description-style",
        choices=("synthetic", "caption"),
        default="synthetic",
        help="first descriptions: short synthetic ones (default) or longer ones in the style of "
        "real CUHK-PEDES captions (docs/language.md)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    synth = subparsers.add_parser(
        "synth",
        help="render the synthetic pedestrian world and its dialogues",
        description="Render a licence-free synthetic world (identity-disjoint splits, "
        "multi-camera, near-twins) and write MInterPEDES dialogues.",
    )
    _add_dialogue_options(synth)
    synth.add_argument("--train-identities", type=int, default=2000)
    synth.add_argument("--val-identities", type=int, default=300)
    synth.add_argument("--test-identities", type=int, default=400)
    synth.add_argument("--cameras", type=int, default=6)
    synth.add_argument("--height", type=int, default=256, help="image height in pixels (default 256)")
    synth.add_argument("--width", type=int, default=128, help="image width in pixels (default 128)")
    synth.add_argument("--workers", type=int, default=2, help="rendering processes (default 2)")
    synth.add_argument("--force", action="store_true", help="rebuild even if DIR holds the same build")
    synth.set_defaults(handler=cmd_synth)
    add_common_options(synth)

    peta = subparsers.add_parser(
        "peta",
        help="write PETA dialogues on real images",
        description="Identity-disjoint splits of PETA (multi-camera subsets in val/test), "
        "gallery manifests and MInterPEDES dialogues; images are linked, not copied.",
    )
    peta.add_argument("--root", required=True, metavar="PETA", help="the PETA folder (or its 'PETA dataset' folder)")
    _add_dialogue_options(peta)
    peta.add_argument(
        "--hold-out",
        action="append",
        metavar="SUBSET",
        help="cross-camera fold: test = every image of this PETA subset (repeatable, or a comma "
        "list: MIT, GRID, CUHK, ...); train/val = identity-disjoint parts of the others",
    )
    peta.set_defaults(handler=cmd_peta)
    add_common_options(
        peta,
        json=True,
        json_help="also write the build summary as JSON to PATH ('-' or no value: "
        "to stdout, the summary table to stderr)",
    )

    pa100k = subparsers.add_parser(
        "pa100k",
        help="write PA-100K gallery manifests (images linked, not copied)",
        description="Gallery manifests of a PA-100K copy (annotation.mat + data/): one per "
        "annotation split and gallery_all.jsonl with every image; each image is "
        "its own person. For minterpr eval-attributes.",
    )
    pa100k.add_argument("--root", required=True, metavar="PA100K", help="folder holding annotation.mat and data/")
    pa100k.add_argument("--out", required=True, metavar="DIR", help="output dataset directory")
    pa100k.set_defaults(handler=cmd_pa100k)
    add_common_options(pa100k)  # --quiet also leaves the summary out

    mark = subparsers.add_parser(
        "mark",
        help="fingerprint a dataset folder assembled by hand",
        description="Read gallery_<split>.jsonl and <split>.jsonl strictly and write a "
        "finished build marker (dataset.json) with their fingerprint, so that "
        "train and simulate read the folder. Rerun it after editing the files.",
    )
    mark.add_argument("dir", metavar="DIR", help="folder with gallery_<split>.jsonl (and <split>.jsonl, images/)")
    mark.set_defaults(handler=cmd_mark)
    add_common_options(mark)
