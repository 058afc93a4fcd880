"""``minterpr index``: embed a gallery once into a store that reopens in a second.

``index build`` embeds the images of a folder (its gallery manifest, or every image file in it)
with a trained run, skips and summarises the unreadable ones, and saves a gallery store
(:mod:`minterpr.index.store.gallery_store`: embeddings, attribute probabilities, the images and their
metadata, the model's fingerprint) with a vector index over it (``--backend``: ``exact``,
``faiss_hnsw``, ``faiss_ivfpq``, ``qdrant`` where installed; ``none`` for no vector index).
With 20,000 images or more (``--fused auto``, the default; ``yes`` / ``no`` force it) the store
also gets its fused index (:mod:`minterpr.index.store.fused_store`: the inverted lists sessions take
their shortlist from), saved beside it and memory-mapped when the store is opened; ``index fused
DIR`` builds one for a store saved without it. ``index info`` prints a store's manifest.
``--appearance`` (default ``auto``: the shipped appearance model beside the shipped attribute model)
adds same-person vectors (``appearance.npy``); ``index build --update --out STORE`` adds them to a
store built without them, from its stored crops and images, no video read again.
``minterpr chat --run RUN --index DIR`` then searches the store without re-embedding, and
refuses one built by another model.

Example:
    $ minterpr index build --run runs/synth --images data/synth --out galleries/synth-test
    $ minterpr index info galleries/synth-test
    $ minterpr index build --update --out galleries/lobby          # appearance vectors for an older store
    $ minterpr index fused galleries/old-store --fused-options '{"nprobe": 16}'
    $ minterpr chat --run runs/synth --index galleries/synth-test
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from minterpr.cli.shared.common import STDOUT, CLIError, add_common_options, show_progress, write_json
from minterpr.cli.shared.model_options import (
    add_appearance_argument,
    add_batch_size_argument,
    add_image_precision_argument,
    gallery_images,
)

DEFAULT_BACKEND = "exact"  # the vector index saved with a store unless --backend says otherwise
NO_BACKEND = "none"  # --backend none: the store alone (sessions scan the embeddings)


def cmd_build(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from minterpr.index.store.fused_store import build_fused, wants_fused
    from minterpr.index.store.gallery_store import save_gallery
    from minterpr.index.store.store_vectors import build_appearance_index, build_vector_index
    from minterpr.runtime.pipeline import load_pipeline

    out = out or sys.stdout
    if args.update:
        return cmd_update(args, out)
    if args.images is None:
        raise CLIError("index build: --images DIR is required (or --update --out STORE to add appearance vectors)")
    images_dir = Path(args.images)
    if not images_dir.is_dir():
        raise CLIError(f"image directory not found: {images_dir}")
    backend = args.backend
    if backend != NO_BACKEND:
        from minterpr.index.vectors.vector_index import VECTOR_INDEXES

        if backend not in VECTOR_INDEXES:  # before the embedding, not after it
            raise CLIError(
                f"--backend {backend!r} is not available here: choose one of "
                f"{', '.join([*VECTOR_INDEXES.names(), NO_BACKEND])}"
            )
    images = gallery_images(images_dir, args.gallery, args.split)
    if args.camera is not None:  # crops of one camera: images that name none get it
        images = [
            image if image.camera_id is not None else dataclasses.replace(image, camera_id=args.camera)
            for image in images
        ]
    pipeline = load_pipeline(
        args.run,
        device=args.device,
        batch_size=args.batch_size,
        appearance=args.appearance,
        image_precision=args.image_precision,
    )
    start = time.perf_counter()
    try:
        index = pipeline.index_images(
            images, root=os.path.abspath(images_dir), progress=show_progress(args, sys.stderr.isatty())
        )
    except ValueError as err:  # InputError: nothing readable, a path listed twice
        raise CLIError(str(err)) from None
    seconds = time.perf_counter() - start
    fingerprint = pipeline.fingerprint
    vectors = None if backend == NO_BACKEND else build_vector_index(backend, index, model_fingerprint=fingerprint)
    looks_index = build_appearance_index(
        None if vectors is None else backend, index, appearance_fingerprint=pipeline.appearance_fingerprint
    )
    start = time.perf_counter()
    fused = build_fused(index, **args.fused_options) if wants_fused(args.fused, len(index)) else None
    fused_s = time.perf_counter() - start
    save_gallery(
        index,
        args.out,
        model_fingerprint=fingerprint,
        vector_index=vectors,
        rebuild=_rebuild_command(args),
        fused_index=fused,
        appearance_fingerprint=pipeline.appearance_fingerprint,
        appearance_index=looks_index,
    )
    looks = "" if pipeline.appearance is None else f" and appearance model {pipeline.appearance_fingerprint}"
    print(
        f"indexed {len(index)} images in {seconds:.1f} s ({len(index) / max(seconds, 1e-9):.0f} images/s) "
        f"with model {fingerprint}{looks}",
        file=out,
    )
    if fused is not None:
        print(f"fused index: {fused.nlist} lists ({fused.kmeans} k-means) in {fused_s:.1f} s", file=out)
    if index.skipped:
        print(index.skipped_summary(), file=out)
    print(
        f"saved to {args.out} ({'no vector index' if vectors is None else f'{backend} vector index'}); "
        f"search it with: minterpr chat --run {shlex.quote(str(args.run))} --index {shlex.quote(str(args.out))}",
        file=out,
    )
    return 0


def cmd_update(args: argparse.Namespace, out: TextIO) -> int:
    """``index build --update --out STORE``: appearance vectors for every image of an existing store,
    read from the store's own crops and images (no video read again); the embeddings stay."""
    from minterpr.data.paths import resolve_under
    from minterpr.index.store.appearance_store import update_appearance
    from minterpr.index.store.gallery_store import STORE_ROOT, open_gallery
    from minterpr.runtime.appearance import AUTO, NONE, SHIPPED, load_appearance

    if args.images is not None or args.gallery is not None:
        raise CLIError("index build --update reads the images the store lists: leave out --images and --gallery")
    if args.appearance == NONE:
        raise CLIError("index build --update adds appearance vectors: --appearance none leaves nothing to add")
    folder = Path(args.out)
    # DatasetError (one line) for a missing or half-written store; its appearance index is replaced, not read
    stored = open_gallery(folder, fused=False, appearance_index=False)
    root = stored.manifest.root
    base = folder.absolute() if root in (None, STORE_ROOT) else Path(root)
    looks = load_appearance(SHIPPED if args.appearance == AUTO else args.appearance, batch_size=args.batch_size or 64)
    paths = [resolve_under(os.fspath(base), image.path) for image in stored.index.images]
    start = time.perf_counter()
    vectors, _, failed = looks.embed_files(paths)
    if failed:
        position, error = failed[0]
        raise CLIError(
            f"{folder}: {len(failed)} of its {len(paths)} images cannot be read any more (the first: "
            f"{error}); nothing was changed: restore them, or rebuild the store"
        )
    manifest = update_appearance(folder, vectors, looks.fingerprint)
    seconds = time.perf_counter() - start
    print(
        f"added appearance vectors ({len(vectors)} x {manifest.appearance['dim']}, appearance model "
        f"{looks.fingerprint}) to {folder} in {seconds:.1f} s ({len(vectors) / max(seconds, 1e-9):.0f} images/s)",
        file=out,
    )
    return 0


def _rebuild_command(args: argparse.Namespace) -> str:
    """The ``minterpr index build`` command line that rebuilds this store (named when it is refused)."""
    words = ["minterpr", "index", "build", "--run", str(args.run), "--images", str(args.images)]
    for flag, value in (("--gallery", args.gallery), ("--camera", args.camera)):
        if value is not None:
            words += [flag, str(value)]
    if args.split != "test":
        words += ["--split", args.split]
    if args.backend != DEFAULT_BACKEND:
        words += ["--backend", args.backend]
    if args.fused != "auto":
        words += ["--fused", args.fused]
    if args.fused_options:
        words += ["--fused-options", json.dumps(args.fused_options, sort_keys=True)]
    if args.appearance != "auto":
        words += ["--appearance", str(args.appearance)]
    return shlex.join([*words, "--out", str(args.out)])


def cmd_info(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from minterpr.index.store.gallery_store import VECTORS, read_manifest

    out = out or sys.stdout
    manifest = read_manifest(args.dir)  # DatasetError for a half-written store or another version
    data = dataclasses.asdict(manifest)
    vectors_manifest = Path(args.dir) / VECTORS / "index.json"
    if manifest.vector_backend is not None and vectors_manifest.is_file():
        data["vector_index"] = json.loads(vectors_manifest.read_text(encoding="utf-8"))
    if args.json:
        text = json.dumps(data, indent=2, ensure_ascii=False)
        if args.json == STDOUT and out is not sys.stdout:  # a caller's stream (tests, the Python API)
            print(text, file=out)
        else:
            write_json(args.json, text)
        return 0
    vector_index: Any = data.get("vector_index")
    rows = [
        ("store", os.fspath(args.dir)),
        ("format", f"{manifest.format} version {manifest.version}"),
        ("images", f"{manifest.count} ({manifest.skipped} skipped as unreadable)"),
        ("embeddings", f"{manifest.count} x {manifest.dim} float32"),
        ("attribute probabilities", "none" if manifest.labels is None else f"{manifest.count} x {manifest.labels}"),
        ("model fingerprint", manifest.model_fingerprint or "unknown"),
        ("image root", manifest.root or "-"),
        (
            "appearance vectors",
            "none (add them: minterpr index build --update --out STORE)"
            if manifest.appearance is None
            else f"{manifest.count} x {manifest.appearance.get('dim')} (appearance "
            f"model {manifest.appearance.get('model_fingerprint')}"
            + (f"; {looks} index" if (looks := manifest.appearance.get("vector_backend")) else "")
            + ")",
        ),
        (
            "vector index",
            "none"
            if manifest.vector_backend is None
            else f"{manifest.vector_backend} ({vector_index.get('count', '?')} vectors, "
            f"{json.dumps(vector_index.get('params', {}), sort_keys=True)})"
            if vector_index
            else f"{manifest.vector_backend} (its index.json is missing)",
        ),
        (
            "fused index",
            "none"
            if manifest.fused is None
            else f"{manifest.fused.get('nlist')} lists, nprobe {manifest.fused.get('nprobe')}, max_probe "
            f"{manifest.fused.get('max_probe')} ({manifest.fused.get('kmeans')} k-means, part version "
            f"{manifest.fused.get('version')})",
        ),
        ("created", manifest.created),
        ("rebuild", manifest.rebuild),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:>{width}}: {value}", file=out)
    return 0


def cmd_fused(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from minterpr.index.store.gallery_append import add_fused

    out = out or sys.stdout
    start = time.perf_counter()
    ivf = add_fused(args.dir, **args.fused_options)  # DatasetError for a store that does not open
    print(
        f"fused index of {len(ivf)} images saved in {args.dir}: {ivf.nlist} lists ({ivf.kmeans} k-means) "
        f"in {time.perf_counter() - start:.1f} s",
        file=out,
    )
    return 0


def _fused_options(text: str) -> dict[str, Any]:
    """--fused-options: a JSON object of FusedIVF options."""
    try:
        value = json.loads(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not JSON ({err})") from None
    allowed = {"nlist", "nprobe", "max_probe", "iterations", "seed", "kmeans"}
    if not isinstance(value, dict) or set(value) - allowed:
        raise argparse.ArgumentTypeError(f"must be a JSON object with keys among {', '.join(sorted(allowed))}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "index",
        help="embed a gallery once into a store; show a store",
        description="Gallery stores: embedded once, reopened without re-embedding.",
    )
    parser.set_defaults(group_parser=parser)
    sub = parser.add_subparsers(dest="index_command", metavar="INDEX_COMMAND")
    build = sub.add_parser(
        "build",
        help="embed a folder of images with a trained run and save the store",
        description="Embed a gallery with a trained run and save it (with a vector index).",
    )
    build.add_argument(
        "--run",
        default="shipped",
        metavar="RUN",
        help="a trained run directory (its model.pt), a model file or directory, 'shipped[:NAME]' or "
        "'hf-hub:ORG/NAME[@REV]' (default: shipped, the real-pixel model of models/)",
    )
    build.add_argument(
        "--images",
        metavar="DIR",
        help="image directory (with gallery_<split>.jsonl, or image files); required unless --update",
    )
    build.add_argument("--gallery", metavar="MANIFEST", help="gallery manifest (default: DIR/gallery_<split>.jsonl)")
    build.add_argument("--split", default="test", help="the split whose gallery_<split>.jsonl is read (default: test)")
    build.add_argument(
        "--out", required=True, metavar="INDEX_DIR", help="the store's folder (new, or a store to replace)"
    )
    build.add_argument(
        "--backend",
        default=DEFAULT_BACKEND,
        metavar="NAME",
        help="vector index saved with the store: exact, faiss_hnsw, faiss_ivfpq, qdrant (where "
        f"installed) or {NO_BACKEND} (default: {DEFAULT_BACKEND})",
    )
    build.add_argument("--camera", metavar="ID", help="camera id of the images that name none (a folder of one camera)")
    add_appearance_argument(build)
    add_image_precision_argument(build)
    build.add_argument(
        "--update",
        action="store_true",
        help="add appearance vectors (--appearance, default the "
        "shipped model) to the existing store --out from its stored crops and images; nothing is "
        "re-embedded and no video is read",
    )
    add_batch_size_argument(build, "images embedded")
    build.add_argument(
        "--fused",
        choices=("auto", "yes", "no"),
        default="auto",
        help="save the fused index sessions take their shortlist from (auto: from 20,000 images)",
    )
    build.add_argument(
        "--fused-options",
        type=_fused_options,
        default={},
        metavar="JSON",
        help='FusedIVF options, e.g. \'{"nprobe": 16, "max_probe": 64}\' (default: its own)',
    )
    build.set_defaults(handler=cmd_build)
    add_common_options(build, device=True)
    info = sub.add_parser("info", help="print a store's manifest", description="Print a gallery store's manifest.")
    info.add_argument("dir", metavar="INDEX_DIR", help="the store's folder")
    info.set_defaults(handler=cmd_info)
    add_common_options(info, json=True, json_help="the manifest as JSON: to stdout (no value or '-') or to PATH")
    fused = sub.add_parser(
        "fused",
        help="build and save a store's fused index (a store saved without one)",
        description="Build the fused index of a gallery store from its saved embeddings "
        "and save it in the store (replacing one it has); no re-embedding.",
    )
    fused.add_argument("dir", metavar="INDEX_DIR", help="the store's folder")
    fused.add_argument(
        "--fused-options",
        type=_fused_options,
        default={},
        metavar="JSON",
        help="FusedIVF options, e.g. '{\"nprobe\": 16}' (default: its own)",
    )
    fused.set_defaults(handler=cmd_fused)
    add_common_options(fused)
