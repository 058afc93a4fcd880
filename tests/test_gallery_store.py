"""Gallery stores (minterpr.index.store.gallery_store): saved whole, reopened equal, refused when wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest

from minterpr.errors import DatasetError, InputError
from minterpr.index.store import gallery_store
from minterpr.index.gallery_index import GalleryIndex
from minterpr.index.store.gallery_store import (
    GALLERY_VERSION,
    MANIFEST,
    load_gallery,
    open_gallery,
    read_manifest,
    save_gallery,
)
from minterpr.index.store.store_vectors import build_vector_index, vector_records
from minterpr.index.vectors.vector_index import Range

from support.stores import FP, same_index as _same, store_index as _index


@pytest.mark.parametrize("probs", [True, False])
def test_round_trip_mmap_equals_in_memory(tmp_path, probs):
    index, metadata = _index(probs=probs)
    save_gallery(index, tmp_path / "g", model_fingerprint=FP, metadata=metadata)
    mapped = open_gallery(tmp_path / "g", expected_fingerprint=FP)
    in_memory = open_gallery(tmp_path / "g", mmap=False)
    _same(index, mapped.index)
    _same(mapped.index, in_memory.index)
    assert mapped.metadata == in_memory.metadata == metadata
    assert mapped.manifest.count == 12 and mapped.manifest.dim == 8 and mapped.manifest.model_fingerprint == FP
    # memory-mapped: read-only pages of the file; in memory: an ordinary writeable array
    assert not mapped.index.embeddings.flags.writeable and in_memory.index.embeddings.flags.writeable
    assert isinstance(mapped.index.embeddings.base, np.memmap) and type(mapped.index.embeddings) is np.ndarray
    query = index.embeddings[3]
    assert np.array_equal(mapped.index.rank(query), index.rank(query))
    assert mapped.vectors is None and mapped.index.vectors is None


def test_saving_again_replaces_the_store(tmp_path):
    index, _ = _index()
    save_gallery(index, tmp_path / "g", model_fingerprint=FP)
    smaller = GalleryIndex(index.images[:3], index.embeddings[:3], root=None)
    save_gallery(smaller, tmp_path / "g", model_fingerprint="other")
    again = load_gallery(tmp_path / "g", expected_fingerprint="other", mmap=False)
    _same(smaller, again)
    assert not (tmp_path / "g" / gallery_store.PROBS).exists()  # the old probabilities are gone


def test_another_models_store_is_refused(tmp_path):
    index, _ = _index()
    save_gallery(index, tmp_path / "g", model_fingerprint=FP)
    with pytest.raises(
        DatasetError,
        match=r"built by another model \(fingerprint 0123456789abcdef, this model's is "
        r"ffff\); rebuild it with `minterpr index build",
    ):
        load_gallery(tmp_path / "g", expected_fingerprint="ffff")
    save_gallery(index, tmp_path / "u", model_fingerprint=None)
    with pytest.raises(DatasetError, match="unknown model"):
        load_gallery(tmp_path / "u", expected_fingerprint=FP)
    assert len(load_gallery(tmp_path / "u")) == 12  # no expectation: opened


def test_a_save_killed_before_the_manifest_is_refused(tmp_path, monkeypatch):
    index, _ = _index()
    folder = tmp_path / "g"
    save_gallery(index, folder, model_fingerprint=FP)
    real = gallery_store.atomic_write_text

    def killed(path, text):
        if str(path).endswith(MANIFEST):
            raise KeyboardInterrupt  # the process dies before the manifest is written
        return real(path, text)

    monkeypatch.setattr(gallery_store, "atomic_write_text", killed)
    with pytest.raises(KeyboardInterrupt):
        save_gallery(GalleryIndex(index.images[:2], index.embeddings[:2]), folder, model_fingerprint=FP)
    monkeypatch.undo()
    with pytest.raises(
        DatasetError,
        match=r"half-written gallery store \(the save did not finish\): no gallery.json; "
        r"rebuild it with `minterpr index build",
    ):
        load_gallery(folder)
    with pytest.raises(DatasetError, match="not a gallery store"):
        load_gallery(tmp_path)  # a folder without any store file
    with pytest.raises(DatasetError, match="no such gallery store"):
        load_gallery(tmp_path / "missing")


def test_changed_files_and_other_versions_are_refused(tmp_path):
    index, _ = _index()
    folder = tmp_path / "g"
    save_gallery(index, folder, model_fingerprint=FP, rebuild="minterpr index build --run R --images I --out g")
    data = (folder / gallery_store.EMBEDDINGS).read_bytes()
    (folder / gallery_store.EMBEDDINGS).write_bytes(data[:-4])
    with pytest.raises(
        DatasetError,
        match=r"embeddings.npy has \d+ bytes, the save wrote \d+ .*rebuild it with "
        r"`minterpr index build --run R --images I --out g`",
    ):
        load_gallery(folder)
    (folder / gallery_store.EMBEDDINGS).write_bytes(data)
    assert len(load_gallery(folder)) == 12
    manifest = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**manifest, "version": GALLERY_VERSION + 1}))
    with pytest.raises(DatasetError, match=f"format version {GALLERY_VERSION + 1}; this minterpr reads version"):
        read_manifest(folder)
    (folder / MANIFEST).write_text("{not json")
    with pytest.raises(DatasetError, match="unreadable gallery.json"):
        load_gallery(folder)


def test_bad_arguments_and_foreign_folders(tmp_path):
    index, metadata = _index()
    with pytest.raises(InputError, match="3 metadata records for 12 images"):
        save_gallery(index, tmp_path / "g", model_fingerprint=FP, metadata=metadata[:3])
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("precious")
    with pytest.raises(InputError, match="not empty and not a gallery store"):
        save_gallery(index, tmp_path / "mine", model_fingerprint=FP)
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "precious"
    with pytest.raises(InputError, match="plain JSON"):
        save_gallery(index, tmp_path / "h", model_fingerprint=FP, metadata=[{"x": object()}] * 12)


def test_vector_records_carry_camera_and_free_metadata():
    index, metadata = _index()
    records = vector_records(index, metadata)
    assert records[1] == {
        "path": "cam1/é1.jpg",
        "person_id": "t:0",
        "camera": "t:cam1",
        "view": "front",
        "time": "2026-12-01T10:00:01",
        "frame": 1,
        "box": [1, 2, 3, 4],
    }
    assert "camera" not in records[0] and "view" not in records[0]  # unknown: absent, so no filter matches it


@pytest.mark.parametrize("backend", ["exact", "faiss_hnsw"])
def test_the_vector_index_is_saved_and_reopened_with_the_store(tmp_path, backend):
    if backend.startswith("faiss"):
        pytest.importorskip("faiss")
    index, metadata = _index()
    vectors = build_vector_index(backend, index, metadata, model_fingerprint=FP)
    save_gallery(index, tmp_path / "g", model_fingerprint=FP, vector_index=vectors, metadata=metadata)
    stored = open_gallery(tmp_path / "g", expected_fingerprint=FP)
    assert stored.manifest.vector_backend == backend and stored.index.vectors is stored.vectors
    queries = index.embeddings[:3]
    where = {"camera": "t:cam1", "time": Range("2026-12-01T10:00:00", "2026-12-01T10:00:30")}
    before, after = vectors.search(queries, 4, where=where), stored.vectors.search(queries, 4, where=where)
    assert np.array_equal(before.ids, after.ids) and np.allclose(before.scores, after.scores)
    # the reference: the filter over the records, then the exact ranking of the store's embeddings
    allowed = [i for i, r in enumerate(vector_records(index, metadata)) if r.get("camera") == "t:cam1" and "time" in r]
    expected = [[i for i in index.rank(q) if i in allowed][:4] for q in queries]
    assert [[i for i in row if i >= 0] for row in after.ids.tolist()] == expected
    with pytest.raises(InputError, match="the vector index was made by model 'other'"):
        save_gallery(
            index,
            tmp_path / "h",
            model_fingerprint=FP,
            vector_index=build_vector_index(backend, index, model_fingerprint="other"),
        )
    with pytest.raises(InputError, match="the vector index holds 3 vectors"):
        small = build_vector_index("exact", GalleryIndex(index.images[:3], index.embeddings[:3]), model_fingerprint=FP)
        save_gallery(index, tmp_path / "h", model_fingerprint=FP, vector_index=small)


# ---------------------------------------------------------------------- the fused index saved with a store
