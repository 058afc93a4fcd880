"""The fused search (cosine + attribute evidence as one inner product) against the plain references:
the augmented inner product equals rerank's score before rejections and the anchor, the fused
shortlist keeps the exact path's top 10, FusedIVF's list bounds hold, and replays stay identical."""

from __future__ import annotations


import numpy as np
import pytest

from support.helpers import near_duplicate_gallery
from minterpr.language.ontology import ONTOLOGY
from minterpr.language.evidence import fact_log_likelihood
from minterpr.language.phrasing import Fact
from minterpr.errors import InputError
from minterpr.index.fused_ivf import FusedIVF
from minterpr.index.fused_vectors import FactColumns, augmented_query, fact_feature, fused_top_k, label_features
from minterpr.interaction.reranking import RerankConfig, rerank
from minterpr.interaction.session import Session
from minterpr.interaction.shortlist import ShortlistConfig
from minterpr.interaction.simulators import SIMULATORS

FUSED = dict(min_gallery=0, fused=True)


@pytest.fixture(scope="module")
def big():
    """1,500 images: 500 identities x 3 (near-duplicates), noisy attribute predictions."""
    return near_duplicate_gallery(5, 4)


def random_facts(rng: np.random.Generator, count: int, single_value: bool) -> list[Fact]:
    facts = []
    for _ in range(count):
        slot = ONTOLOGY.slots[int(rng.integers(len(ONTOLOGY.slots)))]
        many = 1 if single_value else int(rng.integers(1, min(3, len(slot.value_names)) + 1))
        values = tuple(rng.choice(slot.value_names, size=many, replace=False).tolist())
        facts.append(Fact(slot.name, values, bool(rng.integers(2))))
    return facts + facts[:1]  # one stated twice: counted once


def plain_fused(index, query, facts, weight, floor):
    """rerank's score with rejections, the anchor and pinning off: cosine + w · Σ log P(fact | image)."""
    config = RerankConfig(attribute_weight=weight, prob_floor=floor, rejection=False, anchor=False, pin_confirmed=False)
    return rerank(index.scores(query), index, facts, {}, config).scores


@pytest.mark.parametrize("seed", range(5))
def test_augmented_inner_product_is_reranks_score(big, seed):
    _, index, _ = big
    rng = np.random.default_rng(seed)
    weight, floor = float(rng.uniform(0.01, 0.5)), float(rng.uniform(0.005, 0.2))
    query = index.embeddings[int(rng.integers(len(index)))]
    facts = random_facts(rng, 4, single_value=True)
    augmented = np.hstack([index.embeddings, label_features(index.attribute_probs, floor)]).astype(np.float64)
    got = augmented @ augmented_query(query, facts, weight)
    np.testing.assert_allclose(got, plain_fused(index, query, facts, weight, floor), atol=1e-5, rtol=0)
    # facts on several values have a column of their own: the same sum, bit for bit
    facts = random_facts(rng, 5, single_value=False)
    columns = FactColumns(index.attribute_probs, floor)
    mine = index.scores(query).astype(np.float64) + weight * columns.total(facts)
    assert np.array_equal(mine, plain_fused(index, query, facts, weight, floor))


def test_a_fact_on_several_values_is_no_label_feature():
    fact = Fact("upper_colour", ("red", "white"))
    assert fact_feature(fact) is None and fact_feature(Fact("gender", ("female",), True)) is not None
    with pytest.raises(InputError, match="several values"):
        augmented_query(np.zeros(4), [fact], 0.1)


def _conversation(session, target, seed, rounds=5):
    user = SIMULATORS.create("witness").user(target, session.index, query=seed, seed=seed)
    steps = [session.describe(user.describe())]
    steps.append(session.feedback(int(steps[-1].ranking[0]), "No, that's not her."))
    for _ in range(rounds):
        turn = user.respond(steps[-1].action)
        if turn is None:
            break
        steps.append(session.add(turn))
    return steps


@pytest.mark.parametrize("seed", range(4))
def test_fused_shortlist_keeps_the_exact_top_10(big, seed):
    backend, index, images = big
    options = dict(schedule="alternate", seed=seed)
    target = images[97 * seed + 5]
    exact = _conversation(Session(backend, index, shortlist=None, **options), target, seed)
    short = _conversation(
        Session(backend, index, shortlist=ShortlistConfig(size=60, certify=10, **FUSED), **options), target, seed
    )
    assert len(exact) == len(short)
    for a, b in zip(exact, short):
        if a.anchor == b.anchor:  # the certificate assumes the exact path's anchor
            assert a.ranking[:10].tolist() == b.ranking[:10].tolist()
        assert len(b.ranking) < len(index)  # never grown to the whole gallery


def test_fused_search_needs_fewer_candidates_than_the_cosine_search(big):
    backend, index, images = big
    sizes = {}
    for fused in (False, True):
        config = ShortlistConfig(size=40, min_gallery=0, certify=10, fused=fused)
        steps = [
            s
            for seed in range(4)
            for s in _conversation(
                Session(backend, index, shortlist=config, seed=seed, schedule="alternate"), images[61 * seed], seed
            )
        ]
        sizes[fused] = sum(len(s.ranking) for s in steps)
    assert sizes[True] < sizes[False]  # the cosine search's loose bound grows the shortlist


@pytest.mark.parametrize("seed", range(3))
def test_fused_ivf_agrees_with_the_exact_fused_top_k(big, seed):
    _, index, _ = big
    rng = np.random.default_rng(seed)
    facts = random_facts(rng, 3, single_value=False)
    query = index.embeddings[int(rng.integers(len(index)))]
    columns = FactColumns(index.attribute_probs, 0.02)
    exact_rows, exact_scores = fused_top_k(index.embeddings, columns, query, facts, 0.2, 20)
    whole = FusedIVF(index.embeddings, index.attribute_probs, nlist=16, nprobe=16, seed=seed)
    hits = whole.search(query, facts, 0.2, 0.02, 20)
    assert hits.certified and hits.rows.tolist() == exact_rows.tolist()
    np.testing.assert_allclose(hits.scores, exact_scores, atol=1e-6)
    some = FusedIVF(index.embeddings, index.attribute_probs, nlist=16, nprobe=2, max_probe=16, seed=seed)
    hits = some.search(query, facts, 0.2, 0.02, 20)  # probes on until its bounds certify the result
    assert hits.certified and set(hits.rows.tolist()) == set(exact_rows.tolist())


def test_fused_ivf_list_bounds_hold(big):
    _, index, _ = big
    ivf = FusedIVF(index.embeddings, index.attribute_probs, nlist=24, seed=1)
    rng = np.random.default_rng(9)
    for _ in range(5):
        facts = random_facts(rng, 3, single_value=False)
        loglik = sum(fact_log_likelihood(f, index.attribute_probs, 0.05) for f in dict.fromkeys(facts))
        bound = ivf.attribute_bounds(facts, 0.05)
        query = index.embeddings[int(rng.integers(len(index)))]
        cos_bound = ivf.centroids @ query + ivf.radius
        for j in range(ivf.nlist):
            rows = ivf.perm[ivf.offsets[j] : ivf.offsets[j + 1]]
            assert loglik[rows].max(initial=-np.inf) <= bound[j] + 1e-9
            assert (index.embeddings[rows] @ query).max(initial=-np.inf) <= cos_bound[j] + 1e-5


def test_replay_on_a_fused_ivf_shortlist_is_identical(big):
    backend, index, images = big
    with_ivf = type(index)(
        index.images,
        index.embeddings,
        index.attribute_probs,
        fused=FusedIVF(index.embeddings, index.attribute_probs, nlist=32, nprobe=4, max_probe=32),
    )
    config = ShortlistConfig(size=100, **FUSED)
    session = Session(backend, with_ivf, shortlist=config, seed=2)
    steps = _conversation(session, images[400], 2)
    again = Session.replay(session.history, backend, with_ivf, shortlist=config, seed=2)
    assert np.array_equal(again.step.ranking, steps[-1].ranking) and again.step.action == steps[-1].action
    assert np.array_equal(again.step.scores, steps[-1].scores)
    assert session.protocol()["shortlist"]["fused"] is True
    exact = Session(backend, index, shortlist=None, seed=2)
    overlap = []
    for entry, step in zip(session.history, steps):  # the same turns on the exact path
        top = exact.add(entry.turn, facts=entry.facts).ranking[:10]
        overlap.append(len(set(top.tolist()) & set(step.ranking[:10].tolist())))
    assert np.mean(overlap) >= 9, overlap  # probing on until certified: the exact top 10 (bar an anchor found apart)


def test_a_subset_read_from_the_fused_lists_equals_the_gallerys_rows(big):
    """GalleryIndex.subset reads a fused index's list-contiguous copies: the same bits as the gallery's rows."""
    _, index, _ = big
    ivf = FusedIVF(index.embeddings, index.attribute_probs, nlist=16, seed=3)
    with_ivf = type(index)(index.images, index.embeddings, index.attribute_probs, fused=ivf)
    ascending = np.sort(np.random.default_rng(3).choice(len(index), 200, replace=False))
    for rows in (ascending, ascending[::-1]):
        sub, plain = with_ivf.subset(rows), index.subset(rows)
        assert sub.embeddings.dtype == plain.embeddings.dtype and np.array_equal(sub.embeddings, plain.embeddings)
        assert sub.attribute_probs.dtype == plain.attribute_probs.dtype
        assert np.array_equal(sub.attribute_probs, plain.attribute_probs)
        assert [image.path for image in sub.images] == [index.images[r].path for r in rows.tolist()]
    assert ivf._positions is not None  # read from the lists
    wider = type(index)(index.images, index.embeddings, index.attribute_probs.astype(np.float64), fused=ivf)
    assert wider.subset(ascending).attribute_probs.dtype == np.float64  # another dtype: the gallery's own rows
