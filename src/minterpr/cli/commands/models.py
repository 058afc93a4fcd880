"""``minterpr models``: the models this installation can use, with their fingerprints; getting,
publishing and exporting them.

``minterpr models list [DIR ...]`` lists the shipped models (``models/``, pinned by
``models/zoo.json``), then the training runs and exported model directories found under the
folders given (default ``runs``, ``models``, ``outputs`` and each folder under ``outputs``: the
run ``serve --demo`` trains is ``outputs/demo/run``). The fingerprint is what a stored gallery
records: a gallery opens only with the model that built it. Then the detection models of the
detector catalogue, and whether each is in the model cache. ``list`` is the default: when the
word after ``models`` names no subcommand, ``minterpr models`` and ``minterpr models DIR`` list.

``minterpr models fetch NAME`` downloads a catalogue model (``yolox-nano``) into the model cache,
with a progress bar, resuming an interrupted download, checked against the SHA-256 the catalogue
pins; ``--from FILE|URL`` takes a copy you already have, ``--sha256 HEX`` accepts a file whose
hash you have checked yourself (:mod:`minterpr.ingest.fetch`).

``minterpr models publish-appearance BEST_PT`` publishes a reid run's checkpoint as the shipped
appearance model (``models/osnet-x0_25-reid``: safetensors, float16 when the vectors stay within
cosine 0.9999 and ``--check``'s rank-1 is unchanged, pinned in ``models/zoo.json``; its model card
and licence note must be there first: :func:`minterpr.training.publish.publish_appearance`).

``minterpr models export RUN --out DIR`` writes a trained run as a portable model directory
(safetensors + JSON, :mod:`minterpr.cli.commands.models_export`); ``minterpr export``, its earlier
name, stays as an alias that says so.

Each subcommand takes only its own options (``--from`` goes with ``fetch``, ``--check`` with
``publish-appearance``...): ``minterpr models SUBCOMMAND --help`` lists them.

Example:
    $ minterpr models
    $ minterpr models list runs/ outputs/demo --json models.json
    $ minterpr models fetch yolox-nano
    $ minterpr models fetch yolox-nano --from ~/Downloads/yolox_nano.onnx
    $ minterpr models publish-appearance runs/reid/best.pt --check data/reid/val.jsonl
    $ minterpr models export runs/synth --out models/synth
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
from pathlib import Path
from typing import Callable

from minterpr.cli.shared.common import add_common_options, write_json

LIST, FETCH, PUBLISH = "list", "fetch", "publish-appearance"  # the subcommands: `minterpr models list` ...
EXPORT_MODULE = "minterpr.cli.commands.models_export"  # `models export` and its alias `minterpr export`


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


def list_models(args: argparse.Namespace) -> int:
    """``models list``: the shipped models, the runs and model directories under the folders, the detectors."""
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
        if entry.kind == "shipped" and not entry.problem:
            size = "" if entry.size_bytes is None else f", {entry.size_bytes / 1e6:.1f} MB"
            use = "--appearance" if entry.role == "appearance" else "--run"
            what += f"  ({entry.role} model: {use}{size})" + (f"  {entry.summary}" if entry.summary else "")
        print(f"{entry.kind:8}  {entry.name}  {what}")
    from minterpr.ingest.detector_zoo import CATALOGUE, cached_model

    for name, model in CATALOGUE.items():
        where = cached_model(name)
        state = f"in the cache: {where}" if where else f"not fetched (`minterpr models fetch {name}`)"
        print(f"detector  {name}  {model.summary}; {state}")
    write_json(args.json, [dict(dataclasses.asdict(e), path=str(e.path)) for e in entries])
    return 0


def publish(args: argparse.Namespace) -> int:
    """Publish a reid run's best.pt as the shipped appearance model models/NAME (training.publish)."""
    from minterpr.errors import InputError
    from minterpr.models.zoo import DEFAULT_APPEARANCE_MODEL, shipped_models
    from minterpr.training.publish import publish_appearance

    name = args.name or DEFAULT_APPEARANCE_MODEL
    summary = args.summary or shipped_models().get(name, {}).get("summary")
    if not summary:
        raise InputError(f"--summary: say in one line what models/{name} is (its first publication has none yet)")
    done = publish_appearance(args.checkpoint, name, summary, check=args.check, precision=args.precision)
    rank1 = ", ".join(f"{k} {v:.1f}" for k, v in done.rank1.items()) or "not measured (no --check)"
    print(
        f"published {done.path} ({done.precision}, {done.bytes / 1e6:.2f} MB, fingerprint {done.fingerprint}); "
        f"float16 cosine min {done.cosine_min:.6f}; check rank-1: {rank1}; models/zoo.json pins it"
    )
    write_json(args.json, {**dataclasses.asdict(done), "path": str(done.path)})
    return 0


def fetch(args: argparse.Namespace) -> int:
    """Download (or take ``--from``) a detector catalogue model into the model cache; print where it is."""
    from minterpr.ingest.fetch import fetch_model

    path = fetch_model(
        args.model,
        source=args.source,
        sha256=args.sha256,
        progress=not args.quiet and sys.stderr.isatty(),
        say=lambda line: print(line, file=sys.stderr),
    )
    print(path)
    write_json(args.json, {"model": args.model, "path": str(path)})
    return 0


def _subcommand(sub: argparse._SubParsersAction, name: str, line: str, handler: Callable) -> argparse.ArgumentParser:
    """The parser of ``models NAME``, with its handler and the common options (listed last in its help)."""
    parser = sub.add_parser(name, help=line, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(handler=handler)
    add_common_options(parser, json=True)
    return parser


def _add_list(sub: argparse._SubParsersAction) -> None:
    parser = _subcommand(
        sub, LIST, "list the shipped models, runs, exported models and detectors (the default)", list_models
    )
    parser.add_argument(
        "roots",
        nargs="*",
        metavar="DIR",
        help="folders to look in (default: runs, models, outputs and the folders under outputs)",
    )
    parser.add_argument(
        "--no-fingerprints",
        action="store_true",
        help="do not compute the fingerprints (each model is still loaded to check it)",
    )


def _add_fetch(sub: argparse._SubParsersAction) -> None:
    parser = _subcommand(sub, FETCH, "download a detector catalogue model (yolox-nano) into the model cache", fetch)
    parser.add_argument("model", metavar="NAME", help="the catalogue model (yolox-nano)")
    parser.add_argument(
        "--from",
        dest="source",
        metavar="FILE|URL",
        help="a copy you already have, or another URL to download it from (default: the catalogue's release URL)",
    )
    parser.add_argument(
        "--sha256",
        metavar="HEX",
        help="accept a file with this SHA-256 instead of the catalogue's pin (one you have checked yourself)",
    )


def _add_publish(sub: argparse._SubParsersAction) -> None:
    parser = _subcommand(sub, PUBLISH, "publish a reid run's checkpoint as the shipped appearance model", publish)
    parser.add_argument("checkpoint", metavar="BEST_PT", help="the reid run's checkpoint (runs/reid/best.pt)")
    parser.add_argument("--name", help="the folder under models/ (default: the shipped appearance model's)")
    parser.add_argument("--summary", help="what it is, one line (default: the one zoo.json has)")
    parser.add_argument(
        "--check",
        metavar="MANIFEST",
        help="a re-id manifest (val.jsonl) whose crops measure the float16 drift and rank-1 "
        "(default: seeded random inputs)",
    )
    parser.add_argument(
        "--precision",
        choices=("auto", "float16", "float32"),
        default="auto",
        help="how the weights are stored (auto: float16 when within tolerance)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser(
        "models",
        help="list the shipped models, runs and exported models; fetch, publish and export models",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    group.set_defaults(group_parser=group, default_subcommand=LIST)  # `minterpr models [DIR ...]` lists
    sub = group.add_subparsers(dest="models_command", metavar="MODELS_COMMAND")
    _add_list(sub)
    _add_fetch(sub)
    _add_publish(sub)
    export = importlib.import_module(EXPORT_MODULE)
    export.register(sub)
    export.register_alias(subparsers)  # `minterpr export`, the earlier name: left out of --help's list
