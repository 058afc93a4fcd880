"""Time retrieval_metrics_from_embeddings on random embeddings and print seconds and peak memory.

The full-size default (10,000 queries x 100,000 gallery, dim 256) is what a large person
retrieval protocol needs; the (Q, G) float32 score matrix alone would be 4 GB, which the chunked
path never builds.

Usage:
    python benchmarks/bench_metrics.py --queries 1000 --gallery 10000
    python benchmarks/bench_metrics.py  # 10k x 100k x 256
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import numpy as np

from minterpr.evaluation.metrics import DEFAULT_CHUNK_SIZE, retrieval_metrics_from_embeddings


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def random_unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim), dtype=np.float32)  # (n, dim)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000, help="number of queries Q")
    parser.add_argument("--gallery", type=int, default=100_000, help="number of gallery images G")
    parser.add_argument("--dim", type=int, default=256, help="embedding dimension")
    parser.add_argument(
        "--identities", type=int, default=10_000, help="gallery person ids are drawn from 0..identities-1"
    )
    parser.add_argument(
        "--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE, help="queries scored and ranked at a time"
    )
    parser.add_argument(
        "--noise", type=float, default=3.5, help="query = its anchor gallery image + noise * random unit vector"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    gallery_pids = rng.integers(0, args.identities, size=args.gallery)
    gallery = random_unit(rng, args.gallery, args.dim)  # (G, D)
    # each query is a noisy copy of one gallery image and takes its person id, so every query
    # has a true match and the metrics are not all ~0
    anchor = rng.integers(0, args.gallery, size=args.queries)
    query_pids = gallery_pids[anchor]
    queries = gallery[anchor] + args.noise * random_unit(rng, args.queries, args.dim)  # (Q, D)
    setup_rss = peak_rss_mib()

    start = time.perf_counter()
    metrics = retrieval_metrics_from_embeddings(queries, gallery, query_pids, gallery_pids, chunk_size=args.chunk_size)
    seconds = time.perf_counter() - start

    print(
        f"queries={args.queries} gallery={args.gallery} dim={args.dim} "
        f"identities={args.identities} chunk_size={args.chunk_size}"
    )
    print("metrics: " + " ".join(f"{k}={v:.2f}" for k, v in metrics.items()))
    print(f"seconds: {seconds:.2f} ({1e3 * seconds / args.queries:.3f} ms per query)")
    print(
        f"peak RSS: {peak_rss_mib():.0f} MiB (after building the inputs: {setup_rss:.0f} MiB; "
        f"the full score matrix would be {args.queries * args.gallery * 4 / 2**20:.0f} MiB)"
    )


if __name__ == "__main__":
    main()
