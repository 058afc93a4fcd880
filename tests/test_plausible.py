"""Plausible references: an image the user could not rule out ("could be", "maybe") pulls the
scores towards itself, less than a confirmation, in the exact path and the shortlists alike."""

from __future__ import annotations

import numpy as np
import pytest

from support.helpers import near_duplicate_gallery
from minterpr.errors import InputError
from minterpr.index.gallery_index import GalleryIndex
from minterpr.interaction.reranking import RerankConfig, plausible_images, rerank
from minterpr.interaction.shortlist import ShortlistConfig, rank_candidates
from minterpr.language.dialogue_acts import verdict
from minterpr.language.phrasing import Fact
from minterpr.types import GalleryImage


def _line_index():
    """Four unit vectors: 0 and 1 close together, 2 and 3 elsewhere."""
    angles = np.array([0.0, 0.2, 1.4, 1.6])
    emb = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)  # (4, 2)
    return GalleryIndex([GalleryImage(f"{i}.jpg", f"x:{i}") for i in range(4)], emb)


def test_an_undecided_verdict_lifts_the_image_and_its_neighbours():
    index = _line_index()
    query = np.array([0.30, 0.28, 0.32, 0.29])  # the words alone prefer image 2
    assert verdict("Could be, everything I remember fits.") is None
    plain = rerank(query, index, (), {}, RerankConfig(anchor=False)).scores
    leaned = rerank(query, index, (), {0: None}, RerankConfig(anchor=False)).scores
    assert int(np.argmax(plain)) == 2 and int(np.argmax(leaned)) == 0
    assert leaned[1] > leaned[2] and leaned[1] > leaned[3]  # the undecided image's neighbour rises with it
    lam = RerankConfig().plausible_lambda
    cos = index.embeddings @ index.embeddings[0]
    np.testing.assert_allclose(leaned, lam * query + (1 - lam) * cos, rtol=1e-6)
    off = rerank(query, index, (), {0: None}, RerankConfig(anchor=False, plausible=False)).scores
    np.testing.assert_array_equal(off, plain)  # switched off: as before (an unsure verdict changed nothing)


def test_a_confirmation_outranks_the_plausible_images():
    index = _line_index()
    query = np.array([0.30, 0.28, 0.32, 0.29])
    assert plausible_images({0: None, 3: True}) == []
    both = rerank(query, index, (), {0: None, 3: True}).scores
    confirmed = rerank(query, index, (), {3: True}).scores
    np.testing.assert_array_equal(both, confirmed)


def test_the_blend_weight_is_checked():
    with pytest.raises(InputError, match="plausible_lambda must be in"):
        RerankConfig(plausible_lambda=1.5)
    assert RerankConfig.from_dict({"attribute_weight": 0.1}).plausible_lambda == RerankConfig().plausible_lambda


@pytest.fixture(scope="module")
def big():
    return near_duplicate_gallery(3, 2)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_shortlists_agree_with_the_exact_path_and_stay_short(big, fused, seed):
    backend, index, images = big
    rng = np.random.default_rng(seed)
    query = index.embeddings[rng.integers(len(index))] + 0.3 * rng.standard_normal(index.embeddings.shape[1])
    query = (query / np.linalg.norm(query)).astype(np.float32)
    facts = (Fact("gender", ("female",)),)
    judged = {int(i): None for i in rng.choice(len(index), 2, replace=False)}
    judged[int(rng.integers(len(index)))] = False
    exact = rank_candidates(index, query, facts, judged, None)
    short = rank_candidates(
        index, query, facts, judged, ShortlistConfig(size=100, min_gallery=0, certify=10, fused=fused)
    )
    order_exact = exact.rows[np.argsort(-exact.scores, kind="stable")][:10]
    order_short = short.rows[np.argsort(-short.scores, kind="stable")][:10]
    assert exact.anchor == short.anchor
    assert order_exact.tolist() == order_short.tolist()
    np.testing.assert_allclose(np.sort(exact.scores)[::-1][:10], np.sort(short.scores)[::-1][:10], rtol=1e-6)
    assert len(short.rows) < len(index)  # certified on a shortlist, not grown to the whole gallery
