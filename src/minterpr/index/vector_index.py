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

import os
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence, Union, runtime_checkable

import numpy as np

from minterpr.errors import InputError
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
                raise InputError(f"filter {key!r}: a condition is a value, a list of values or a Range, "
                                 f"got {type(value).__name__}")


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


VECTOR_INDEXES: Registry[VectorIndex] = Registry("vector index")
