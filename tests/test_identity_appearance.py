"""The appearance ceiling: appearance vectors drawn from the gallery's identities (measurement only)."""

from __future__ import annotations

import numpy as np
import pytest

from minterpr.errors import InputError
from minterpr.evaluation.identity_appearance import appearance_from_identity, parse_identity_appearance
from minterpr.index.gallery_index import GalleryIndex
from minterpr.language.ontology import ONTOLOGY
from minterpr.types import GalleryImage


def _index(people=("a", "a", "a", "b", "b", "c"), dim=256, seed=1) -> GalleryIndex:
    rng = np.random.default_rng(seed)
    model = rng.standard_normal((len(people), dim)).astype(np.float32)
    model /= np.linalg.norm(model, axis=1, keepdims=True)
    images = [GalleryImage(f"{k}.jpg", f"x:{pid}") for k, pid in enumerate(people)]
    probs = rng.random((len(people), 5)).astype(np.float32)
    return GalleryIndex(
        images,
        np.eye(len(people), 8, dtype=np.float32),
        probs,
        appearance=model,
        appearance_vectors="the model's neighbour index",
        same_person="calibration",
    )


def test_identity_alone_tells_people_apart_exactly():
    index = _index()
    vectors = appearance_from_identity(index).appearance
    cos = vectors @ vectors.T  # (N, N)
    same = np.equal.outer(index.person_ids, index.person_ids)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert np.allclose(cos[same], 1.0, atol=1e-5)
    assert np.abs(cos[~same]).max() < 0.3  # random directions in 256 dimensions: near orthogonal


def test_the_weight_mixes_identity_into_the_models_vectors():
    index = _index()
    same = np.equal.outer(index.person_ids, index.person_ids) & ~np.eye(len(index), dtype=bool)
    assert np.allclose(appearance_from_identity(index, weight=0.0).appearance, index.appearance, atol=1e-6)
    gaps = []
    for weight in (0.0, 0.3, 0.6, 1.0):
        vectors = appearance_from_identity(index, weight=weight).appearance
        cos = vectors @ vectors.T
        gaps.append(cos[same].mean() - cos[~same & ~np.eye(len(index), dtype=bool)].mean())
    assert gaps == sorted(gaps) and gaps[0] < 0.2 and gaps[-1] > 0.9  # one person's crops draw together


def test_only_the_appearance_vectors_change_and_the_draw_is_seeded():
    index = _index()
    out = appearance_from_identity(index, weight=0.5, seed=3)
    assert out.appearance_vectors is None  # it held the model's vectors: comparisons scan the new ones
    assert out.same_person == "calibration" and out.images == index.images
    assert np.array_equal(out.attribute_probs, index.attribute_probs) and np.array_equal(
        out.embeddings, index.embeddings
    )
    assert np.array_equal(appearance_from_identity(index, weight=0.5, seed=3).appearance, out.appearance)
    assert not np.array_equal(appearance_from_identity(index, weight=0.5, seed=4).appearance, out.appearance)
    assert index.appearance_vectors == "the model's neighbour index"  # the original is untouched


def test_bad_settings_are_one_line():
    with pytest.raises(InputError, match="no appearance vectors"):
        appearance_from_identity(GalleryIndex([GalleryImage("a.jpg", "x:1")], np.ones((1, 2), np.float32)))
    with pytest.raises(InputError, match=r"weight in \[0, 1\], got 1.5"):
        appearance_from_identity(_index(), weight=1.5)
    assert parse_identity_appearance("0.25") == 0.25
    for text, message in (("all", "expected a weight"), ("-0.1", "a weight in")):
        with pytest.raises(InputError, match=message):
            parse_identity_appearance(text)


def test_the_ceilings_apply_both_in_one_place():
    """``Ceilings`` (the benchmarks' flags) gives what the two ceilings give one after the other."""
    import argparse

    from minterpr.evaluation.ceilings import Ceilings, add_ceiling_arguments
    from minterpr.evaluation.label_reading import read_from_labels

    index = _index()
    index.images[0] = GalleryImage("0.jpg", "x:a", attributes={"gender": ("male",)})
    index.attribute_probs = np.full((len(index), len(ONTOLOGY.flat_labels())), 0.5, np.float32)
    both = Ceilings(label_reading=(0.9, 0.0), identity_appearance=1.0).apply(index)
    want = appearance_from_identity(read_from_labels(index, confidence=0.9), weight=1.0)
    assert np.array_equal(both.attribute_probs, want.attribute_probs) and np.array_equal(
        both.appearance, want.appearance
    )
    parser = argparse.ArgumentParser()
    add_ceiling_arguments(parser)
    assert Ceilings.from_args(parser.parse_args([])) == Ceilings() and Ceilings().apply(index) is index
    with pytest.raises(InputError, match="--identity-appearance: a weight in"):
        Ceilings.from_args(parser.parse_args(["--identity-appearance", "3"]))
