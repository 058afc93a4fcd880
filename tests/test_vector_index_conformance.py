"""Every registered vector index (VECTOR_INDEXES) behaves like the exact reference: same top
results on small data, recall@10 >= 0.95 on clustered vectors, filters equal to ``matches``,
deletes, persistence round trip (mmap too), refusals, concurrent readers, bad input.
A backend whose optional extra is not installed is skipped."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from minterpr.errors import DatasetError, InputError, MinterprError
from minterpr.index.vectors.vector_index import (
    MANIFEST_FILE,
    VECTOR_INDEXES,
    Range,
    SearchResult,
    VectorIndex,
    load_vector_index,
    matches,
)

FINGERPRINT = "0123456789abcdef"
# Options that make the small data sets exercise each backend's own search path (not its fallbacks).
OPTIONS = {
    "faiss_hnsw": {"brute_force_below": 0, "M": 16, "ef_construction": 80},
    "faiss_ivfpq": {"brute_force_below": 0, "nlist": 16, "m": 8, "nprobe": 16},
}
RECALL_OPTIONS = {"faiss_ivfpq": {"m": 32}}  # the 256-d recall data


def make(name: str, dim: int, **extra):
    try:
        return VECTOR_INDEXES.create(name, dim=dim, model_fingerprint=FINGERPRINT, **{**OPTIONS.get(name, {}), **extra})
    except MinterprError as error:
        if "pip install" in str(error):
            pytest.skip(f"{name}: {error}")
        raise


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def small_data(n: int = 600, dim: int = 32, seed: int = 0):
    rng = np.random.default_rng(seed)
    vectors = unit(rng.normal(size=(n, dim)))
    ids = rng.choice(10 * n, size=n, replace=False).astype(np.int64)
    cameras = ["cam0", "cam1", "cam2", "cam3"]
    metadata = []
    for i in range(n):
        record = {"camera": cameras[i % 4], "time": f"2026-12-01T{i % 24:02d}:{i % 60:02d}:00", "frame": int(i)}
        if i % 7 == 0:
            del record["camera"]  # a record without the key never matches a condition on it
        if i % 11 == 0:
            record["score"] = float(i) / 10
        metadata.append(record)
    return vectors, ids, metadata


FILTERS = [
    {"camera": "cam1"},
    {"camera": ["cam0", "cam3"]},
    {"frame": Range(100, 250)},
    {"time": Range("2026-12-01T05:00:00", "2026-12-01T09:30:00")},
    {"camera": "cam2", "time": Range(low="2026-12-01T12:00:00")},
    {"score": Range(high=30.0)},
    {"missing_key": "x"},
    {"frame": 17},
]


@pytest.fixture(params=VECTOR_INDEXES.names())
def name(request) -> str:
    return request.param


@pytest.fixture
def filled(name):
    vectors, ids, metadata = small_data()
    index = make(name, vectors.shape[1])
    index.add(vectors, ids, metadata)
    return index, vectors, ids, metadata


def reference(vectors, ids, metadata, queries, k, where=None, alive=None):
    keep = np.array([matches(m, where) for m in metadata]) & (np.ones(len(ids), bool) if alive is None else alive)
    scores = queries @ vectors[keep].T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    found = ids[keep][order]
    return np.pad(found, ((0, 0), (0, k - found.shape[1])), constant_values=-1)  # -1 padded like a SearchResult


def test_is_a_vector_index_with_same_top_results_as_exact(filled):
    index, vectors, ids, metadata = filled
    assert isinstance(index, VectorIndex) and index.dim == 32 and len(index) == 600
    queries = unit(vectors[:20] + 0.05 * np.random.default_rng(1).normal(size=(20, 32)))
    result = index.search(queries, 5)
    assert isinstance(result, SearchResult) and result.ids.shape == (20, 5) and result.ids.dtype == np.int64
    assert (result.ids == reference(vectors, ids, metadata, queries, 5)).mean() >= 0.95
    assert result.ids[:, 0].tolist() == ids[:20].tolist()
    assert np.all(np.diff(result.scores, axis=1) <= 1e-6)  # best first
    np.testing.assert_allclose(index.get_vectors(ids[:3]), vectors[:3], atol=2e-3)
    assert index.get_metadata(ids[:2]) == metadata[:2]
    one = index.search(queries[0], 3)  # a single (D,) query
    assert one.ids.shape == (1, 3)


def test_more_than_stored_pads(filled):
    index, *_ = filled
    result = index.search(unit(np.ones((1, 32))), 700)
    assert (result.ids[0, :600] >= 0).all() and (result.ids[0, 600:] == -1).all()
    assert np.isneginf(result.scores[0, 600:]).all()


@pytest.mark.parametrize("where", FILTERS, ids=str)
def test_filters_equal_reference_and_return_k(filled, where):
    index, vectors, ids, metadata = filled
    expected = {int(i) for i, m in zip(ids, metadata) if matches(m, where)}
    queries = unit(np.random.default_rng(2).normal(size=(3, 32)))
    everything = index.search(queries, 600, where=where)
    for row in everything.ids:
        assert set(row[row >= 0].tolist()) == expected
    k = 10
    top = index.search(queries, k, where=where)
    assert ((top.ids >= 0).sum(axis=1) == min(k, len(expected))).all()
    if expected:
        assert (top.ids == reference(vectors, ids, metadata, queries, k, where)).mean() >= 0.9


def test_deletes(filled):
    index, vectors, ids, metadata = filled
    gone = ids[::3]
    assert index.delete(gone) == len(gone)
    assert index.delete(gone) == 0
    assert len(index) == 600 - len(gone)
    result = index.search(vectors[:30], 600)
    assert not set(result.ids.ravel().tolist()) & set(gone.tolist())
    assert ((result.ids >= 0).sum(axis=1) == len(index)).all()
    filtered = index.search(vectors[:5], 5, where={"camera": "cam1"})
    assert not set(filtered.ids.ravel().tolist()) & set(gone.tolist())
    with pytest.raises(InputError):
        index.get_vectors(gone[:1])
    index.add(vectors[:1], gone[:1], metadata[:1])  # a deleted id can be added again
    assert index.search(vectors[:1], 1).ids[0, 0] == gone[0] and len(index) == 601 - len(gone)


@pytest.mark.parametrize("mmap", [False, True])
def test_persistence_round_trip(filled, tmp_path, mmap):
    index, vectors, ids, metadata = filled
    index.delete(ids[:50])
    queries = unit(np.random.default_rng(3).normal(size=(8, 32)))
    before = [index.search(queries, 10), index.search(queries, 10, where=FILTERS[3])]
    index.save(tmp_path / "ix")
    again = load_vector_index(tmp_path / "ix", expected_fingerprint=FINGERPRINT, mmap=mmap)
    assert again.name == index.name and again.dim == 32 and len(again) == 550
    assert again.model_fingerprint == FINGERPRINT
    after = [again.search(queries, 10), again.search(queries, 10, where=FILTERS[3])]
    for b, a in zip(before, after):
        np.testing.assert_array_equal(a.ids, b.ids)
        np.testing.assert_allclose(a.scores, b.scores, atol=1e-5)
    assert again.get_metadata(ids[60:62]) == metadata[60:62]
    again.add(vectors[:1], ids[:1], metadata[:1])  # a reopened (even mapped) index accepts adds
    assert len(again) == 551


def test_refuses_another_model_and_half_written(filled, tmp_path):
    index, *_ = filled
    index.save(tmp_path / "ix")
    with pytest.raises(DatasetError, match="fingerprint"):
        load_vector_index(tmp_path / "ix", expected_fingerprint="ffffffffffffffff")
    (tmp_path / "ix" / MANIFEST_FILE).unlink()
    with pytest.raises(DatasetError, match="index.json"):
        load_vector_index(tmp_path / "ix")
    with pytest.raises(DatasetError):
        load_vector_index(tmp_path / "nowhere")


def test_concurrent_readers(filled):
    index, vectors, *_ = filled
    queries = unit(np.random.default_rng(4).normal(size=(64, 32)))
    expected = [index.search(queries[i : i + 1], 10, where=FILTERS[i % 3]).ids for i in range(64)]
    got: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(part: int) -> None:
        try:
            for i in range(part, 64, 4):
                got[i] = index.search(queries[i : i + 1], 10, where=FILTERS[i % 3]).ids
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(64):
        np.testing.assert_array_equal(got[i], expected[i])


def test_bad_input(filled):
    index, vectors, ids, metadata = filled
    bad_nan = vectors[:2].copy()
    bad_nan[0, 0] = np.nan
    for call in [
        lambda: index.add(vectors[:2, :16], np.array([90001, 90002])),
        lambda: index.add(bad_nan, np.array([90001, 90002])),
        lambda: index.add(vectors[:2], np.array([90001, 90001])),
        lambda: index.add(vectors[:1], ids[:1]),
        lambda: index.add(vectors[:2], np.array([90001, 90002]), metadata[:1]),
        lambda: index.add(vectors[:1], np.array([-5])),
        lambda: index.search(vectors[:1], 0),
        lambda: index.search(vectors[:1], -3),
        lambda: index.search(vectors[:1, :8], 3),
        lambda: index.search(bad_nan, 3),
        lambda: index.search(vectors[:1], 3, where={"camera": object()}),
        lambda: index.search(vectors[:1], 3, where="camera"),
    ]:
        with pytest.raises(InputError):
            call()
    assert len(index) == 600  # nothing was added by the refused calls


# --- recall on clustered vectors (a mixture of Gaussians, 20k x 256) -----------------------------
@pytest.fixture(scope="module")
def clustered():
    rng = np.random.default_rng(7)
    centres = unit(rng.normal(size=(200, 256)))
    labels = rng.integers(0, 200, size=20_200)
    points = unit(centres[labels] + 0.08 * rng.normal(size=(20_200, 256)))
    return points[:20_000], points[20_000:]  # gallery, queries


def test_recall_at_10_against_exact(name, clustered):
    gallery, queries = clustered
    ids = np.arange(20_000, dtype=np.int64) * 3 + 1
    exact = make("exact", 256)
    exact.add(gallery, ids)
    index = make(name, 256, **{**RECALL_OPTIONS.get(name, {}), **({"nlist": None} if name == "faiss_ivfpq" else {})})
    index.add(gallery, ids)
    truth, found = exact.search(queries, 10).ids, index.search(queries, 10).ids
    recall = np.mean([len(set(t) & set(f)) / 10 for t, f in zip(truth, found)])
    assert recall >= 0.95, f"{name}: recall@10 {recall:.3f}"
