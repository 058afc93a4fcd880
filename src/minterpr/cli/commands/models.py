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

``minterpr models quantize MODEL --data DIR [--out COPY]`` writes the int8 image tower of an
exported model directory (in place, or into a copy: the only way for a shipped model, which
``zoo.json`` pins), calibrated on crops of DIR (a built dataset's val gallery, or a folder of
crops such as your own cameras') and checked on other crops of it (:mod:`minterpr.models.onnx_int8`);
``--run COPY --image-precision int8`` on the commands that embed galleries then uses it.

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
    $ minterpr models quantize shipped --data data/peta_cw --out models-local/lite2-int8
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

LIST, FETCH, PUBLISH, QUANTIZE = "list", "fetch", "publish-appearance", "quantize"  # `minterpr models list` ...
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
        what += "  (int8 image tower: --image-precision int8)" if entry.image_int8 else ""
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


def quantize(args: argparse.Namespace) -> int:
    """Write the int8 image tower of a model directory (or of a copy, --out) from crops (models.onnx_int8)."""
    import shutil

    import numpy as np
    import torch

    from minterpr.cli.shared.model_options import gallery_images
    from minterpr.errors import InputError
    from minterpr.models.model_dir import is_model_dir, load_model_dir
    from minterpr.models.onnx_int8 import quantize_model_dir
    from minterpr.models.zoo import HUB_PREFIX, resolve_model, shipped_models_dir

    for name in ("calibration", "held_out"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    source = resolve_model(args.model)
    if not is_model_dir(source):
        raise InputError(
            f"{source}: not an exported model directory (`minterpr models export RUN --out DIR` makes one)"
        )
    if args.out is None and source.resolve().is_relative_to(shipped_models_dir().resolve()):
        raise InputError(
            f"{source}: a shipped model is pinned by zoo.json and stays as it is: write a copy with --out DIR"
        )
    if args.out is None and str(args.model).startswith(HUB_PREFIX):
        raise InputError(f"{args.model}: a hub model's cached snapshot stays as it is: write a copy with --out DIR")
    images_dir = Path(args.data)
    if not images_dir.is_dir():
        what = "not a folder" if images_dir.exists() else "no such folder"
        raise InputError(f"{images_dir}: {what} (--data names a built dataset or a folder of crops)")
    images = gallery_images(images_dir, None, "val")  # a dataset's val gallery, else every image in the folder
    want = args.calibration + args.held_out
    if len(images) < want:
        raise InputError(f"{images_dir}: {len(images)} crops, fewer than --calibration + --held-out = {want}")
    folder = source
    if args.out is not None:
        folder = Path(args.out)
        if folder.exists() and any(folder.iterdir()):
            raise InputError(f"{folder}: exists and is not empty (--out names a new folder for the copy)")
    # evenly spaced over the gallery (a built one is grouped by camera set): every camera in both parts
    spread = lambda count, pool: [pool[int(i)] for i in np.linspace(0, len(pool) - 1, count).round()]  # noqa: E731
    calibration = spread(args.calibration, list(range(len(images))))
    taken = set(calibration)
    held_out = spread(args.held_out, [i for i in range(len(images)) if i not in taken])
    model = load_model_dir(source)[0]  # a copy (--out) holds the same weights: loaded once
    root = _image_root(images_dir)

    def pixels(rows: list[int]) -> "torch.Tensor":  # (N, 3, H, W)
        return torch.stack([model.preprocess.load(root / images[i].path) for i in rows])

    calibration_pixels, held_out_pixels = pixels(calibration), pixels(held_out)  # unreadable crops fail here
    if folder != source:
        shutil.copytree(source, folder, dirs_exist_ok=True)
    try:
        entry = quantize_model_dir(
            folder,
            calibration_pixels,
            held_out_pixels,
            source=f"{len(calibration)} + {len(held_out)} crops of {images_dir.resolve().name}",
            model=model,
        )
    except BaseException:
        if folder != source:  # no half-made copy left behind
            shutil.rmtree(folder, ignore_errors=True)
        raise
    drift = entry["drift"]
    print(
        f"wrote {folder / entry['file']} ({entry['bytes'] / 1e6:.2f} MB, sha256 {entry['sha256'][:12]}...); "
        f"on {args.held_out} held-out crops: embedding cosine mean {drift['cosine_mean']} "
        f"(min {drift['cosine_min']}), label decisions kept {drift['decisions_kept']:.1%}; "
        f"use it with --run {folder} --image-precision int8"
    )
    write_json(args.json, entry)
    return 0


def _image_root(images_dir: Path) -> Path:
    """Where a folder's gallery paths resolve: a built dataset's image root, else the folder."""
    from minterpr.data.dataset import BuiltDataset

    return BuiltDataset(images_dir).image_root


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


def _add_quantize(sub: argparse._SubParsersAction) -> None:
    parser = _subcommand(
        sub, QUANTIZE, "write the int8 image tower of a model directory (--image-precision int8)", quantize
    )
    parser.add_argument("model", metavar="MODEL", help="an exported model directory, or shipped[:NAME] with --out")
    parser.add_argument(
        "--data",
        required=True,
        metavar="DIR",
        help="crops to calibrate and check it on: a built dataset (its val gallery) or a folder of crops "
        "(e.g. your own cameras')",
    )
    parser.add_argument(
        "--out", metavar="DIR", help="write a copy of the model directory there with the int8 tower (default: in place)"
    )
    parser.add_argument("--calibration", type=int, default=160, help="crops the ranges come from (default 160)")
    parser.add_argument("--held-out", type=int, default=160, help="other crops the drift is measured on (default 160)")


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
    _add_quantize(sub)
    export = importlib.import_module(EXPORT_MODULE)
    export.register(sub)
    export.register_alias(subparsers)  # `minterpr export`, the earlier name: left out of --help's list
