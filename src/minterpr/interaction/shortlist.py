"""Sessions over large galleries: re-rank a shortlist of the query's nearest images, not every image.

Each turn of a :class:`~minterpr.interaction.session.Session` scores the gallery with the
query, then adds the conversation's evidence (:func:`~minterpr.interaction.reranking.rerank`:
attribute log-likelihood, rejections and their near-duplicates, the anchor) and runs the
policies. On the **exact path** all of that runs over all N images. On a **shortlist**
(:class:`ShortlistConfig`, the default for galleries of ``min_gallery`` images or more) it
runs over the candidates only, so a turn costs O(K) after one nearest-neighbour search:

1. the top-``size`` images of the **fused score** ``cos(q, e_i) + w · Σ_facts log P(fact | i)``
   (``ShortlistConfig.fused``, the default): the score before rejections and the anchor, an
   inner product of ``[q, w · fact indicators]`` with ``[e_i, per-label log-probabilities]``
   (:mod:`minterpr.index.fused_vectors`), so the images the attribute evidence lifts are found
   by the search itself. ``index.fused`` (a :class:`~minterpr.index.fused_ivf.FusedIVF`; a
   gallery store saves one and sets it when opened) answers it without touching every row;
   without one, one exact scan (the (N, D) cosine plus one cached (N,) column per fact) and an
   ``argpartition``. With ``fused=False`` (what a record without the key means: see
   :meth:`ShortlistConfig.from_dict`), or a gallery whose ``index.vectors`` is an approximate
   (ANN) index and that has no ``index.fused``, the query's top-K by cosine alone;
2. plus, always, every image the conversation judged (confirmed, rejected, unsure) and every
   gallery image it named (example turns);
3. the evidence is added on those rows alone (``GalleryIndex.subset``); when an anchor is
   found (and ``anchor_search``), the top-K of the blended query join the candidates — anchor
   refinement scores ``λ · fused + (1 − λ) · cos(anchor, e)``, again an inner product
   (``[λq + (1 − λ)·anchor, λ·w·indicators]``), so the images it lifts are there — and the
   candidates are re-ranked once more;
4. **growth**: an image left out scores at most the K-th best fused score (rejections only
   lower a score); blended with the anchor, at most the K-th best blended score (or
   ``λ · edge + (1 − λ)``). On the cosine-only search the bound is the K-th query score plus the
   largest attribute term any image can get (every fact at probability ``1 - prob_floor``),
   much looser. While fewer than ``max(certify, min_open)`` unjudged candidates score at least
   that bound (rejections demote the candidates), K grows by ``growth`` and the turn starts
   over, up to ``max_size`` candidates (then the turn keeps what it has: certification is given
   up for a bounded cost) or the whole gallery. So the first ``certify`` results are those of
   the exact path whenever the search is exact (the scan) and the anchor is the one the exact
   path finds.

The result is a pure function of the turns, so replays stay identical. With K ≥ N the
shortlist is the whole gallery and the scores are those of the exact path, bit for bit.

Example:
    >>> import numpy as np
    >>> from minterpr.index.gallery_index import GalleryIndex
    >>> from minterpr.types import GalleryImage
    >>> rng = np.random.default_rng(0)
    >>> emb = rng.normal(size=(50, 8)).astype(np.float32); emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    >>> index = GalleryIndex([GalleryImage(f"{i}.jpg", f"x:{i}") for i in range(50)], emb)
    >>> found = rank_candidates(index, emb[7], (), {3: False}, ShortlistConfig(size=5, min_gallery=0, certify=0))
    >>> len(found.rows), 3 in found.rows, 7 in found.rows  # top 5 plus the judged image
    (6, True, True)
    >>> int(found.rows[np.argmax(found.scores)])
    7
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Collection, Mapping, Sequence

import numpy as np

from minterpr.language.phrasing import Fact
from minterpr.errors import InputError
from minterpr.index.fused_vectors import fact_columns
from minterpr.index.gallery_index import GalleryIndex
from minterpr.interaction.candidates import Candidates, certified, rank_gallery, rank_rows
from minterpr.interaction.reranking import RerankConfig
from minterpr.interaction.shortlist_bounds import (
    anchor_lambda,
    compares_appearance,
    example_bound,
    leans,
    plausible_blend,
    plausible_bound,
)

__all__ = ["ShortlistConfig", "appearance_neighbours", "make_shortlist", "nearest_rows", "rank_candidates"]


@dataclass(frozen=True)
class ShortlistConfig:
    """When and how a session works on a shortlist (see the module doc)."""

    size: int = 2000  # K: candidates taken from the query's nearest images each turn
    min_gallery: int = 20_000  # galleries with fewer images are ranked whole (the exact path)
    growth: float = 2.0  # factor K grows by while rejections leave too few open candidates
    anchor_search: bool = True  # with an anchor, also take the blended query's top-K (one more search)
    certify: int = 10  # the shortlist grows until this many unjudged candidates provably lead every image left out
    max_size: int | None = 16_000  # growth stops at this many candidates (a bound on a turn's cost); None = up to N
    fused: bool = True  # take the top-K by the fused score (cosine + attribute evidence, one inner product)
    #   from index.fused or an exact scan; False: by cosine alone (the search index.vectors answers).
    #   A record without the key was written when the cosine search was the only one: it reads False

    def __post_init__(self) -> None:
        for name, low in (("size", 1), ("min_gallery", 0), ("certify", 0), ("max_size", 1)):
            value = getattr(self, name)
            if name == "max_size" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise InputError(f"shortlist: {name} must be an int >= {low}, got {value!r}")
            object.__setattr__(self, name, int(value))
        if isinstance(self.growth, bool) or not isinstance(self.growth, (int, float)) or not self.growth > 1:
            raise InputError(f"shortlist: growth must be a number > 1, got {self.growth!r}")
        for name in ("anchor_search", "fused"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"shortlist: {name} must be true or false, got {getattr(self, name)!r}")

    def applies(self, num_images: int) -> bool:
        """Whether a gallery of ``num_images`` is ranked on a shortlist."""
        return num_images >= self.min_gallery

    def to_dict(self) -> dict[str, Any]:
        """Every field; ``fused`` only when on, so a cosine config's record is the one written before
        the field existed (and :meth:`from_dict` reads a record without it as the cosine search)."""
        out = asdict(self)
        if not self.fused:
            del out["fused"]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ShortlistConfig":
        """The config a record (:meth:`to_dict`, a session protocol's ``"shortlist"``) describes.

        A record without ``fused`` was written by the cosine search (before the fused search
        existed, or with it off): it reads ``fused=False`` whatever today's default, so it replays
        as it ran. InputError for an unknown field or a bad value.

        Example:
            >>> ShortlistConfig.from_dict({"size": 500, "min_gallery": 0}).fused  # an old record: the cosine search
            False
            >>> config = ShortlistConfig(size=500)
            >>> ShortlistConfig.from_dict(config.to_dict()) == config
            True
        """
        if not isinstance(data, Mapping):
            raise InputError(f"shortlist: a record must be a mapping of fields, got {data!r}")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise InputError(f"shortlist: unknown field {unknown[0]!r} in a shortlist record")
        return cls(**{"fused": False, **data})


def make_shortlist(option: Any) -> ShortlistConfig | None:
    """The Session option read: None (always exact), an int K (a shortlist of K at any gallery
    size) or a :class:`ShortlistConfig`.

    Example:
        >>> make_shortlist(500)
        ShortlistConfig(size=500, min_gallery=0, growth=2.0, anchor_search=True, certify=10, max_size=16000, fused=True)
    """
    if option is None or isinstance(option, ShortlistConfig):
        return option
    if isinstance(option, (int, np.integer)) and not isinstance(option, bool):
        return ShortlistConfig(size=int(option), min_gallery=0)
    raise InputError(f"shortlist must be None, an int K or a ShortlistConfig, got {option!r}")


def nearest_rows(index: GalleryIndex, query: np.ndarray, k: int, scores: np.ndarray | None = None) -> np.ndarray:
    """(≤ k,) gallery positions of the query's top-k (unordered): ``index.vectors`` when set, else an
    exact ``argpartition`` of ``scores`` (the (N,) scan, computed when not given)."""
    n = len(index)
    if index.vectors is not None:
        ids = np.asarray(index.vectors.search(np.asarray(query, np.float32)[None], min(k, n)).ids[0])
        return ids[(ids >= 0) & (ids < n)]
    if k >= n:
        return np.arange(n)
    scores = index.scores(query) if scores is None else scores
    return np.argpartition(scores, n - k)[n - k :]


def appearance_neighbours(index: GalleryIndex, example: np.ndarray, k: int, *, exact: bool = False) -> np.ndarray:
    """(≤ k,) gallery positions of the (A,) ``example``'s top-k by appearance (unordered):
    ``index.appearance_vectors`` (a store's index over ``index.appearance``) when set and not ``exact``,
    else the reference it agrees with: an exact ``argpartition`` of the (N, A) scan."""
    n = len(index)
    example = np.asarray(example, np.float32)
    centre = index.appearance_centre()
    if centre is not None:  # x . (e - c) ranks as (x - c) . (e - c), the centred cosine's numerator
        example = example - centre
    if index.appearance_vectors is not None and not exact:
        ids = np.asarray(index.appearance_vectors.search(example[None], min(k, n)).ids[0])
        return ids[(ids >= 0) & (ids < n)]
    if k >= n:
        return np.arange(n)
    return np.argpartition(index.appearance @ example, n - k)[n - k :]


def rank_candidates(
    index: GalleryIndex,
    query: np.ndarray,
    facts: Sequence[Fact],
    judgements: Mapping[int, bool | None],
    shortlist: ShortlistConfig | None,
    reranking: RerankConfig = RerankConfig(),
    *,
    named: Collection[int] = (),
    min_open: int = 1,
    stated: Mapping[int, Sequence[Fact]] | None = None,
    example: np.ndarray | None = None,
) -> Candidates:
    """Rank the gallery for one (D,) query: on the exact path when ``shortlist`` is None or does
    not apply to this gallery's size, else on a growing shortlist (module doc). ``named``:
    gallery images the conversation named that must be candidates; ``min_open``: leading
    candidates below which the shortlist grows (as ``ShortlistConfig.certify``); ``stated``: gallery
    image -> what the user said of it when shown, evidence that outranks the model's for those images
    (:func:`~minterpr.language.evidence.stated_log_likelihood`; they are always candidates);
    ``example``: the (A,) appearance vector of the conversation's example image (its top-``size``
    appearance neighbours are always candidates; :attr:`RerankConfig.example_lambda`)."""
    stated = dict(stated or {})
    n = len(index)
    if example is not None and (index.appearance is None or index.same_person is None):
        example = None  # a gallery without calibrated appearance ranks as without the example's vector
    if shortlist is None or not shortlist.applies(n) or shortlist.size >= n:
        return rank_gallery(index, query, facts, judgements, reranking, stated, example)
    query = np.asarray(query, dtype=np.float32)
    must = np.asarray(sorted({*judgements, *named, *stated}), dtype=np.int64)
    if example is not None:  # the example's nearest by appearance: what its blend lifts (a search or one scan)
        must = np.union1d(must, appearance_neighbours(index, example, shortlist.size))
    if shortlist.fused and (index.fused is not None or not _approximate(index.vectors)):
        return _fused(index, query, facts, judgements, shortlist, reranking, must, min_open, stated, example)
    full = None if index.vectors is not None else index.scores(query)  # (N,) the one scan of the exact argpartition
    looks = compares_appearance(index)
    # the attribute term of any image is at most this (every probability is clipped to 1 - floor)
    distinct = len(dict.fromkeys(facts)) if reranking.attributes and index.attribute_probs is not None else 0
    best_evidence = reranking.attribute_weight * distinct * math.log(1.0 - reranking.prob_floor)
    k = min(shortlist.size, n)
    while True:
        top = nearest_rows(index, query, k, full)
        rows = np.union1d(top, must)
        found, query_scores = rank_rows(index, rows, query, full, facts, judgements, reranking, stated, example)
        # the most an image outside the shortlist could score: its query score is at most the K-th best
        edge = float(query_scores[np.searchsorted(rows, top)].min()) if len(top) < n else -math.inf
        lean = leans(judgements, reranking)
        bound = plausible_bound(example_bound(edge + best_evidence, example, reranking), lean, reranking)
        if found.anchor is not None and reranking.anchor:
            lam = anchor_lambda(reranking, judgements, found.anchor)
            bound = lam * bound + (1.0 - lam)  # anchor similarity <= 1
            if shortlist.anchor_search and not lean and not looks:  # (on appearance: the loose bound alone)
                anchor = index.embeddings[found.anchor]
                blend = lam * query + (1.0 - lam) * anchor  # anchor refinement scores by this inner product
                blend_scores = None if full is None else lam * full + (1.0 - lam) * index.scores(anchor)
                near = nearest_rows(index, blend, k, blend_scores)
                grown = np.union1d(rows, near)
                if len(grown) > len(rows):
                    found, _ = rank_rows(index, grown, query, full, facts, judgements, reranking, stated, example)
                if len(near) < n:
                    bound = min(bound, float((index.embeddings[near] @ blend).min()) + lam * best_evidence)
        if lean and shortlist.anchor_search and len(top) < n and not looks:
            vector, scale = plausible_blend(query, index, judgements, reranking, found.anchor)
            near = nearest_rows(index, vector, k, None if full is None else index.scores(vector))
            grown = np.union1d(rows, near)
            if len(grown) > len(rows):
                found, _ = rank_rows(index, grown, query, full, facts, judgements, reranking, stated, example)
            if len(near) < n:
                bound = min(bound, float((index.embeddings[near] @ vector).min()) + scale * best_evidence)
        if certified(found, judgements, bound, max(min_open, shortlist.certify)):
            return found
        k = _grow(k, shortlist)
        if k is None:
            return found  # the cap: the best the shortlist could do within its budget
        if k >= n:  # grown to the whole gallery: the exact path itself (no copy)
            return rank_gallery(index, query, facts, judgements, reranking, stated, example)


def _fused(
    index: GalleryIndex,
    query: np.ndarray,
    facts: Sequence[Fact],
    judgements: Mapping[int, bool | None],
    shortlist: ShortlistConfig,
    config: RerankConfig,
    must: np.ndarray,
    min_open: int,
    stated: Mapping[int, Sequence[Fact]],
    example: np.ndarray | None = None,
) -> Candidates:
    """The shortlist on the top-K of the fused score (module doc, "Fused search"): ``index.fused``
    when set, else one exact scan of cosine plus the facts' cached columns."""
    n = len(index)
    looks = compares_appearance(index)
    weight = config.attribute_weight if config.attributes and index.attribute_probs is not None else 0.0
    floor = config.prob_floor
    full = fused_full = columns = None
    if index.fused is None:  # exact: (N,) cosine (the exact path's own scan) + (N,) attribute columns
        full = index.scores(query)
        fused_full = full.astype(np.float64)
        columns = fact_columns(index, floor) if weight and facts else None
        if columns is not None:
            fused_full += weight * columns.total(facts)

    def top(vector: np.ndarray, lam: float, exact: Callable[[], np.ndarray], k: int) -> tuple[np.ndarray, float]:
        """(k,) rows of the top-k of vector · x + lam · w · Σ log P(facts | x) and its k-th score:
        ``index.fused``'s search, else ``exact()``, those (N,) scores computed in full."""
        if index.fused is not None:
            hits = index.fused.search(vector, facts, lam * weight, floor, k)
            return hits.rows, float(hits.scores[-1])
        scores = exact()
        rows = np.argpartition(scores, n - k)[n - k :]
        return rows, float(scores[rows].min())

    k = min(shortlist.size, n)
    while True:
        near, edge = top(query, 1.0, lambda: fused_full, k)
        rows = np.union1d(near, must)
        found, _ = rank_rows(index, rows, query, full, facts, judgements, config, stated, example)
        # an image left out has a fused score <= edge; rejections only lower it
        lean = leans(judgements, config)
        bound = plausible_bound(example_bound(edge, example, config), lean, config)
        if found.anchor is not None and config.anchor:
            lam = anchor_lambda(config, judgements, found.anchor)
            bound = lam * bound + (1.0 - lam)  # anchor similarity <= 1
            if (
                shortlist.anchor_search and not lean and not looks
            ):  # the inner product [lam q + (1 - lam) a, lam w facts]
                anchor = index.embeddings[found.anchor]
                blended, blend_edge = top(
                    lam * query + (1.0 - lam) * anchor,
                    lam,
                    lambda: lam * fused_full + (1.0 - lam) * index.scores(anchor),
                    k,
                )
                grown = np.union1d(rows, blended)
                if len(grown) > len(rows):
                    found, _ = rank_rows(index, grown, query, full, facts, judgements, config, stated, example)
                bound = min(bound, blend_edge)
        if lean and shortlist.anchor_search and not looks:  # the blends' inner product [vector, scale w facts]
            vector, scale = plausible_blend(query, index, judgements, config, found.anchor)

            def exact_blend() -> np.ndarray:
                scores = index.scores(vector).astype(np.float64)
                if columns is not None:
                    scores += scale * weight * columns.total(facts)
                return scores

            blended, blend_edge = top(vector, scale, exact_blend, k)
            grown = np.union1d(rows, blended)
            if len(grown) > len(rows):
                found, _ = rank_rows(index, grown, query, full, facts, judgements, config, stated, example)
            bound = min(bound, blend_edge)
        if certified(found, judgements, bound, max(min_open, shortlist.certify)):
            return found
        k = _grow(k, shortlist)
        if k is None:
            return found
        if k >= n:
            return rank_gallery(index, query, facts, judgements, config, stated, example)


def _approximate(vectors: Any) -> bool:
    """Whether ``vectors`` is an approximate (sublinear) search: an ANN is kept for the cosine
    shortlist; an exact one (a scan, ``name == "exact"``) costs what the fused scan costs, which
    finds the fused top-K instead."""
    return vectors is not None and getattr(vectors, "name", None) != "exact"


def _grow(k: int, shortlist: ShortlistConfig) -> int | None:
    """The next K, or None at the cap."""
    if shortlist.max_size is not None and k >= shortlist.max_size:
        return None
    k = int(math.ceil(k * shortlist.growth))
    if shortlist.max_size is not None:
        k = min(k, max(shortlist.max_size, shortlist.size))
    return k
