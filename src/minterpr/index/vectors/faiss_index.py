"""FAISS vector indexes: HNSW ("faiss_hnsw") and IVF-PQ ("faiss_ivfpq"); ``pip install 'minterpr[faiss]'``.

Both keep a :class:`~minterpr.index.vectors.row_store.RowStore` beside the FAISS index (vectors in fp16 by
default, ids, metadata, deleted mask); FAISS labels are row numbers, mapped back to the caller's
ids. Inner-product metric. Filters run inside the search: the mask of allowed rows (alive and
matching ``where``) becomes an ``IDSelectorBitmap`` in the search parameters. A filter that
leaves few rows (``brute_force_below``) is answered exactly over those rows, and a query for which
the ANN search returns fewer than k results while k rows are allowed is answered exactly too, so
a filtered search returns k results whenever k rows match.

* HNSW (``M``, ``ef_construction``, ``ef_search``; ``efSearch`` is raised to the number fetched).
  HNSW cannot remove vectors: deleted rows stay in the graph, excluded by the selector, until
  they pass half of the rows; then the graph is rebuilt from the live rows.
* IVF-PQ (``nlist`` (None = 2*sqrt(n), 16..2048), ``m`` sub-quantizers, ``nbits``, ``nprobe``).
  Trained on the first add with enough vectors (``max(nlist, 2**nbits)``) or by ``train``; a
  search before that is refused with InputError. Deletes use ``remove_ids``. PQ codes are coarse,
  so ``rerank=True`` (default) over-fetches ``rerank_factor * k`` candidates and re-scores them
  exactly with the stored vectors: this is what brings recall@10 to >= 0.95.

Saved: the RowStore files, ``faiss.index`` (``faiss.serialize_index``), then ``index.json``.

Example:
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(500, 16)).astype(np.float32)
    >>> x /= np.linalg.norm(x, axis=1, keepdims=True)
    >>> index = FaissHNSWIndex(dim=16)
    >>> index.add(x, np.arange(1000, 1500))
    >>> index.search(x[:2], 1).ids.tolist()
    [[1000], [1001]]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.errors import DatasetError, InputError
from minterpr.fileio import atomic_write
from minterpr.index.vectors.exact import search_rows, to_result
from minterpr.index.vectors.row_store import (
    RowStore,
    StoredRowsMixin,
    check_k,
    check_queries,
    check_vectors,
    clear_manifest,
    finish_top_k,
)
from minterpr.index.vectors.vector_index import VECTOR_INDEXES, Filter, IndexManifest, SearchResult, write_manifest

FAISS_FILE = "faiss.index"
TRAIN_ITERATIONS = 15  # k-means iterations of the IVF coarse quantizer (FAISS default 25; 1M rows: ~2x faster)
PQ_TRAIN_ITERATIONS = 10  # k-means iterations of each PQ sub-quantizer (FAISS default 25)


def import_faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise InputError("the FAISS vector indexes need faiss: pip install 'minterpr[faiss]'") from None
    return faiss


class _FaissIndex(StoredRowsMixin):
    """What HNSW and IVF-PQ share: the row store, filters, over-fetch, re-ranking, persistence."""

    name = ""

    def __init__(
        self,
        dim: int,
        *,
        dtype: str = "float16",
        model_fingerprint: str | None = None,
        rerank: bool = False,
        rerank_factor: int = 4,
        brute_force_below: int = 10_000,
    ) -> None:
        self.faiss = import_faiss()
        self.store = RowStore(dim, dtype)
        self.dim = self.store.dim  # embedding width D
        self.model_fingerprint = model_fingerprint  # of the model that made the embeddings
        self.rerank = bool(rerank)  # re-score an over-fetched candidate list with the stored vectors
        self.rerank_factor = int(rerank_factor)  # candidates fetched per result when re-ranking
        self.brute_force_below = int(brute_force_below)  # a filter leaving fewer rows: exact over them
        self.index: Any = None  # the FAISS index; labels are RowStore rows

    # --- what a subclass provides ------------------------------------------------------------
    def _new_index(self) -> Any:
        raise NotImplementedError

    def _ready(self) -> None:
        """InputError when the index cannot search yet."""

    def _add_rows(self, vectors: np.ndarray, rows: np.ndarray) -> None:
        raise NotImplementedError

    def _params(self, fetch: int, selector: Any) -> Any:
        raise NotImplementedError

    def _remove_rows(self, rows: np.ndarray) -> None:
        """Remove rows from the FAISS index where it can (HNSW cannot: the selector masks them)."""

    @property
    def params(self) -> dict[str, Any]:
        return {
            "dtype": str(self.store.dtype),
            "rerank": self.rerank,
            "rerank_factor": self.rerank_factor,
            "brute_force_below": self.brute_force_below,
        }

    # --- the protocol ------------------------------------------------------------------------
    def add(self, vectors: np.ndarray, ids: np.ndarray, metadata: Sequence[Mapping[str, Any]] | None = None) -> None:
        with self.store.lock:
            start = self.store.n
            vectors = self.store.append(vectors, ids, metadata)
            self._add_rows(vectors, np.arange(start, self.store.n, dtype=np.int64))

    def delete(self, ids: np.ndarray) -> int:
        with self.store.lock:
            rows = self.store.mark_deleted(ids)
            if len(rows):
                self._remove_rows(rows)
            if self.store.n - self.store.count > max(1024, self.store.n // 2):
                self._rebuild()
        return len(rows)

    def _rebuild(self) -> None:
        """Drop deleted rows and re-add the live ones (rows renumbered)."""
        self.store.compact()
        self._reset_index()
        for start in range(0, self.store.n, 1 << 16):
            rows = np.arange(start, min(self.store.n, start + (1 << 16)), dtype=np.int64)
            self._add_rows(np.asarray(self.store.vectors[rows], np.float32), rows)

    def _reset_index(self) -> None:
        self.index = None

    def search(self, queries: np.ndarray, k: int, *, where: Filter | None = None) -> SearchResult:
        k = check_k(k)
        queries = check_queries(queries, self.dim)
        allowed = self.store.allowed(where)
        n_allowed = self.store.n if allowed is None else int(allowed.sum())
        if n_allowed == 0 or (where and n_allowed <= self.brute_force_below):
            return to_result(self.store, *search_rows(self.store, queries, k, allowed))
        self._ready()
        fetch = min(n_allowed, max(2 * k, min(k * self.rerank_factor, k + 1000)) if self.rerank else k)
        bitmap = None if allowed is None else np.packbits(allowed, bitorder="little")  # kept alive for the call
        selector = None if bitmap is None else self.faiss.IDSelectorBitmap(len(allowed), self.faiss.swig_ptr(bitmap))
        scores, rows = self.index.search(queries, fetch, params=self._params(fetch, selector))
        rows = rows.astype(np.int64)
        if self.rerank:
            valid = rows >= 0
            stored = np.asarray(self.store.vectors[np.where(valid, rows, 0).ravel()], np.float32)
            scores = np.einsum("qkd,qd->qk", stored.reshape(rows.shape + (self.dim,)), queries)
            scores = np.where(valid, scores, -np.inf)
        rows, scores = finish_top_k(rows, scores.astype(np.float32), k)
        short = np.flatnonzero((rows >= 0).sum(axis=1) < min(k, n_allowed))
        if len(short):  # the ANN search missed allowed rows: answer those queries exactly
            rows[short], scores[short] = search_rows(self.store, queries[short], k, allowed)
        return to_result(self.store, rows, scores)

    # --- persistence -------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write the rows, faiss.index, then index.json (rows keep their numbers: FAISS labels)."""
        with self.store.lock:
            folder = clear_manifest(directory)
            self.store.save(folder)
            if self.index is not None:
                data = self.faiss.serialize_index(self.index)
                atomic_write(folder / FAISS_FILE, lambda f: f.write(data.tobytes()))
            else:
                (folder / FAISS_FILE).unlink(missing_ok=True)
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
    def load(cls, directory: Path, manifest: IndexManifest, mmap: bool = False) -> "_FaissIndex":
        index = cls(manifest.dim, model_fingerprint=manifest.model_fingerprint, **dict(manifest.params))
        index.store = RowStore.load(directory, manifest.dim, str(index.store.dtype), mmap=mmap)
        path = directory / FAISS_FILE
        if path.is_file():
            try:
                index.index = index.faiss.read_index(str(path))
            except RuntimeError as error:
                raise DatasetError(
                    path, f"cannot read the FAISS index ({str(error).splitlines()[0]}); rebuild it"
                ) from None
            if index.index.ntotal > index.store.n:
                raise DatasetError(
                    path, f"holds {index.index.ntotal} vectors, the saved rows {index.store.n}; rebuild the index"
                )
        return index


@VECTOR_INDEXES.register("faiss_hnsw")
class FaissHNSWIndex(_FaissIndex):
    """FAISS HNSW graph (IndexHNSWFlat, inner product); see the module doc."""

    name = "faiss_hnsw"

    def __init__(
        self, dim: int, *, M: int = 32, ef_construction: int = 200, ef_search: int = 128, **options: Any
    ) -> None:
        super().__init__(dim, **options)
        self.M = int(M)  # graph neighbours per node (memory ~ 2*M*8 bytes per vector)
        self.ef_construction = int(ef_construction)  # candidate list while building
        self.ef_search = int(ef_search)  # candidate list while searching (raised to the number fetched)

    @property
    def params(self) -> dict[str, Any]:
        return {**super().params, "M": self.M, "ef_construction": self.ef_construction, "ef_search": self.ef_search}

    def _new_index(self) -> Any:
        index = self.faiss.IndexHNSWFlat(self.dim, self.M, self.faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.ef_construction
        return index

    def _add_rows(self, vectors: np.ndarray, rows: np.ndarray) -> None:
        if self.index is None:
            self.index = self._new_index()
        if len(rows) and self.index.ntotal != rows[0]:
            raise RuntimeError(f"HNSW holds {self.index.ntotal} vectors, expected {rows[0]}")
        self.index.add(vectors)  # HNSW labels are sequential: row numbers

    def _ready(self) -> None:
        if self.index is None:
            raise InputError("faiss_hnsw: the index is empty; add vectors first")

    def _params(self, fetch: int, selector: Any) -> Any:
        return self.faiss.SearchParametersHNSW(efSearch=max(self.ef_search, fetch), sel=selector)


@VECTOR_INDEXES.register("faiss_ivfpq")
class FaissIVFPQIndex(_FaissIndex):
    """FAISS inverted lists of product-quantised codes (IndexIVFPQ, inner product); see the module doc."""

    name = "faiss_ivfpq"

    def __init__(
        self,
        dim: int,
        *,
        nlist: int | None = None,
        m: int = 32,
        nbits: int = 8,
        nprobe: int = 32,
        rerank: bool = True,
        rerank_factor: int = 10,
        seed: int = 0,
        **options: Any,
    ) -> None:
        super().__init__(dim, rerank=rerank, rerank_factor=rerank_factor, **options)
        if dim % int(m):
            raise InputError(f"faiss_ivfpq: m={m} sub-quantizers must divide the dimension {dim}")
        self.nlist = None if nlist is None else int(nlist)  # inverted lists; None = chosen at training
        self.m = int(m)  # PQ sub-quantizers: bytes per vector at nbits=8
        self.nbits = int(nbits)  # bits per sub-quantizer code
        self.nprobe = int(nprobe)  # lists visited per query
        self.seed = int(seed)  # training sample and k-means seed

    @property
    def params(self) -> dict[str, Any]:
        return {
            **super().params,
            "nlist": self.nlist,
            "m": self.m,
            "nbits": self.nbits,
            "nprobe": self.nprobe,
            "seed": self.seed,
        }

    def _min_train(self) -> int:
        return max(self.nlist or 16, 2**self.nbits)

    def _new_index(self) -> Any:
        quantizer = self.faiss.IndexFlatIP(self.dim)
        index = self.faiss.IndexIVFPQ(
            quantizer, self.dim, self.nlist, self.m, self.nbits, self.faiss.METRIC_INNER_PRODUCT
        )
        return index

    def _reset_index(self) -> None:
        if self.index is not None and self.index.is_trained:
            self.index.reset()  # keeps the training

    def train(self, vectors: np.ndarray) -> None:
        """Train the coarse quantizer and the PQ codebooks on (n, D) vectors (a sample is enough)."""
        vectors = check_vectors(vectors, self.dim, "train vectors")
        if len(vectors) < self._min_train():
            raise InputError(f"faiss_ivfpq: training needs at least {self._min_train()} vectors, got {len(vectors)}")
        with self.store.lock:
            if self.nlist is None:
                self.nlist = int(np.clip(2 * np.sqrt(len(vectors)), 16, 2048))
            rng = np.random.default_rng(self.seed)
            sample = max(39 * self.nlist, 39 * 2**self.nbits, 10_000)
            if len(vectors) > sample:
                vectors = vectors[np.sort(rng.choice(len(vectors), sample, replace=False))]
            index = self._new_index()
            index.cp.seed = index.pq.cp.seed = self.seed
            index.cp.max_points_per_centroid = index.pq.cp.max_points_per_centroid = 1 << 30  # we sampled
            index.cp.niter, index.pq.cp.niter = TRAIN_ITERATIONS, PQ_TRAIN_ITERATIONS
            index.train(vectors)
            self.index = index
            live = np.flatnonzero(self.store.alive)
            for start in range(0, len(live), 1 << 16):  # rows added before training
                rows = live[start : start + (1 << 16)]
                self.index.add_with_ids(np.asarray(self.store.vectors[rows], np.float32), rows)

    def _add_rows(self, vectors: np.ndarray, rows: np.ndarray) -> None:
        if self.index is not None and self.index.is_trained:
            self.index.add_with_ids(vectors, rows)
        elif self.store.count >= self._min_train():  # the first add with enough vectors trains
            live = np.flatnonzero(self.store.alive)
            self.train(np.asarray(self.store.vectors[live], np.float32))

    def _remove_rows(self, rows: np.ndarray) -> None:
        if self.index is not None and self.index.is_trained:
            self.index.remove_ids(self.faiss.IDSelectorBatch(rows))

    def _ready(self) -> None:
        if self.index is None or not self.index.is_trained:
            raise InputError(
                f"faiss_ivfpq: the index is not trained yet: it needs at least {self._min_train()} "
                f"vectors (it holds {self.store.count}); add more or call train(vectors)"
            )

    def _params(self, fetch: int, selector: Any) -> Any:
        return self.faiss.SearchParametersIVF(nprobe=self.nprobe, sel=selector)
