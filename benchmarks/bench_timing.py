"""What ``bench_turn_latency.py`` wraps a pipeline's backend with to see where a turn's time goes: the
texts its text cache looked up and encoded (:class:`TextCounts`), and the seconds of the text
encoder per turn (:class:`TimedBackend`)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from minterpr.index.gallery_index import GalleryIndex


class TextCounts:
    """Counts, on a NeuralBackend, the texts looked up in its text cache and those encoded (misses)."""

    def __init__(self, backend: Any) -> None:
        self.looked_up = self.encoded = 0
        lookup, featurize = backend._text_features, backend._featurize

        def counted_lookup(texts: Any) -> Any:
            self.looked_up += len(set(texts))
            return lookup(texts)

        def counted_featurize(texts: Any) -> Any:
            self.encoded += len(texts)
            return featurize(texts)

        backend._text_features, backend._featurize = counted_lookup, counted_featurize  # instance attributes


class TimedBackend:
    """The pipeline's backend, timing ``encode_turns`` (the text encoder: the same on every path)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.last = 0.0  # seconds of the latest encode_turns
        self.hits = (0, 0)  # (texts looked up, texts found in the cache) by the latest encode_turns

    def encode_turns(self, turns: Any, index: GalleryIndex) -> np.ndarray:
        counts = getattr(self.backend, "_counts", None)
        before = (counts.looked_up, counts.encoded) if counts else (0, 0)
        t = time.perf_counter()
        out = self.backend.encode_turns(turns, index)
        self.last = time.perf_counter() - t
        if counts:
            looked_up = counts.looked_up - before[0]
            self.hits = (looked_up, looked_up - (counts.encoded - before[1]))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)
