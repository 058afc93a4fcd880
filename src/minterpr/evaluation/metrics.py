"""Retrieval metrics (R@k, mAP, mINP); the per-round dialogue metrics built on them (Hits@k, BRI) are in
:mod:`minterpr.evaluation.dialogue_metrics`.

Single-shot metrics follow the text-to-image person retrieval convention of IRRA's ``rank()``:
a gallery image is a *true match* when it shows the query's person id; the whole gallery is
ranked per query; R@k (CMC@k) is the share of queries whose first true match is in the top k;
AP averages, over the true matches, (true matches up to and including rank i) / i; mINP is
#true matches / (1-based rank of the last one). All are returned in percent.

Tie rule: a query's gallery is ranked by descending score and equal scores keep gallery order
(the lower gallery index ranks first), i.e. a stable descending sort. IRRA's ``torch.argsort``
leaves ties unspecified; fixing the rule makes every figure deterministic and identical across
chunk sizes. Scores with no ties (the usual float case) give IRRA's exact numbers.

Every query must have at least one true match in the gallery (IRRA assumes it and would
divide by zero otherwise): a clear ``ValueError`` names how many do not.

Memory: queries are processed ``chunk_size`` at a time, so at most two (chunk, G) arrays exist
at once (the scores and their sorted copy); the *_from_embeddings variants compute the scores
chunk by chunk so the (Q, G) matrix never exists. Only the ranks of the true matches are
needed, so a value sort plus binary search replaces a full argsort (about 20x faster).

Example:
    >>> sim = np.array([[0.9, 0.8, 0.1, 0.7, 0.3],
    ...                 [0.9, 0.2, 0.5, 0.6, 0.4]])
    >>> m = retrieval_metrics(sim, query_pids=[1, 2], gallery_pids=[1, 2, 1, 3, 2])
    >>> {k: round(v, 2) for k, v in m.items()}
    {'r1': 50.0, 'r5': 100.0, 'r10': 100.0, 'mAP': 51.25, 'mINP': 40.0}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import numpy as np

DEFAULT_CHUNK_SIZE = 256  # queries per chunk: 256 x 100k gallery x 4 B = 100 MB per array
RECALL_KS = (1, 5, 10)  # the R@k reported by retrieval_metrics


@dataclass(frozen=True)
class QueryRanks:
    """Per-query ranking statistics, from which every single-round metric is a mean."""

    first: np.ndarray  # (Q,) int64: 0-based rank of the best-ranked true match
    ap: np.ndarray  # (Q,) float64: average precision over the whole gallery, in (0, 1]
    inp: np.ndarray  # (Q,) float64: #true matches / 1-based rank of the last one, in (0, 1]

    def summary(self) -> dict[str, float]:
        """R@1/5/10, mAP and mINP in percent."""
        out = {f"r{k}": percent_true(self.first < k) for k in RECALL_KS}
        out["mAP"] = float(self.ap.mean() * 100.0)
        out["mINP"] = float(self.inp.mean() * 100.0)
        return out


class TrueMatches:
    """Where each query's true matches sit in the gallery (positions ascending)."""

    def __init__(self, query_pids: Any, gallery_pids: Any) -> None:
        q, g = np.asarray(query_pids), np.asarray(gallery_pids)
        if q.ndim != 1 or g.ndim != 1:
            raise ValueError(f"pids must be 1-D, got query {q.shape} and gallery {g.shape}")
        if (q.dtype.kind in "US") != (g.dtype.kind in "US"):
            # numpy would silently turn 1 into "1"; mixing kinds is almost surely a bug
            raise TypeError(
                f"query pids ({q.dtype}) and gallery pids ({g.dtype}) must both be strings or both be numbers"
            )
        if len(q) == 0:
            raise ValueError("no queries to evaluate (query_pids is empty)")
        self.num_queries, self.num_gallery = len(q), len(g)
        # one integer code per identity so that matching is integer work whatever the pid type
        _, codes = np.unique(np.concatenate([g, q]), return_inverse=True)
        g_codes, self._q_codes = codes[: len(g)], codes[len(g) :]
        counts = np.bincount(g_codes, minlength=int(codes.max(initial=-1)) + 1)
        self._order = np.argsort(g_codes, kind="stable")  # (G,) gallery grouped by identity
        self._starts = np.concatenate([[0], np.cumsum(counts)])  # group bounds in _order
        missing = np.flatnonzero(counts[self._q_codes] == 0)
        if missing.size:
            raise ValueError(
                f"{missing.size} of {len(q)} queries have no true match in the gallery "
                f"(query indices {missing[:10].tolist()}{'...' if missing.size > 10 else ''}); "
                "every query's person id must appear among the gallery pids"
            )

    def positions(self, query: int) -> np.ndarray:
        """Gallery indices (ascending) showing the person of query ``query``."""
        c = self._q_codes[query]
        return self._order[self._starts[c] : self._starts[c + 1]]


def percent_true(mask: np.ndarray) -> float:
    return float(np.mean(mask) * 100.0)


def check_chunk_size(chunk_size: int) -> int:
    is_int = isinstance(chunk_size, (int, np.integer)) and not isinstance(chunk_size, bool)
    if not is_int or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    return int(chunk_size)


def similarity_chunks(similarity: Any, matches: TrueMatches, chunk_size: int) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (first query, (C, G) scores); slicing keeps memory-mapped inputs lazy."""
    if not hasattr(similarity, "shape"):
        similarity = np.asarray(similarity)
    expected = (matches.num_queries, matches.num_gallery)
    if tuple(similarity.shape) != expected:
        raise ValueError(
            f"similarity has shape {tuple(similarity.shape)}, expected "
            f"(len(query_pids), len(gallery_pids)) = {expected}"
        )
    for start in range(0, expected[0], chunk_size):
        yield start, np.asarray(similarity[start : start + chunk_size])


def embedding_chunks(
    query_emb: Any, gallery_emb: Any, matches: TrueMatches, chunk_size: int
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (first query, (C, G) dot products) without building the (Q, G) matrix."""
    q, g = np.asarray(query_emb), np.asarray(gallery_emb)
    if q.ndim != 2 or g.ndim != 2 or q.shape[1] != g.shape[1]:
        raise ValueError(f"embeddings must be (Q, D) and (G, D), got {q.shape} and {g.shape}")
    if (q.shape[0], g.shape[0]) != (matches.num_queries, matches.num_gallery):
        raise ValueError(
            f"{q.shape[0]} query and {g.shape[0]} gallery embeddings for "
            f"{matches.num_queries} query and {matches.num_gallery} gallery pids"
        )
    g_t = g.T  # (D, G) view, no copy
    for start in range(0, q.shape[0], chunk_size):
        yield start, q[start : start + chunk_size] @ g_t


def _tie_offsets(row: np.ndarray, pos: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """For true matches sharing their score with other items: how many tied items precede them."""
    out = np.empty(len(pos), dtype=np.int64)
    for value in np.unique(scores):
        tied_idx = np.flatnonzero(row == value)  # ascending gallery indices with this score
        sel = scores == value
        out[sel] = np.searchsorted(tied_idx, pos[sel], side="left")
    return out


def _rank_chunk(start: int, sim: np.ndarray, matches: TrueMatches, out: QueryRanks) -> None:
    """Fill ``out`` for queries start..start+C from their (C, G) scores."""
    if sim.ndim != 2 or sim.shape[1] != matches.num_gallery:
        raise ValueError(f"score chunk has shape {sim.shape}, expected (*, {matches.num_gallery})")
    if sim.dtype.kind not in "fiu":
        raise TypeError(f"scores must be real numbers, got dtype {sim.dtype}")
    if sim.dtype.kind == "f" and np.isnan(sim).any():
        raise ValueError(f"scores of queries {start}..{start + len(sim) - 1} contain NaN")
    num_gallery = sim.shape[1]
    srt = np.sort(sim, axis=1)  # (C, G) ascending values: only counts are read from it
    for i in range(sim.shape[0]):
        q = start + i
        pos = matches.positions(q)  # (P,) gallery indices of the true matches
        scores = sim[i, pos]
        right = np.searchsorted(srt[i], scores, side="right")
        left = np.searchsorted(srt[i], scores, side="left")
        rank0 = (num_gallery - right).astype(np.int64)  # items scored strictly higher
        tied = np.flatnonzero(right - left > 1)
        if tied.size:  # equal scores: lower gallery index ranks first (stable sort)
            rank0[tied] += _tie_offsets(sim[i], pos[tied], scores[tied])
        ranks = np.sort(rank0) + 1  # (P,) 1-based ranks of the true matches, ascending
        out.first[q] = ranks[0] - 1
        out.ap[q] = np.mean(np.arange(1, len(ranks) + 1) / ranks)
        out.inp[q] = len(ranks) / ranks[-1]


def collect_ranks(chunks: Iterable[tuple[int, np.ndarray]], matches: TrueMatches) -> QueryRanks:
    n = matches.num_queries
    out = QueryRanks(first=np.empty(n, np.int64), ap=np.empty(n), inp=np.empty(n))
    for start, sim in chunks:
        _rank_chunk(start, sim, matches, out)
    return out


def query_ranks(
    similarity: Any, query_pids: Any, gallery_pids: Any, *, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> QueryRanks:
    """Per-query first-match rank, AP and INP from a (Q, G) score matrix (higher = better).

    ``similarity`` may be any array-like with ``.shape`` whose row slices convert with
    ``np.asarray`` (a numpy array, a ``np.memmap``, a CPU tensor).
    """
    matches = TrueMatches(query_pids, gallery_pids)
    return collect_ranks(similarity_chunks(similarity, matches, check_chunk_size(chunk_size)), matches)


def query_ranks_from_embeddings(
    query_emb: Any, gallery_emb: Any, query_pids: Any, gallery_pids: Any, *, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> QueryRanks:
    """Like :func:`query_ranks` with scores = dot products, computed chunk by chunk."""
    matches = TrueMatches(query_pids, gallery_pids)
    chunks = embedding_chunks(query_emb, gallery_emb, matches, check_chunk_size(chunk_size))
    return collect_ranks(chunks, matches)


def retrieval_metrics(
    similarity: Any, query_pids: Any, gallery_pids: Any, *, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> dict[str, float]:
    """R@1, R@5, R@10, mAP and mINP in percent, as IRRA's ``rank()`` (see the module doc).

    Example:
        >>> sim = np.array([[0.2, 0.9, 0.5]])  # one query, gallery ranked 1, 2, 0
        >>> retrieval_metrics(sim, ["a"], ["a", "b", "a"])["mAP"]  # matches at ranks 2, 3
        58.33333333333333
    """
    return query_ranks(similarity, query_pids, gallery_pids, chunk_size=chunk_size).summary()


def retrieval_metrics_from_embeddings(
    query_emb: Any, gallery_emb: Any, query_pids: Any, gallery_pids: Any, *, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> dict[str, float]:
    """:func:`retrieval_metrics` with scores ``query_emb @ gallery_emb.T`` made chunk by chunk.

    No normalisation is applied: pass L2-normalised embeddings for cosine similarity, and
    float32 (numpy has no fast float16 matrix product).

    Example:
        >>> q = np.array([[1.0, 0.0]]); g = np.array([[0.0, 1.0], [1.0, 0.0]])
        >>> retrieval_metrics_from_embeddings(q, g, [7], [3, 7])["r1"]
        100.0
    """
    return query_ranks_from_embeddings(
        query_emb, gallery_emb, query_pids, gallery_pids, chunk_size=chunk_size
    ).summary()


class _OtherImagesMatches(TrueMatches):
    """Queries that are rows of the gallery itself: a query's true matches are its person's
    *other* images (``rows[q]`` is query q's own row, never counted)."""

    def __init__(self, pids: np.ndarray, rows: np.ndarray) -> None:
        super().__init__(pids[rows], pids)
        self._rows = rows

    def positions(self, query: int) -> np.ndarray:
        pos = super().positions(query)
        return pos[pos != self._rows[query]]


def leave_one_out_ranks(
    embeddings: Any, pids: Any, *, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> tuple[np.ndarray, QueryRanks]:
    """Query by image within one gallery: ``(rows, ranks)`` where every image whose person has
    another image is a query (``rows``, ascending) against all the *other* images, scored by
    ``embeddings @ embeddings.T`` (pass L2-normalised rows for cosine); ``ranks.summary()``
    gives R@k, mAP and mINP in percent. Same tie rule as :func:`query_ranks`; the query's own
    row can never rank (its score is set below every other).

    Example:
        >>> e = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
        >>> rows, ranks = leave_one_out_ranks(e, ["a", "a", "b"])  # "b" has no other image
        >>> rows.tolist(), ranks.first.tolist(), ranks.summary()["mAP"]
        ([0, 1], [0, 0], 100.0)
    """
    e = np.asarray(embeddings)
    if e.ndim != 2:
        raise ValueError(f"embeddings must be (N, D), got shape {e.shape}")
    if e.dtype.kind != "f":
        e = e.astype(np.float64)
    p = np.asarray(pids)
    if p.shape != (len(e),):
        raise ValueError(f"{len(e)} embeddings but pids of shape {p.shape}")
    codes = np.unique(p, return_inverse=True)[1].reshape(-1)
    rows = np.flatnonzero(np.bincount(codes)[codes] > 1)
    if rows.size == 0:
        raise ValueError("no person has two images: there is nothing to query by image")
    matches = _OtherImagesMatches(p, rows)

    def chunks() -> Iterator[tuple[int, np.ndarray]]:
        for start, sim in embedding_chunks(e[rows], e, matches, check_chunk_size(chunk_size)):
            own = rows[start : start + len(sim)]
            sim[np.arange(len(sim)), own] = -np.inf  # (C, N): the query itself ranks last, uncounted
            yield start, sim

    return rows, collect_ranks(chunks(), matches)


def rank_of_first_match(
    similarity: Any, query_pids: Any, gallery_pids: Any, *, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> np.ndarray:
    """(Q,) int64: 0-based rank of each query's best-ranked true match (0 = top-1).

    Example:
        >>> rank_of_first_match(np.array([[0.1, 0.7, 0.3]]), [5], [5, 6, 5])
        array([1])
    """
    return query_ranks(similarity, query_pids, gallery_pids, chunk_size=chunk_size).first
