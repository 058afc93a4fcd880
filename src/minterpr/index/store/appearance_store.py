"""A store's appearance vectors: asking for them, and adding them to a store built without them.

A gallery built before the appearance model (or with ``--appearance none``) has embeddings and
attribute probabilities but no ``appearance.npy``. Whoever needs same-person vectors calls
:func:`require_appearance`, which says so in one line naming the command that adds them
(``minterpr index build --update --out STORE``: :func:`update_appearance` writes them from the
store's own crops, no video is read again).

:func:`update_appearance` commits through the manifest, as every save does: an old entry is
dropped from ``gallery.json`` first, ``appearance.npy`` is written (atomically) and, in a store with
a vector index, the same backend's index over them (``appearance_vectors/``), then the manifest
names them with their size and model. A kill at any step leaves a store that opens (with the old
vectors, or without any), never a manifest naming vectors that are not there.

Example:
    >>> import tempfile, numpy as np
    >>> from minterpr.index.gallery_index import GalleryIndex
    >>> from minterpr.index.store.gallery_store import open_gallery, save_gallery
    >>> from minterpr.types import GalleryImage
    >>> folder = Path(tempfile.mkdtemp()) / "store"
    >>> index = GalleryIndex([GalleryImage("a.jpg", "p1"), GalleryImage("b.jpg", "p2")], np.eye(2, dtype=np.float32))
    >>> save_gallery(index, folder, model_fingerprint="m1")
    >>> require_appearance(open_gallery(folder).manifest, folder)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    minterpr.errors.DatasetError: ...: has no appearance vectors (built without an appearance model): add them with `minterpr index build --update --out ...`
    >>> _ = update_appearance(folder, np.eye(2, 4, dtype=np.float32), "a1")
    >>> require_appearance(open_gallery(folder).manifest, folder, "a1")["dim"]
    4
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from minterpr.errors import DatasetError, InputError
from minterpr.fileio import atomic_write

from .gallery_store import APPEARANCE, GALLERY_VERSION, GalleryManifest, open_gallery, read_manifest, write_manifest
from .store_vectors import APPEARANCE_VECTORS, appearance_entry, build_appearance_index

UPDATE = "minterpr index build --update --out {dir}"  # the command that adds (or replaces) a store's vectors


def update_command(store_dir: str | os.PathLike[str]) -> str:
    """The command line that gives ``store_dir`` appearance vectors."""
    return UPDATE.format(dir=shlex.quote(os.fspath(store_dir)))


def require_appearance(
    manifest: GalleryManifest, store_dir: str | os.PathLike[str], fingerprint: str | None = None
) -> Mapping[str, Any]:
    """The store's appearance entry (``{"dim", "model_fingerprint"}``); DatasetError in one line naming
    ``store_dir`` and :func:`update_command` when it has none, or (``fingerprint`` given) when another
    appearance model made them."""
    entry = manifest.appearance
    if entry is None:
        raise DatasetError(
            store_dir,
            "has no appearance vectors (built without an appearance model): add them "
            f"with `{update_command(store_dir)}`",
        )
    if fingerprint is not None and entry.get("model_fingerprint") != fingerprint:
        raise DatasetError(
            store_dir,
            f"its appearance vectors were made by appearance model "
            f"{entry.get('model_fingerprint')}, not {fingerprint}: replace them with "
            f"`{update_command(store_dir)} --appearance ...`",
        )
    return entry


def check_appearance_match(
    manifest: GalleryManifest, store_dir: str | os.PathLike[str], fingerprint: str | None
) -> None:
    """Before rows are added: DatasetError in one line unless the new rows' appearance model
    (``fingerprint``, None = none) is the store's."""
    entry = manifest.appearance
    stored = None if entry is None else entry.get("model_fingerprint")
    if stored == fingerprint:
        return
    if stored is None:
        raise DatasetError(
            store_dir,
            f"has no appearance vectors, the new rows would (appearance model {fingerprint}): "
            f"add them to the store first with `{update_command(store_dir)}`, or add "
            "these rows with --appearance none",
        )
    if fingerprint is None:
        raise DatasetError(
            store_dir,
            f"has appearance vectors (appearance model {stored}), the new rows none: "
            "add them with that appearance model (--appearance)",
        )
    raise DatasetError(
        store_dir,
        f"its appearance vectors are appearance model {stored}'s, the new rows "
        f"{fingerprint}'s: use the store's model, or replace its vectors with "
        f"`{update_command(store_dir)} --appearance ...`",
    )


def update_appearance(store_dir: str | os.PathLike[str], vectors: np.ndarray, fingerprint: str) -> GalleryManifest:
    """Give the finished store at ``store_dir`` these ``(N, A)`` appearance vectors (one row per
    stored image, in store order) made by the appearance model ``fingerprint``; see the module
    doc for the order of the writes. Returns the new manifest."""
    folder = Path(store_dir)
    manifest = read_manifest(folder)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != manifest.count:
        raise InputError(
            f"update_appearance: {folder} holds {manifest.count} images, the vectors are {tuple(vectors.shape)}"
        )
    if not fingerprint:
        raise InputError("update_appearance: the vectors need the fingerprint of the appearance model that made them")
    files = {name: size for name, size in manifest.files.items() if name != APPEARANCE}
    looks = None
    if manifest.vector_backend is not None:  # the same backend's index over the new vectors, as the embeddings have
        stored = open_gallery(folder, fused=False, appearance_index=False)
        index = dataclasses.replace(stored.index, appearance=vectors)
        looks = build_appearance_index(
            manifest.vector_backend, index, stored.metadata, appearance_fingerprint=fingerprint
        )
    if manifest.appearance is not None:  # first forget the old vectors: never a manifest naming a changed file
        manifest = dataclasses.replace(manifest, appearance=None, files=files)
        write_manifest(folder, manifest)
    shutil.rmtree(folder / APPEARANCE_VECTORS, ignore_errors=True)
    atomic_write(folder / APPEARANCE, lambda f: np.save(f, vectors))
    if looks is not None:
        looks.save(folder / APPEARANCE_VECTORS)
    manifest = dataclasses.replace(
        manifest,
        files={**files, APPEARANCE: (folder / APPEARANCE).stat().st_size},
        appearance=appearance_entry(vectors, fingerprint, looks),
        version=GALLERY_VERSION,
    )
    write_manifest(folder, manifest)
    return manifest
