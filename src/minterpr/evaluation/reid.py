"""Re-identification scores with the field's protocol: rank-k (CMC), mAP and mINP.

Each query is ranked against the gallery by cosine similarity; gallery crops of the same
identity *from the same camera* are left out (finding the same person in the same camera a
second later is no re-identification), and a query without any remaining match is skipped, as
in Market-1501/CUHK03-NP's evaluation code. mINP (Ye et al., 2021) is the mean over queries of
matches / (position of the hardest match): how far down an analyst must look to see them all.
Ties keep the gallery's order (a stable sort), so the figures are reproducible.

Example:
    >>> import numpy as np
    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> g = np.array([[0.9, 0.1], [0.1, 0.9], [0.95, 0.05]])
    >>> m = reid_metrics(q, g, ["a", "b"], ["a", "b", "b"], ["0", "0"], ["1", "1", "1"])
    >>> round(m.cmc[1], 1), round(m.mean_ap, 1), round(m.mean_inp, 1), m.queries
    (50.0, 66.7, 58.3, 2)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

RANKS = (1, 5, 10)


@dataclass(frozen=True)
class ReidMetrics:
    """Percentages over the queries that have a cross-camera match."""

    cmc: dict[int, float]  # k -> % of queries with a match in the top k
    mean_ap: float  # mean average precision (%)
    mean_inp: float  # mean inverse negative penalty (%)
    queries: int  # queries scored (those with at least one match left)
    skipped: int  # queries without any match once same-camera crops are left out

    def to_dict(self) -> dict[str, Any]:
        return {
            **{f"rank{k}": v for k, v in self.cmc.items()},
            "mAP": self.mean_ap,
            "mINP": self.mean_inp,
            "queries": self.queries,
            "skipped": self.skipped,
        }


def _normalise(features: Any) -> np.ndarray:
    array = np.asarray(features, dtype=np.float32)
    if array.ndim != 2:
        raise ValueError(f"features must be (N, D), got shape {array.shape}")
    return array / np.clip(np.linalg.norm(array, axis=1, keepdims=True), 1e-12, None)


def reid_metrics(
    query_features: Any,
    gallery_features: Any,
    query_pids: Sequence[str],
    gallery_pids: Sequence[str],
    query_cameras: Sequence[str],
    gallery_cameras: Sequence[str],
    *,
    ranks: Sequence[int] = RANKS,
    chunk_size: int = 256,
) -> ReidMetrics:
    """Rank-k, mAP and mINP of queries against a gallery (features (Q, D) and (G, D)) by cosine."""
    query, gallery = _normalise(query_features), _normalise(gallery_features)
    orders = (
        np.argsort(-(query[start : start + chunk_size] @ gallery.T), axis=1, kind="stable")  # (C, G) best first
        for start in range(0, len(query), chunk_size)
    )
    return _score(orders, len(query), len(gallery), query_pids, gallery_pids, query_cameras, gallery_cameras, ranks)


def reid_metrics_from_distances(
    distances: Any,
    query_pids: Sequence[str],
    gallery_pids: Sequence[str],
    query_cameras: Sequence[str],
    gallery_cameras: Sequence[str],
    *,
    ranks: Sequence[int] = RANKS,
    chunk_size: int = 256,
) -> ReidMetrics:
    """The same scores from a (Q, G) distance matrix, smaller is closer (re-ranked distances).

    >>> d = np.array([[0.1, 0.9, 0.05], [0.9, 0.1, 0.95]])
    >>> m = reid_metrics_from_distances(d, ["a", "b"], ["a", "b", "b"], ["0", "0"], ["1", "1", "1"])
    >>> round(m.cmc[1], 1), round(m.mean_ap, 1)
    (50.0, 66.7)
    """
    dist = np.asarray(distances, dtype=np.float32)
    if dist.ndim != 2:
        raise ValueError(f"distances must be (Q, G), got shape {dist.shape}")
    orders = (
        np.argsort(dist[start : start + chunk_size], axis=1, kind="stable") for start in range(0, len(dist), chunk_size)
    )
    return _score(orders, dist.shape[0], dist.shape[1], query_pids, gallery_pids, query_cameras, gallery_cameras, ranks)


def _score(
    orders: Iterable[np.ndarray],
    n_query: int,
    n_gallery: int,
    query_pids: Sequence[str],
    gallery_pids: Sequence[str],
    query_cameras: Sequence[str],
    gallery_cameras: Sequence[str],
    ranks: Sequence[int],
) -> ReidMetrics:
    """Tally rank-k, AP and INP over chunks of ranked gallery indices (C, G), queries in order."""
    if n_query != len(query_pids) or n_query != len(query_cameras):
        raise ValueError("query features, identities and cameras differ in length")
    if n_gallery != len(gallery_pids) or n_gallery != len(gallery_cameras):
        raise ValueError("gallery features, identities and cameras differ in length")
    q_pid, g_pid = np.asarray(query_pids, dtype=object), np.asarray(gallery_pids, dtype=object)
    q_cam, g_cam = np.asarray(query_cameras, dtype=object), np.asarray(gallery_cameras, dtype=object)
    hits = {k: 0 for k in ranks}
    ap_sum = inp_sum = 0.0
    scored = start = 0
    for order in orders:
        stop = start + len(order)
        same = q_pid[start:stop, None] == g_pid[order]  # (C, G) in ranked order
        same_camera = q_cam[start:stop, None] == g_cam[order]
        keep = ~(same & same_camera)  # drop same person, same camera
        start = stop
        for row in range(order.shape[0]):
            matches = same[row][keep[row]]  # (G',) bool, ranked
            positions = np.flatnonzero(matches)  # 0-based ranks of the matches
            if positions.size == 0:
                continue
            scored += 1
            for k in ranks:
                hits[k] += int(positions[0] < k)
            ap_sum += float(np.mean(np.arange(1, positions.size + 1) / (positions + 1)))
            inp_sum += positions.size / float(positions[-1] + 1)
    if scored == 0:
        raise ValueError("no query has a match in another camera: nothing to score")
    return ReidMetrics(
        cmc={k: 100.0 * hits[k] / scored for k in ranks},
        mean_ap=100.0 * ap_sum / scored,
        mean_inp=100.0 * inp_sum / scored,
        queries=scored,
        skipped=n_query - scored,
    )
