"""Benchmark the local vector indexes (exact fp32/fp16/mmap, FAISS HNSW, FAISS IVF-PQ) at N rows.

Per backend and N: build time (add, training included), bytes saved on disk, RSS growth, search
latency p50/p95 for one query at k=10 and k=2000, recall@10 against the exact fp32 top-10,
filtered-search latency (camera; camera + time window), save and reopen time.

Vectors (D=256, L2-normalised): a synthetic mixture of Gaussians generated in blocks (10M rows
stream without a second copy), or ``--embeddings FILE.npy`` (real embeddings of a trained model,
tiled to N rows with small noise; queries are the real embeddings with other noise). Make the
file once with::

    python -c "import numpy as np, minterpr; from minterpr.data.formats.gallery import read_gallery; \
p = minterpr.load_pipeline('/work/runs/synth'); \
ix = p.index_images(read_gallery('/work/data/synth/gallery_test.jsonl'), root='/work/data/synth'); \
np.save('emb.npy', ix.embeddings)"

Usage:
    python benchmarks/bench_vector_index.py --n 10000 100000 1000000
    python benchmarks/bench_vector_index.py --n 100000 --embeddings emb.npy
    python benchmarks/bench_vector_index.py --n 10000000 --backends faiss_ivfpq exact_mmap --no-metadata
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from minterpr.index.vectors.exact import ExactIndex
from minterpr.index.vectors.row_store import exact_top_k
from minterpr.index.vectors.vector_index import Range, load_vector_index

DIM = 256
BLOCK = 250_000  # rows generated / added per block
T0 = datetime(2026, 12, 1)
SYNTH_NOISE = 0.05  # per-dimension noise around 2,000 unit centres (noise norm 0.8: overlapping clusters)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


class Source:
    """Rows [start, stop) of the benchmark gallery, reproducible block by block, and the queries."""

    def __init__(self, n: int, embeddings: str | None, seed: int = 0, queries: int = 200) -> None:
        self.n, self.seed = n, seed
        rng = np.random.default_rng(seed)
        if embeddings:
            base = unit(np.load(embeddings).astype(np.float32))
            self.base, self.noise = base, 0.03
            self.queries = unit(
                base[rng.integers(len(base), size=queries)] + 0.03 * rng.normal(size=(queries, base.shape[1]))
            )
        else:
            self.base, self.noise = unit(rng.normal(size=(2000, DIM))), SYNTH_NOISE
            self.queries = unit(
                self.base[rng.integers(2000, size=queries)] + SYNTH_NOISE * rng.normal(size=(queries, DIM))
            )

    @property
    def dim(self) -> int:
        return self.base.shape[1]

    def block(self, start: int, stop: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, start])
        if self.noise == 0.03:  # tiled real embeddings
            centre = self.base[np.arange(start, stop) % len(self.base)]
        else:
            centre = self.base[rng.integers(len(self.base), size=stop - start)]
        return unit(centre + self.noise * rng.normal(size=(stop - start, self.dim)).astype(np.float32))

    def blocks(self):
        for start in range(0, self.n, BLOCK):
            stop = min(self.n, start + BLOCK)
            yield start, stop, self.block(start, stop)


def metadata(start: int, stop: int) -> list[dict]:
    return [{"camera": f"cam{i % 8}", "time": (T0 + timedelta(seconds=i)).isoformat()} for i in range(start, stop)]


def ground_truth(source: Source, k: int = 10) -> np.ndarray:
    rows, scores = np.empty((len(source.queries), 0), np.int64), np.empty((len(source.queries), 0), np.float32)
    for start, _, block in source.blocks():
        r, s = exact_top_k(block, source.queries, k)
        rows, scores = np.concatenate([rows, r + start], 1), np.concatenate([scores, s], 1)
    order = np.argsort(-scores, axis=1)[:, :k]
    return np.take_along_axis(rows, order, 1)


def make(name: str, dim: int, args):
    if name in ("exact", "exact_mmap", "exact_fp16"):
        return ExactIndex(dim, dtype="float32" if name == "exact" else "float16")
    from minterpr.index.vectors.faiss_index import FaissHNSWIndex, FaissIVFPQIndex

    if name == "faiss_hnsw":
        return FaissHNSWIndex(dim, M=args.hnsw_m, ef_construction=args.ef_construction, ef_search=args.ef_search)
    return FaissIVFPQIndex(dim, nlist=args.nlist, m=args.pq_m, nprobe=args.nprobe)


def latency(fn, queries: np.ndarray, repeat: int) -> tuple[float, float]:
    times = []
    for i in range(repeat):
        t = time.perf_counter()
        fn(queries[i % len(queries)][None])
        times.append(1000 * (time.perf_counter() - t))
    return float(np.percentile(times, 50)), float(np.percentile(times, 95))


def run_one(name: str, source: Source, truth: np.ndarray, args) -> dict:
    gc.collect()
    rss0, t0 = rss_bytes(), time.perf_counter()
    index = make(name, source.dim, args)
    for start, stop, block in source.blocks():
        index.add(block, np.arange(start, stop), None if args.no_metadata else metadata(start, stop))
    build = time.perf_counter() - t0
    folder = Path(tempfile.mkdtemp(dir=args.tmp))
    t = time.perf_counter()
    index.save(folder / "ix")
    save = time.perf_counter() - t
    stored = sum(p.stat().st_size for p in (folder / "ix").iterdir())
    rss = rss_bytes() - rss0
    if name == "exact_mmap":  # search the memory-mapped copy
        del index
        gc.collect()
    t = time.perf_counter()
    reopened = load_vector_index(folder / "ix", mmap=name == "exact_mmap")
    reopen = time.perf_counter() - t
    index = reopened
    found = np.concatenate(
        [index.search(source.queries[i : i + 50], 10).ids for i in range(0, len(source.queries), 50)]
    )
    recall = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(truth, found)]))
    out = {
        "backend": name,
        "n": source.n,
        "build_s": build,
        "save_s": save,
        "reopen_s": reopen,
        "stored_mb": stored / 2**20,
        "rss_growth_mb": rss / 2**20,
        "recall@10": recall,
    }
    q = source.queries
    out["k10_p50_ms"], out["k10_p95_ms"] = latency(lambda x: index.search(x, 10), q, args.repeat)
    out["k2000_p50_ms"], out["k2000_p95_ms"] = latency(lambda x: index.search(x, 2000), q, max(5, args.repeat // 4))
    if not args.no_metadata:
        window = Range(
            (T0 + timedelta(seconds=source.n // 4)).isoformat(), (T0 + timedelta(seconds=source.n // 2)).isoformat()
        )
        index.search(q[:1], 10, where={"camera": "cam3"})  # first use of the keys builds the columns
        index.search(q[:1], 10, where={"time": window})
        out["cam_k10_p50_ms"], out["cam_k10_p95_ms"] = latency(
            lambda x: index.search(x, 10, where={"camera": "cam3"}), q, args.repeat
        )
        out["camtime_k10_p50_ms"], out["camtime_k10_p95_ms"] = latency(
            lambda x: index.search(x, 10, where={"camera": "cam3", "time": window}), q, args.repeat
        )
    del index, reopened
    shutil.rmtree(folder, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument(
        "--backends", nargs="+", default=["exact", "exact_fp16", "exact_mmap", "faiss_hnsw", "faiss_ivfpq"]
    )
    parser.add_argument("--hnsw-max-n", type=int, default=200_000, help="skip HNSW above this N (slow build)")
    parser.add_argument("--embeddings", help="(M, D) .npy of real embeddings, tiled with noise to N")
    parser.add_argument("--no-metadata", action="store_true", help="no metadata (and no filtered timings)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=100, help="single-query searches timed per figure")
    parser.add_argument("--hnsw-m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=100)
    parser.add_argument("--ef-search", type=int, default=128)
    parser.add_argument("--nlist", type=int, default=None)
    parser.add_argument("--pq-m", type=int, default=32)
    parser.add_argument("--nprobe", type=int, default=32)
    parser.add_argument("--tmp", default=None, help="folder for the saved indexes")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    rows = []
    for n in args.n:
        source = Source(n, args.embeddings, queries=args.queries)
        t = time.perf_counter()
        truth = ground_truth(source)
        print(
            f"N={n:,} D={source.dim} ({'embeddings ' + args.embeddings if args.embeddings else 'synthetic'}): "
            f"ground truth {time.perf_counter() - t:.1f}s",
            flush=True,
        )
        for name in args.backends:
            if name == "faiss_hnsw" and n > args.hnsw_max_n:
                continue
            row = run_one(name, source, truth, args)
            rows.append(row)
            print(
                "  " + " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
