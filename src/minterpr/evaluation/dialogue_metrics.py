"""Per-round dialogue metrics: each round's R@k, mAP and mINP, ChatIR's cumulative Hits@k, and PlugIR's BRI.

Built on the single-shot ranking of :mod:`minterpr.evaluation.metrics` (its tie rule, its chunked
scoring): a dialogue evaluation is a sequence of rounds, each ranked as a retrieval, plus what only a
sequence has (the best rank so far, the round a target first reaches rank 1).

Example:
    >>> import numpy as np
    >>> rounds = [np.array([[0.1, 0.9]]), np.array([[0.8, 0.2]])]
    >>> [r["r1"] for r in per_round_metrics(rounds, [1], [1, 2])["rounds"]]
    [0.0, 100.0]
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from minterpr.evaluation.metrics import (
    DEFAULT_CHUNK_SIZE,
    TrueMatches,
    check_chunk_size,
    collect_ranks,
    embedding_chunks,
    percent_true,
    similarity_chunks,
)


def best_log_rank_integral(first_ranks: Any) -> float:
    """BRI (PlugIR): mean over queries of the trapezoidal average of log(best rank + 1).

    ``first_ranks`` is (R, Q): the 0-based rank of each query's first true match at rounds
    0..R-1. The best rank so far is ``b_t = min_{s<=t} rank_s``; with ``v_t = ln(b_t + 1)``,
    BRI = mean_q (v_0/2 + v_1 + ... + v_{T-1} + v_T/2) / T for T = R-1 >= 1, and mean_q v_0 for
    a single round. This is PlugIR's fixed ``eval.py`` (natural log, 0-based rank, +1 so that a
    top-1 hit scores 0, trapezoid over rounds divided by #rounds - 1); PlugIR's target is one
    image, ours is the best-ranked image of the target identity (R@1 semantics). Lower is better.

    Example:
        >>> round(best_log_rank_integral([[3, 1], [0, 2], [5, 0]]), 6)  # 0.625 * ln 2
        0.433217
    """
    ranks = np.asarray(first_ranks, dtype=np.float64)
    if ranks.ndim != 2 or ranks.shape[0] == 0 or ranks.shape[1] == 0:
        raise ValueError(f"first_ranks must be a non-empty (rounds, queries) array, got {ranks.shape}")
    if (ranks < 0).any():
        raise ValueError("ranks are 0-based and cannot be negative")
    best = np.minimum.accumulate(ranks, axis=0)  # (R, Q)
    return _trapezoid_mean(np.log1p(best).mean(axis=1))


def _trapezoid_mean(values: Sequence[float]) -> float:
    """Trapezoidal average of values at rounds 0..T (the value itself when T = 0)."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 1:
        return float(v[0])
    return float((v[0] / 2 + v[1:-1].sum() + v[-1] / 2) / (len(v) - 1))


def _round_chunks(item: Any, matches: TrueMatches, chunk_size: int) -> Iterator[tuple[int, np.ndarray]]:
    if isinstance(item, tuple):
        if len(item) != 2:
            raise ValueError(f"a round given as a tuple must be (query_emb, gallery_emb), got {len(item)} items")
        return embedding_chunks(item[0], item[1], matches, chunk_size)
    return similarity_chunks(item, matches, chunk_size)


def per_round_metrics(
    rounds: Iterable[Any],
    query_pids: Any,
    gallery_pids: Any,
    *,
    hits_ks: Sequence[int] = (1, 5, 10),
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> dict[str, Any]:
    """Metrics of a dialogue evaluation, one entry per round, plus BRI.

    ``rounds`` yields, for rounds 0, 1, ..., either a (Q, G) score array or a
    ``(query_emb, gallery_emb)`` tuple; it is consumed lazily, so a generator keeps only one
    round's scores (and O(Q) per-query state) in memory.

    Per round: ``r1, r5, r10, mAP, mINP`` of that round alone (percent); ``hits{k}`` for k in
    ``hits_ks``: ChatIR's cumulative Hits@k, the share of queries whose target identity was in
    the top k at *any* round <= r (percent, never decreasing; the evaluation report needs
    k = 1 and 10); ``mean_first_hit_rank``: mean
    0-based rank of the first true match at that round; ``mean_best_log_rank``: mean of
    ln(best rank so far + 1), the curve BRI integrates.

    Top level: ``bri`` (see :func:`best_log_rank_integral`, lower is better);
    ``first_round_at_rank1``: mean 0-based round at which the target first reaches rank 1
    (round 0 = the description alone, so it counts the turns needed; a query that never does
    counts as T+1, one past the last round); ``num_queries``, ``num_rounds``.

    Example:
        >>> g = [1, 2]; rounds = (np.array([[0.1, 0.9]]), np.array([[0.8, 0.2]]))
        >>> res = per_round_metrics(rounds, [1], g)
        >>> [(r["r1"], r["hits1"]) for r in res["rounds"]], round(res["bri"], 4)
        ([(0.0, 0.0), (100.0, 100.0)], 0.3466)
    """
    matches = TrueMatches(query_pids, gallery_pids)
    chunk_size = check_chunk_size(chunk_size)
    ks = sorted({int(k) for k in hits_ks})
    if not ks or ks[0] < 1:
        raise ValueError(f"hits_ks must be positive integers, got {tuple(hits_ks)}")
    best: np.ndarray | None = None  # (Q,) best 0-based rank over the rounds so far
    # round at which each query first reaches rank 1; -1 = not yet
    first_rank1 = np.full(matches.num_queries, -1, dtype=np.int64)
    log_curve: list[float] = []
    out_rounds: list[dict[str, Any]] = []
    # a plain counter, not enumerate(): enumerate's cached result tuple would keep the previous
    # round's scores alive while the next round is generated
    r = -1
    for item in rounds:
        r += 1
        qr = collect_ranks(_round_chunks(item, matches, chunk_size), matches)
        best = qr.first.copy() if best is None else np.minimum(best, qr.first)
        first_rank1[(first_rank1 < 0) & (qr.first == 0)] = r
        row: dict[str, Any] = {"round": r, **qr.summary()}
        for k in ks:
            row[f"hits{k}"] = percent_true(best < k)
        row["mean_first_hit_rank"] = float(qr.first.mean())
        row["mean_best_log_rank"] = float(np.log1p(best).mean())
        log_curve.append(row["mean_best_log_rank"])
        out_rounds.append(row)
        del item  # drop this round's scores before the next round is generated
    if not out_rounds:
        raise ValueError("per_round_metrics needs at least one round")
    never = first_rank1 < 0
    first_rank1[never] = len(out_rounds)  # T + 1 with rounds 0..T
    return {
        "rounds": out_rounds,
        # mean of per-round means = PlugIR's mean over queries of per-query trapezoids (linearity)
        "bri": _trapezoid_mean(log_curve),
        "first_round_at_rank1": float(first_rank1.mean()),
        "num_queries": matches.num_queries,
        "num_rounds": len(out_rounds),
    }
