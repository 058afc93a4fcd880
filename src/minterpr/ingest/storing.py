"""A job's crops into the gallery store: resumable embedding shards, appearance vectors (cached in
the job), this job's rows replaced or dropped, and the check before any work that a store's
appearance vectors can be continued. :mod:`minterpr.ingest.runner` decides what goes in; this writes it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from minterpr.errors import DatasetError
from minterpr.fileio import atomic_write
from minterpr.index.store.gallery_store import STORE_ROOT
from minterpr.ingest.job import JobFolder
from minterpr.ingest.options import IngestOptions
from minterpr.ingest.progress import Reporter
from minterpr.ingest.sources import SourceInfo
from minterpr.types import GalleryImage

SHARD_SIZE = 256  # crops per embedding shard (the unit an interrupted embedding resumes from)


def embed_crops(
    pipeline: Any, images: list[GalleryImage], root: Path, job: JobFolder, options: IngestOptions, reporter: Reporter
) -> Any:
    """Embed the crops into resumable shards (minterpr.runtime.batch_embed's format); the EmbeddedGallery."""
    from minterpr.runtime.batch_embed import collect, embed_shards

    out = job.embed_dir
    out.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256("\n".join(i.path for i in images).encode("utf-8")).hexdigest()
    marker = out / "images.sha256"
    if not marker.is_file() or marker.read_text(encoding="utf-8").strip() != digest:
        shutil.rmtree(out)
        out.mkdir(parents=True)
        atomic_write(marker, lambda f: f.write(digest.encode("ascii") + b"\n"))
    reporter.update("embed", 0, len(images))
    embed_shards(
        pipeline.backend,
        images,
        os.fspath(root),
        out,
        SHARD_SIZE,
        options.batch_size,
        lambda done, _: reporter.update("embed", done, len(images)),
    )
    return collect(out, images, SHARD_SIZE)


def rows_of_job(gallery: Path, job: str) -> tuple[int, int] | None:
    """(rows of ``job``, all rows) in the store, None when there is no finished store."""
    from minterpr.index.store.gallery_store import open_gallery, read_manifest

    try:
        read_manifest(gallery)
    except DatasetError:
        return None
    stored = open_gallery(gallery)
    return sum(1 for value in stored.meta_columns.get("job", []) if value == job), len(stored.index)


def check_appearance(folder: Path, stored: Any, pipeline: Any) -> None:
    """Refuse, before any work, a gallery whose appearance vectors the pipeline cannot continue."""
    looks = getattr(pipeline, "appearance", None)
    if stored is None and looks is None:
        return
    if stored is None:
        raise DatasetError(
            folder,
            "has no appearance vectors, and this pipeline adds them: add them to the "
            f"gallery first with `minterpr index build --update --out {folder}`, or ingest "
            "without an appearance model",
        )
    if looks is None:
        raise DatasetError(
            folder,
            f"has appearance vectors (model {stored.get('model_fingerprint')}): ingest with "
            "that appearance model too, so every row has one",
        )
    if stored.get("model_fingerprint") != looks.fingerprint:
        raise DatasetError(
            folder,
            f"its appearance vectors come from model {stored.get('model_fingerprint')}, this "
            f"appearance model is {looks.fingerprint}: ingest with the same one, or rebuild "
            f"them with `minterpr index build --update --out {folder}`",
        )


def appearance_vectors(pipeline: Any, images: list[GalleryImage], folder: Path, job: JobFolder) -> np.ndarray | None:
    """The appearance vectors of the embedded crops (None without an appearance model), kept in the
    job's embed folder so a rerun after a kill at the store write does not compute them again."""
    looks = getattr(pipeline, "appearance", None)
    if looks is None:
        return None
    key = hashlib.sha256("\n".join([looks.fingerprint, *(i.path for i in images)]).encode("utf-8")).hexdigest()
    cache = job.embed_dir / f"appearance-{key[:16]}.npy"
    if cache.is_file():
        try:
            vectors = np.load(cache)
            if vectors.shape == (len(images), looks.dim):
                return vectors
        except (OSError, ValueError):
            pass  # a torn file: computed again
    # the attribute model read every one of them: an unreadable one now is an error, not a skip
    vectors, _, _ = looks.embed_files([os.fspath(folder / i.path) for i in images], strict=True)
    atomic_write(cache, lambda f: np.save(f, vectors))
    return vectors


def store_crops(
    pipeline: Any,
    images: list[GalleryImage],
    metadata: list[dict[str, Any]],
    folder: Path,
    job: JobFolder,
    options: IngestOptions,
    reporter: Reporter,
    skipped: list[tuple[str, str]],
    info: SourceInfo,
) -> tuple[int, int]:
    """Embed the crops and put them in the store (this job's old rows replaced): (rows added, rows in all)."""
    from minterpr.index.store.gallery_append import append_gallery
    from minterpr.index.gallery_index import GalleryIndex

    embedded = embed_crops(pipeline, images, folder, job, options, reporter) if images else None
    if embedded is not None:
        skipped.extend(embedded.skipped)
    if embedded is None or not embedded.images:  # nothing to add; rows of an earlier run of the job go
        counts = rows_of_job(folder, job.job)
        if counts is None:
            return 0, 0
        if counts[0] == 0:
            return 0, counts[1]
        return 0, drop_rows(folder, job.job, pipeline.fingerprint)
    reporter.update("index", 0, 1, force=True, message=f"index: writing {len(embedded.images)} rows to {folder}")
    position = {image.path: k for k, image in enumerate(images)}
    rows = [metadata[position[image.path]] for image in embedded.images]
    looks = getattr(pipeline, "appearance", None)
    index = GalleryIndex(
        embedded.images,
        embedded.embeddings,
        attribute_probs=embedded.attribute_probs,
        root=STORE_ROOT,
        skipped=embedded.skipped,  # the crops are inside the store's folder
        appearance=appearance_vectors(pipeline, embedded.images, folder, job),
    )
    rebuild = f"minterpr ingest {info.path} --gallery {folder} --run RUN (again for each source)"
    total = append_gallery(
        index,
        folder,
        model_fingerprint=pipeline.fingerprint,
        metadata=rows,
        replace={"job": job.job},
        backend="exact",
        rebuild=rebuild,
        appearance_fingerprint=None if looks is None else looks.fingerprint,
    )
    return len(embedded.images), total


def drop_rows(folder: Path, job: str, fingerprint: str) -> int:
    """Remove ``job``'s rows from the store; the rows left."""
    from minterpr.index.store.gallery_append import append_gallery
    from minterpr.index.gallery_index import GalleryIndex
    from minterpr.index.store.gallery_store import open_gallery

    stored = open_gallery(folder)
    labels = stored.manifest.labels
    looks = stored.manifest.appearance  # kept as it is: the store's rows keep their vectors
    empty = GalleryIndex(
        [],
        np.zeros((0, stored.manifest.dim), np.float32),
        root=STORE_ROOT,
        attribute_probs=None if labels is None else np.zeros((0, labels), np.float32),
        appearance=None if looks is None else np.zeros((0, int(looks["dim"])), np.float32),
    )
    return append_gallery(
        empty,
        folder,
        model_fingerprint=fingerprint,
        metadata=[],
        replace={"job": job},
        appearance_fingerprint=None if looks is None else looks["model_fingerprint"],
    )
