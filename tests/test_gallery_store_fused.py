"""Gallery stores with a fused index (minterpr.index.store.fused_store): saved, reopened memory-mapped,
refused when changed, added to an older store, kept by an append, and on the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from minterpr.errors import DatasetError, InputError
from minterpr.index.store import gallery_store
from minterpr.index.store.fused_store import build_fused
from minterpr.index.store.gallery_append import append_gallery
from minterpr.index.gallery_index import GalleryIndex
from minterpr.index.store.gallery_store import (
    GALLERY_VERSION,
    MANIFEST,
    load_gallery,
    open_gallery,
    save_gallery,
)
from minterpr.index.store.store_vectors import build_vector_index
from minterpr.types import GalleryImage
from support.stores import FP, same_index as _same


def _fused_gallery(n: int = 600) -> GalleryIndex:
    from minterpr.language.ontology import ONTOLOGY

    rng = np.random.default_rng(4)
    embeddings = rng.standard_normal((n, 16)).astype(np.float32)  # (N, D)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    probs = rng.random((n, len(ONTOLOGY.flat_labels())), dtype=np.float32)  # (N, L)
    return GalleryIndex([GalleryImage(f"{i}.jpg", f"t:{i}") for i in range(n)], embeddings, attribute_probs=probs)


def _queries(index: GalleryIndex, count: int = 4):
    from minterpr.language.phrasing import Fact

    facts = [
        (Fact("gender", ("female",)),),
        (Fact("upper_colour", ("red", "white")), Fact("carried", ("backpack",), True)),
        (),
    ]
    return [(index.embeddings[7 * q], facts[q % len(facts)]) for q in range(count)]


@pytest.mark.parametrize("kmeans", ["numpy", "faiss"])
def test_the_fused_index_round_trips_memory_mapped(tmp_path, kmeans):
    from minterpr.index.fused_vectors import FactColumns, fused_top_k
    from minterpr.index.fused_ivf import FusedIVF

    if kmeans == "faiss":
        pytest.importorskip("faiss")
    index = _fused_gallery()
    fresh = FusedIVF(index.embeddings, index.attribute_probs, nlist=12, nprobe=3, max_probe=12, kmeans=kmeans)
    save_gallery(index, tmp_path / "g", model_fingerprint=FP, fused_index=fresh)
    stored = open_gallery(tmp_path / "g", expected_fingerprint=FP)
    ivf = stored.index.fused
    assert stored.manifest.version == GALLERY_VERSION and stored.manifest.fused["kmeans"] == kmeans
    assert isinstance(ivf.embeddings.base, np.memmap) and not ivf.embeddings.flags.writeable  # a view of the file
    assert (ivf.nlist, ivf.nprobe, ivf.max_probe) == (12, 3, 12)
    columns = FactColumns(index.attribute_probs, 0.02)
    for query, facts in _queries(index):
        before, after = fresh.search(query, facts, 0.3, 0.02, 20), ivf.search(query, facts, 0.3, 0.02, 20)
        assert after.rows.tolist() == before.rows.tolist() and np.array_equal(after.scores, before.scores)
        exact_rows, exact_scores = fused_top_k(index.embeddings, columns, query, facts, 0.3, 20)
        assert after.certified and after.rows.tolist() == exact_rows.tolist()  # probed on until certified: exact
        np.testing.assert_allclose(after.scores, exact_scores, atol=1e-6)
    assert open_gallery(tmp_path / "g", fused=False).index.fused is None  # asked not to: not loaded
    in_memory = open_gallery(tmp_path / "g", mmap=False).index.fused
    assert in_memory.embeddings.flags.writeable and np.array_equal(in_memory.perm, fresh.perm)


def test_a_session_over_a_store_takes_its_shortlist_from_the_saved_fused_index(tmp_path):
    from minterpr.interaction.shortlist import ShortlistConfig, rank_candidates

    index = _fused_gallery()
    save_gallery(index, tmp_path / "g", model_fingerprint=FP, fused_index=build_fused(index, nlist=12))
    stored = load_gallery(tmp_path / "g")
    calls = []
    search = stored.fused.search
    stored.fused.search = lambda *a, **k: calls.append(1) or search(*a, **k)
    query, facts = _queries(stored)[1]
    found = rank_candidates(stored, query, facts, {}, ShortlistConfig(size=50, min_gallery=0))  # the default: fused
    exact = rank_candidates(index, query, facts, {}, None)
    assert calls and len(found.rows) < len(index)
    top = found.rows[np.argsort(-found.scores, kind="stable")][:10]
    assert top.tolist() == np.argsort(-exact.scores, kind="stable")[:10].tolist()


def test_a_changed_or_foreign_fused_index_is_refused(tmp_path, monkeypatch):
    index = _fused_gallery()
    folder = tmp_path / "g"
    save_gallery(
        index,
        folder,
        model_fingerprint=FP,
        fused_index=build_fused(index, nlist=12),
        rebuild="minterpr index build --run R --images I --out g",
    )
    part = folder / "fused" / "perm.npy"
    data = part.read_bytes()
    part.write_bytes(data[:-8])  # changed since the save
    with pytest.raises(DatasetError, match=r"fused/perm.npy has \d+ bytes, the save wrote \d+"):
        open_gallery(folder)
    part.unlink()  # half there
    with pytest.raises(DatasetError, match=r"fused/perm.npy is missing \(the store is incomplete\)"):
        open_gallery(folder)
    part.write_bytes(data)
    manifest = json.loads((folder / MANIFEST).read_text())
    for entry, message in [
        (
            {**manifest["fused"], "version": 99},
            r"its fused index is of format version 99; this "
            r"minterpr reads version 1: rebuild that part alone with `minterpr index fused .*`, or "
            r"the whole store; rebuild it with `minterpr index build --run R",
        ),
        (
            {**manifest["fused"], "nlist": 13},
            r"its fused index does not fit the store \(FusedIVF: "
            r"the part 'centroids' is float32 \(12, 16\), expected float32 \(13, 16\)\)",
        ),
        ({**manifest["fused"], "parts": ["centroids"]}, r"the part 'perm' is missing"),
    ]:
        (folder / MANIFEST).write_text(json.dumps({**manifest, "fused": entry}))
        with pytest.raises(DatasetError, match=message):
            open_gallery(folder)
    (folder / MANIFEST).write_text(json.dumps(manifest))
    assert open_gallery(folder).index.fused is not None
    # a part replaced by one of the same size that does not fit: the rows are no permutation of the store's
    perm = np.load(folder / "fused" / "perm.npy")
    np.save(folder / "fused" / "perm.npy", np.zeros_like(perm))  # same size, not a permutation
    with pytest.raises(DatasetError, match="not a permutation of the gallery's rows"):
        open_gallery(folder)
    # a save killed after the parts, before the manifest: refused as half-written, like any store file
    real = gallery_store.atomic_write_text
    monkeypatch.setattr(
        gallery_store,
        "atomic_write_text",
        lambda path, text: (
            (_ for _ in ()).throw(KeyboardInterrupt) if str(path).endswith(MANIFEST) else real(path, text)
        ),
    )
    with pytest.raises(KeyboardInterrupt):
        save_gallery(index, folder, model_fingerprint=FP, fused_index=build_fused(index, nlist=12))
    monkeypatch.undo()
    with pytest.raises(DatasetError, match="half-written gallery store"):
        open_gallery(folder)


def test_a_store_from_before_the_fused_index_opens_and_can_get_one(tmp_path, monkeypatch):
    from minterpr.index.store.gallery_append import add_fused
    from minterpr.interaction.shortlist import ShortlistConfig, rank_candidates

    index = _fused_gallery()
    folder = tmp_path / "g"
    vectors = build_vector_index("exact", index, model_fingerprint=FP)
    save_gallery(index, folder, model_fingerprint=FP, vector_index=vectors)
    manifest = json.loads((folder / MANIFEST).read_text())
    del manifest["fused"]
    (folder / MANIFEST).write_text(json.dumps({**manifest, "version": 1}))  # as a version-1 save wrote it
    old = open_gallery(folder)
    assert old.manifest.version == 1 and old.manifest.fused is None and old.index.fused is None
    # no fused index: the default (fused) shortlist ranks the fused score by one exact scan, not the
    # exact vector index's cosine search
    monkeypatch.setattr(old.vectors, "search", lambda *a, **k: pytest.fail("the cosine search was used"))
    query, facts = _queries(index)[1]
    found = rank_candidates(old.index, query, facts, {}, ShortlistConfig(size=50, min_gallery=0))
    exact = rank_candidates(index, query, facts, {}, None)
    top = found.rows[np.argsort(-found.scores, kind="stable")][:10]
    assert top.tolist() == np.argsort(-exact.scores, kind="stable")[:10].tolist()
    monkeypatch.undo()
    # add one without re-embedding; a kill between the steps leaves a store that opens
    from minterpr.index.store import gallery_append

    monkeypatch.setattr(gallery_append, "save_fused", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        add_fused(folder, nlist=12)
    monkeypatch.undo()
    assert open_gallery(folder).index.fused is None and len(load_gallery(folder)) == len(index)
    add_fused(folder, nlist=12, nprobe=2, max_probe=12)
    upgraded = open_gallery(folder, expected_fingerprint=FP)
    assert upgraded.manifest.version == GALLERY_VERSION and upgraded.index.fused.nprobe == 2
    assert upgraded.manifest.vector_backend == "exact" and upgraded.vectors is not None  # the rest kept
    _same(index, upgraded.index)


def test_append_keeps_a_fused_index(tmp_path):
    index = _fused_gallery(300)
    folder = tmp_path / "g"
    first = GalleryIndex(index.images[:200], index.embeddings[:200], index.attribute_probs[:200])
    second = GalleryIndex(index.images[200:], index.embeddings[200:], index.attribute_probs[200:])
    append_gallery(first, folder, model_fingerprint=FP, fused="yes")
    assert open_gallery(folder).index.fused is not None
    assert append_gallery(second, folder, model_fingerprint=FP) == 300  # auto: the store had one
    grown = open_gallery(folder)
    assert len(grown.index.fused) == 300 and grown.manifest.fused is not None
    _same(index, grown.index)
    assert append_gallery(second, tmp_path / "small", model_fingerprint=FP) == 100
    assert open_gallery(tmp_path / "small").index.fused is None  # auto: below FUSED_MIN_IMAGES
    with pytest.raises(InputError, match="fused must be one of auto, yes, no"):
        append_gallery(second, tmp_path / "x", model_fingerprint=FP, fused="maybe")


def test_index_fused_and_info_on_the_command_line(tmp_path, capsys):
    from minterpr.cli.main import main

    index = _fused_gallery(200)
    save_gallery(index, tmp_path / "g", model_fingerprint=FP)
    assert main(["index", "info", str(tmp_path / "g")]) == 0
    assert "fused index: none" in " ".join(capsys.readouterr().out.split())
    assert main(["index", "fused", str(tmp_path / "g"), "--fused-options", '{"nlist": 8, "nprobe": 2}']) == 0
    assert "fused index of 200 images saved" in capsys.readouterr().out
    assert main(["index", "info", str(tmp_path / "g")]) == 0
    assert "fused index: 8 lists, nprobe 2, max_probe 2" in " ".join(capsys.readouterr().out.split())
    assert open_gallery(tmp_path / "g").index.fused.nlist == 8
    with pytest.raises(SystemExit):
        main(["index", "fused", str(tmp_path / "g"), "--fused-options", '{"lists": 8}'])
    assert "keys among" in capsys.readouterr().err
