"""Retrieval and per-round metrics against plain-loop references and hand-worked cases."""

from __future__ import annotations

import gc
import math
import weakref

import numpy as np
import pytest

from minterpr.evaluation.dialogue_metrics import best_log_rank_integral, per_round_metrics
from minterpr.evaluation.metrics import (
    leave_one_out_ranks,
    query_ranks,
    query_ranks_from_embeddings,
    rank_of_first_match,
    retrieval_metrics,
    retrieval_metrics_from_embeddings,
)

# ---------------------------------------------------------------- loop references


def ref_ranked_matches(sim, qp, gp):
    """Per query, the 0/1 match list in ranked order: descending score, ties by gallery index."""
    out = []
    for i in range(len(qp)):
        order = sorted(range(len(gp)), key=lambda j: (-float(sim[i][j]), j))
        out.append([1 if gp[j] == qp[i] else 0 for j in order])
    return out


def ref_first_ranks(sim, qp, gp):
    return [m.index(1) for m in ref_ranked_matches(sim, qp, gp)]


def ref_metrics(sim, qp, gp):
    """IRRA's rank() written as loops: CMC@k, AP = sum_i match_i * hits_i / i / #rel, INP."""
    lists = ref_ranked_matches(sim, qp, gp)
    out = {}
    for k in (1, 5, 10):
        out[f"r{k}"] = 100.0 * sum(1 for m in lists if 1 in m[:k]) / len(lists)
    aps, inps = [], []
    for m in lists:
        hits, ap, last = 0, 0.0, -1
        for i, x in enumerate(m):
            if x:
                hits += 1
                ap += hits / (i + 1)
                last = i
        aps.append(ap / hits)
        inps.append(hits / (last + 1))
    out["mAP"] = 100.0 * sum(aps) / len(aps)
    out["mINP"] = 100.0 * sum(inps) / len(inps)
    return out


def ref_per_round(sims, qp, gp, ks=(1, 5, 10)):
    ranks = [ref_first_ranks(s, qp, gp) for s in sims]  # [round][query]
    n_rounds, n_q = len(ranks), len(qp)
    hits = {}
    for k in ks:  # a hit at round r: target within top k at ANY round <= r
        hits[k] = [
            100.0 * sum(1 for q in range(n_q) if any(ranks[s][q] < k for s in range(r + 1))) / n_q
            for r in range(n_rounds)
        ]
    bri_q = []
    for q in range(n_q):
        vals, best = [], math.inf
        for r in range(n_rounds):
            best = min(best, ranks[r][q])
            vals.append(math.log(best + 1))
        if n_rounds == 1:
            bri_q.append(vals[0])
        else:
            area = sum((vals[t] + vals[t + 1]) / 2 for t in range(n_rounds - 1))
            bri_q.append(area / (n_rounds - 1))
    firsts = []
    for q in range(n_q):
        hit = [r for r in range(n_rounds) if ranks[r][q] == 0]
        firsts.append(hit[0] if hit else n_rounds)
    return ranks, hits, sum(bri_q) / n_q, sum(firsts) / n_q


def random_case(seed, n_q=7, n_g=23, n_ids=6, ties=True, strings=False):
    rng = np.random.default_rng(seed)
    gp = rng.integers(0, n_ids, size=n_g)
    qp = rng.choice(gp, size=n_q)  # every query has at least one true match
    if ties:  # few distinct values: many ties, some between a match and a non-match
        sim = rng.integers(0, 4, size=(n_q, n_g)).astype(np.float32)
    else:
        sim = rng.standard_normal((n_q, n_g)).astype(np.float32)
    if strings:
        gp = np.array([f"ds:{p:04d}" for p in gp])
        qp = np.array([f"ds:{p:04d}" for p in qp])
    return sim, qp, gp


def assert_metrics_close(got, want):
    assert set(got) == set(want)
    for key in want:
        assert got[key] == pytest.approx(want[key], abs=1e-9), key


# ---------------------------------------------------------------- hand-worked cases


def test_hand_case_two_queries():
    # gallery pids [1, 2, 1, 3, 2]
    # q0 (pid 1): order g0 .9(+) g1 .8 g3 .7 g4 .3 g2 .1(+): matches at ranks 1, 5
    #   AP = (1/1 + 2/5)/2 = 0.7, INP = 2/5 = 0.4, first rank 0
    # q1 (pid 2): order g0 .9 g3 .6 g2 .5 g4 .4(+) g1 .2(+): matches at ranks 4, 5
    #   AP = (1/4 + 2/5)/2 = 0.325, INP = 2/5 = 0.4, first rank 3
    # R@1 = 50, R@5 = R@10 = 100, mAP = (0.7 + 0.325)/2 = 51.25 %, mINP = 40 %
    sim = np.array([[0.9, 0.8, 0.1, 0.7, 0.3], [0.9, 0.2, 0.5, 0.6, 0.4]])
    m = retrieval_metrics(sim, [1, 2], [1, 2, 1, 3, 2])
    assert_metrics_close(m, {"r1": 50.0, "r5": 100.0, "r10": 100.0, "mAP": 51.25, "mINP": 40.0})
    assert rank_of_first_match(sim, [1, 2], [1, 2, 1, 3, 2]).tolist() == [0, 3]


def test_hand_case_ties_keep_gallery_order():
    # all scores equal: ranked g0 g1 g2 g3; pid 1 at g1, g3 -> ranks 2, 4
    # AP = (1/2 + 2/4)/2 = 0.5, INP = 2/4 = 0.5, first rank 1 (so R@1 = 0)
    sim = np.full((1, 4), 0.5, dtype=np.float32)
    qr = query_ranks(sim, [1], [3, 1, 3, 1])
    assert qr.first.tolist() == [1]
    assert qr.ap.tolist() == [0.5] and qr.inp.tolist() == [0.5]
    # a match tied with a later non-match ranks first
    assert rank_of_first_match(np.array([[0.2, 0.5, 0.5]]), ["a"], ["b", "a", "b"]).tolist() == [0]


# ---------------------------------------------------------------- against the loop reference


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ties", [True, False])
def test_random_against_loop_reference(seed, ties):
    sim, qp, gp = random_case(seed, ties=ties, strings=seed % 2 == 1)
    assert_metrics_close(retrieval_metrics(sim, qp, gp), ref_metrics(sim, qp, gp))
    assert rank_of_first_match(sim, qp, gp).tolist() == ref_first_ranks(sim, qp, gp)


@pytest.mark.parametrize("chunk_size", [1, 3, 1000])
def test_chunked_equals_unchunked(chunk_size):
    sim, qp, gp = random_case(11, n_q=10, n_g=40)
    whole = query_ranks(sim, qp, gp, chunk_size=len(qp))
    part = query_ranks(sim, qp, gp, chunk_size=chunk_size)
    np.testing.assert_array_equal(part.first, whole.first)
    np.testing.assert_array_equal(part.ap, whole.ap)
    np.testing.assert_array_equal(part.inp, whole.inp)


@pytest.mark.parametrize("chunk_size", [1, 4, 100])
def test_embeddings_path_equals_similarity_path(chunk_size):
    rng = np.random.default_rng(5)
    # small integer embeddings: exact dot products, so both paths see identical (tied) scores
    q = rng.integers(-2, 3, size=(9, 4)).astype(np.float32)
    g = rng.integers(-2, 3, size=(30, 4)).astype(np.float32)
    gp = rng.integers(0, 5, size=30)
    qp = rng.choice(gp, size=9)
    want = ref_metrics(q @ g.T, qp, gp)
    got = retrieval_metrics_from_embeddings(q, g, qp, gp, chunk_size=chunk_size)
    assert_metrics_close(got, want)
    a = query_ranks_from_embeddings(q, g, qp, gp, chunk_size=chunk_size)
    b = query_ranks(q @ g.T, qp, gp)
    np.testing.assert_array_equal(a.first, b.first)
    np.testing.assert_array_equal(a.ap, b.ap)


def test_accepts_lists_memmaps_and_int_scores(tmp_path):
    sim, qp, gp = random_case(3)
    want = ref_metrics(sim, qp, gp)
    assert_metrics_close(retrieval_metrics(sim.tolist(), list(qp), list(gp)), want)
    mm = np.memmap(tmp_path / "sim.f32", dtype=np.float32, mode="w+", shape=sim.shape)
    mm[:] = sim
    assert_metrics_close(retrieval_metrics(mm, qp, gp, chunk_size=2), want)
    assert_metrics_close(retrieval_metrics(sim.astype(np.int64), qp, gp), want)


# ---------------------------------------------------------------- errors


def test_queries_without_a_match_raise():
    sim = np.zeros((4, 3))
    with pytest.raises(ValueError, match=r"2 of 4 queries have no true match.*\[1, 3\]"):
        retrieval_metrics(sim, [1, 9, 2, 8], [1, 2, 2])


@pytest.mark.parametrize(
    "sim, qp, gp, error, pattern",
    [
        (np.zeros((2, 3)), [1], [1, 1, 1], ValueError, "shape"),
        (np.array([[np.nan, 1.0]]), [1], [1, 2], ValueError, "NaN"),
        (np.zeros((1, 2)), ["1"], [1, 2], TypeError, "both be strings"),
        (np.zeros((1, 2), dtype=bool), [1], [1, 2], TypeError, "real numbers"),
        (np.zeros((0, 2)), [], [1, 2], ValueError, "no queries"),
    ],
)
def test_invalid_inputs_raise(sim, qp, gp, error, pattern):
    with pytest.raises(error, match=pattern):
        retrieval_metrics(sim, qp, gp)


def test_bad_chunk_size_and_embedding_shapes():
    with pytest.raises(ValueError, match="chunk_size"):
        retrieval_metrics(np.zeros((1, 2)), [1], [1, 2], chunk_size=0)
    with pytest.raises(ValueError, match="embeddings"):
        retrieval_metrics_from_embeddings(np.zeros((1, 3)), np.zeros((2, 4)), [1], [1, 2])


# ---------------------------------------------------------------- per-round metrics


def scores_with_rank(n_gallery, target, rank):
    """One score row where gallery item ``target`` is ranked ``rank`` (0-based), no ties."""
    others = [j for j in range(n_gallery) if j != target]
    order = others[:rank] + [target] + others[rank:]
    row = np.empty(n_gallery)
    row[order] = np.arange(n_gallery, 0, -1)
    return row


def test_bri_and_rank1_hand_case():
    # target ranks per round: q0: 3, 0, 5 -> best 3, 0, 0;  q1: 1, 2, 0 -> best 1, 1, 0
    # q2: 4, 4, 4 never top-1.  Mean ln(best+1) per round: v0 = (ln4 + ln2 + ln5)/3,
    # v1 = (0 + ln2 + ln5)/3, v2 = ln5/3; BRI = (v0/2 + v1 + v2/2)/2.
    # first round at rank 1: q0 -> 1, q1 -> 2, q2 never -> T+1 = 3; mean 2.
    gp = list(range(6))
    qp = [0, 1, 2]
    plan = [[3, 1, 4], [0, 2, 4], [5, 0, 4]]  # [round][query]
    sims = [np.stack([scores_with_rank(6, q, plan[r][q]) for q in range(3)]) for r in range(3)]
    res = per_round_metrics(sims, qp, gp)
    ln = math.log
    v = [(ln(4) + ln(2) + ln(5)) / 3, (ln(2) + ln(5)) / 3, ln(5) / 3]
    assert res["bri"] == pytest.approx((v[0] / 2 + v[1] + v[2] / 2) / 2)
    assert [r["mean_best_log_rank"] for r in res["rounds"]] == pytest.approx(v)
    assert res["first_round_at_rank1"] == pytest.approx(2.0)
    assert [r["hits1"] for r in res["rounds"]] == pytest.approx([0.0, 100 / 3, 200 / 3])
    assert [r["r1"] for r in res["rounds"]] == pytest.approx([0.0, 100 / 3, 100 / 3])
    assert [r["mean_first_hit_rank"] for r in res["rounds"]] == pytest.approx([8 / 3, 2.0, 3.0])
    assert best_log_rank_integral(plan) == pytest.approx(res["bri"])
    assert (res["num_queries"], res["num_rounds"]) == (3, 3)


def test_bri_single_round_is_mean_log_rank():
    assert best_log_rank_integral([[0, 2]]) == pytest.approx(math.log(3) / 2)
    with pytest.raises(ValueError, match="non-empty"):
        best_log_rank_integral(np.zeros((0, 3)))


@pytest.mark.parametrize("seed", range(4))
def test_per_round_against_loop_reference(seed):
    rng = np.random.default_rng(100 + seed)
    _, qp, gp = random_case(seed, n_q=8, n_g=30)
    sims = [rng.integers(0, 6, size=(8, 30)).astype(np.float32) for _ in range(4)]
    res = per_round_metrics(iter(sims), qp, gp, hits_ks=(1, 3, 10), chunk_size=3)
    ranks, hits, bri, first = ref_per_round(sims, qp, gp, ks=(1, 3, 10))
    assert res["bri"] == pytest.approx(bri)
    assert res["first_round_at_rank1"] == pytest.approx(first)
    for r, row in enumerate(res["rounds"]):
        assert row["round"] == r
        assert_metrics_close({k: row[k] for k in ("r1", "r5", "r10", "mAP", "mINP")}, ref_metrics(sims[r], qp, gp))
        for k in (1, 3, 10):
            assert row[f"hits{k}"] == pytest.approx(hits[k][r])
        assert row["mean_first_hit_rank"] == pytest.approx(np.mean(ranks[r]))
    for k in (1, 3, 10):  # cumulative: never decreases, and never below that round's R@k
        series = [row[f"hits{k}"] for row in res["rounds"]]
        assert series == sorted(series)
    assert all(row["hits1"] >= row["r1"] and row["hits10"] >= row["r10"] for row in res["rounds"])


def test_per_round_is_lazy_and_accepts_embeddings():
    rng = np.random.default_rng(0)
    q = rng.integers(-2, 3, size=(5, 3)).astype(np.float32)
    g = rng.integers(-2, 3, size=(12, 3)).astype(np.float32)
    gp = rng.integers(0, 4, size=12)
    qp = rng.choice(gp, size=5)
    alive = []

    def rounds():
        for r in range(3):
            gc.collect()
            # the previous round's scores were dropped before this one is made
            assert all(ref() is None for ref in alive)
            sim = (q + r) @ g.T
            alive.append(weakref.ref(sim))
            yield sim
            del sim

    lazy = per_round_metrics(rounds(), qp, gp)
    by_emb = per_round_metrics(((q + r, g) for r in range(3)), qp, gp)
    assert lazy == by_emb


def test_per_round_errors():
    with pytest.raises(ValueError, match="at least one round"):
        per_round_metrics([], [1], [1])
    with pytest.raises(ValueError, match="hits_ks"):
        per_round_metrics([np.zeros((1, 1))], [1], [1], hits_ks=(0,))
    with pytest.raises(ValueError, match=r"\(query_emb, gallery_emb\)"):
        per_round_metrics([(np.zeros((1, 1)),)], [1], [1])


# ---------------------------------------------------------------- query by image (leave one out)


def ref_leave_one_out(emb, pids):
    """Per query row: the loop reference's metrics against the gallery without that row."""
    sim = np.asarray(emb, dtype=np.float64) @ np.asarray(emb, dtype=np.float64).T
    rows = [i for i in range(len(pids)) if sum(1 for p in pids if p == pids[i]) > 1]
    firsts, per_query = [], []
    for i in rows:
        others = [j for j in range(len(pids)) if j != i]
        row = [[sim[i][j] for j in others]]
        firsts.append(ref_first_ranks(row, [pids[i]], [pids[j] for j in others])[0])
        per_query.append(ref_metrics(row, [pids[i]], [pids[j] for j in others]))
    mean = {k: sum(m[k] for m in per_query) / len(per_query) for k in per_query[0]}
    return rows, firsts, mean


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize("chunk_size", [1, 5, 256])
def test_leave_one_out_against_loop_reference(seed, ties, chunk_size):
    rng = np.random.default_rng(seed)
    pids = [f"p{v}" for v in rng.integers(0, 8, size=25)]
    pids[3] = "alone"  # one person with a single image: never a query, still in the gallery
    emb = rng.integers(0, 3, size=(25, 2)) if ties else rng.standard_normal((25, 4))  # ints: many ties
    rows, ranks = leave_one_out_ranks(emb, pids, chunk_size=chunk_size)
    want_rows, want_first, want = ref_leave_one_out(emb, pids)
    assert rows.tolist() == want_rows and 3 not in rows.tolist()
    assert ranks.first.tolist() == want_first
    assert_metrics_close(ranks.summary(), want)


def test_leave_one_out_never_counts_the_query_itself():
    # each query's own row would score 1.0, above everything: left out, the other person ranks first
    emb = np.array([[1.0, 0.0], [0.6, 0.8], [0.8, 0.6]])
    rows, ranks = leave_one_out_ranks(emb, ["a", "a", "b"])
    assert rows.tolist() == [0, 1]
    assert ranks.first.tolist() == [1, 1]  # "b" (0.8, 0.96) above the other "a" (0.6) for both
    assert ranks.summary()["mAP"] == pytest.approx(50.0)


def test_leave_one_out_errors():
    with pytest.raises(ValueError, match="no person has two images"):
        leave_one_out_ranks(np.eye(3), ["a", "b", "c"])
    with pytest.raises(ValueError, match="3 embeddings but pids"):
        leave_one_out_ranks(np.eye(3), ["a", "a"])
    with pytest.raises(ValueError, match=r"\(N, D\)"):
        leave_one_out_ranks(np.ones(3), ["a", "a", "b"])
