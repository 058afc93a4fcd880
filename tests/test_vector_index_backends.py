"""Backend-specific behaviour of the local vector indexes: the columnar filter against the reference
on odd values, exact fp16 and memory-mapped storage, compaction, FAISS's own filtered path,
IVF-PQ training, HNSW rebuild after many deletes, manifest refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from minterpr.errors import DatasetError, InputError
from minterpr.index.vectors import faiss_index
from minterpr.index.vectors.exact import ExactIndex
from minterpr.index.vectors.metadata_filter import MetadataColumns, reference_mask
from minterpr.index.vectors.vector_index import MANIFEST_FILE, Range, load_vector_index

VALUES = [
    "a",
    "b",
    "2026-12-01T10:00:00",
    "2026-12-02T00:00:00",
    "",
    0,
    1,
    2,
    -3,
    2.5,
    1.0,
    0.0,
    True,
    False,
    float("nan"),
    None,
    [1, 2],
    {"x": 1},
    2**60,
    -(2**60) - 1,
    1e300,
]
CONDITIONS = [
    "a",
    1,
    1.0,
    True,
    False,
    0,
    2.5,
    2**60,
    float("nan"),
    ["a", 1],
    ["b", False, 2**60],
    [],
    Range(0, 2),
    Range(low=1),
    Range(high=1.0),
    Range("a", "z"),
    Range("2026-12-01T00:00:00", None),
    Range(),
    Range(float("nan"), 3),
    Range(0, "z"),
    Range(2**59, None),
    Range(True, True),
    Range([0], [5]),
]


def test_columnar_filter_equals_reference_on_odd_values():
    rng = np.random.default_rng(0)
    records = []
    for _ in range(400):
        record = {}
        for key in ("k1", "k2"):
            if rng.random() < 0.8:
                record[key] = VALUES[rng.integers(len(VALUES))]
        records.append(record)
    columns = MetadataColumns()
    for condition in CONDITIONS:
        for where in ({"k1": condition}, {"k1": condition, "k2": CONDITIONS[rng.integers(len(CONDITIONS))]}):
            np.testing.assert_array_equal(columns.mask(records, where), reference_mask(records, where), str(where))
    records.extend([{"k1": 1}, {"k1": "a"}])  # columns are extended after an append
    np.testing.assert_array_equal(columns.mask(records, {"k1": [1, "a"]}), reference_mask(records, {"k1": [1, "a"]}))


def _data(n=3000, dim=16, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True), np.arange(n, dtype=np.int64) + 100


def test_exact_fp16_scores_in_fp32_and_matches_fp32():
    x, ids = _data()
    full, half = ExactIndex(16), ExactIndex(16, dtype="float16")
    full.add(x, ids)
    half.add(x, ids)
    a, b = full.search(x[:50], 10), half.search(x[:50], 10)
    assert b.scores.dtype == np.float32 and half.store.vectors.dtype == np.float16
    assert (a.ids[:, 0] == b.ids[:, 0]).all() and (a.ids == b.ids).mean() > 0.95
    np.testing.assert_allclose(a.scores, b.scores, atol=2e-3)
    with pytest.raises(InputError):
        ExactIndex(16, dtype="int8")


def test_exact_chunked_scan_equals_one_block(monkeypatch):
    x, ids = _data(5000)
    index = ExactIndex(16)
    index.add(x, ids, [{"even": int(i % 2 == 0)} for i in range(5000)])
    expected = [index.search(x[:20], 50), index.search(x[:20], 50, where={"even": 1})]
    monkeypatch.setattr("minterpr.index.vectors.row_store.CHUNK_BYTES", 16 * 4 * 300)  # 300-row blocks
    for before, where in zip(expected, (None, {"even": 1})):
        np.testing.assert_array_equal(index.search(x[:20], 50, where=where).ids, before.ids)


def file_backed(array) -> bool:
    """Whether ``array`` views a memory-mapped file (a plain view of a ``np.memmap`` included)."""
    while array is not None:
        if isinstance(array, np.memmap):
            return True
        array = getattr(array, "base", None)
    return False


def test_exact_mmap_and_compaction(tmp_path):
    x, ids = _data()
    index = ExactIndex(16, dtype="float16", model_fingerprint="fp")
    index.add(x, ids)
    index.delete(ids[:2000])  # more than half: compacted
    assert index.store.n == 1000 and len(index) == 1000
    index.save(tmp_path / "ix")
    mapped = load_vector_index(tmp_path / "ix", mmap=True)
    assert file_backed(mapped.store.vectors) and not mapped.store.vectors.flags.writeable
    np.testing.assert_array_equal(mapped.search(x[2000:2010], 5).ids, index.search(x[2000:2010], 5).ids)
    assert mapped.delete(ids[2000:2600]) == 600 and len(mapped) == 400  # masked, the map is not copied
    assert mapped.search(x[2000:2001], 1).ids[0, 0] != ids[2000]


def test_manifest_of_another_version_is_refused(tmp_path):
    x, ids = _data(50)
    index = ExactIndex(16)
    index.add(x, ids)
    index.save(tmp_path / "ix")
    manifest = json.loads((tmp_path / "ix" / MANIFEST_FILE).read_text())
    manifest["version"] = 99
    (tmp_path / "ix" / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(DatasetError, match="version 99"):
        load_vector_index(tmp_path / "ix")
    (tmp_path / "ix" / MANIFEST_FILE).write_text("{not json")
    with pytest.raises(DatasetError, match="unreadable"):
        load_vector_index(tmp_path / "ix")


faiss = pytest.importorskip("faiss")


@pytest.mark.parametrize(
    "cls, options", [(faiss_index.FaissHNSWIndex, {}), (faiss_index.FaissIVFPQIndex, {"nlist": 8, "m": 4, "nprobe": 8})]
)
def test_faiss_filtered_search_runs_inside_faiss(cls, options, monkeypatch):
    x, ids = _data()
    index = cls(16, brute_force_below=0, **options)
    index.add(x, ids, [{"camera": f"cam{i % 3}"} for i in range(3000)])
    exact = ExactIndex(16)
    exact.add(x, ids, [{"camera": f"cam{i % 3}"} for i in range(3000)])
    expected = exact.search(x[:30], 10, where={"camera": "cam1"}).ids

    def no_fallback(*args, **kwargs):
        raise AssertionError("answered by the exact fallback, not by FAISS")

    monkeypatch.setattr(faiss_index, "search_rows", no_fallback)
    got = index.search(x[:30], 10, where={"camera": "cam1"}).ids
    assert (got >= 0).all() and all(m["camera"] == "cam1" for m in index.get_metadata(got.ravel()))
    assert (got == expected).mean() >= 0.9


def test_ivfpq_refuses_search_before_training_then_trains():
    x, ids = _data()
    index = faiss_index.FaissIVFPQIndex(16, m=4)
    index.add(x[:100], ids[:100])
    with pytest.raises(InputError, match="not trained"):
        index.search(x[:1], 5)
    index.add(x[100:], ids[100:])  # enough now: trained on everything stored, then searchable
    assert index.index.is_trained and index.index.ntotal == 3000
    assert index.search(x[:5], 1).ids[:, 0].tolist() == ids[:5].tolist()
    explicit = faiss_index.FaissIVFPQIndex(16, m=4, nlist=8)
    explicit.train(x)
    explicit.add(x[:10], ids[:10])
    assert explicit.search(x[:3], 1).ids[:, 0].tolist() == ids[:3].tolist()
    with pytest.raises(InputError, match="divide"):
        faiss_index.FaissIVFPQIndex(16, m=5)


def test_ivfpq_delete_removes_from_faiss():
    x, ids = _data()
    index = faiss_index.FaissIVFPQIndex(16, m=4, nlist=8)
    index.add(x, ids)
    index.delete(ids[:10])
    assert index.index.ntotal == 2990 and index.search(x[:10], 1).ids[:, 0].tolist() != ids[:10].tolist()


def test_hnsw_rebuilds_after_many_deletes():
    x, ids = _data()
    index = faiss_index.FaissHNSWIndex(16, M=8)
    index.add(x, ids)
    index.delete(ids[:1000])
    assert index.index.ntotal == 3000  # HNSW cannot remove: masked
    index.delete(ids[1000:1600])
    assert index.index.ntotal == 1400 == len(index)  # past half: rebuilt from the live rows
    got = index.search(x[1600:1620], 1).ids[:, 0]
    assert got.tolist() == ids[1600:1620].tolist()


def test_the_backend_registry_loads_once_for_concurrent_callers(monkeypatch):
    """A thread asking while another is still importing the backends waits for them (it used to see
    an empty registry: the loaded flag was set before the imports)."""
    import importlib
    import threading
    import time

    from minterpr.index.vectors import vector_index

    registry = vector_index._BackendRegistry("vector index")
    monkeypatch.setattr(vector_index._BackendRegistry, "_loaded", False)
    monkeypatch.setattr(vector_index, "BACKEND_MODULES", ("slow_backend_module",))

    def slow_import(name):
        time.sleep(0.3)  # a backend module that takes a while to import (faiss, qdrant)
        registry.register("slow")(lambda **kw: None)

    monkeypatch.setattr(importlib, "import_module", slow_import)
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(registry.names())) for _ in range(4)]
    for t in threads:
        t.start()
        time.sleep(0.02)
    for t in threads:
        t.join()
    assert seen == [["slow"]] * 4
