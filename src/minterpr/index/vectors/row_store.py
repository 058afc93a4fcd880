"""The rows every local vector-index backend keeps: vectors, caller ids, metadata, a deleted mask.

:class:`RowStore` is shared by the exact and FAISS backends. Row ``r`` holds ``vectors[r]``
(fp32 or fp16, possibly a read-only memory map of a saved ``vectors.npy``), ``ids[r]`` (the
caller's int64 id), ``records[r]`` (its metadata dict) and ``alive[r]`` (False once deleted).
It validates what callers pass (:func:`check_vectors`, :func:`check_queries`, :func:`check_k`),
turns a filter into a mask over rows (:class:`~minterpr.index.vectors.metadata_filter.MetadataColumns`),
maps ids to rows with a sorted array (no per-id Python dict: 10M ids fit), and runs the exact
chunked top-k (:func:`exact_top_k`) that is the reference for every approximate backend.

Saved layout (all through :mod:`minterpr.fileio`): ``vectors.npy`` (N, D), ``ids.npy`` (N,),
``alive.npy`` (N,), ``metadata.json`` (a JSON array, one record per line; never pickle).

Example:
    >>> store = RowStore(dim=2, dtype="float32")
    >>> _ = store.append(np.array([[1, 0], [0, 1]], np.float32), np.array([7, 9]), [{"cam": "a"}, {}])
    >>> rows, scores = exact_top_k(store.vectors, np.array([[1, 0.1]], np.float32), 1)
    >>> store.ids[rows].tolist(), store.rows_of(np.array([9])).tolist()
    ([[7]], [1])
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.errors import DatasetError, InputError
from minterpr.fileio import atomic_open
from minterpr.index.vectors.metadata_filter import MetadataColumns
from minterpr.index.npy import load_npy
from minterpr.index.vectors.vector_index import Filter, check_filter

VECTORS_FILE, IDS_FILE, ALIVE_FILE, METADATA_FILE = "vectors.npy", "ids.npy", "alive.npy", "metadata.json"
CHUNK_BYTES = 32 << 20  # rows scored per block in exact_top_k: about 32 MB of fp32 vectors
DTYPES = ("float32", "float16")
_EMPTY: Mapping[str, Any] = {}  # shared record of rows added without metadata (never mutated)


def check_vectors(vectors: Any, dim: int, what: str = "vectors") -> np.ndarray:
    """(n, D) finite float32, or InputError naming ``what``."""
    array = np.asarray(vectors)
    if array.ndim != 2 or array.shape[1] != dim:
        raise InputError(f"{what}: expected shape (n, {dim}), got {array.shape}")
    if not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.complexfloating):
        raise InputError(f"{what}: expected real numbers, got dtype {array.dtype}")
    array = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(array).all():
        raise InputError(f"{what}: contains NaN or infinite values")
    return array


def check_queries(queries: Any, dim: int) -> np.ndarray:
    """(Q, D) float32; a single (D,) query becomes (1, D)."""
    array = np.asarray(queries)
    if array.ndim == 1:
        array = array[None, :]
    return check_vectors(array, dim, "queries")


def check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
        raise InputError(f"k must be a positive integer, got {k!r}")
    return int(k)


def check_ids(ids: Any, n: int | None = None) -> np.ndarray:
    """(n,) int64 non-negative ids, or InputError."""
    array = np.asarray(ids)
    if array.ndim == 0:
        array = array[None]
    if array.ndim != 1 or (n is not None and len(array) != n):
        raise InputError(f"ids: expected shape ({n if n is not None else 'n'},), got {array.shape}")
    if len(array) and not np.issubdtype(array.dtype, np.integer):
        raise InputError(f"ids: expected integers, got dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    if len(array) and array.min() < 0:
        raise InputError("ids: must be >= 0 (-1 pads search results)")
    return array


def exact_top_k(
    vectors: np.ndarray,
    queries: np.ndarray,
    k: int,
    *,
    rows: np.ndarray | None = None,
    allowed: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact inner-product top-k: (Q, k) rows (-1 padded) and fp32 scores (-inf padded), best first
    (ties: lower row first). Only ``rows`` (sorted subset) or rows where ``allowed`` is True count.
    Scores are fp32 whatever the storage dtype; vectors are read in blocks (memory maps work)."""
    q = len(queries)
    total = len(vectors) if rows is None else len(rows)
    chunk = max(1024, CHUNK_BYTES // (4 * max(1, vectors.shape[1])))
    best_rows = np.empty((q, 0), np.int64)
    best_scores = np.empty((q, 0), np.float32)
    for start in range(0, total, chunk):
        stop = min(total, start + chunk)
        if rows is None:
            block_rows = np.arange(start, stop, dtype=np.int64)
            block = vectors[start:stop]
        else:
            block_rows = rows[start:stop]
            block = vectors[block_rows]
        scores = queries @ np.asarray(block, dtype=np.float32).T  # (Q, C)
        if allowed is not None:
            scores[:, ~allowed[block_rows]] = -np.inf
        if k < scores.shape[1]:
            part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
            scores, cand = np.take_along_axis(scores, part, 1), block_rows[part]
        else:
            cand = np.broadcast_to(block_rows, scores.shape)
        best_scores = np.concatenate([best_scores, scores], axis=1)
        best_rows = np.concatenate([best_rows, cand], axis=1)
        if best_scores.shape[1] > 4 * k:
            part = np.argpartition(-best_scores, k - 1, axis=1)[:, :k]
            best_scores, best_rows = np.take_along_axis(best_scores, part, 1), np.take_along_axis(best_rows, part, 1)
    return finish_top_k(best_rows, best_scores, k)


def finish_top_k(rows: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Sort candidates best first (ties: lower row), keep k, pad with -1 / -inf; -inf is padding."""
    rows = np.where(np.isneginf(scores) | (rows < 0), -1, rows)
    scores = np.where(rows < 0, -np.inf, scores).astype(np.float32)
    order = np.lexsort((np.where(rows < 0, np.iinfo(np.int64).max, rows), -scores), axis=-1)[:, :k]
    rows, scores = np.take_along_axis(rows, order, 1), np.take_along_axis(scores, order, 1)
    if rows.shape[1] < k:
        pad = k - rows.shape[1]
        rows = np.pad(rows, ((0, 0), (0, pad)), constant_values=-1)
        scores = np.pad(scores, ((0, 0), (0, pad)), constant_values=-np.inf)
    return rows, scores


class RowStore:
    """Vectors, ids, metadata and the deleted mask of one index (see the module doc)."""

    def __init__(self, dim: int, dtype: str = "float32") -> None:
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim <= 0:
            raise InputError(f"dim must be a positive integer, got {dim!r}")
        if str(np.dtype(dtype)) not in DTYPES:
            raise InputError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        self.dim = int(dim)
        self.dtype = np.dtype(dtype)
        self._vectors = np.empty((0, self.dim), self.dtype)  # (capacity, D); may be a read-only memmap
        self._ids = np.empty(0, np.int64)  # (capacity,)
        self._alive = np.empty(0, bool)  # (capacity,)
        self.n = 0  # rows used (deleted included)
        self.records: list[Mapping[str, Any]] = []  # (n,) metadata per row
        self.columns = MetadataColumns()
        self.lock = threading.RLock()  # writers and lazily built caches
        self._lookup: tuple[np.ndarray, np.ndarray] | None = None  # (sorted alive ids, their rows)

    vectors = property(lambda self: self._vectors[: self.n])  # (n, D)
    ids = property(lambda self: self._ids[: self.n])  # (n,)
    alive = property(lambda self: self._alive[: self.n])  # (n,)
    count = property(lambda self: int(self.alive.sum()))  # rows not deleted

    def _grow(self, extra: int) -> None:
        need = self.n + extra
        if need <= len(self._ids) and isinstance(self._vectors, np.ndarray) and self._vectors.flags.writeable:
            return
        capacity = max(need, 2 * len(self._ids), 1024)
        for name in ("_vectors", "_ids", "_alive"):
            old = getattr(self, name)
            new = np.zeros((capacity,) + old.shape[1:], old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def _sorted_lookup(self) -> tuple[np.ndarray, np.ndarray]:
        with self.lock:
            if self._lookup is None:
                rows = np.flatnonzero(self.alive)
                order = np.argsort(self.ids[rows], kind="stable")
                self._lookup = (self.ids[rows][order], rows[order])
            return self._lookup

    def find(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, found) for ``ids``: rows[i] valid where found[i]."""
        keys, rows = self._sorted_lookup()
        pos = np.minimum(np.searchsorted(keys, ids), max(0, len(keys) - 1))
        found = (keys[pos] == ids) if len(keys) else np.zeros(len(ids), bool)
        return rows[pos] if len(keys) else np.zeros(len(ids), np.int64), found

    def rows_of(self, ids: Any) -> np.ndarray:
        """Rows of stored ids; InputError naming the first unknown one."""
        ids = check_ids(ids)
        rows, found = self.find(ids)
        if not found.all():
            raise InputError(f"id {int(ids[~found][0])} is not in the index")
        return rows

    def append(self, vectors: Any, ids: Any, metadata: Sequence[Mapping[str, Any]] | None) -> np.ndarray:
        """Validate and store new rows; returns the (n,) float32 vectors as given."""
        vectors = check_vectors(vectors, self.dim)
        ids = check_ids(ids, len(vectors))
        if metadata is None:
            records: list[Mapping[str, Any]] = [_EMPTY] * len(ids)
        else:
            records = list(metadata)
            if len(records) != len(ids):
                raise InputError(f"metadata: expected {len(ids)} records, got {len(records)}")
            for i, record in enumerate(records):
                if not isinstance(record, Mapping) or not all(isinstance(key, str) for key in record):
                    raise InputError(f"metadata[{i}]: expected a mapping with str keys, got {record!r:.80}")
            records = [dict(r) for r in records]
        if len(np.unique(ids)) != len(ids):
            raise InputError("ids: the same id appears twice in one add")
        with self.lock:
            _, found = self.find(ids)
            if found.any():
                raise InputError(f"id {int(ids[found][0])} is already in the index (delete it first)")
            self._grow(len(ids))
            self._vectors[self.n : self.n + len(ids)] = vectors
            self._ids[self.n : self.n + len(ids)] = ids
            self._alive[self.n : self.n + len(ids)] = True
            self.n += len(ids)
            self.records.extend(records)
            self._lookup = None
        return vectors

    def mark_deleted(self, ids: Any) -> np.ndarray:
        """Mask the rows of the stored ``ids`` (unknown ones ignored); returns those rows."""
        ids = check_ids(ids)
        with self.lock:
            rows, found = self.find(ids)
            rows = np.unique(rows[found])
            if len(rows):
                if not self._alive.flags.writeable:
                    self._alive = self._alive.copy()
                self._alive[rows] = False
                self._lookup = None
        return rows

    def compact(self) -> np.ndarray:
        """Drop deleted rows (renumbering the rest); returns the old rows kept."""
        with self.lock:
            keep = np.flatnonzero(self.alive)
            self._vectors, self._ids = np.ascontiguousarray(self.vectors[keep]), self.ids[keep].copy()
            self._alive = np.ones(len(keep), bool)
            self.records = [self.records[r] for r in keep]
            self.n = len(keep)
            self.columns.invalidate()
            self._lookup = None
        return keep

    def allowed(self, where: Filter | None) -> np.ndarray | None:
        """(n,) bool of rows alive and matching ``where``; None when that is every row."""
        check_filter(where)
        alive = self.alive
        if not where:
            return None if alive.all() else alive.copy()
        return self.columns.mask(self.records, where) & alive

    def metadata_of(self, rows: np.ndarray) -> list[dict[str, Any]]:
        return [dict(self.records[r]) for r in rows]

    # --- persistence -------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """Write vectors.npy, ids.npy, alive.npy, metadata.json (each atomically)."""
        for name, array in ((VECTORS_FILE, self.vectors), (IDS_FILE, self.ids), (ALIVE_FILE, self.alive)):
            with atomic_open(directory / name, "wb") as f:
                np.lib.format.write_array_header_1_0(
                    f,
                    {"descr": np.lib.format.dtype_to_descr(array.dtype), "fortran_order": False, "shape": array.shape},
                )
                step = max(1, CHUNK_BYTES // max(1, array[:1].nbytes))  # blocks: a memmap is never loaded whole
                for start in range(0, len(array), step):
                    f.write(np.ascontiguousarray(array[start : start + step]).tobytes())
        with atomic_open(directory / METADATA_FILE, "w") as f:
            f.write("[\n")
            for i, record in enumerate(self.records):
                try:
                    line = json.dumps(record, ensure_ascii=False, allow_nan=False)
                except (TypeError, ValueError) as error:
                    raise InputError(f"metadata of id {int(self.ids[i])} cannot be saved as JSON: {error}") from None
                f.write(line + (",\n" if i + 1 < len(self.records) else "\n"))
            f.write("]\n")

    @classmethod
    def load(cls, directory: Path, dim: int, dtype: str, *, mmap: bool = False) -> "RowStore":
        store = cls(dim, dtype)
        try:
            vectors = load_npy(directory / VECTORS_FILE, mmap=mmap)
            ids = np.load(directory / IDS_FILE, allow_pickle=False)
            alive = np.load(directory / ALIVE_FILE, allow_pickle=False)
            records = json.loads((directory / METADATA_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise DatasetError(directory, f"cannot read the saved index ({error}); rebuild it") from None
        n = len(ids)
        if vectors.shape != (n, dim) or vectors.dtype != store.dtype or alive.shape != (n,) or len(records) != n:
            raise DatasetError(
                directory,
                f"the saved files disagree (vectors {vectors.shape} {vectors.dtype}, "
                f"{n} ids, {len(records)} metadata records); rebuild the index",
            )
        store._vectors, store._ids, store._alive = vectors, ids.astype(np.int64), alive.astype(bool)
        store.records, store.n = [r if r else _EMPTY for r in records], n
        return store


def clear_manifest(directory: str | os.PathLike[str]) -> Path:
    """Create ``directory`` and remove its old index.json first, so a save cut short is detected."""
    from minterpr.index.vectors.vector_index import MANIFEST_FILE

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST_FILE).unlink(missing_ok=True)
    return folder


class StoredRowsMixin:
    """The protocol's reads that only need the rows (``self.store``): shared by every backend that
    keeps its vectors and metadata in a :class:`RowStore`."""

    store: RowStore

    def __len__(self) -> int:
        return self.store.count

    def get_vectors(self, ids: np.ndarray) -> np.ndarray:
        return np.asarray(self.store.vectors[self.store.rows_of(ids)], dtype=np.float32)

    def get_metadata(self, ids: np.ndarray) -> list[dict[str, Any]]:
        return self.store.metadata_of(self.store.rows_of(ids))
