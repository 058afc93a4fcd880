"""``minterpr data reid``: identity-disjoint re-identification manifests from CUHK03 and PETA.

CUHK03's 1,467 identities are split as CUHK03-NP's protocol sizes them (700 for test, the rest
for training), by a seeded draw (the official split file is not part of the data): ``test.jsonl``.
``--val-identities`` of the training identities become ``val.jsonl`` (the epoch is chosen on
it). ``train.jsonl`` holds the rest plus, with ``--peta``, the identities of a built PETA dataset's
*training* gallery with two crops or more (PETA's val and test identities stay out: they are
written to ``peta_val.jsonl`` and ``peta_test.jsonl``, with the camera the file names give for
3DPeS, GRID and CAVIAR4REID, to score "search with this image" across cameras).
``split.json`` records the seed and the counts. Images are referenced, never copied.

Example:
    $ minterpr data reid --cuhk03 ../shared/data/cuhk03 --peta data/peta_cw --out data/reid
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from minterpr.cli.shared.common import add_common_options

CUHK03_NP_TEST_IDENTITIES = 700


def run(args: argparse.Namespace) -> int:
    from minterpr.data.dataset import BuiltDataset
    from minterpr.data.errors import DataError
    from minterpr.data.reid import by_identity, read_cuhk03, read_gallery_identities, split_identities, write_manifest
    from minterpr.fileio import atomic_write_text

    try:
        cuhk03 = read_cuhk03(args.cuhk03)
        rest, test = split_identities(cuhk03, test_identities=CUHK03_NP_TEST_IDENTITIES, seed=args.seed)
        train, val = split_identities(rest, test_identities=args.val_identities, seed=args.seed)
        built = BuiltDataset(args.peta) if args.peta else None
        peta = read_gallery_identities(built.gallery_path("train")) if built else []
        # PETA's val and test identities, cameras read from file names: "search with this image"
        peta_eval = (
            {
                f"peta_{split}": read_gallery_identities(built.gallery_path(split), camera_from_name=True)
                for split in ("val", "test")
            }
            if built
            else {}
        )
    except (DataError, ValueError) as err:
        print(f"minterpr data reid: error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = {"train": train + peta, "val": val, "test": test, **peta_eval}
    counts = {}
    for name, images in parts.items():
        write_manifest(images, out / f"{name}.jsonl")
        counts[name] = {"images": len(images), "identities": len(by_identity(images))}
    counts["train"]["peta_identities"] = len(by_identity(peta))
    summary = {
        "seed": args.seed,
        "protocol": "CUHK03-NP sizes (700 test identities), seeded draw",
        "cuhk03": str(Path(args.cuhk03).resolve()),
        "peta": args.peta,
        "splits": counts,
    }
    atomic_write_text(out / "split.json", json.dumps(summary, indent=2) + "\n")
    for name, count in counts.items():
        print(f"{name:9s} {count['images']:6,d} crops {count['identities']:5,d} identities")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reid",
        help="re-identification manifests (CUHK03 + PETA identities)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cuhk03", required=True, metavar="DIR", help="the CUHK03 folder (images/PPPP_NN.jpg)")
    parser.add_argument(
        "--peta", metavar="DIR", help="a built PETA dataset (minterpr data peta): its training identities join"
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder (train/val/test.jsonl, split.json)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the identity draws (default 0)")
    parser.add_argument(
        "--val-identities", type=int, default=100, help="training identities held out for val (default 100)"
    )
    parser.set_defaults(handler=run)
    add_common_options(parser)
