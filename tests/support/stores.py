"""Shared by the gallery store tests: a small gallery index with every kind of field, and equality."""

from __future__ import annotations

import numpy as np

from minterpr.index.gallery_index import GalleryIndex
from minterpr.types import GalleryImage

FP = "0123456789abcdef"


def store_index(n: int = 12, dim: int = 8, probs: bool = True) -> tuple[GalleryIndex, list[dict]]:
    rng = np.random.default_rng(0)
    embeddings = rng.standard_normal((n, dim)).astype(np.float32)  # (N, D)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    attributes = [None, {}, {"gender": ("female",), "upper_colour": ("black", "white")}]
    images = [
        GalleryImage(
            f"cam{i % 3}/é{i}.jpg",
            f"t:{i // 2}",
            None if i % 4 == 0 else f"t:cam{i % 3}",
            "front" if i % 2 else None,
            attributes[i % 3],
        )
        for i in range(n)
    ]
    metadata = [
        {"time": f"2026-12-01T10:00:{i:02d}", "frame": i, "box": [1, 2, 3, 4]} if i % 5 else {} for i in range(n)
    ]
    index = GalleryIndex(
        images,
        embeddings,
        attribute_probs=rng.random((n, 121), dtype=np.float32) if probs else None,
        root="/photos",
        skipped=(("broken.jpg", "not an image"),),
    )
    return index, metadata


def same_index(a: GalleryIndex, b: GalleryIndex) -> None:
    assert a.images == b.images and a.root == b.root and a.skipped == b.skipped
    assert np.array_equal(a.embeddings, b.embeddings)
    assert (a.attribute_probs is None) == (b.attribute_probs is None)
    if a.attribute_probs is not None:
        assert np.array_equal(a.attribute_probs, b.attribute_probs)
