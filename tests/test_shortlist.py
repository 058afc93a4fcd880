"""Sessions on a shortlist agree with the exact path: identical at K = N, same top results at K >= N/2,
growth when rejections exhaust the shortlist, an ANN's shortlist, replay, and what a Step says."""

from __future__ import annotations


import numpy as np
import pytest

from support.helpers import near_duplicate_gallery
from minterpr.errors import InputError
from minterpr.index.vectors.vector_index import SearchResult
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.session import AskQuestion, Session, ShowReferences
from minterpr.interaction.shortlist import ShortlistConfig, make_shortlist, rank_candidates
from minterpr.interaction.simulators import SIMULATORS

SEEDS = range(4)


@pytest.fixture(scope="module")
def big():
    """1,500 images: 500 identities x 3 (near-duplicates), noisy attribute predictions."""
    return near_duplicate_gallery(3, 2)


class ExactVectors:
    """A brute-force VectorIndex search over the gallery's embeddings (ids = gallery positions)."""

    name = "test_exact"

    def __init__(self, embeddings):
        self.embeddings = embeddings
        self.calls = 0

    def search(self, queries, k, *, where=None):
        self.calls += 1
        scores = queries @ self.embeddings.T  # (Q, N)
        ids = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return SearchResult(ids.astype(np.int64), np.take_along_axis(scores, ids, 1).astype(np.float32))


def _conversation(session, target, seed, rounds=5):
    """A witness (never recognises the face: rejects what it is shown) plus a rejection of the top-1."""
    user = SIMULATORS.create("witness").user(target, session.index, query=seed, seed=seed)
    steps = [session.describe(user.describe())]
    steps.append(session.feedback(int(steps[-1].ranking[0]), "No, that's not her."))
    for _ in range(rounds):
        turn = user.respond(steps[-1].action)
        if turn is None:
            break
        steps.append(session.add(turn))
    return steps


def _pair(backend, index, images, seed, shortlist, **options):
    options = dict(schedule="alternate", seed=seed, **options)
    exact = _conversation(Session(backend, index, shortlist=None, **options), images[97 * seed + 5], seed)
    short = _conversation(Session(backend, index, shortlist=shortlist, **options), images[97 * seed + 5], seed)
    assert len(exact) == len(short)
    return exact, short


def test_shortlist_of_the_whole_gallery_is_the_exact_path(big):
    backend, index, images = big
    for seed in SEEDS:
        exact, short = _pair(backend, index, images, seed, len(index))
        for a, b in zip(exact, short):
            assert np.array_equal(a.ranking, b.ranking) and np.array_equal(a.scores, b.scores)
            assert a.action == b.action and a.anchor == b.anchor


@pytest.mark.parametrize("reference_policy", ["diverse", "uncertain"])
def test_half_the_gallery_gives_the_same_top_results(big, reference_policy):
    backend, index, images = big
    kinds, sizes = set(), set()
    for seed in SEEDS:
        exact, short = _pair(backend, index, images, seed, len(index) // 2, reference_policy=reference_policy)
        for a, b in zip(exact, short):
            assert b.num_images == len(index)
            sizes.add(len(b.ranking))
            assert a.ranking[:10].tolist() == b.ranking[:10].tolist()
            np.testing.assert_allclose(a.scores[:10], b.scores[:10], rtol=1e-6, atol=1e-9)
            assert a.action == b.action and a.anchor == b.anchor
            kinds.add(type(a.action))
    assert {AskQuestion, ShowReferences} <= kinds  # both kinds of move were compared
    assert min(sizes) < len(index)  # on a shortlist (grown to the whole gallery when it could not certify)


@pytest.mark.parametrize("fused", [False, True])
def test_a_small_certified_shortlist_keeps_the_exact_top_results(big, fused):
    backend, index, images = big
    grown, candidates, turns = 0, 0, 0
    for seed in SEEDS:
        exact, short = _pair(
            backend, index, images, seed, ShortlistConfig(size=60, min_gallery=0, certify=10, fused=fused)
        )
        for a, b in zip(exact, short):
            if a.anchor == b.anchor:  # the certificate assumes the exact path's anchor
                assert a.ranking[:10].tolist() == b.ranking[:10].tolist()
            grown += len(b.ranking) > 60 + 10
            candidates, turns = candidates + len(b.ranking), turns + 1
    if not fused:
        assert grown  # some turns needed more than 60 candidates to certify their top 10 (the cosine bound is loose)
    else:
        assert candidates / turns < 0.2 * len(index), candidates / turns  # its bound is the K-th fused score


def test_an_ann_shortlist_matches_the_exact_argpartition(big):
    backend, index, images = big
    vectors = ExactVectors(index.embeddings)
    with_ann = type(index)(index.images, index.embeddings, index.attribute_probs, vectors=vectors)
    cosine = ShortlistConfig(size=300, min_gallery=0, fused=False)  # an ANN over embeddings serves the cosine search
    for seed in SEEDS[:2]:
        plain = _conversation(Session(backend, index, shortlist=cosine, seed=seed), images[50 * seed], seed)
        ann = _conversation(Session(backend, with_ann, shortlist=cosine, seed=seed), images[50 * seed], seed)
        for a, b in zip(plain, ann):
            assert a.ranking[:10].tolist() == b.ranking[:10].tolist() and a.action == b.action
    assert vectors.calls >= len(ann)  # the search came from the vector index


def test_shortlist_grows_when_rejections_exhaust_it(big):
    _, _, images = big
    backend = AttributeBackend()  # ground truth: a person's 3 images are exact near-duplicates
    index = backend.index_images(images)
    only_open = ShortlistConfig(size=6, min_gallery=0, certify=0)  # grows for the policies' 4 open images only
    session = Session(backend, index, shortlist=only_open, num_references=3, reference_policy="topk")
    step = session.describe("A woman.")
    assert len(step.ranking) <= 9  # top 6 (plus an anchor's neighbours)
    rejected = []
    for _ in range(2):  # reject the best two people: their near-duplicates leave < 4 open candidates
        rejected.append(int(step.ranking[0]))
        step = session.feedback(rejected[-1], "No, that's not her.")
    assert len(step.ranking) >= 12  # grown (doubled at least once)
    found = rank_candidates(
        index,
        backend.encode_turns([h.turn for h in session.history], index)[-1],
        session.facts,
        session.judgements,
        only_open,
        session.reranking,
        min_open=4,
    )
    assert np.array_equal(np.sort(step.ranking), found.rows)
    emb = index.embeddings
    open_rows = [i for i in found.rows if i not in rejected and (emb[rejected] @ emb[i]).max() <= 0.9]
    assert len(open_rows) >= 4  # not demoted as the rejected people's near-duplicates
    exact = Session(backend, index, shortlist=None, num_references=3, reference_policy="topk")
    exact.describe("A woman.")
    for i in rejected:
        last = exact.feedback(i, "No, that's not her.")
    # the same best score, and the shortlist's best person is one the exact path ties at that score
    # (a person's images tie, and so may people described alike: which tied row comes first, and
    # which tied rows enter the shortlist, is not specified)
    assert last.scores[0] == pytest.approx(step.scores[0])
    tied = {
        index.images[int(r)].person_id for r, v in zip(last.ranking, last.scores) if v == pytest.approx(last.scores[0])
    }
    assert index.images[int(step.ranking[0])].person_id in tied
    assert all(step.rank_of(i) is not None for i in rejected)  # judged images stay candidates


def test_replay_and_undo_on_a_shortlist(big):
    backend, index, images = big
    session = Session(backend, index, shortlist=200, seed=1)
    steps = _conversation(session, images[300], 1)
    again = Session.replay(session.history, backend, index, shortlist=200, seed=1)
    assert np.array_equal(again.step.ranking, steps[-1].ranking) and again.step.action == steps[-1].action
    restored = session.undo()
    assert np.array_equal(restored.ranking, steps[-2].ranking) and restored.action == steps[-2].action
    fields = {"size": 200, "min_gallery": 0, "growth": 2.0, "anchor_search": True, "certify": 10, "max_size": 16000}
    assert session.protocol()["shortlist"] == {**fields, "fused": True}  # the default: the fused search
    assert ShortlistConfig.from_dict(session.protocol()["shortlist"]) == session.shortlist


def test_a_record_without_fused_replays_the_cosine_search(big):
    """A protocol written before the fused search existed (no "fused" key) means the cosine search:
    read back, it replays what was stored, not today's default."""
    backend, index, images = big
    old_record = {"size": 200, "min_gallery": 0, "growth": 2.0, "anchor_search": True, "certify": 10, "max_size": 16000}
    cosine = ShortlistConfig(size=200, min_gallery=0, fused=False)
    assert ShortlistConfig.from_dict(old_record) == cosine and cosine.to_dict() == old_record
    session = Session(backend, index, shortlist=cosine, seed=1)
    steps = _conversation(session, images[300], 1)
    assert session.protocol()["shortlist"] == old_record  # a cosine session still writes the old record
    again = Session.replay(session.history, backend, index, shortlist=ShortlistConfig.from_dict(old_record), seed=1)
    assert np.array_equal(again.step.ranking, steps[-1].ranking) and np.array_equal(again.step.scores, steps[-1].scores)
    fused = Session.replay(session.history, backend, index, shortlist=200, seed=1)  # today's default reads otherwise
    assert len(fused.step.ranking) != len(steps[-1].ranking) or not np.array_equal(fused.step.scores, steps[-1].scores)
    with pytest.raises(InputError, match="unknown field 'sise'"):
        ShortlistConfig.from_dict({"sise": 200})
    with pytest.raises(InputError, match="fused must be true or false"):
        ShortlistConfig.from_dict({"fused": "yes"})


def test_step_on_a_shortlist_says_what_is_beyond_it(big):
    backend, index, _ = big
    step = Session(backend, index, shortlist=50).describe("A man in a red top.")
    beyond = int(np.setdiff1d(np.arange(len(index)), step.ranking)[0])
    assert step.rank_of(int(step.ranking[3])) == 3 and step.rank_of(beyond) is None
    scores = step.gallery_scores()
    assert scores.shape == (len(index),) and scores[beyond] == -np.inf
    assert np.array_equal(np.argsort(-scores, kind="stable")[: len(step.ranking)], step.ranking)
    assert step.explain_image(beyond).index == beyond and step.explain(0).index == int(step.ranking[0])


def test_small_galleries_stay_exact_by_default(big):
    backend, index, _ = big
    session = Session(backend, index)
    assert len(session.describe("A woman.").ranking) == len(index) and session.protocol()["shortlist"] is None
    assert ShortlistConfig().applies(20_000) and not ShortlistConfig().applies(19_999)


@pytest.mark.parametrize("bad", [0, -3, 1.5, "2000", True])
def test_bad_shortlist_options_are_refused(big, bad):
    backend, index, _ = big
    with pytest.raises(InputError, match="shortlist"):
        Session(backend, index, shortlist=bad)
    with pytest.raises(InputError, match="growth"):
        ShortlistConfig(growth=1.0)
    assert make_shortlist(None) is None


def test_growth_stops_at_max_size(big):
    backend, index, images = big
    capped = ShortlistConfig(size=20, min_gallery=0, certify=1000, max_size=80)  # can never certify 1000
    step = Session(backend, index, shortlist=capped).describe("A woman in a red top.")
    assert 80 <= len(step.ranking) < 100  # the cap (plus an anchor's neighbours), not the whole gallery
    # the cosine search's bound never certifies 1000 on this gallery: it grows to the whole gallery
    uncapped = ShortlistConfig(size=20, min_gallery=0, certify=1000, max_size=None, fused=False)
    assert len(Session(backend, index, shortlist=uncapped).describe("A woman in a red top.").ranking) == len(index)
    # the fused search's bound is its K-th score: it stops once 1000 candidates lead it (20 doubled to 1280)
    fused = ShortlistConfig(size=20, min_gallery=0, certify=1000, max_size=None)
    assert 1000 <= len(Session(backend, index, shortlist=fused).describe("A woman in a red top.").ranking) < len(index)
    capped_fused = Session(backend, index, shortlist=ShortlistConfig(size=20, min_gallery=0, certify=1000, max_size=80))
    assert 80 <= len(capped_fused.describe("A woman in a red top.").ranking) < 100  # the cap holds on it too
