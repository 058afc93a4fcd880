"""The exact vector index ("exact"): numpy inner products over every stored row.

The plain reference every other backend is tested against (tests/test_vector_index_conformance.py).
Vectors are stored fp32 or fp16 (``dtype``; fp16 halves memory, scores are still computed in
fp32), scored in blocks of about 32 MB, top-k by ``argpartition``. Filters become a mask over
rows (:class:`~minterpr.index.vectors.metadata_filter.MetadataColumns`: per-key columns, no Python loop
per row); a selective filter scores only its rows. Deleted rows are masked and compacted when
they pass half of the rows (and on save). ``load(..., mmap=True)`` maps the saved vectors
read-only (``np.load(mmap_mode="r")``): a 10M x 256 fp16 gallery is 5 GB on disk, not in memory.

Example:
    >>> index = ExactIndex(dim=2, model_fingerprint="abc")
    >>> index.add(np.array([[1, 0], [0.6, 0.8], [0, 1]], np.float32), np.array([10, 11, 12]),
    ...           [{"camera": "c1"}, {"camera": "c2"}, {"camera": "c1"}])
    >>> index.search(np.array([[1, 0]], np.float32), 2).ids.tolist()
    [[10, 11]]
    >>> index.search(np.array([[1, 0]], np.float32), 2, where={"camera": "c1"}).ids.tolist()
    [[10, 12]]
    >>> index.delete(np.array([10])), len(index)
    (1, 2)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.index.vectors.row_store import (
    RowStore,
    StoredRowsMixin,
    check_k,
    check_queries,
    clear_manifest,
    exact_top_k,
)
from minterpr.index.vectors.vector_index import VECTOR_INDEXES, Filter, IndexManifest, SearchResult, write_manifest

SUBSET_FRACTION = 0.5  # a filter matching fewer rows than this fraction scores only those rows
COMPACT_FRACTION = 0.5  # deleted rows beyond this fraction are dropped at the next delete


def search_rows(
    store: RowStore, queries: np.ndarray, k: int, allowed: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k rows of ``store`` among ``allowed`` (None = every row): (Q, k) rows, scores."""
    if allowed is None:
        return exact_top_k(store.vectors, queries, k)
    count = int(allowed.sum())
    if count == 0:
        return np.full((len(queries), k), -1, np.int64), np.full((len(queries), k), -np.inf, np.float32)
    if count < SUBSET_FRACTION * store.n:
        return exact_top_k(store.vectors, queries, k, rows=np.flatnonzero(allowed))
    return exact_top_k(store.vectors, queries, k, allowed=allowed)


def to_result(store: RowStore, rows: np.ndarray, scores: np.ndarray) -> SearchResult:
    """Rows (-1 padded) -> a SearchResult of the caller's ids."""
    ids = np.where(rows >= 0, store.ids[np.maximum(rows, 0)] if store.n else -1, -1)
    return SearchResult(ids=ids.astype(np.int64), scores=scores.astype(np.float32))


@VECTOR_INDEXES.register("exact")
class ExactIndex(StoredRowsMixin):
    """Exact inner-product search over fp32 or fp16 rows (see the module doc)."""

    name = "exact"

    def __init__(self, dim: int, *, dtype: str = "float32", model_fingerprint: str | None = None) -> None:
        self.store = RowStore(dim, dtype)
        self.dim = self.store.dim  # embedding width D
        self.model_fingerprint = model_fingerprint  # of the model that made the embeddings

    @property
    def params(self) -> dict[str, Any]:
        return {"dtype": str(self.store.dtype)}

    def add(self, vectors: np.ndarray, ids: np.ndarray, metadata: Sequence[Mapping[str, Any]] | None = None) -> None:
        self.store.append(vectors, ids, metadata)

    def delete(self, ids: np.ndarray) -> int:
        with self.store.lock:
            removed = len(self.store.mark_deleted(ids))
            dead = self.store.n - self.store.count
            if dead > COMPACT_FRACTION * self.store.n and self.store.vectors.flags.writeable:
                self.store.compact()
        return removed

    def search(self, queries: np.ndarray, k: int, *, where: Filter | None = None) -> SearchResult:
        k = check_k(k)
        queries = check_queries(queries, self.dim)
        allowed = self.store.allowed(where)
        rows, scores = search_rows(self.store, queries, k, allowed)
        return to_result(self.store, rows, scores)

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write the rows (deleted ones dropped) and index.json last."""
        with self.store.lock:
            if self.store.count < self.store.n:
                self.store.compact()
            folder = clear_manifest(directory)
            self.store.save(folder)
            write_manifest(
                folder,
                IndexManifest(
                    backend=self.name,
                    dim=self.dim,
                    count=len(self),
                    model_fingerprint=self.model_fingerprint,
                    params=self.params,
                ),
            )

    @classmethod
    def load(cls, directory: Path, manifest: IndexManifest, mmap: bool = False) -> "ExactIndex":
        index = cls(
            manifest.dim, dtype=manifest.params.get("dtype", "float32"), model_fingerprint=manifest.model_fingerprint
        )
        index.store = RowStore.load(directory, manifest.dim, str(index.store.dtype), mmap=mmap)
        return index
