"""Appending to a gallery store (what ingestion does): rows added, a job's rows replaced, the
vector index rebuilt over everything, a kill at any step of the swap leaves the old store or
the new one, and stores it must not mix are refused."""

from __future__ import annotations

import os

import numpy as np
import pytest

from minterpr.errors import DatasetError, InputError
from minterpr.index.gallery_index import GalleryIndex
from minterpr.index.store import gallery_append
from minterpr.index.store.gallery_append import append_gallery
from minterpr.index.store.gallery_store import (
    MANIFEST,
    STAGING,
    load_gallery,
    open_gallery,
    read_manifest,
    save_gallery,
)
from minterpr.index.vectors.vector_index import Range
from minterpr.types import GalleryImage

FP = "00ff00ff00ff00ff"


def _rows(names, job, root="/g", seed=0, probs=True):
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((len(names), 8)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    index = GalleryIndex(
        [GalleryImage(n, f"{job}:{k}", "cam1") for k, n in enumerate(names)],
        emb,
        attribute_probs=rng.random((len(names), 5), dtype=np.float32) if probs else None,
        root=root,
    )
    meta = [{"job": job, "time": f"2026-12-01T10:00:{k:02d}.000", "frame": k} for k in range(len(names))]
    return index, meta


def test_append_adds_replaces_and_rebuilds_the_vector_index(tmp_path):
    a, meta_a = _rows(["a0.jpg", "a1.jpg"], "A")
    b, meta_b = _rows(["b0.jpg", "b1.jpg", "b2.jpg"], "B", seed=1)
    assert append_gallery(a, tmp_path, model_fingerprint=FP, metadata=meta_a) == 2
    assert append_gallery(b, tmp_path, model_fingerprint=FP, metadata=meta_b) == 5
    stored = open_gallery(tmp_path, expected_fingerprint=FP)
    assert [i.path for i in stored.index.images] == ["a0.jpg", "a1.jpg", "b0.jpg", "b1.jpg", "b2.jpg"]
    assert np.array_equal(stored.index.embeddings, np.concatenate([a.embeddings, b.embeddings]))
    assert np.array_equal(stored.index.attribute_probs, np.concatenate([a.attribute_probs, b.attribute_probs]))
    assert stored.metadata == meta_a + meta_b
    hits = stored.vectors.search(b.embeddings[:1], 5, where={"job": "B", "frame": Range(1, 2)}).ids.tolist()[0]
    assert sorted(i for i in hits if i >= 0) == [3, 4]
    # job A redone with one row: its two old rows go, the new one comes last
    a2, meta_a2 = _rows(["a9.jpg"], "A", seed=2)
    assert append_gallery(a2, tmp_path, model_fingerprint=FP, metadata=meta_a2, replace={"job": "A"}) == 4
    again = load_gallery(tmp_path)
    assert [i.path for i in again.images] == ["b0.jpg", "b1.jpg", "b2.jpg", "a9.jpg"]
    assert len(again.vectors) == 4
    assert not (tmp_path / STAGING).exists()


def test_a_kill_during_the_swap_leaves_a_store_the_next_append_finishes(tmp_path, monkeypatch):
    a, meta_a = _rows(["a0.jpg"], "A")
    b, meta_b = _rows(["b0.jpg"], "B", seed=1)
    append_gallery(a, tmp_path, model_fingerprint=FP, metadata=meta_a)
    real_replace = os.replace
    calls = []

    def killed_after_two_moves(src, dst):  # the swap's moves out of the staged store into the folder
        if STAGING in os.fspath(src) and os.path.dirname(os.fspath(dst)) == os.fspath(tmp_path):
            calls.append(dst)
            if len(calls) == 3:
                raise KeyboardInterrupt("killed")
        real_replace(src, dst)

    monkeypatch.setattr(gallery_append.os, "replace", killed_after_two_moves)
    with pytest.raises(KeyboardInterrupt):
        append_gallery(b, tmp_path, model_fingerprint=FP, metadata=meta_b)
    monkeypatch.setattr(gallery_append.os, "replace", real_replace)
    with pytest.raises(DatasetError, match="half-written"):
        read_manifest(tmp_path)  # mid-swap: refused, never misread
    c, meta_c = _rows(["c0.jpg"], "C", seed=2)
    assert append_gallery(c, tmp_path, model_fingerprint=FP, metadata=meta_c) == 3  # finished B's swap first
    assert [i.path for i in load_gallery(tmp_path).images] == ["a0.jpg", "b0.jpg", "c0.jpg"]


def test_a_kill_while_staging_leaves_the_old_store(tmp_path, monkeypatch):
    a, meta_a = _rows(["a0.jpg"], "A")
    append_gallery(a, tmp_path, model_fingerprint=FP, metadata=meta_a)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(gallery_append, "build_vector_index", killed)
    with pytest.raises(KeyboardInterrupt):
        append_gallery(_rows(["b0.jpg"], "B")[0], tmp_path, model_fingerprint=FP)
    assert [i.path for i in load_gallery(tmp_path).images] == ["a0.jpg"]


def test_refusals(tmp_path):
    a, meta = _rows(["a0.jpg"], "A")
    append_gallery(a, tmp_path / "g", model_fingerprint=FP, metadata=meta)
    with pytest.raises(DatasetError, match="built by another model"):
        append_gallery(_rows(["b.jpg"], "B")[0], tmp_path / "g", model_fingerprint="feedfeedfeedfeed")
    with pytest.raises(DatasetError, match="images lie under '/g'"):
        append_gallery(_rows(["b.jpg"], "B", root="/elsewhere")[0], tmp_path / "g", model_fingerprint=FP)
    with pytest.raises(DatasetError, match="do not match"):
        append_gallery(_rows(["b.jpg"], "B", probs=False)[0], tmp_path / "g", model_fingerprint=FP)
    with pytest.raises(InputError, match="listed twice"):
        append_gallery(a, tmp_path / "g", model_fingerprint=FP)  # the same path again, not replaced
    with pytest.raises(InputError, match="2 metadata records for 1 images"):
        append_gallery(a, tmp_path / "h", model_fingerprint=FP, metadata=meta * 2)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    with pytest.raises(InputError, match="not a gallery store"):
        append_gallery(a, tmp_path / "notes", model_fingerprint=FP)
    save_gallery(a, tmp_path / "plain", model_fingerprint=FP, vector_index=None)
    assert append_gallery(_rows(["b.jpg"], "B")[0], tmp_path / "plain", model_fingerprint=FP) == 2
    assert read_manifest(tmp_path / "plain").vector_backend is None  # keeps having none
    assert (tmp_path / "plain" / MANIFEST).is_file()
