"""Adding rows to a stored gallery: the ingestion path (:mod:`minterpr.index.store.gallery_store` for the layout).

:func:`append_gallery` adds rows to a store (creating it when absent), first dropping the rows
whose metadata matches a filter (the rows of an ingestion job that is being redone): the whole
store is written into ``DIR/.staging/`` and then moved into place file by file, the manifest
last, so a kill at any moment leaves the old store or the new one (an interrupted move is
finished by the next :func:`append_gallery`). The cost is a rewrite of the store (O(N)).

:func:`rewrite_metadata` replaces the free metadata of every row the same way (what tracklet
linking stores its groups with). :func:`add_fused` builds and saves the fused index of a store from its saved embeddings.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.errors import DatasetError, InputError
from minterpr.fileio import fsync_directory, remove_stale_temporaries
from minterpr.index.fused_ivf import FusedIVF
from minterpr.index.store.fused_store import FUSED, build_fused, save_fused, wants_fused
from minterpr.index.gallery_index import GalleryIndex
from minterpr.index.store.gallery_store import (
    APPEARANCE,
    APPEARANCE_VECTORS,
    APPENDABLE,
    EMBEDDINGS,
    GALLERY_VERSION,
    IMAGES,
    MANIFEST,
    PROBS,
    REBUILD,
    SKIPPED,
    STAGING,
    STORE_FILES,
    VECTORS,
    check_store_folder,
    open_gallery,
    save_gallery,
    write_manifest,
)
from minterpr.index.store.store_vectors import build_appearance_index, build_vector_index
from minterpr.types import GalleryImage  # noqa: F401  (the doctest builds GalleryImage rows)

__all__ = ["add_fused", "append_gallery", "rewrite_metadata"]


def _finish_staged(folder: Path) -> None:
    """Move a finished staged store (``STAGING`` with its manifest) into ``folder``, or drop an
    unfinished one (the old store is then untouched). Every step may be redone after a kill."""
    staging = folder / STAGING
    if not staging.is_dir():
        return
    try:
        staged = json.loads((staging / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        shutil.rmtree(staging)  # the staged save did not finish: nothing of it was moved
        return
    (folder / MANIFEST).unlink(missing_ok=True)
    fsync_directory(folder)
    for name in (IMAGES, EMBEDDINGS, PROBS, SKIPPED, APPEARANCE):
        if (staging / name).exists():
            os.replace(staging / name, folder / name)
        elif name not in staged.get("files", {}):  # not part of the new store (no probabilities)
            (folder / name).unlink(missing_ok=True)
    looks = (staged.get("appearance") or {}).get("vector_backend")
    for name, saved in (
        (VECTORS, staged.get("vector_backend")),
        (FUSED, staged.get("fused")),
        (APPEARANCE_VECTORS, looks),
    ):
        if (staging / name).is_dir():
            shutil.rmtree(folder / name, ignore_errors=True)
            os.replace(staging / name, folder / name)
        elif saved is None:  # not part of the new store
            shutil.rmtree(folder / name, ignore_errors=True)
    fsync_directory(folder)
    os.replace(staging / MANIFEST, folder / MANIFEST)
    fsync_directory(folder)
    shutil.rmtree(staging, ignore_errors=True)


def append_gallery(
    index: GalleryIndex,
    directory: str | os.PathLike[str],
    *,
    model_fingerprint: str | None,
    metadata: Sequence[Mapping[str, Any]] | None = None,
    replace: Mapping[str, Any] | None = None,
    backend: str | None = "exact",
    rebuild: str | None = None,
    fused: str = "auto",
    appearance_fingerprint: str | None = None,
) -> int:
    """Add ``index``'s rows (and their ``metadata``) to the store in ``directory`` and return its
    new row count. The store's rows whose metadata matches ``replace`` (a vector-index filter,
    e.g. ``{"job": "4f2a"}``) are dropped first. A new store gets a ``backend`` vector index
    (None: none) and ``rebuild``; an existing one keeps its own, rebuilt over all rows (and, with
    appearance vectors, the same backend's index over those: ``appearance_vectors/``). A fused
    index is built over all rows when ``fused`` says so (auto: from ``FUSED_MIN_IMAGES`` rows, or
    when the store had one; its search settings kept). ``index.appearance`` (with the appearance
    model's ``appearance_fingerprint``) is appended to the store's: both have them or neither.
    Refused: a store of another model (DatasetError), or one whose images lie under another root.

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> rows = lambda names: GalleryIndex([GalleryImage(n, n) for n in names], np.eye(2, dtype=np.float32)[:len(names)],
    ...                                   root="/crops")
    >>> append_gallery(rows(["a.jpg", "b.jpg"]), folder, model_fingerprint="f00d", metadata=[{"job": 1}, {"job": 1}])
    2
    >>> append_gallery(rows(["c.jpg"]), folder, model_fingerprint="f00d", metadata=[{"job": 2}])
    3
    >>> append_gallery(rows(["d.jpg"]), folder, model_fingerprint="f00d", metadata=[{"job": 1}], replace={"job": 1})
    2
    >>> from minterpr.index.store.gallery_store import load_gallery
    >>> [image.path for image in load_gallery(folder).images], open_gallery(folder).metadata
    (['c.jpg', 'd.jpg'], [{'job': 2}, {'job': 1}])
    """
    from minterpr.index.vectors.vector_index import check_filter, matches

    check_filter(replace)
    wants_fused(fused, 0)  # InputError for a choice that is not one, before any work
    folder = Path(directory)
    n = len(index)
    if metadata is not None and len(metadata) != n:
        raise InputError(f"append_gallery: {len(metadata)} metadata records for {n} images")
    records = [dict(m) for m in metadata] if metadata is not None else [{} for _ in range(n)]
    check_store_folder(folder)
    if folder.is_dir():
        remove_stale_temporaries(folder)
        _finish_staged(folder)
    images, embeddings, probs, skipped = list(index.images), index.embeddings, index.attribute_probs, index.skipped
    appearance = index.appearance
    old_fused: Mapping[str, Any] | None = None
    if folder.is_dir() and any((folder / name).exists() for name in STORE_FILES):
        old = open_gallery(folder, expected_fingerprint=model_fingerprint, fused=False, appearance_index=False)
        old_fused = old.manifest.fused
        if old.manifest.root != index.root:
            raise DatasetError(
                folder,
                f"its images lie under {old.manifest.root!r}, the new ones under {index.root!r}: "
                "a store has one image root; add them to another gallery",
            )
        if (old.manifest.labels is None) != (probs is None) or old.manifest.dim != index.embeddings.shape[1]:
            raise DatasetError(folder, "the new rows' embeddings or attribute probabilities do not match the store's")
        stored = old.manifest.appearance
        if (stored is None) != (appearance is None) or (
            stored is not None and stored.get("model_fingerprint") != appearance_fingerprint
        ):
            have = "no appearance vectors" if stored is None else f"appearance model {stored.get('model_fingerprint')}"
            new = "none" if appearance is None else f"appearance model {appearance_fingerprint}"
            raise DatasetError(
                folder,
                f"the store has {have}, the new rows {new}: add them with the store's "
                f"(--appearance none when it has none), or give the store this model's first: "
                f"minterpr index build --update --out {shlex.quote(os.fspath(folder))}",
            )
        keep = [i for i, record in enumerate(old.metadata) if not (replace and matches(record, replace))]
        new_paths = {image.path for image in images} | {path for path, _ in skipped}
        images = [old.index.images[i] for i in keep] + images
        records = [old.metadata[i] for i in keep] + records
        embeddings = np.concatenate([np.asarray(old.index.embeddings)[keep], embeddings])
        if probs is not None and old.index.attribute_probs is not None:
            probs = np.concatenate([np.asarray(old.index.attribute_probs)[keep], probs])
        if appearance is not None and old.index.appearance is not None:
            appearance = np.concatenate([np.asarray(old.index.appearance)[keep], appearance])
        skipped = tuple(s for s in old.index.skipped if s[0] not in new_paths) + tuple(skipped)
        backend, rebuild = old.manifest.vector_backend, old.manifest.rebuild
    if backend is not None and backend not in APPENDABLE:
        raise InputError(
            f"{folder}: a store with a {backend} vector index cannot be appended to here "
            f"(only {', '.join(APPENDABLE)}); rebuild it with one of those"
        )
    merged = GalleryIndex(
        images, embeddings, attribute_probs=probs, root=index.root, skipped=skipped, appearance=appearance
    )
    vectors = (
        None if backend is None else build_vector_index(backend, merged, records, model_fingerprint=model_fingerprint)
    )
    looks = build_appearance_index(backend, merged, records, appearance_fingerprint=appearance_fingerprint)
    ivf = None
    if len(merged) and (wants_fused(fused, len(merged)) or (fused == "auto" and old_fused is not None)):
        ivf = build_fused(merged, like=old_fused)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(folder / STAGING, ignore_errors=True)
    save_gallery(
        merged,
        folder / STAGING,
        model_fingerprint=model_fingerprint,
        vector_index=vectors,
        metadata=records,
        rebuild=rebuild or REBUILD.format(dir=shlex.quote(os.fspath(folder))),
        fused_index=ivf,
        appearance_fingerprint=appearance_fingerprint,
        appearance_index=looks,
    )
    _finish_staged(folder)
    return len(merged)


def rewrite_metadata(directory: str | os.PathLike[str], metadata: Sequence[Mapping[str, Any]]) -> None:
    """Replace the free metadata of the store in ``directory``, one record per row in its order
    (its vector indexes are rebuilt over them: their filters read them; everything else is kept), with
    the same staged swap as :func:`append_gallery`.

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> rows = GalleryIndex([GalleryImage("a.jpg", "a")], np.eye(2, dtype=np.float32)[:1], root="/crops")
    >>> append_gallery(rows, folder, model_fingerprint="f00d", metadata=[{"job": 1}])
    1
    >>> rewrite_metadata(folder, [{"job": 1, "link": "x"}])
    >>> open_gallery(folder).metadata, open_gallery(folder).manifest.root
    ([{'job': 1, 'link': 'x'}], '/crops')
    """
    folder = Path(directory)
    check_store_folder(folder)
    remove_stale_temporaries(folder)
    _finish_staged(folder)
    old = open_gallery(folder, fused=False, appearance_index=False)  # its appearance index is rebuilt
    if len(metadata) != len(old.index):
        raise InputError(f"rewrite_metadata: {len(metadata)} metadata records for a store of {len(old.index)} rows")
    records = [dict(m) for m in metadata]
    manifest = old.manifest
    index = dataclasses.replace(old.index, root=manifest.root)  # as stored ("." for a store holding its images)
    backend = manifest.vector_backend
    vectors = (
        None
        if backend is None
        else build_vector_index(backend, index, records, model_fingerprint=manifest.model_fingerprint)
    )
    ivf = build_fused(index, like=manifest.fused) if manifest.fused is not None and len(index) else None
    shutil.rmtree(folder / STAGING, ignore_errors=True)
    looks = None if manifest.appearance is None else manifest.appearance.get("model_fingerprint")
    save_gallery(
        index,
        folder / STAGING,
        model_fingerprint=manifest.model_fingerprint,
        vector_index=vectors,
        metadata=records,
        rebuild=manifest.rebuild,
        fused_index=ivf,
        appearance_fingerprint=looks,
        appearance_index=build_appearance_index(backend, index, records, appearance_fingerprint=looks),
    )
    _finish_staged(folder)


def add_fused(directory: str | os.PathLike[str], **options: Any) -> FusedIVF:
    """Build the fused index of the store in ``directory`` from its saved embeddings and save it
    there (replacing one it has); ``options``: FusedIVF's. Returns the index.

    The store's other files are left as they are. The manifest is first rewritten without a fused
    index, then the parts are written, then the manifest naming them: a kill at any point leaves
    a store that opens (with the old fused index, none, or the new one).

    >>> import tempfile
    >>> from minterpr.index.store.gallery_store import open_gallery, save_gallery
    >>> from minterpr.types import GalleryImage
    >>> folder = tempfile.mkdtemp()
    >>> save_gallery(GalleryIndex([GalleryImage(f"{i}.jpg", "x") for i in range(6)], np.eye(6, dtype=np.float32)),
    ...              folder, model_fingerprint="f00d")
    >>> open_gallery(folder).index.fused is None
    True
    >>> add_fused(folder, nlist=2).nlist, open_gallery(folder).index.fused.nlist
    (2, 2)
    """
    folder = Path(directory)
    stored = open_gallery(folder, fused=False)  # a finished, unchanged store (DatasetError otherwise)
    ivf = build_fused(stored.index, **options)
    base = {name: size for name, size in stored.manifest.files.items() if not name.startswith(f"{FUSED}/")}
    without = dataclasses.replace(stored.manifest, fused=None, files=base, version=GALLERY_VERSION)
    write_manifest(folder, without)
    shutil.rmtree(folder / FUSED, ignore_errors=True)
    entry, files = save_fused(ivf, folder)
    write_manifest(folder, dataclasses.replace(without, fused=entry, files={**base, **files}))
    return ivf
