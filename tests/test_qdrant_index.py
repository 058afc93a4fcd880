"""The Qdrant backend beyond the shared conformance suite: filter translation equal to the reference
``matches()`` on awkward values (bools vs numbers, ISO times, untranslatable ranges), local path mode
persisted in place and reopened, in-memory saved to a directory, refusals (another dimension, a
changed store, an unreachable server), and the server manifest."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("qdrant_client")

from minterpr.errors import DatasetError, InputError  # noqa: E402
from minterpr.index.vectors.qdrant_filter import EMPTY, TS_PREFIX, iso_seconds, payload_of, to_qdrant_filter  # noqa: E402
from minterpr.index.vectors.qdrant_index import QdrantIndex  # noqa: E402
from minterpr.index.vectors.vector_index import MANIFEST_FILE, Range, load_vector_index, matches, read_manifest  # noqa: E402

DIM = 8


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


RECORDS = [
    {"camera": "cam1", "time": "2026-12-01T08:00:00", "flag": True, "n": 1},
    {"camera": "cam2", "time": "2026-12-01T09:30:00", "flag": False, "n": 0.0},
    {"camera": "cam1", "time": "2026-12-01T12:00:00", "flag": 1, "n": 5, "name": "alice"},
    {"camera": "cam3", "time": "2026-12-02T00:00:00", "n": 2.5, "name": "bob"},
    {"time": 1700000000, "n": True, "name": "carol"},
    {"camera": "cam2", "time": "2026-12-01T10:00:00Z", "name": "zed", "a.b": 3},
    {},
    {"camera": "cam1", "n": 10**6, "flag": 0},
]
FILTERS = [
    {"camera": "cam1"},
    {"camera": ["cam2", "cam3"]},
    {"camera": []},
    {"flag": True},  # Python: True == 1, so the stored int 1 matches too
    {"flag": 0},  # and False == 0
    {"n": 1},  # 1 == True == 1.0
    {"n": [0, 2.5]},
    {"n": Range(0, 1)},  # the stored bool True is inside
    {"n": Range(low=2)},
    {"time": Range("2026-12-01T09:00:00", "2026-12-01T12:00:00")},
    {"time": Range(low="2026-12-01T10:00:00")},
    {"time": Range(0, 2e9)},  # numbers: only the numeric time
    {"name": Range("b", "d")},  # plain strings: evaluated with the reference
    {"name": Range()},
    {"a.b": 3},  # a dotted key is not a Qdrant path here
    {"camera": "cam1", "time": Range(high="2026-12-01T10:00:00")},
    {"missing": "x"},
]


@pytest.fixture
def index():
    rng = np.random.default_rng(0)
    vectors = unit(rng.normal(size=(len(RECORDS), DIM)))
    index = QdrantIndex(DIM, model_fingerprint="fp")
    index.add(vectors, np.arange(100, 100 + len(RECORDS)), RECORDS)
    return index, vectors


@pytest.mark.parametrize("where", FILTERS, ids=lambda w: json.dumps(w, default=str))
def test_filters_equal_the_reference(index, where):
    qdrant, vectors = index
    expected = {100 + i for i, r in enumerate(RECORDS) if matches(r, where)}
    result = qdrant.search(vectors[:2], k=len(RECORDS), where=where)
    for row in range(2):
        assert {int(i) for i in result.ids[row] if i >= 0} == expected
        assert (result.ids[row] >= 0).sum() == len(expected)


def test_translation_is_native_where_it_can_be():
    assert to_qdrant_filter({"camera": []}) is EMPTY
    assert to_qdrant_filter({"name": Range("a", "m")}) is None
    assert to_qdrant_filter({"a.b": 1}) is None
    native = to_qdrant_filter({"camera": "c", "time": Range("2026-12-01", None), "n": Range(2, 3)})
    assert [c.key for c in native.must] == ["camera", TS_PREFIX + "time", "n"]
    assert iso_seconds("2026-12-01T00:00:00") == iso_seconds("2026-12-01T00:00:00Z") == iso_seconds("2026-12-01")
    assert iso_seconds("yesterday") is None and iso_seconds(5) is None
    with pytest.raises(InputError, match="__ts__"):
        payload_of({TS_PREFIX + "time": 1})


def test_metadata_and_vectors_come_back_without_mirrors(index):
    qdrant, vectors = index
    assert qdrant.get_metadata(np.array([102, 100])) == [RECORDS[2], RECORDS[0]]
    np.testing.assert_allclose(qdrant.get_vectors(np.array([103, 103])), vectors[[3, 3]], atol=1e-6)
    with pytest.raises(InputError, match="not stored"):
        qdrant.get_vectors(np.array([5]))
    with pytest.raises(InputError, match="already stored"):
        qdrant.add(vectors[:1], np.array([100]))
    with pytest.raises(InputError, match="twice"):
        qdrant.add(vectors[:2], np.array([1, 1]))


def test_path_mode_persists_in_place_and_reopens(tmp_path):
    rng = np.random.default_rng(1)
    vectors = unit(rng.normal(size=(50, DIM)))
    ids = np.arange(50) * 3
    with QdrantIndex(DIM, path=tmp_path, collection="gallery", model_fingerprint="fp") as index:
        index.add(vectors, ids, [{"camera": f"cam{i % 3}"} for i in range(50)])
        index.delete(ids[:5])
        before = index.search(vectors[:3], 5, where={"camera": "cam1"})
        index.save(tmp_path)
    assert read_manifest(tmp_path).params["collection"] == "gallery"
    reopened = load_vector_index(tmp_path, expected_fingerprint="fp")
    try:
        assert len(reopened) == 45
        after = reopened.search(vectors[:3], 5, where={"camera": "cam1"})
        np.testing.assert_array_equal(before.ids, after.ids)
        reopened.add(vectors[:1], np.array([1000]))  # changed after the save, not saved again
    finally:
        reopened.close()
    with pytest.raises(DatasetError, match="changed after the save"):
        load_vector_index(tmp_path)


def test_memory_index_saved_to_a_directory(index, tmp_path):
    qdrant, vectors = index
    qdrant.save(tmp_path / "saved")
    qdrant.save(tmp_path / "saved")  # saving again replaces the copy
    reopened = load_vector_index(tmp_path / "saved")
    try:
        assert len(reopened) == len(RECORDS)
        np.testing.assert_array_equal(reopened.search(vectors, 3).ids, qdrant.search(vectors, 3).ids)
        assert reopened.get_metadata(np.array([103])) == [RECORDS[3]]
    finally:
        reopened.close()
    with pytest.raises(InputError, match="4-d"):
        QdrantIndex(4, path=tmp_path / "saved")


def test_missing_store_and_unreachable_server(tmp_path, index):
    qdrant, _ = index
    qdrant.save(tmp_path / "saved")
    manifest = json.loads((tmp_path / "saved" / MANIFEST_FILE).read_text())
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(DatasetError, match="collection files are missing"):
        load_vector_index(tmp_path / "bare")
    manifest["params"].update(mode="server", url="http://127.0.0.1:9")
    (tmp_path / "bare" / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="127.0.0.1:9"):
        load_vector_index(tmp_path / "bare")


def test_constructor_refusals():
    with pytest.raises(InputError, match="one of"):
        QdrantIndex(4, location=":memory:", url="http://x")
    with pytest.raises(InputError, match="distance"):
        QdrantIndex(4, distance="l2")
    with pytest.raises(InputError, match="dim"):
        QdrantIndex(0)
