"""The Qdrant collection behind a :class:`~minterpr.index.vectors.qdrant_index.QdrantIndex`: how it is
made from the index's settings, and how its points are copied to another client.

A new collection gets the vectors' size and distance, the HNSW graph, int8 scalar quantization when
asked, on-disk vectors and payloads, a cluster's shards and replicas, and (on a server) the payload
indexes filters read: ``camera`` (keyword) and ``time`` (float, and its numeric mirror).
"""

from __future__ import annotations

from typing import Any, Mapping

from minterpr.index.vectors.qdrant_filter import TS_PREFIX

# a QdrantIndex's collection settings, as its constructor takes them and its manifest stores them
SETTINGS = (
    "distance",
    "on_disk",
    "quantization",
    "hnsw_m",
    "hnsw_ef_construct",
    "hnsw_ef",
    "exact",
    "shard_number",
    "replication_factor",
)
PAYLOAD_INDEXES = {"camera": "keyword", "time": "float", TS_PREFIX + "time": "float"}  # made with the collection
SCROLL_BATCH = 4096  # points per scroll page (copy, reference filtering)


def create_collection(client: Any, collection: str, dim: int, settings: Mapping[str, Any], *, server: bool) -> None:
    """Create ``collection`` of ``dim``-d vectors with ``settings`` (:data:`SETTINGS`); ``server``: a
    Qdrant server or cluster (shards, replicas and payload indexes apply), else local mode."""
    from qdrant_client import models as m

    s = settings
    quantization = None
    if s["quantization"] == "int8":
        quantization = m.ScalarQuantization(
            scalar=m.ScalarQuantizationConfig(type=m.ScalarType.INT8, quantile=0.99, always_ram=True)
        )
    client.create_collection(
        collection,
        vectors_config=m.VectorParams(
            size=dim,
            on_disk=s["on_disk"],
            distance=(m.Distance.DOT if s["distance"] == "dot" else m.Distance.COSINE),
        ),
        hnsw_config=m.HnswConfigDiff(m=s["hnsw_m"], ef_construct=s["hnsw_ef_construct"]),
        quantization_config=quantization,
        on_disk_payload=s["on_disk"],
        **(
            {}
            if not server
            else {
                "shard_number": s["shard_number"],  # a cluster's shards
                "replication_factor": s["replication_factor"],
            }
        ),
    )
    if not server:
        return  # local mode scans every payload: its payload indexes would do nothing (it warns)
    schema = {"keyword": m.PayloadSchemaType.KEYWORD, "float": m.PayloadSchemaType.FLOAT}
    for key, kind in PAYLOAD_INDEXES.items():
        client.create_payload_index(collection, key, field_schema=schema[kind])


def copy_points(source: Any, target: Any, collection: str) -> None:
    """Copy every point (vector and payload) of ``collection`` from client ``source`` to ``target``."""
    from qdrant_client import models as m

    offset = None
    while True:
        points, offset = source.scroll(
            collection, limit=SCROLL_BATCH, offset=offset, with_payload=True, with_vectors=True
        )
        if points:
            target.upsert(
                collection,
                wait=True,
                points=m.Batch(
                    ids=[p.id for p in points],
                    vectors=[p.vector for p in points],
                    payloads=[p.payload or {} for p in points],
                ),
            )
        if offset is None:
            break
