"""k-reciprocal re-ranking (Zhong, Zheng, Cao and Li, CVPR 2017): distances that trust shared neighbours.

Two crops of one person seen from two cameras are often far apart in appearance space, but each
sits among the same few crops of that person. k-reciprocal re-ranking measures that: crop j is a
*k-reciprocal* neighbour of i when each is among the other's k nearest. Every crop gets a soft
neighbour set (its k1-reciprocal neighbours, grown by the reciprocal neighbours of those
neighbours that mostly agree with it, weighted by exp(-distance), then averaged over its k2
nearest crops), and the final distance mixes the Jaccard distance of two crops' sets with the
original one: ``(1 - lam) * jaccard + lam * original``. It uses no labels, only the query and
gallery vectors themselves, so it is an evaluation-time and search-time method; the field reports
re-ranked figures beside plain ones, and so do we (docs/appearance.md).

The distances are computed over all query and gallery crops together, so memory grows with the
square of their number (N = 6,717 CUHK03 test crops: 0.75 GB at the peak, 4 s on 2 cores);
:data:`MAX_ITEMS` bounds it. :func:`k_reciprocal_distances` is the vectorised path,
:func:`k_reciprocal_distances_reference` the plain one written from the paper's definitions with
Python sets; a test checks they agree.

Before the neighbour sets are built, each vector may be replaced by its alpha-query expansion
(Radenović, Tolias and Chum 2018; :func:`query_expansion`): the sum of itself and its ``qe_k``
nearest, each weighted by cosine ** ``qe_alpha``. On val it adds to re-ranking where people have
several crops (CUHK03 val mAP 89.3 → 92.0), so the default does it.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> people = rng.normal(size=(4, 8))
    >>> crops = np.repeat(people, 3, axis=0) + 0.3 * rng.normal(size=(12, 8))  # 4 people x 3 crops
    >>> d = k_reciprocal_distances(crops[::3], crops, ReciprocalConfig(k1=3, k2=2, lam=0.3))
    >>> d.shape, bool((d.argsort(axis=1)[:, :3] // 3 == np.arange(4)[:, None]).all())
    ((4, 12), True)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

MAX_ITEMS = 15_000  # queries + gallery crops: about 3.7 GB of (N, N) arrays at the peak


FORM = "K1,K2,LAMBDA[,QE_K,QE_ALPHA]"  # the settings' command-line form


@dataclass(frozen=True)
class ReciprocalConfig:
    """The settings of re-ranking; the defaults were chosen on val (docs/benchmarks.md)."""

    k1: int = 8  # size of the nearest-neighbour lists whose reciprocity defines a crop's neighbour set
    k2: int = 3  # local query expansion: each set is averaged over the crop's k2 nearest (1 = none)
    lam: float = 0.3  # weight of the original distance in the final one (0 = Jaccard distance only)
    # alpha-query expansion first (Radenovic et al. 2018): each vector replaced by the sum of itself and
    #   its qe_k nearest, each weighted by its cosine ** qe_alpha (0 = none)
    qe_k: int = 5
    qe_alpha: float = 3.0

    def __post_init__(self) -> None:
        if self.k1 < 1 or self.k2 < 1 or not 0.0 <= self.lam <= 1.0 or self.qe_k < 0 or self.qe_alpha < 0:
            raise ValueError(
                f"re-ranking needs k1 >= 1, k2 >= 1, 0 <= lam <= 1, qe_k >= 0 and qe_alpha >= 0, got {self}"
            )

    @classmethod
    def parse(cls, text: str) -> "ReciprocalConfig":
        """``"K1,K2,LAMBDA[,QE_K,QE_ALPHA]"`` (the command line's form; without the last two, no query
        expansion), e.g. ``"20,6,0.3"``, the paper's settings.

        >>> ReciprocalConfig.parse("20,6,0.3")
        ReciprocalConfig(k1=20, k2=6, lam=0.3, qe_k=0, qe_alpha=0.0)
        >>> ReciprocalConfig.parse("8,3,0.3,5,3") == ReciprocalConfig()
        True
        """
        parts = [p.strip() for p in str(text).split(",")]
        if len(parts) not in (3, 5):
            raise ValueError(f"re-ranking settings must be {FORM} (e.g. 8,3,0.3,5,3), got {text!r}")
        try:
            k1, k2, lam = int(parts[0]), int(parts[1]), float(parts[2])
            qe_k, qe_alpha = (int(parts[3]), float(parts[4])) if len(parts) == 5 else (0, 0.0)
        except ValueError:
            raise ValueError(f"re-ranking settings must be {FORM} (e.g. 8,3,0.3,5,3), got {text!r}") from None
        return cls(k1, k2, lam, qe_k, qe_alpha)

    def to_dict(self) -> dict[str, Any]:
        return {"k1": self.k1, "k2": self.k2, "lambda": self.lam, "qe_k": self.qe_k, "qe_alpha": self.qe_alpha}

    def label(self) -> str:
        """The command-line form, e.g. ``"8,3,0.3,5,3"``."""
        return f"{self.k1},{self.k2},{self.lam:g}" + (f",{self.qe_k},{self.qe_alpha:g}" if self.qe_k else "")


def query_expansion(x: np.ndarray, k: int, alpha: float) -> np.ndarray:
    """(N, D) alpha-query expansion of unit vectors (N, D): each the normalised sum of itself and its k
    nearest (ties in index order), weighted by cosine ** alpha (negative cosines count 0)."""
    if k == 0:
        return x
    cosine = x @ x.T  # (N, N)
    near = _ranks(-cosine, k + 1)  # (N, k + 1) itself (or a duplicate) first
    weights = np.clip(np.take_along_axis(cosine, near, axis=1), 0.0, None) ** alpha  # (N, k + 1)
    out = (weights[:, :, None] * x[near]).sum(axis=1)  # (N, D)
    return out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)


def _original_distances(query: Any, gallery: Any, config: ReciprocalConfig) -> tuple[np.ndarray, slice, slice]:
    """(N, N) squared Euclidean distances of the unit vectors (query-expanded as ``config`` says), each
    row scaled to a maximum of 1, and the rows of the queries and the columns of the gallery in them
    (gallery None: the queries)."""
    parts = [np.asarray(query, np.float32)] + ([] if gallery is None else [np.asarray(gallery, np.float32)])
    x = np.concatenate(parts)  # (N, D)
    if x.ndim != 2:
        raise ValueError(f"re-ranking needs (N, D) features, got shape {x.shape}")
    if len(x) > MAX_ITEMS:
        raise ValueError(
            f"re-ranking compares all {len(x)} crops with each other; at most {MAX_ITEMS} fit its N x N arrays"
        )
    x /= np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)
    x = query_expansion(x, min(config.qe_k, len(x) - 1), config.qe_alpha)
    dist = np.clip(2.0 - 2.0 * (x @ x.T), 0.0, None)  # (N, N)
    dist /= np.clip(dist.max(axis=1, keepdims=True), 1e-12, None)  # the paper's scaling, row by row
    n_query = len(parts[0])
    columns = slice(0, len(x)) if gallery is None else slice(n_query, len(x))
    return dist.astype(np.float32), slice(0, n_query), columns


def _ranks(dist: np.ndarray, k: int) -> np.ndarray:
    """(N, k) nearest items of each row, nearest first; ties in index order, as a stable full sort.

    Duplicate crops tie exactly, so the k-th place must not be left to argpartition's choice: every
    item within the k-th distance is taken, sorted by (distance, index), and the first k kept.
    """
    n, k = len(dist), min(k, dist.shape[1])
    kth = np.partition(dist, k - 1, axis=1)[:, k - 1]  # (N,) the k-th smallest distance of each row
    rows, cols = np.nonzero(dist <= kth[:, None])  # at least k per row, more where ties reach the k-th
    order = np.lexsort((cols, dist[rows, cols], rows))  # by row, then distance, then index
    rows, cols = rows[order], cols[order]
    place = np.arange(len(rows)) - np.searchsorted(rows, np.arange(n))[rows]  # rank within the row
    keep = place < k
    out = np.empty((n, k), dtype=np.int64)
    out[rows[keep], place[keep]] = cols[keep]
    return out


def _reciprocal(ranks: np.ndarray, k: int) -> list[np.ndarray]:
    """For each item i, its k-reciprocal neighbours: j in i's k + 1 nearest and i in j's."""
    forward = ranks[:, : k + 1]  # (N, k + 1)
    backward = ranks[forward, : k + 1]  # (N, k + 1, k + 1)
    mutual = (backward == np.arange(len(ranks))[:, None, None]).any(axis=2)  # (N, k + 1)
    return [row[keep] for row, keep in zip(forward, mutual)]


def k_reciprocal_distances(query: Any, gallery: Any, config: ReciprocalConfig = ReciprocalConfig()) -> np.ndarray:
    """(Q, G) re-ranked distances of query vectors (Q, D) to gallery vectors (G, D); smaller is closer.

    ``gallery=None`` compares the crops of ``query`` with each other, each crop once: (Q, Q), for a
    gallery searched with its own crops (a footage gallery's crops against its other tracks).
    """
    dist, rows, columns = _original_distances(query, gallery, config)
    n = len(dist)
    half = int(np.around(config.k1 / 2))
    ranks = _ranks(dist, max(config.k1, config.k2, half) + 1)  # (N, K)
    sets, half_sets = _reciprocal(ranks, config.k1), _reciprocal(ranks, half)
    weights = np.zeros((n, n), np.float32)  # (N, N) each row a neighbour set's weights, summing to 1
    for i in range(n):
        own = sets[i]
        grown = [own]
        for candidate in own:
            theirs = half_sets[candidate]
            if np.isin(theirs, own).sum() > 2.0 / 3.0 * len(theirs):
                grown.append(theirs)
        members = np.unique(np.concatenate(grown))
        w = np.exp(-dist[i, members])
        weights[i, members] = w / w.sum()
    if config.k2 > 1:  # local query expansion over each item's k2 nearest (itself included)
        expanded = np.zeros_like(weights)
        near = min(config.k2, ranks.shape[1])  # fewer items than k2: all of them
        for m in range(near):  # one (N, N) gather at a time, not an (N, k2, N) array
            expanded += weights[ranks[:, m]]
        weights = expanded / near
    gallery_weights = weights[columns]  # (G, N)
    jaccard = np.empty((rows.stop, columns.stop - columns.start), np.float32)  # (Q, G)
    for q in range(rows.stop):
        shared = np.flatnonzero(weights[q])  # the few items in query q's set
        overlap = np.minimum(gallery_weights[:, shared], weights[q, shared]).sum(axis=1)  # (G,)
        # both rows sum to 1, so the sum of maxima is 2 - the sum of minima
        jaccard[q] = 1.0 - overlap / (2.0 - overlap)
    return (1.0 - config.lam) * jaccard + config.lam * dist[rows, columns]


def k_reciprocal_distances_reference(
    query: Any, gallery: Any, config: ReciprocalConfig = ReciprocalConfig()
) -> np.ndarray:
    """The plain version of :func:`k_reciprocal_distances`, one item and one pair at a time."""
    if config.qe_k:  # the query expansion, one vector at a time, then the rest on the expanded vectors
        parts = [np.asarray(query, np.float64)] + ([] if gallery is None else [np.asarray(gallery, np.float64)])
        x = np.concatenate(parts)
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        k = min(config.qe_k, len(x) - 1)
        expanded = []
        for i in range(len(x)):
            near = sorted(range(len(x)), key=lambda j: (-float(np.float32(x[i] @ x[j])), j))[: k + 1]
            total = sum(max(float(x[i] @ x[j]), 0.0) ** config.qe_alpha * x[j] for j in near)
            expanded.append(total / np.linalg.norm(total))
        x = np.asarray(expanded)
        query, gallery = x[: len(parts[0])], None if gallery is None else x[len(parts[0]) :]
        config = replace(config, qe_k=0)
    dist, rows, columns = _original_distances(query, gallery, config)
    n = len(dist)
    order = [sorted(range(n), key=lambda j: (dist[i, j], j)) for i in range(n)]

    def reciprocal(i: int, k: int) -> set[int]:
        return {j for j in order[i][: k + 1] if i in order[j][: k + 1]}

    half = int(np.around(config.k1 / 2))
    vectors: list[dict[int, float]] = []
    for i in range(n):
        own = reciprocal(i, config.k1)
        members = set(own)
        for candidate in own:
            theirs = reciprocal(candidate, half)
            if len(theirs & own) > 2.0 / 3.0 * len(theirs):
                members |= theirs
        total = sum(np.exp(-float(dist[i, j])) for j in members)
        vectors.append({j: float(np.exp(-float(dist[i, j]))) / total for j in members})
    if config.k2 > 1:
        expanded = []
        for i in range(n):
            near = order[i][: config.k2]
            expanded.append({j: sum(vectors[m].get(j, 0.0) for m in near) / len(near) for j in range(n)})
        vectors = expanded
    gallery_items = range(columns.start, columns.stop)
    out = np.empty((rows.stop, len(gallery_items)), np.float32)
    for q in range(rows.stop):
        for col, g in enumerate(gallery_items):
            a, b = vectors[q], vectors[g]
            keys = set(a) | set(b)
            low = sum(min(a.get(j, 0.0), b.get(j, 0.0)) for j in keys)
            high = sum(max(a.get(j, 0.0), b.get(j, 0.0)) for j in keys)
            jaccard = 1.0 - low / high
            out[q, col] = (1.0 - config.lam) * jaccard + config.lam * dist[q, g]
    return out
