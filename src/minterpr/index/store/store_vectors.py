"""A gallery store's vector indexes: the records their filters read, building them, and opening the appearance one.

:func:`build_vector_index` makes a ``VECTOR_INDEXES`` backend over a gallery's embeddings (ids =
gallery positions), each with its :func:`vector_records` record (camera, path, time, ...), for
:func:`~minterpr.index.store.gallery_store.save_gallery` to save beside the store in ``vectors/``.
:func:`build_appearance_index` makes one of the same backend over its appearance vectors (same ids
and records, the appearance model's fingerprint), saved in ``appearance_vectors/`` (format version
3) and opened by :func:`open_appearance_index` as ``GalleryIndex.appearance_vectors``: what an example
image's appearance neighbours are searched with instead of scanning ``appearance.npy``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from minterpr.errors import DatasetError, InputError
from minterpr.index.gallery_index import GalleryIndex
from minterpr.types import GalleryImage  # noqa: F401  (the doctests use it)

APPEARANCE_VECTORS = "appearance_vectors"  # a store's VectorIndex over appearance.npy (format version 3)


def vector_records(index: GalleryIndex, metadata: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The metadata record of each image for a vector index (what its filters read): ``path``,
    ``person_id``, ``camera`` and ``view`` when known, then the free metadata.

    >>> index = GalleryIndex([GalleryImage("a.jpg", "x:1", "x:cam1")], np.ones((1, 2), np.float32))
    >>> vector_records(index, [{"time": 5}])
    [{'path': 'a.jpg', 'person_id': 'x:1', 'camera': 'x:cam1', 'time': 5}]
    """
    out = []
    for k, image in enumerate(index.images):
        record: dict[str, Any] = {"path": image.path, "person_id": image.person_id}
        if image.camera_id is not None:
            record["camera"] = image.camera_id
        if image.view is not None:
            record["view"] = image.view
        record.update(metadata[k] if metadata is not None else {})
        out.append(record)
    return out


def build_vector_index(
    backend: str,
    index: GalleryIndex,
    metadata: Sequence[Mapping[str, Any]] | None = None,
    *,
    model_fingerprint: str | None,
    **params: Any,
) -> Any:
    """A ``VECTOR_INDEXES`` backend over ``index``'s embeddings: ids = gallery positions 0..N-1,
    records = :func:`vector_records` (so filters read camera, path, time, ...); a backend that
    learns (IVF-PQ) is trained on the embeddings first. ``params``: the backend's own options.

    >>> index = GalleryIndex([GalleryImage("a.jpg", "x:1", "x:c1"), GalleryImage("b.jpg", "x:2", "x:c2")],
    ...                      np.eye(2, dtype=np.float32))
    >>> vectors = build_vector_index("exact", index, model_fingerprint="f00d")
    >>> vectors.search(np.array([[1.0, 0.0]], np.float32), 2, where={"camera": "x:c2"}).ids.tolist()
    [[1, -1]]
    """
    return _index_over(backend, index.embeddings, vector_records(index, metadata), model_fingerprint, params)


def _index_over(
    backend: str, rows: np.ndarray, records: list[dict[str, Any]], fingerprint: str | None, params: Mapping[str, Any]
) -> Any:
    """A ``backend`` VectorIndex over ``rows`` (ids 0..N-1, one record each), trained first when it learns."""
    from minterpr.index.vectors.vector_index import VECTOR_INDEXES

    if backend not in VECTOR_INDEXES:
        raise InputError(f"unknown vector index {backend!r}: must be one of {', '.join(VECTOR_INDEXES.names())}")
    n, dim = rows.shape
    vectors = VECTOR_INDEXES.create(backend, dim=dim, model_fingerprint=fingerprint, **params)
    rows = np.asarray(rows, dtype=np.float32)
    if callable(getattr(vectors, "train", None)):
        vectors.train(rows)
    vectors.add(rows, np.arange(n, dtype=np.int64), records)
    return vectors


def build_appearance_index(
    backend: str | None,
    index: GalleryIndex,
    metadata: Sequence[Mapping[str, Any]] | None = None,
    *,
    appearance_fingerprint: str | None,
    **params: Any,
) -> Any:
    """A ``backend`` VectorIndex over ``index.appearance`` (ids = gallery positions, records = :func:`vector_records`,
    fingerprint = the appearance model's); None when ``backend`` is None (a store without vector indexes)
    or the gallery has no appearance vectors.

    >>> index = GalleryIndex([GalleryImage("a.jpg", "x:1"), GalleryImage("b.jpg", "x:2")], np.eye(2, dtype=np.float32),
    ...                      appearance=np.eye(2, 3, dtype=np.float32))
    >>> looks = build_appearance_index("exact", index, appearance_fingerprint="a1")
    >>> looks.dim, looks.model_fingerprint, looks.search(np.eye(1, 3, 1, dtype=np.float32), 1).ids.tolist()
    (3, 'a1', [[1]])
    """
    if backend is None or index.appearance is None:
        return None
    return _index_over(backend, index.appearance, vector_records(index, metadata), appearance_fingerprint, params)


def appearance_entry(appearance: np.ndarray, fingerprint: str | None, vectors: Any = None) -> dict[str, Any]:
    """The manifest's ``appearance`` entry: ``dim``, ``model_fingerprint`` and, when ``vectors`` (the
    appearance VectorIndex) is saved beside them, its ``vector_backend``; InputError when it does not fit them."""
    entry: dict[str, Any] = {"dim": int(appearance.shape[1]), "model_fingerprint": fingerprint}
    if vectors is None:
        return entry
    if len(vectors) != len(appearance) or vectors.dim != entry["dim"] or vectors.model_fingerprint != fingerprint:
        raise InputError(
            f"save_gallery: the appearance vector index holds {len(vectors)} vectors of width {vectors.dim} "
            f"by appearance model {vectors.model_fingerprint!r}, the gallery {appearance.shape} by {fingerprint!r}"
        )
    return {**entry, "vector_backend": str(vectors.name)}


def open_appearance_index(
    folder: Path, entry: Mapping[str, Any] | None, count: int, mmap: bool, fail: Callable[[str], DatasetError]
) -> Any:
    """The store's appearance VectorIndex in ``folder/APPEARANCE_VECTORS`` when its manifest ``entry`` names
    one (else None); ``fail(reason)`` (one line, naming the directory) when it is another appearance
    model's or does not hold the store's rows."""
    if entry is None or entry.get("vector_backend") is None:
        return None
    from minterpr.index.vectors.vector_index import load_vector_index, read_manifest

    where, fingerprint = folder / APPEARANCE_VECTORS, entry.get("model_fingerprint")
    saved = read_manifest(where)  # DatasetError naming the directory when missing or half written
    if saved.model_fingerprint != fingerprint:
        raise fail(
            f"{APPEARANCE_VECTORS}/ was made by appearance model {saved.model_fingerprint}, "
            f"the store's appearance vectors by {fingerprint}"
        )
    if saved.count != count or saved.dim != entry.get("dim") or saved.backend != entry["vector_backend"]:
        raise fail(
            f"{APPEARANCE_VECTORS}/ holds {saved.count} {saved.backend} vectors of width {saved.dim}, the manifest "
            f"says {count} {entry['vector_backend']} of width {entry.get('dim')}"
        )
    return load_vector_index(where, expected_fingerprint=fingerprint, mmap=mmap)
