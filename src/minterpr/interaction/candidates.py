"""The images a turn ranks (:class:`Candidates`) and their scoring, for the shortlist to search with.

:func:`rank_gallery` is the exact path (every image), :func:`rank_rows` adds the evidence on a set
of rows only (a shortlist, ``GalleryIndex.subset``); :func:`certified` says whether enough of them
provably lead every image left out (:mod:`~minterpr.interaction.shortlist`, step 4).

Example:
    >>> import numpy as np
    >>> from minterpr.index.gallery_index import GalleryIndex
    >>> from minterpr.interaction.reranking import RerankConfig
    >>> from minterpr.types import GalleryImage
    >>> index = GalleryIndex([GalleryImage(f"{i}.jpg", f"x:{i}") for i in range(3)], np.eye(3, dtype=np.float32))
    >>> found = rank_gallery(index, np.eye(3, dtype=np.float32)[2], (), {}, RerankConfig())
    >>> found.local([2, 7]), certified(found, {}, 0.5, 1)  # image 7 is no candidate; one leads at 0.5
    ([2], True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Mapping, Sequence

import numpy as np

from minterpr.index.gallery_index import GalleryIndex
from minterpr.interaction.reranking import RerankConfig, rerank
from minterpr.language.phrasing import Fact

__all__ = ["Candidates", "certified", "rank_gallery", "rank_rows"]


@dataclass(frozen=True)
class Candidates:
    """The images a turn ranked and their final scores."""

    rows: np.ndarray  # (K,) gallery positions, ascending; arange(N) on the exact path
    index: GalleryIndex  # those images as an index (the gallery itself on the exact path)
    scores: np.ndarray  # (K,) float64 final scores, rows order
    anchor: int | None  # gallery index of the anchor used in re-ranking, if any

    def local(self, gallery_indices: Collection[int]) -> list[int]:
        """Positions in ``rows`` of gallery images that are candidates (all judged images are)."""
        wanted = np.asarray(sorted(gallery_indices), dtype=np.int64)
        at = np.searchsorted(self.rows, wanted)
        ok = at < len(self.rows)
        ok[ok] &= self.rows[at[ok]] == wanted[ok]
        return at[ok].tolist()


def certified(found: Candidates, judgements: Mapping[int, bool | None], bound: float, wanted: int) -> bool:
    """Whether ``wanted`` unjudged candidates score at least ``bound`` (the most an image left out can)."""
    unjudged = np.ones(len(found.rows), dtype=bool)
    unjudged[found.local(judgements)] = False
    return int((found.scores[unjudged] >= bound).sum()) >= wanted


def rank_gallery(
    index: GalleryIndex,
    query: np.ndarray,
    facts: Sequence[Fact],
    judgements: Mapping[int, bool | None],
    config: RerankConfig,
    stated: Mapping[int, Sequence[Fact]] | None = None,
    example: np.ndarray | None = None,
) -> Candidates:
    result = rerank(index.scores(query), index, facts, judgements, config, stated, example)
    return Candidates(np.arange(len(index)), index, result.scores, result.anchor)


def rank_rows(
    index: GalleryIndex,
    rows: np.ndarray,
    query: np.ndarray,
    full: np.ndarray | None,
    facts: Sequence[Fact],
    judgements: Mapping[int, bool | None],
    config: RerankConfig,
    stated: Mapping[int, Sequence[Fact]],
    example: np.ndarray | None = None,
) -> tuple[Candidates, np.ndarray]:
    sub = index.subset(rows)  # (K, ...) the candidates
    scores = full[rows] if full is not None else sub.scores(query)  # (K,) exact re-scoring of an ANN's shortlist
    local = dict(zip(np.searchsorted(rows, list(judgements)).tolist(), judgements.values()))
    said = dict(zip(np.searchsorted(rows, list(stated)).tolist(), stated.values()))  # every stated image is a row
    result = rerank(scores, sub, facts, local, config, said, example)
    anchor = None if result.anchor is None else int(rows[result.anchor])
    return Candidates(rows, sub, result.scores, anchor), scores
