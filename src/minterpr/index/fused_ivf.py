"""Approximate top-K of the fused score (cosine + attribute evidence): inverted lists, exact inside.

:class:`FusedIVF` clusters the gallery's embeddings (k-means, ``nlist`` lists) once and keeps
each list's rows contiguous (a permuted copy of the embeddings), the list's radius
(max ‖e − c‖) and, per label, the largest and smallest probability r its images give a one-value
fact (:func:`~minterpr.language.evidence.normalised_probs`). A search for a query q and facts:

1. every list gets an optimistic attribute term: the largest value each fact's log-likelihood can
   take in it (log-likelihoods are monotone in r: a positive fact reads at most the list's
   largest r, a negated one at most 1 − the smallest, sums and products alike), weighted;
2. lists are probed best first by ``q · c + that term``, ``nprobe`` of them (more while they hold
   fewer than k rows);
3. on the rows probed the fused score is computed exactly (the same formula as rerank), top-k kept.

An image of a list not probed scores at most ``q · c + radius + term`` (Cauchy–Schwarz): when the
k-th score found reaches every such bound, the result is the exact top-k (``certified``);
``max_probe`` lets the search probe on until then. No O(N) work per query: O(nlist · D) to
order the lists plus the rows probed.

The lists come from faiss's k-means and nearest-centroid assignment when faiss is installed
(``kmeans="auto"``; the build's cost is the N × nlist × D assignment, which faiss blocks without
an (N, nlist) matrix), else from the numpy Lloyd below (``kmeans="numpy"``): any clustering
gives exact bounds, only the rows probed change. :meth:`FusedIVF.parts` and
:meth:`FusedIVF.from_parts` are the arrays a gallery store saves and memory-maps back
(:mod:`minterpr.index.store.gallery_store`).

Example:
    >>> from minterpr.language.ontology import ONTOLOGY
    >>> from minterpr.index.fused_vectors import FactColumns, fused_top_k
    >>> rng = np.random.default_rng(0)
    >>> emb = rng.normal(size=(400, 8)).astype(np.float32); emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    >>> probs = rng.uniform(size=(400, len(ONTOLOGY.flat_labels()))).astype(np.float32)
    >>> ivf = FusedIVF(emb, probs, nlist=8, nprobe=8)
    >>> facts = (Fact("gender", ("female",)),)
    >>> found = ivf.search(emb[3], facts, 0.2, 0.02, 5)
    >>> exact, _ = fused_top_k(emb, FactColumns(probs, 0.02), emb[3], facts, 0.2, 5)
    >>> found.rows.tolist() == exact.tolist(), found.certified  # every list probed: exact
    (True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.language.phrasing import Fact
from minterpr.errors import InputError
from minterpr.language.evidence import SINGLE, chosen_columns, fact_log_likelihood, normalised_probs

__all__ = ["FusedIVF", "FusedHits", "KMEANS", "PARTS"]

_CHUNK = 65_536  # rows per block while assigning (memory ~ CHUNK x nlist floats)
KMEANS = ("auto", "faiss", "numpy")  # k-means engines: auto = faiss when installed, else numpy
# part name (as saved) -> (attribute, when present: always / probs = with attribute probabilities)
PARTS = {
    "centroids": ("centroids", "always"),
    "perm": ("perm", "always"),
    "offsets": ("offsets", "always"),
    "radius": ("radius", "always"),
    "embeddings": ("embeddings", "always"),
    "probs": ("probs_perm", "probs"),
    "r_max": ("r_max", "probs"),
    "r_min": ("r_min", "probs"),
}
_PLAIN = {name for name, (_, need) in PARTS.items() if need == "always"}
_SLACK = 1e-5  # added to the list bounds: r is recomputed in float32 by another order of operations


@dataclass(frozen=True)
class FusedHits:
    """A fused search's result."""

    rows: np.ndarray  # (k,) int64 gallery rows, best first
    scores: np.ndarray  # (k,) float64 fused scores
    certified: bool  # every image not returned provably scores at most scores[-1]
    probed_rows: int  # rows scored (the search's cost)


class FusedIVF:
    """Inverted lists over (N, D) embeddings with per-list attribute bounds (see the module doc)."""

    def __init__(
        self,
        embeddings: np.ndarray,
        attribute_probs: np.ndarray | None,
        *,
        nlist: int | None = None,
        nprobe: int = 16,
        max_probe: int | None = None,
        iterations: int = 10,
        seed: int = 0,
        kmeans: str = "auto",
    ) -> None:
        emb = np.asarray(embeddings, np.float32)
        n = len(emb)
        if emb.ndim != 2 or n == 0:
            raise InputError(f"FusedIVF: embeddings must be a non-empty (N, D) array, got {emb.shape}")
        if attribute_probs is not None and len(attribute_probs) != n:
            raise InputError(f"FusedIVF: attribute_probs has {len(attribute_probs)} rows, embeddings {n}")
        self.nlist = int(
            min(n, nlist if nlist is not None else max(1, int(2 * np.sqrt(n))))
        )  # lists; default 2 sqrt(N)
        self.nprobe = int(nprobe)  # lists probed per search (at least)
        self.max_probe = int(max_probe if max_probe is not None else nprobe)  # probe on until certified, up to this
        if self.nlist < 1 or self.nprobe < 1 or self.max_probe < self.nprobe:
            raise InputError(
                f"FusedIVF: need nlist >= 1, nprobe >= 1, max_probe >= nprobe, got "
                f"{self.nlist}, {self.nprobe}, {self.max_probe}"
            )
        if kmeans not in KMEANS:
            raise InputError(f"FusedIVF: kmeans must be one of {', '.join(KMEANS)}, got {kmeans!r}")
        faiss = _faiss() if kmeans != "numpy" else None
        if kmeans == "faiss" and faiss is None:
            raise InputError("FusedIVF: kmeans='faiss' needs faiss: pip install 'minterpr[faiss]' (or kmeans='numpy')")
        self.kmeans = "faiss" if faiss is not None else "numpy"  # which k-means made the lists
        self.probs = attribute_probs  # (N, L) the index's (None: the cosine alone)
        self.centroids = _kmeans(emb, self.nlist, iterations, seed, faiss)  # (nlist, D)
        labels = self._assign(emb, faiss)  # (N,)
        self.perm = np.argsort(labels, kind="stable").astype(np.int64)  # (N,) gallery rows, list by list
        self.offsets = np.searchsorted(labels[self.perm], np.arange(self.nlist + 1)).astype(np.int64)  # (nlist + 1,)
        self.embeddings = emb[self.perm]  # (N, D) list-contiguous copy
        self._positions: np.ndarray | None = None  # (N,) inverse of perm, made by the first gather
        # (N, L) the probabilities beside them, list-contiguous too (a gather of random rows costs more)
        self.probs_perm = None if attribute_probs is None else np.asarray(attribute_probs)[self.perm]
        self.radius = np.zeros(self.nlist)  # (nlist,) max ||e - c|| in each list
        self.r_max = self.r_min = None  # (nlist, L) per-list extremes of r; None without probabilities
        if attribute_probs is not None:
            self.r_max = np.zeros((self.nlist, attribute_probs.shape[1]), np.float64)
            self.r_min = np.ones((self.nlist, attribute_probs.shape[1]), np.float64)
        for start in range(0, n, _CHUNK):
            part = slice(start, min(n, start + _CHUNK))
            lab = labels[self.perm[part]]
            starts = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
            ids = lab[starts]
            dist = np.linalg.norm(self.embeddings[part] - self.centroids[lab], axis=1)
            self.radius[ids] = np.maximum(self.radius[ids], np.maximum.reduceat(dist, starts))
            if attribute_probs is not None:
                r = normalised_probs(attribute_probs[self.perm[part]])
                self.r_max[ids] = np.maximum(self.r_max[ids], np.maximum.reduceat(r, starts, axis=0))
                self.r_min[ids] = np.minimum(self.r_min[ids], np.minimum.reduceat(r, starts, axis=0))

    def __len__(self) -> int:
        return len(self.perm)

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """((n, D) embeddings, (n, L) probabilities or None) of gallery ``rows``, read from the
        list-contiguous copies: the rows a search returns lie in the lists it has just read (in
        cache, near each other), where the gallery's own arrays hold them scattered (a 2,000-row
        gather from a memory-mapped 1M gallery: 2.0 ms there, 0.7 ms here). Same values, same
        dtypes as the arrays the index was built from.

        Example:
            >>> rng = np.random.default_rng(2)
            >>> emb = rng.normal(size=(30, 4)).astype(np.float32)
            >>> ivf = FusedIVF(emb, None, nlist=3)
            >>> bool((ivf.gather(np.array([7, 2]))[0] == emb[[7, 2]]).all())
            True
        """
        if self._positions is None:  # (N,) gallery row -> its position in the lists; built once
            positions = np.empty(len(self.perm), np.int32 if len(self.perm) < 2**31 else np.int64)
            positions[self.perm] = np.arange(len(self.perm), dtype=positions.dtype)
            self._positions = positions  # one assignment: a thread that built it too wrote the same
        at = self._positions[np.asarray(rows, np.int64)]
        return self.embeddings[at], None if self.probs_perm is None else self.probs_perm[at]

    def _assign(self, emb: np.ndarray, faiss: Any = None) -> np.ndarray:
        """(N,) each row's nearest centroid (L2). Any assignment is valid: the bounds are taken over the
        lists as assigned, so faiss and numpy may break near-ties differently."""
        out = np.empty(len(emb), np.int64)
        if faiss is not None:  # blocked distance + argmin inside faiss: no (chunk, nlist) matrix in numpy
            flat = faiss.IndexFlatL2(self.centroids.shape[1])
            flat.add(np.ascontiguousarray(self.centroids))
            for start in range(0, len(emb), _CHUNK):
                out[start : start + _CHUNK] = flat.search(np.ascontiguousarray(emb[start : start + _CHUNK]), 1)[1][:, 0]
            return out
        half = 0.5 * (self.centroids**2).sum(axis=1)  # nearest centroid in L2: argmax x.c - |c|^2 / 2
        for start in range(0, len(emb), _CHUNK):
            out[start : start + _CHUNK] = np.argmax(emb[start : start + _CHUNK] @ self.centroids.T - half, axis=1)
        return out

    # ------------------------------------------------------------------ persistence
    def parts(self) -> dict[str, np.ndarray]:
        """The arrays that make the index (what a gallery store saves): name -> array, see :data:`PARTS`."""
        out = {name: getattr(self, attr) for name, (attr, _) in PARTS.items()}
        return {name: value for name, value in out.items() if value is not None}

    def params(self) -> dict[str, Any]:
        """The search settings and how the lists were made (JSON)."""
        return {"nlist": self.nlist, "nprobe": self.nprobe, "max_probe": self.max_probe, "kmeans": self.kmeans}

    @classmethod
    def from_parts(
        cls, parts: Mapping[str, np.ndarray], attribute_probs: np.ndarray | None, params: Mapping[str, Any]
    ) -> "FusedIVF":
        """The index :meth:`parts` and :meth:`params` describe (arrays may be memory-mapped, read-only),
        over a gallery with ``attribute_probs``. InputError when the arrays do not fit together.

        Example:
            >>> rng = np.random.default_rng(1)
            >>> emb = rng.normal(size=(50, 4)).astype(np.float32); emb /= np.linalg.norm(emb, axis=1, keepdims=True)
            >>> ivf = FusedIVF(emb, None, nlist=5, nprobe=2)
            >>> again = FusedIVF.from_parts(ivf.parts(), None, ivf.params())
            >>> top = lambda index: index.search(emb[0], (), 0.0, 0.02, 3).rows.tolist()
            >>> top(again) == top(ivf)
            True
        """
        ivf = object.__new__(cls)
        missing = [
            name
            for name, (_, need) in PARTS.items()
            if name not in parts and (need == "always" or (need == "probs") == (attribute_probs is not None))
        ]
        if missing:
            raise InputError(f"FusedIVF: the part {missing[0]!r} is missing")
        for name, (attr, _) in PARTS.items():
            setattr(ivf, attr, parts.get(name) if attribute_probs is not None or name in _PLAIN else None)
        ivf.probs, ivf._positions = attribute_probs, None
        ivf.nlist, ivf.nprobe = int(params["nlist"]), int(params["nprobe"])
        ivf.max_probe, ivf.kmeans = int(params["max_probe"]), str(params.get("kmeans", "numpy"))
        ivf._check()
        return ivf

    def _check(self) -> None:
        """InputError unless the parts have the shapes and dtypes of one index (O(N): the permutation is checked)."""
        emb = self.embeddings
        if emb.ndim != 2 or emb.dtype != np.float32 or not 1 <= self.nlist <= len(emb):
            raise InputError(
                f"FusedIVF: the part 'embeddings' is {self.embeddings.dtype} {self.embeddings.shape}, "
                f"expected float32 (N, D) with N >= nlist = {self.nlist}"
            )
        n, dim = self.embeddings.shape
        want = {
            "centroids": ((self.nlist, dim), np.float32),
            "perm": ((n,), np.int64),
            "offsets": ((self.nlist + 1,), np.int64),
            "radius": ((self.nlist,), np.float64),
        }
        if self.probs is not None:
            labels = self.probs.shape[1]
            want.update(
                {
                    "probs": ((n, labels), np.float32),
                    "r_max": ((self.nlist, labels), np.float64),
                    "r_min": ((self.nlist, labels), np.float64),
                }
            )
        for name, (shape, dtype) in want.items():
            value = getattr(self, PARTS[name][0])
            if value.shape != shape or value.dtype != dtype:
                raise InputError(
                    f"FusedIVF: the part {name!r} is {value.dtype} {value.shape}, expected {np.dtype(dtype)} {shape}"
                )
        if self.probs is not None and len(self.probs) != n:
            raise InputError(f"FusedIVF: the lists hold {n} rows, the gallery {len(self.probs)}")
        if not (
            self.nprobe >= 1
            and self.max_probe >= self.nprobe
            and self.offsets[0] == 0
            and self.offsets[-1] == n
            and bool((np.diff(self.offsets) >= 0).all())
        ):
            raise InputError("FusedIVF: the list offsets or probe settings are inconsistent")
        if n and (self.perm.min() < 0 or self.perm.max() >= n or not (np.bincount(self.perm, minlength=n) == 1).all()):
            raise InputError("FusedIVF: the list rows are not a permutation of the gallery's rows")

    def attribute_bounds(self, facts: Sequence[Fact], floor: float) -> np.ndarray:
        """(nlist,) the most Σ_facts log P(fact | image) can be for an image of each list."""
        bound = np.zeros(self.nlist)
        if self.r_max is None:
            return bound
        for fact in dict.fromkeys(facts):
            cols = chosen_columns(fact)
            if SINGLE[fact.slot]:
                p = (1.0 - self.r_min[:, cols].sum(axis=1)) if fact.negated else self.r_max[:, cols].sum(axis=1)
            elif fact.negated:
                p = np.prod(1.0 - self.r_min[:, cols], axis=1)
            else:
                p = 1.0 - np.prod(1.0 - self.r_max[:, cols], axis=1)
            bound += np.log(np.clip(p + _SLACK, floor, 1.0 - floor))
        return bound

    def search(self, query: np.ndarray, facts: Sequence[Fact], weight: float, floor: float, k: int) -> FusedHits:
        """The top-k of ``cos(query, e) + weight · Σ_facts log P(fact | image)`` over the lists probed."""
        query = np.asarray(query, np.float32)
        facts = tuple(dict.fromkeys(facts)) if (self.probs is not None and weight) else ()
        k = max(1, min(int(k), len(self)))
        attr = weight * self.attribute_bounds(facts, floor) if facts else np.zeros(self.nlist)
        centre = self.centroids @ query  # (nlist,)
        order = np.argsort(-(centre + attr), kind="stable")
        upper = (centre + self.radius + attr)[order]  # bound of each list, in probing order
        sizes = np.diff(self.offsets)[order]
        count = max(self.nprobe, int(np.searchsorted(np.cumsum(sizes), k)) + 1)  # enough lists for k rows
        rows = np.zeros(0, np.int64)
        scores = np.zeros(0)
        done = 0
        while True:
            count = min(count, self.nlist)
            new_rows, new_scores = self._score(order[done:count], query, facts, weight, floor)
            rows, scores = np.concatenate([rows, new_rows]), np.concatenate([scores, new_scores])
            done = count
            keep = min(k, len(rows))
            top = np.argpartition(scores, len(rows) - keep)[len(rows) - keep :]
            top = top[np.argsort(-scores[top], kind="stable")]
            kth = scores[top[-1]]
            certified = done >= self.nlist or (keep >= k and kth >= float(upper[done:].max()))
            if certified or done >= min(self.max_probe, self.nlist):
                return FusedHits(rows[top], scores[top], bool(certified), len(rows))
            count = min(2 * done, self.max_probe)

    def _score(
        self, lists: np.ndarray, query: np.ndarray, facts: Sequence[Fact], weight: float, floor: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """(n,) gallery rows of ``lists`` and their (n,) fused scores."""
        spans = [(int(self.offsets[j]), int(self.offsets[j + 1])) for j in lists.tolist()]
        total = sum(b - a for a, b in spans)
        cos = np.empty(total, np.float32)
        at = 0
        for a, b in spans:  # contiguous blocks: no gather of the embedding rows
            cos[at : at + b - a] = self.embeddings[a:b] @ query
            at += b - a
        rows = self.perm[np.concatenate([np.arange(a, b) for a, b in spans])] if spans else np.zeros(0, np.int64)
        scores = cos.astype(np.float64)
        if facts:
            probs = np.concatenate([self.probs_perm[a:b] for a, b in spans])  # (n, L) contiguous copies
            loglik = np.zeros(total)
            for fact in facts:  # first-mention order, as rerank sums them
                loglik += fact_log_likelihood(fact, probs, floor)
            scores += weight * loglik
        return rows, scores


def _faiss() -> Any:
    """The faiss module, or None when it is not installed (the numpy k-means is used then)."""
    try:
        import faiss
    except ImportError:
        return None
    return faiss


def _kmeans(emb: np.ndarray, nlist: int, iterations: int, seed: int, faiss: Any = None) -> np.ndarray:
    """(nlist, D) k-means centroids (Lloyd on a sample of at most 32 rows per list; ``faiss``: its
    ``Kmeans`` on the same sample, else numpy)."""
    rng = np.random.default_rng(seed)
    n = len(emb)
    sample = emb[np.sort(rng.choice(n, min(n, max(32 * nlist, 10_000)), replace=False))]
    if faiss is not None:
        km = faiss.Kmeans(
            emb.shape[1],
            nlist,
            niter=iterations,
            seed=seed,
            verbose=False,
            max_points_per_centroid=len(sample),
            min_points_per_centroid=1,
        )  # the sample as it is
        km.train(np.ascontiguousarray(sample))
        return np.ascontiguousarray(km.centroids, dtype=np.float32)
    centroids = sample[rng.choice(len(sample), nlist, replace=False)].copy()
    for _ in range(iterations):
        half = 0.5 * (centroids**2).sum(axis=1)
        labels = np.empty(len(sample), np.int64)
        for start in range(0, len(sample), _CHUNK):
            labels[start : start + _CHUNK] = np.argmax(sample[start : start + _CHUNK] @ centroids.T - half, axis=1)
        order = np.argsort(labels, kind="stable")
        lab = labels[order]
        starts = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])  # each non-empty list once
        sums = np.add.reduceat(sample[order].astype(np.float64), starts, axis=0)
        counts = np.diff(np.r_[starts, len(lab)])
        centroids[lab[starts]] = (sums / counts[:, None]).astype(np.float32)  # an empty list keeps its centroid
    return centroids
