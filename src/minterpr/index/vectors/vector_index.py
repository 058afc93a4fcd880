"""The vector-index protocol: what every gallery index backend (exact, FAISS, Qdrant) provides.

A :class:`VectorIndex` stores L2-normalised embeddings under integer ids with a metadata record
each (camera, time, source, any key), and answers top-k inner-product searches with a
metadata filter applied *inside* the search (not by post-filtering a top-k, which could
return fewer than k results). Every registered backend (``VECTOR_INDEXES``) passes the same
conformance tests (tests/test_vector_index_conformance.py): recall@10 against exact search,
filters, deletes, persistence round trip, concurrent readers.

Filters (:data:`Filter`): a mapping ``key -> condition``; all conditions must hold.

* a scalar (str, int, float, bool): the metadata value equals it;
* a list / tuple / set of scalars: the value is one of them;
* :class:`Range`: ``low <= value <= high`` (either bound may be None), for numbers and for ISO
  8601 timestamps compared as strings of the same format (``"2026-12-01T10:00:00"``).

A record without the key never matches a condition on it.

Persistence: ``index.save(DIR)`` writes the backend's files and, last, ``DIR/index.json``
(:class:`IndexManifest`: format, version, backend, dimension, count, the fingerprint of the model
that made the embeddings); ``load_vector_index(DIR, expected_fingerprint=...)`` refuses an index
built by another model or half written, with a message naming the directory.

Example:
    >>> Range(low="2026-12-01T00:00:00").contains("2026-12-01T08:30:00")
    True
    >>> matches({"camera": "cam2", "time": 5}, {"camera": ["cam1", "cam2"], "time": Range(0, 10)})
    True
    >>> matches({"camera": "cam2"}, {"source": "video.mp4"})
    False
"""

from __future__ import annotations

import json
import threading
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence, Union, runtime_checkable

import numpy as np

from minterpr.errors import DatasetError, InputError
from minterpr.registry import Registry

INDEX_FORMAT = "minterpr-vector-index"  # IndexManifest.format
INDEX_VERSION = 1  # bumped when the on-disk layout changes
MANIFEST_FILE = "index.json"  # written last: its presence means the index was saved whole

Scalar = Union[str, int, float, bool]


@dataclass(frozen=True)
class Range:
    """``low <= value <= high``; None leaves that side open."""

    low: Any = None  # a number or an ISO 8601 string; None = no lower bound
    high: Any = None  # same type as low; None = no upper bound

    def contains(self, value: Any) -> bool:
        if value is None:
            return False
        try:
            return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)
        except TypeError:  # a string compared with a number: no match, not an error
            return False


Condition = Union[Scalar, Sequence[Scalar], Range]
Filter = Mapping[str, Condition]


def matches(metadata: Mapping[str, Any], where: Filter | None) -> bool:
    """Whether one metadata record satisfies every condition of ``where`` (the reference semantics
    each backend's own filter must agree with)."""
    if not where:
        return True
    for key, condition in where.items():
        if key not in metadata:
            return False
        value = metadata[key]
        if isinstance(condition, Range):
            if not condition.contains(value):
                return False
        elif isinstance(condition, (list, tuple, set, frozenset)):
            if value not in condition:
                return False
        elif value != condition:
            return False
    return True


def check_filter(where: Filter | None) -> None:
    """InputError for a filter that is not a mapping of str keys to the conditions above."""
    if where is None:
        return
    if not isinstance(where, Mapping):
        raise InputError(f"a filter must be a mapping of metadata keys to conditions, got {type(where).__name__}")
    for key, condition in where.items():
        if not isinstance(key, str) or not key:
            raise InputError(f"filter keys must be non-empty strings, got {key!r}")
        values = condition if isinstance(condition, (list, tuple, set, frozenset)) else (condition,)
        if isinstance(condition, Range):
            continue
        for value in values:
            if not isinstance(value, (str, int, float, bool)):
                raise InputError(
                    f"filter {key!r}: a condition is a value, a list of values or a Range, got {type(value).__name__}"
                )


@dataclass(frozen=True)
class SearchResult:
    """Top-k per query, best first; rows with fewer than k matches are padded with id -1."""

    ids: np.ndarray  # (Q, k) int64 ids as added; -1 = no result
    scores: np.ndarray  # (Q, k) float32 inner products (cosine for normalised vectors); -inf for padding


@dataclass(frozen=True)
class IndexManifest:
    """``DIR/index.json`` of a saved index."""

    backend: str  # the VECTOR_INDEXES name that wrote it
    dim: int  # embedding width D
    count: int  # vectors stored (deleted ones excluded)
    model_fingerprint: str | None  # fingerprint of the model that made the embeddings; None = unknown
    params: Mapping[str, Any]  # the backend's construction parameters (HNSW M, IVF lists, dtype, ...)
    format: str = INDEX_FORMAT
    version: int = INDEX_VERSION


@runtime_checkable
class VectorIndex(Protocol):
    """What a gallery index backend provides (see the module doc for filters and persistence)."""

    name: str  # the registry name
    dim: int  # embedding width D
    model_fingerprint: str | None  # of the model that made the embeddings

    def __len__(self) -> int:
        """Vectors stored (deleted ones excluded)."""

    def add(self, vectors: np.ndarray, ids: np.ndarray, metadata: Sequence[Mapping[str, Any]] | None = None) -> None:
        """Add (n, D) float32 vectors under (n,) int64 ids (new ids; InputError for one already stored)."""

    def delete(self, ids: np.ndarray) -> int:
        """Remove the given ids; returns how many were stored."""

    def search(self, queries: np.ndarray, k: int, *, where: Filter | None = None) -> SearchResult:
        """(Q, D) queries -> the top ``k`` stored vectors per query among those matching ``where``."""

    def get_vectors(self, ids: np.ndarray) -> np.ndarray:
        """(n, D) float32 stored vectors of ``ids`` (exact re-scoring of a shortlist)."""

    def get_metadata(self, ids: np.ndarray) -> list[dict[str, Any]]:
        """The metadata record of each id."""

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write the index atomically, ``index.json`` last."""


# Modules whose import registers a backend; loaded on the registry's first use (they import this one).
# A module listed here that does not exist (a backend not written yet) is skipped.
BACKEND_MODULES = [
    "minterpr.index.vectors.exact",
    "minterpr.index.vectors.faiss_index",
    "minterpr.index.vectors.qdrant_index",
]


class _BackendRegistry(Registry[VectorIndex]):
    """A Registry that imports :data:`BACKEND_MODULES` before answering (no circular import)."""

    _loaded = False
    _loading = False  # True while the importing thread is inside _load (its nested calls return at once)
    _lock = threading.RLock()  # other threads wait until every backend module is imported

    def _load(self) -> None:
        if self._loaded:
            return
        with self._lock:  # re-entrant: a backend module that asks the registry while being imported
            if self._loaded or self._loading:
                return
            self._loading = True
            try:
                import importlib

                for module in BACKEND_MODULES:
                    try:
                        importlib.import_module(module)
                    except ModuleNotFoundError as error:
                        if error.name != module:  # the module exists but something it imports does not
                            raise
                self._loaded = True  # only now: a concurrent caller never sees a half-filled registry
            finally:
                self._loading = False

    def get(self, name: str) -> Any:
        self._load()
        return super().get(name)

    def names(self) -> list[str]:
        self._load()
        return super().names()

    def __contains__(self, name: object) -> bool:
        self._load()
        return super().__contains__(name)


VECTOR_INDEXES: Registry[VectorIndex] = _BackendRegistry("vector index")


def write_manifest(directory: str | os.PathLike[str], manifest: IndexManifest) -> None:
    """Write ``DIR/index.json`` atomically (the last file of a save)."""
    from minterpr.fileio import atomic_write_text

    atomic_write_text(Path(directory) / MANIFEST_FILE, json.dumps(asdict(manifest), indent=2, sort_keys=True) + "\n")


def read_manifest(directory: str | os.PathLike[str]) -> IndexManifest:
    """The manifest of a saved index; DatasetError for a missing, half-written or foreign one."""
    path = Path(directory) / MANIFEST_FILE
    if not Path(directory).is_dir():
        raise DatasetError(directory, "no saved vector index here (not a directory)")
    if not path.is_file():
        raise DatasetError(
            directory,
            f"no {MANIFEST_FILE}: not a saved vector index, or its save did not finish; "
            "save it again (index.save(DIR) or `minterpr index build`)",
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        manifest = IndexManifest(**data)
    except (OSError, ValueError, TypeError) as error:
        raise DatasetError(path, f"unreadable index manifest ({error}); rebuild the index") from None
    if manifest.format != INDEX_FORMAT or manifest.version != INDEX_VERSION:
        raise DatasetError(
            directory,
            f"format {manifest.format!r} version {manifest.version}, this minterpr reads "
            f"{INDEX_FORMAT!r} version {INDEX_VERSION}; rebuild the index",
        )
    return manifest


def load_vector_index(
    directory: str | os.PathLike[str], *, expected_fingerprint: str | None = None, mmap: bool = False
) -> VectorIndex:
    """Reopen a saved index with the backend that wrote it (no re-embedding).

    ``expected_fingerprint``: the fingerprint of the model whose queries will search it; an index
    built by another model is refused (DatasetError naming both). ``mmap=True`` maps the stored
    vectors read-only instead of reading them (large galleries)."""
    manifest = read_manifest(directory)
    if expected_fingerprint is not None and manifest.model_fingerprint != expected_fingerprint:
        raise DatasetError(
            directory,
            f"built by the model with fingerprint {manifest.model_fingerprint!r}, not the "
            f"loaded model ({expected_fingerprint!r}); rebuild it with this model "
            "(`minterpr index build`)",
        )
    if manifest.backend not in VECTOR_INDEXES:
        raise DatasetError(
            directory,
            f"written by the vector index {manifest.backend!r}, which this installation "
            f"lacks (it has {', '.join(VECTOR_INDEXES.names())})",
        )
    backend: Any = VECTOR_INDEXES.get(manifest.backend)
    return backend.load(Path(directory), manifest, mmap)
