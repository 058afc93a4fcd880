"""A Qdrant collection as a vector index ("qdrant"): local mode in tests, a server or cluster by URL.

``QdrantIndex(dim, location=":memory:")`` keeps the collection in this process (Qdrant's local
mode: exact numpy search, no server); ``path=DIR`` keeps it in ``DIR`` (local mode, persisted in
SQLite; one process at a time); ``url="http://host:6333"`` uses a Qdrant server or cluster
(``QDRANT_API_KEY`` from the environment when set), where HNSW, payload indexes, on-disk vectors
and int8 quantization apply. docs/scale.md says when to use which; local mode is for tests and
galleries up to some tens of thousands of crops.

Ids are the caller's int64 point ids (>= 0); metadata is the payload, with a numeric mirror of
every ISO 8601 string (``__ts__KEY``) so time windows are numeric ranges
(:mod:`minterpr.index.vectors.qdrant_filter`). The collection is created with payload indexes on
``camera`` (keyword) and ``time`` (float, and its mirror). Filters are applied inside the search;
one without an exact Qdrant translation is evaluated with the reference ``matches()`` over the
payloads (O(N)) and searched as a set of ids, so results always equal the reference.

Persistence: ``save(DIR)`` writes ``DIR/index.json`` last. In path mode with ``DIR`` = the path the
collection is already there; an in-memory (or other-path) index is copied into a local store in
``DIR``; a server index writes only the manifest, which points at the URL and collection.
``load_vector_index(DIR)`` reopens any of them. ``qdrant-client`` is imported when an index is made
(``pip install 'minterpr[qdrant]'``).

Example:
    >>> index = QdrantIndex(dim=2, model_fingerprint="abc")
    >>> index.add(np.array([[1, 0], [0.6, 0.8], [0, 1]], np.float32), np.array([10, 11, 12]),
    ...           [{"camera": "c1"}, {"camera": "c2"}, {"camera": "c1"}])
    >>> index.search(np.array([[1, 0]], np.float32), 2, where={"camera": "c1"}).ids.tolist()
    [[10, 12]]
    >>> index.delete(np.array([10, 99])), len(index)
    (1, 2)
"""

from __future__ import annotations

import os
import threading
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.errors import DatasetError, InputError
from minterpr.index.vectors.qdrant_collection import SCROLL_BATCH, SETTINGS, copy_points, create_collection
from minterpr.index.vectors.qdrant_filter import EMPTY, metadata_of, payload_of, to_qdrant_filter
from minterpr.index.vectors.row_store import check_ids, check_k, check_queries, check_vectors, clear_manifest
from minterpr.index.vectors.vector_index import (
    VECTOR_INDEXES,
    Filter,
    IndexManifest,
    SearchResult,
    matches,
    write_manifest,
)

DISTANCES = ("dot", "cosine")  # dot = inner product of the (normalised) embeddings; cosine normalises
UPSERT_BATCH = 1024  # points per upsert call


def import_qdrant() -> Any:
    try:
        import qdrant_client
    except ImportError:
        raise InputError("the Qdrant vector index needs qdrant-client: pip install 'minterpr[qdrant]'") from None
    return qdrant_client


@VECTOR_INDEXES.register("qdrant")
class QdrantIndex:
    """A Qdrant collection behind the VectorIndex protocol (see the module doc).

    Exactly one of ``location`` (``":memory:"``, the default), ``path`` or ``url``. ``on_disk``:
    vectors on disk, memory-mapped by the server (and payloads too); ``quantization="int8"``:
    scalar-quantised copies in RAM with rescoring (server only; local mode ignores both).
    ``hnsw_m``/``hnsw_ef_construct``/``hnsw_ef``: HNSW graph degree, build and search beams;
    ``exact=True`` makes the server scan instead (local mode always scans). ``shard_number`` /
    ``replication_factor``: how a new collection is spread over a cluster (None: the server's).
    """

    name = "qdrant"

    def __init__(
        self,
        dim: int,
        *,
        location: str | None = None,
        path: str | os.PathLike[str] | None = None,
        url: str | None = None,
        collection: str = "minterpr",
        model_fingerprint: str | None = None,
        distance: str = "dot",
        on_disk: bool = False,
        quantization: str | None = None,
        hnsw_m: int = 16,
        hnsw_ef_construct: int = 100,
        hnsw_ef: int = 128,
        exact: bool = False,
        shard_number: int | None = None,
        replication_factor: int | None = None,
    ) -> None:
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim <= 0:
            raise InputError(f"dim must be a positive integer, got {dim!r}")
        if sum(x is not None for x in (location, path, url)) > 1:
            raise InputError("give one of location, path or url")
        if distance not in DISTANCES:
            raise InputError(f"distance must be one of {DISTANCES}, got {distance!r}")
        if quantization not in (None, "int8"):
            raise InputError(f"quantization must be None or 'int8', got {quantization!r}")
        qdrant_client = import_qdrant()
        self.dim = int(dim)  # embedding width D
        self.model_fingerprint = model_fingerprint  # of the model that made the embeddings
        self.collection = collection  # the Qdrant collection name
        self.url = url  # server / cluster URL; None in local mode
        self.path = None if path is None else Path(path)  # local persisted store; None otherwise
        self.settings = {
            "distance": distance,
            "on_disk": bool(on_disk),
            "quantization": quantization,
            "hnsw_m": int(hnsw_m),
            "hnsw_ef_construct": int(hnsw_ef_construct),
            "hnsw_ef": int(hnsw_ef),
            "exact": bool(exact),
            "shard_number": shard_number,
            "replication_factor": replication_factor,
        }
        if url is not None:
            self.client = qdrant_client.QdrantClient(url=url, api_key=os.environ.get("QDRANT_API_KEY"))
        elif path is not None:
            self.client = qdrant_client.QdrantClient(path=os.fspath(path))
        else:
            self.client = qdrant_client.QdrantClient(location=location or ":memory:")
        # local mode is plain Python over shared dicts: one call at a time; a server client is thread-safe
        self._lock = threading.RLock() if url is None else None
        from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

        try:
            self._ensure_collection()
        except (ResponseHandlingException, UnexpectedResponse) as error:
            self.client.close()
            raise InputError(f"cannot use the Qdrant collection {collection!r} at {url}: {error}") from None

    # ------------------------------------------------------------------ set-up
    def _guard(self) -> Any:
        return self._lock if self._lock is not None else nullcontext()

    def _ensure_collection(self) -> None:
        if self.client.collection_exists(self.collection):
            info = self.client.get_collection(self.collection)
            size = getattr(info.config.params.vectors, "size", None)
            if size != self.dim:
                raise InputError(f"Qdrant collection {self.collection!r} holds {size}-d vectors, not {self.dim}-d")
            return
        create_collection(self.client, self.collection, self.dim, self.settings, server=self.url is not None)

    def close(self) -> None:
        """Release the client (a local path store stays locked until then)."""
        self.client.close()

    def __enter__(self) -> "QdrantIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def params(self) -> dict[str, Any]:
        mode = "server" if self.url is not None else "local"
        return {
            "mode": mode,
            "collection": self.collection,
            **self.settings,
            **({"url": self.url} if self.url is not None else {}),
        }

    def __len__(self) -> int:
        with self._guard():
            return int(self.client.count(self.collection, exact=True).count)

    # ------------------------------------------------------------------ writes
    def _stored(self, ids: np.ndarray) -> set[int]:
        found: set[int] = set()
        for start in range(0, len(ids), SCROLL_BATCH):
            chunk = [int(i) for i in ids[start : start + SCROLL_BATCH]]
            found.update(int(r.id) for r in self.client.retrieve(self.collection, chunk, with_payload=False))
        return found

    def add(self, vectors: np.ndarray, ids: np.ndarray, metadata: Sequence[Mapping[str, Any]] | None = None) -> None:
        from qdrant_client import models as m

        vectors = check_vectors(vectors, self.dim)
        ids = check_ids(ids, len(vectors))
        if metadata is not None and len(metadata) != len(ids):
            raise InputError(f"metadata: {len(metadata)} records for {len(ids)} vectors")
        if len(np.unique(ids)) != len(ids):
            raise InputError("ids: an id is given twice")
        payloads = [payload_of(r) if r else {} for r in metadata] if metadata is not None else [{}] * len(ids)
        with self._guard():
            already = self._stored(ids)
            if already:
                raise InputError(f"ids already stored: {sorted(already)[:5]} (delete them first)")
            for start in range(0, len(ids), UPSERT_BATCH):
                stop = start + UPSERT_BATCH
                self.client.upsert(
                    self.collection,
                    wait=True,
                    points=m.Batch(
                        ids=[int(i) for i in ids[start:stop]],
                        vectors=vectors[start:stop].tolist(),
                        payloads=payloads[start:stop],
                    ),
                )

    def delete(self, ids: np.ndarray) -> int:
        from qdrant_client import models as m

        ids = check_ids(ids)
        with self._guard():
            stored = sorted(self._stored(np.unique(ids)))
            if stored:
                self.client.delete(self.collection, points_selector=m.PointIdsList(points=stored), wait=True)
        return len(stored)

    # ------------------------------------------------------------------ reads
    def _records(self, ids: np.ndarray, with_vectors: bool) -> list[Any]:
        ids = check_ids(ids)
        with self._guard():
            found = {
                int(r.id): r
                for r in self.client.retrieve(
                    self.collection,
                    [int(i) for i in np.unique(ids)],
                    with_payload=not with_vectors,
                    with_vectors=with_vectors,
                )
            }
        missing = [int(i) for i in ids if int(i) not in found]
        if missing:
            raise InputError(f"ids not stored: {missing[:5]}")
        return [found[int(i)] for i in ids]

    def get_vectors(self, ids: np.ndarray) -> np.ndarray:
        records = self._records(ids, with_vectors=True)
        return np.asarray([r.vector for r in records], np.float32).reshape(len(records), self.dim)

    def get_metadata(self, ids: np.ndarray) -> list[dict[str, Any]]:
        return [metadata_of(r.payload) for r in self._records(ids, with_vectors=False)]

    def _reference_ids(self, where: Filter) -> list[int]:
        """Ids whose payload satisfies ``where`` by the reference ``matches()`` (a full scroll)."""
        ids, offset = [], None
        while True:
            points, offset = self.client.scroll(
                self.collection, limit=SCROLL_BATCH, offset=offset, with_payload=True, with_vectors=False
            )
            ids += [int(p.id) for p in points if matches(metadata_of(p.payload), where)]
            if offset is None:
                return ids

    def search(self, queries: np.ndarray, k: int, *, where: Filter | None = None) -> SearchResult:
        from qdrant_client import models as m

        from minterpr.index.vectors.vector_index import check_filter

        k = check_k(k)
        queries = check_queries(queries, self.dim)
        check_filter(where)
        out_ids = np.full((len(queries), k), -1, np.int64)
        out_scores = np.full((len(queries), k), -np.inf, np.float32)
        with self._guard():
            query_filter = to_qdrant_filter(where) if where else None
            if where and query_filter is None:
                allowed = self._reference_ids(where)
                query_filter = m.Filter(must=[m.HasIdCondition(has_id=allowed)]) if allowed else EMPTY
            if query_filter is EMPTY or len(queries) == 0:
                return SearchResult(ids=out_ids, scores=out_scores)
            params = (
                None
                if self.url is None
                else m.SearchParams(  # local mode always scans exactly
                    hnsw_ef=max(self.settings["hnsw_ef"], k), exact=self.settings["exact"]
                )
            )
            requests = [
                m.QueryRequest(query=q.tolist(), filter=query_filter, limit=k, params=params, with_payload=False)
                for q in queries
            ]
            responses = self.client.query_batch_points(self.collection, requests=requests)
        for row, response in enumerate(responses):
            points = response.points[:k]
            out_ids[row, : len(points)] = [int(p.id) for p in points]
            out_scores[row, : len(points)] = [p.score for p in points]
        return SearchResult(ids=out_ids, scores=out_scores)

    # ------------------------------------------------------------------ persistence
    def _copy_into(self, folder: Path) -> None:
        """Copy every point into a fresh local store in ``folder`` (its old collection replaced)."""
        target = QdrantIndex(self.dim, path=folder, collection=self.collection, **self.settings)
        try:
            target.client.delete_collection(self.collection)
            target._ensure_collection()
            copy_points(self.client, target.client, self.collection)
        finally:
            target.close()

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write ``DIR/index.json`` last (see the module doc for where the points go)."""
        folder = Path(directory)
        same = self.path is not None and folder.exists() and folder.resolve() == self.path.resolve()
        with self._guard():
            folder = clear_manifest(folder)
            if self.url is None and not same:
                self._copy_into(folder)
            count = int(self.client.count(self.collection, exact=True).count)
        write_manifest(
            folder,
            IndexManifest(
                backend=self.name,
                dim=self.dim,
                count=count,
                model_fingerprint=self.model_fingerprint,
                params=self.params,
            ),
        )

    @classmethod
    def load(cls, directory: Path, manifest: IndexManifest, mmap: bool = False) -> "QdrantIndex":
        """Reopen a saved index: the local store in ``directory``, or the server the manifest names.
        ``mmap`` does not apply (on-disk vectors are the server's ``on_disk``)."""
        params = dict(manifest.params)
        mode, collection = params.pop("mode", "local"), params.pop("collection", "minterpr")
        url = params.pop("url", None)
        settings = {k: v for k, v in params.items() if k in SETTINGS}
        where = {"url": url} if mode == "server" else {"path": directory}
        if mode == "local" and not any(Path(directory).glob("collection/*")):
            raise DatasetError(
                directory,
                "index.json names a local Qdrant store but the collection files are missing; save the index again",
            )
        try:
            index = cls(
                manifest.dim, collection=collection, model_fingerprint=manifest.model_fingerprint, **where, **settings
            )
        except RuntimeError as error:  # local store locked by another client
            raise DatasetError(directory, f"cannot open the Qdrant store ({error})") from None
        if mode == "local" and len(index) != manifest.count:
            count = len(index)
            index.close()
            raise DatasetError(
                directory,
                f"the Qdrant store holds {count} points, index.json says "
                f"{manifest.count}: it changed after the save; save it again",
            )
        return index
