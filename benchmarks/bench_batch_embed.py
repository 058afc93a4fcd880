"""Figures for docs/scale.md: batch gallery embedding (local vs Ray Data) and Qdrant local mode.

    python benchmarks/bench_batch_embed.py embed --run /work/runs/synth --data /work/data/synth
    python benchmarks/bench_batch_embed.py qdrant --sizes 50000 200000 --dim 256
    python benchmarks/bench_batch_embed.py embed ... --executors local ray --json

``embed``: images/s of ``embed_gallery`` over the test gallery of a synthetic dataset (tiled to
``--images`` when larger), per executor, each into a fresh folder, after one warm-up batch; Ray's
figure includes its actors' model loading (what a job pays), ``ray.init`` is timed apart.
``qdrant``: insert rate, top-10 search latency (unfiltered and with a camera + time-window
filter) and the Python process's resident memory for N synthetic 256-d unit vectors in Qdrant's
local (``:memory:``) mode, against the exact numpy scan of the same vectors.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time

import numpy as np


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB


def bench_embed(args: argparse.Namespace) -> list[dict]:
    import torch

    from minterpr.runtime.batch_embed import embed_gallery
    from minterpr.data.dataset import BuiltDataset

    torch.set_num_threads(args.threads)
    gallery = BuiltDataset(args.data).gallery("test")
    paths = [g.path for g in gallery]
    images = paths if args.images <= len(paths) else paths * (args.images // len(paths) + 1)
    images = images[: args.images]
    if len(set(images)) < len(images):  # tiled: each path once per gallery, so tile through symlinks
        print(f"--images {args.images} > gallery {len(paths)}: using {len(paths)}", file=sys.stderr)
        images = paths
    rows = []
    for executor in args.executors:
        extra = {}
        if executor == "ray":
            import ray

            start = time.perf_counter()
            ray.init(num_cpus=args.num_actors, include_dashboard=False, log_to_driver=False)
            extra["ray_init_s"] = round(time.perf_counter() - start, 2)
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            result = embed_gallery(
                args.run,
                images,
                args.data,
                out,
                executor=executor,
                batch_size=args.batch_size,
                shard_size=args.shard_size,
                num_actors=args.num_actors,
                progress=False,
            )
            seconds = time.perf_counter() - start
        rows.append(
            {
                "bench": "embed",
                "executor": executor,
                "images": len(images),
                "seconds": round(seconds, 2),
                "images_per_s": round(len(images) / seconds, 1),
                "skipped": len(result.skipped),
                "batch_size": args.batch_size,
                "num_actors": args.num_actors if executor == "ray" else 1,
                "torch_threads": args.threads,
                **extra,
            }
        )
        if executor == "ray":
            ray.shutdown()
    return rows


def bench_qdrant(args: argparse.Namespace) -> list[dict]:
    from minterpr.index.vectors.qdrant_index import QdrantIndex
    from minterpr.index.vectors.vector_index import Range

    rows = []
    rng = np.random.default_rng(0)
    for n in args.sizes:
        vectors = rng.normal(size=(n, args.dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        metadata = [
            {"camera": f"cam{i % 20}", "time": f"2026-12-01T{(i // 60) % 24:02d}:{i % 60:02d}:00"} for i in range(n)
        ]
        queries = vectors[rng.choice(n, args.queries, replace=False)] + 0.01
        before = rss_mb()
        index = QdrantIndex(args.dim)
        start = time.perf_counter()
        index.add(vectors, np.arange(n), metadata)
        insert_s = time.perf_counter() - start
        after = rss_mb()

        def timed(where=None) -> float:
            start = time.perf_counter()
            for q in queries:
                index.search(q[None], 10, where=where)
            return (time.perf_counter() - start) / len(queries) * 1000

        plain_ms = timed()
        filtered_ms = timed({"camera": ["cam1", "cam2"], "time": Range("2026-12-01T08:00:00", "2026-12-01T12:00:00")})
        start = time.perf_counter()
        for q in queries:
            np.argpartition(-(vectors @ q), 10)[:10]
        scan_ms = (time.perf_counter() - start) / len(queries) * 1000
        rows.append(
            {
                "bench": "qdrant_local",
                "n": n,
                "dim": args.dim,
                "insert_s": round(insert_s, 1),
                "insert_per_s": round(n / insert_s),
                "search_ms": round(plain_ms, 2),
                "filtered_search_ms": round(filtered_ms, 1),
                "numpy_scan_ms": round(scan_ms, 2),
                "peak_rss_growth_mb": round(after - before),
                "bytes_per_vector": round((after - before) * 2**20 / n),
            }
        )
        index.close()
        del index
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    embed = sub.add_parser("embed")
    embed.add_argument("--run", default="/work/runs/synth")
    embed.add_argument("--data", default="/work/data/synth")
    embed.add_argument("--images", type=int, default=886, help="gallery images (the test gallery has 886)")
    embed.add_argument(
        "--executors",
        nargs="+",
        default=["local", "ray"],
        choices=["local", "ray"],
        help="where embed_gallery runs the model (its executor)",
    )
    embed.add_argument("--batch-size", type=int, default=64)
    embed.add_argument("--shard-size", type=int, default=256)
    embed.add_argument("--num-actors", type=int, default=2)
    embed.add_argument("--threads", type=int, default=2, help="torch threads of the local executor")
    qdrant = sub.add_parser("qdrant")
    qdrant.add_argument("--sizes", type=int, nargs="+", default=[50_000, 200_000])
    qdrant.add_argument("--dim", type=int, default=256)
    qdrant.add_argument("--queries", type=int, default=20)
    for p in (embed, qdrant):
        p.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args()
    rows = bench_embed(args) if args.what == "embed" else bench_qdrant(args)
    for row in rows:
        print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
