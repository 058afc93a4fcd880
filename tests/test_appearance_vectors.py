"""A store's appearance vector index (appearance_vectors/, format version 3): saved with every
registered backend, refused when another appearance model made it, kept in step with the
embeddings' index by append, rewrite and update, and searched by sessions with the same top-K
rows as the exact scan (the reference)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from minterpr.errors import DatasetError, InputError, MinterprError
from minterpr.index.gallery_index import GalleryIndex
from minterpr.index.store.appearance_store import update_appearance
from minterpr.index.store.gallery_append import append_gallery, rewrite_metadata
from minterpr.index.store.gallery_store import GALLERY_VERSION, MANIFEST, open_gallery, save_gallery
from minterpr.index.store.store_vectors import APPEARANCE_VECTORS, build_appearance_index, build_vector_index
from minterpr.index.vectors.vector_index import MANIFEST_FILE, VECTOR_INDEXES
from minterpr.interaction.appearance import SamePersonCalibration
from minterpr.interaction.shortlist import ShortlistConfig, appearance_neighbours, rank_candidates
from minterpr.types import GalleryImage

FP, LOOKS = "0123abcd", "a1a1a1a1"  # the embedding model's fingerprint, the appearance model's


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def gallery(n: int = 300, seed: int = 0, start: int = 0) -> tuple[GalleryIndex, list[dict]]:
    rng = np.random.default_rng(seed)
    images = [GalleryImage(f"{start + i}.jpg", f"x:{(start + i) // 3}", f"x:cam{i % 4}") for i in range(n)]
    index = GalleryIndex(
        images, unit(rng.normal(size=(n, 64))), root="/crops", appearance=unit(rng.normal(size=(n, 32)))
    )
    return index, [{"job": seed, "frame": start + i} for i in range(n)]


def save(index: GalleryIndex, folder, metadata, backend: str | None) -> None:
    try:
        vectors = None if backend is None else build_vector_index(backend, index, metadata, model_fingerprint=FP)
    except MinterprError as error:  # a backend whose optional extra is not installed
        if "pip install" in str(error):
            pytest.skip(f"{backend}: {error}")
        raise
    looks = build_appearance_index(backend, index, metadata, appearance_fingerprint=LOOKS)
    save_gallery(
        index,
        folder,
        model_fingerprint=FP,
        vector_index=vectors,
        metadata=metadata,
        appearance_fingerprint=LOOKS,
        appearance_index=looks,
    )


def close(index: GalleryIndex) -> None:
    for vectors in (index.vectors, index.appearance_vectors):
        if callable(getattr(vectors, "close", None)):
            vectors.close()  # a local Qdrant store stays locked until then


@pytest.mark.parametrize("backend", VECTOR_INDEXES.names())
@pytest.mark.parametrize("mmap", [True, False])
def test_round_trip_on_every_backend(tmp_path, backend, mmap):
    index, metadata = gallery(300 if backend == "faiss_ivfpq" else 60)  # IVF-PQ trains on 256 vectors or more
    save(index, tmp_path / "g", metadata, backend)
    stored = open_gallery(tmp_path / "g", expected_fingerprint=FP, mmap=mmap)
    try:
        looks = stored.index.appearance_vectors
        assert stored.manifest.version == GALLERY_VERSION == 3
        assert stored.manifest.appearance == {"dim": 32, "model_fingerprint": LOOKS, "vector_backend": backend}
        assert (
            looks.name == backend and len(looks) == len(index) and looks.dim == 32 and looks.model_fingerprint == LOOKS
        )
        found = looks.search(index.appearance[[5, 41]], 1)
        assert found.ids[:, 0].tolist() == [5, 41]
        assert looks.get_metadata(np.array([7]))[0] == {
            **metadata[7],
            "path": "7.jpg",
            "person_id": "x:2",
            "camera": "x:cam3",
        }
        assert stored.index.subset(np.array([1, 2])).appearance_vectors is None  # its ids are the gallery's rows
    finally:
        close(stored.index)


def test_a_store_without_one_opens_as_before_and_scans(tmp_path):
    index, metadata = gallery(40)
    save(index, tmp_path / "none", metadata, None)  # no vector index: no appearance index either
    stored = open_gallery(tmp_path / "none")
    assert stored.index.appearance_vectors is None and "vector_backend" not in stored.manifest.appearance
    assert not (tmp_path / "none" / APPEARANCE_VECTORS).exists()
    save(index, tmp_path / "v2", metadata, "exact")  # as a version-2 save wrote it: no appearance index
    raw = json.loads((tmp_path / "v2" / MANIFEST).read_text())
    raw["appearance"].pop("vector_backend")
    (tmp_path / "v2" / MANIFEST).write_text(json.dumps({**raw, "version": 2}))
    old = open_gallery(tmp_path / "v2")
    assert old.index.appearance_vectors is None and old.index.vectors is not None
    example = index.appearance[3]
    assert sorted(appearance_neighbours(old.index, example, 5)) == sorted(np.argsort(-(index.appearance @ example))[:5])


def test_another_appearance_models_index_is_refused_in_one_line(tmp_path):
    index, metadata = gallery(30)
    save(index, tmp_path / "g", metadata, "exact")
    saved = tmp_path / "g" / APPEARANCE_VECTORS / MANIFEST_FILE
    saved.write_text(json.dumps({**json.loads(saved.read_text()), "model_fingerprint": "feedbeef"}))
    with pytest.raises(DatasetError) as refused:
        open_gallery(tmp_path / "g")
    message = str(refused.value)
    assert "\n" not in message and str(tmp_path / "g") in message
    assert (
        f"{APPEARANCE_VECTORS}/ was made by appearance model feedbeef, the store's appearance vectors by {LOOKS}"
        in message
    )
    assert open_gallery(tmp_path / "g", appearance_index=False).index.appearance_vectors is None
    update_appearance(tmp_path / "g", index.appearance, LOOKS)  # what mends it
    assert len(open_gallery(tmp_path / "g").index.appearance_vectors) == 30


def test_save_refuses_an_index_that_does_not_fit_the_vectors(tmp_path):
    index, metadata = gallery(20)
    other = build_appearance_index("exact", index, metadata, appearance_fingerprint="feedbeef")
    with pytest.raises(InputError, match="appearance vector index holds 20 vectors of width 32 by appearance model"):
        save_gallery(index, tmp_path / "g", model_fingerprint=FP, appearance_fingerprint=LOOKS, appearance_index=other)
    assert build_appearance_index(None, index, appearance_fingerprint=LOOKS) is None


# the backends whose search of this small gallery is exact (IVF-PQ quantises: its top-K is near, not equal)
AGREEING = [name for name in ("exact", "faiss_hnsw", "qdrant") if name in VECTOR_INDEXES.names()]


@pytest.mark.parametrize("backend", AGREEING)
def test_the_index_finds_the_rows_the_scan_finds(tmp_path, backend):
    index, metadata = gallery(200, seed=1)
    save(index, tmp_path / "g", metadata, backend)
    stored = open_gallery(tmp_path / "g").index
    try:
        assert stored.appearance_vectors is not None
        rng = np.random.default_rng(2)
        examples = np.concatenate([index.appearance[[0, 77, 199]], unit(rng.normal(size=(5, 32)))])
        for example in examples:
            for k in (1, 25, 200):
                fast = np.sort(appearance_neighbours(stored, example, k))
                assert fast.tolist() == np.sort(appearance_neighbours(stored, example, k, exact=True)).tolist()
        # a session's shortlist takes the example's neighbours from the index: the same candidates as the scan's
        stored.same_person = SamePersonCalibration(20.0, -14.0, 0.01, 100, "val", 95.0)
        scanned = dataclasses.replace(stored, appearance_vectors=None)
        config = ShortlistConfig(size=20, min_gallery=0)
        searches, search = [], stored.appearance_vectors.search
        stored.appearance_vectors.search = lambda *args, **kwargs: searches.append(args) or search(*args, **kwargs)
        found = rank_candidates(stored, index.embeddings[4], (), {}, config, example=index.appearance[9])
        assert len(searches) == 1  # the example's neighbours came from the index
        reference = rank_candidates(scanned, index.embeddings[4], (), {}, config, example=index.appearance[9])
        assert found.rows.tolist() == reference.rows.tolist()
        assert np.array_equal(found.scores, reference.scores)
    finally:
        close(stored)


@pytest.mark.parametrize("backend", AGREEING)
def test_centred_neighbours_from_the_index_are_the_scans(tmp_path, backend):
    """With a calibration fitted about the gallery's centre, the index over the stored (uncentred)
    vectors still finds the scan's neighbours: searched with example - centre, x . (e - c) ranks as
    (x - c) . (e - c), the plain loop below."""
    index, metadata = gallery(120, seed=5)
    index.appearance = unit(index.appearance + 0.3)  # a part common to every crop, as a camera adds
    save(index, tmp_path / "g", metadata, backend)
    stored = open_gallery(tmp_path / "g").index
    try:
        stored.same_person = SamePersonCalibration(20.0, -14.0, 0.01, 100, "val", 95.0, centred=True)
        centre = stored.appearance_centre()
        assert centre is not None
        for example in index.appearance[[0, 50, 119]]:
            for k in (1, 10, 120):
                fast = sorted(appearance_neighbours(stored, example, k))
                assert fast == sorted(appearance_neighbours(stored, example, k, exact=True))
                plain = [sum((x - c) * (e - c) for x, c, e in zip(row, centre, example)) for row in index.appearance]
                assert fast == sorted(np.argsort(plain)[::-1][:k].tolist())
    finally:
        close(stored)


@pytest.mark.parametrize("backend", ["exact", "faiss_hnsw"])
def test_append_rewrite_and_update_keep_both_indexes_in_step(tmp_path, backend):
    folder = tmp_path / "g"

    def in_step(count: int) -> None:
        stored = open_gallery(folder)
        vectors, looks = stored.index.vectors, stored.index.appearance_vectors
        assert len(vectors) == len(looks) == len(stored.index) == count and looks.name == backend
        ids = np.arange(count)
        assert np.allclose(looks.get_vectors(ids), stored.index.appearance, atol=2e-3)  # faiss keeps float16
        assert looks.get_metadata(ids) == vectors.get_metadata(ids)

    first, meta = gallery(50, seed=0)
    append_gallery(first, folder, model_fingerprint=FP, metadata=meta, backend=backend, appearance_fingerprint=LOOKS)
    in_step(50)
    second, meta = gallery(30, seed=1, start=50)
    append_gallery(second, folder, model_fingerprint=FP, metadata=meta, appearance_fingerprint=LOOKS)
    in_step(80)
    third, meta = gallery(10, seed=2, start=80)
    append_gallery(third, folder, model_fingerprint=FP, metadata=meta, replace={"job": 0}, appearance_fingerprint=LOOKS)
    in_step(40)  # the first job's rows dropped from both
    rewrite_metadata(folder, [{"link": i % 5} for i in range(40)])
    in_step(40)
    assert open_gallery(folder).index.appearance_vectors.get_metadata(np.array([3]))[0]["link"] == 3
    replaced = unit(np.random.default_rng(9).normal(size=(40, 12)))
    update_appearance(folder, replaced, "b2b2b2b2")
    in_step(40)
    assert open_gallery(folder).index.appearance_vectors.model_fingerprint == "b2b2b2b2"


def test_update_gives_a_store_with_a_vector_index_its_appearance_index(tmp_path):
    index, metadata = gallery(25)
    bare = GalleryIndex(index.images, index.embeddings, root=index.root)  # built without an appearance model
    vectors = build_vector_index("exact", bare, metadata, model_fingerprint=FP)
    save_gallery(bare, tmp_path / "g", model_fingerprint=FP, vector_index=vectors, metadata=metadata)
    (tmp_path / "g" / MANIFEST).write_text(
        json.dumps({**json.loads((tmp_path / "g" / MANIFEST).read_text()), "version": 2})
    )
    manifest = update_appearance(tmp_path / "g", index.appearance, LOOKS)
    assert manifest.version == GALLERY_VERSION and manifest.appearance["vector_backend"] == "exact"
    looks = open_gallery(tmp_path / "g").index.appearance_vectors
    assert len(looks) == 25 and looks.get_metadata(np.array([2])) == vectors.get_metadata(np.array([2]))
