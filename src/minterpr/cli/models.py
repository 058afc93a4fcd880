"""``minterpr models``: the models this installation can use, with their fingerprints.

Lists the shipped models (``models/``, pinned by ``models/zoo.json``), then the training runs and
exported model directories found under the folders given (default ``runs``, ``models``, ``outputs``
and each folder under ``outputs``: the run ``serve --demo`` trains is ``outputs/demo/run``). The
fingerprint is what a stored gallery records: a gallery opens only with the model that built it.

Example:
    $ minterpr models
    $ minterpr models runs/ outputs/demo --json models.json
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from minterpr.cli.common import add_common_options, write_json


def default_roots(base: Path = Path(".")) -> list[Path]:
    """Where runs are looked for when no folder is named: ``runs``, ``models``, ``outputs`` and each folder
    directly under ``outputs`` (``serve --demo`` trains into ``outputs/demo/run``, ``demo`` into
    ``outputs/demo``...).

    >>> default_roots(Path("/nonexistent"))[:3]
    [PosixPath('/nonexistent/runs'), PosixPath('/nonexistent/models'), PosixPath('/nonexistent/outputs')]
    """
    outputs = base / "outputs"
    under = sorted(p for p in outputs.iterdir() if p.is_dir()) if outputs.is_dir() else []
    return [base / "runs", base / "models", outputs, *under]


def run(args: argparse.Namespace) -> int:
    from minterpr.errors import InputError
    from minterpr.runtime.catalogue import describe_models

    missing = [root for root in args.roots if not Path(root).is_dir()]
    if missing:  # a folder named on the command line must exist; the defaults may not
        raise InputError(f"{missing[0]}: no such folder")
    entries = describe_models(args.roots or default_roots(), fingerprints=not args.no_fingerprints)
    if not entries:
        print("no models found (the shipped ones come with a source checkout; train one with `minterpr train`)")
    for entry in entries:
        what = entry.problem or f"{entry.image_encoder}  fingerprint {entry.fingerprint or '-'}"
        print(f"{entry.kind:8}  {entry.name}  {what}")
    write_json(args.json, [dict(dataclasses.asdict(e), path=str(e.path)) for e in entries])
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("models", help="list the shipped models, runs and exported models",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="*", metavar="DIR", help="folders to look in (default: runs, models, outputs and the folders under outputs)")
    parser.add_argument("--no-fingerprints", action="store_true", help="do not compute the fingerprints (each model is still loaded to check it)")
    parser.set_defaults(handler=run)
    add_common_options(parser, json=True)
