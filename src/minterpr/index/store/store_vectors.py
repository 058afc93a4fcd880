"""A gallery store's vector index: the records its filters read, and building one over a gallery.

:func:`build_vector_index` makes a ``VECTOR_INDEXES`` backend over a gallery's embeddings (ids =
gallery positions), each with its :func:`vector_records` record (camera, path, time, ...), for
:func:`~minterpr.index.store.gallery_store.save_gallery` to save beside the store.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.errors import InputError
from minterpr.index.gallery_index import GalleryIndex
from minterpr.types import GalleryImage  # noqa: F401  (the doctests use it)


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
    from minterpr.index.vectors.vector_index import VECTOR_INDEXES

    if backend not in VECTOR_INDEXES:
        raise InputError(f"unknown vector index {backend!r}: must be one of {', '.join(VECTOR_INDEXES.names())}")
    n, dim = index.embeddings.shape
    vectors = VECTOR_INDEXES.create(backend, dim=dim, model_fingerprint=model_fingerprint, **params)
    embeddings = np.asarray(index.embeddings, dtype=np.float32)
    if callable(getattr(vectors, "train", None)):
        vectors.train(embeddings)
    vectors.add(embeddings, np.arange(n, dtype=np.int64), vector_records(index, metadata))
    return vectors
