"""What an image left out of a shortlist can score at most, once re-ranking's blends apply.

Rejections only lower a score, but the example, plausible and anchor blends
(:mod:`~minterpr.interaction.reranking`) can lift an image the search did not find: the shortlist
(:func:`~minterpr.interaction.shortlist.rank_candidates`, its module doc, step 4) bounds each
blend here before it certifies its leading candidates.

Example:
    >>> from minterpr.interaction.reranking import RerankConfig
    >>> example_bound(0.5, None, RerankConfig())  # no example image: no blend to bound
    0.5
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from minterpr.index.gallery_index import GalleryIndex
from minterpr.interaction.reranking import RerankConfig, plausible_images

__all__ = ["anchor_lambda", "compares_appearance", "example_bound", "leans", "plausible_blend", "plausible_bound"]


def compares_appearance(index: GalleryIndex) -> bool:
    """Whether re-ranking compares images by appearance (similarities.Similarities): the anchor and plausible
    blends then use appearance cosines, which the embedding searches cannot bound, so only the loose
    bounds (similarity <= 1) certify."""
    return index.appearance is not None and index.same_person is not None


def example_bound(bound: float, example: np.ndarray | None, config: RerankConfig) -> float:
    """The most an image left out can score after the example blend, given ``bound`` before it:
    λe · bound + (1 − λe) (its appearance cosine is at most 1; the attribute term is ≤ 0, so scaling
    only the query score keeps λe · bound an upper bound)."""
    if example is None:
        return bound
    return config.example_lambda * bound + (1.0 - config.example_lambda)


def leans(judgements: Mapping[int, bool | None], config: RerankConfig) -> bool:
    """Whether the scores lean towards plausible images (reranking's blend over their similarities)."""
    return config.plausible and bool(plausible_images(judgements))


def plausible_blend(
    query: np.ndarray,
    index: GalleryIndex,
    judgements: Mapping[int, bool | None],
    config: RerankConfig,
    anchor: int | None,
) -> tuple[np.ndarray, float]:
    """(vector, scale): an unjudged image x's final score is vector · x + scale · w · Σ log P(facts | x)
    once the plausible blend and then the anchor's (``anchor``, when anchoring) are applied."""
    lam = config.plausible_lambda
    vector = lam * np.asarray(query, np.float64) + (1.0 - lam) * index.embeddings[plausible_images(judgements)].mean(
        axis=0
    )
    scale = lam
    if anchor is not None and config.anchor:
        lam = anchor_lambda(config, judgements, anchor)
        vector = lam * vector + (1.0 - lam) * index.embeddings[anchor]
        scale *= lam
    return vector.astype(np.float32), scale


def anchor_lambda(config: RerankConfig, judgements: Mapping[int, bool | None], anchor: int) -> float:
    """The query's weight in the blend towards ``anchor``: a confirmed anchor is trusted more."""
    return config.confirmed_lambda if judgements.get(anchor) is True else config.anchor_lambda


def plausible_bound(bound: float, lean: bool, config: RerankConfig) -> float:
    """The most an image left out can score after the plausible blend (when the scores ``lean``,
    :func:`leans`), given ``bound`` before it: λp · bound + (1 − λp), its mean similarity being at
    most 1 (loose: such sessions grow the shortlist sooner, never lose an image)."""
    if not lean:
        return bound
    return config.plausible_lambda * bound + (1.0 - config.plausible_lambda)
