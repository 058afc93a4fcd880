"""Turn latency of interactive sessions from 10k to 1M gallery images: the exact path against a shortlist.

The demo-like model's test gallery is embedded once, then tiled with small Gaussian noise to N
rows (attribute probabilities tiled too: every tile is a near-duplicate of its original, as
the frames of one tracked person are). Sessions of describe + 3 turns (answer / feedback that
rejects a shown image / answer) run through the public API; a simulated user (the ``oracle``
simulator, told the target is someone not in the gallery, so it rejects whatever it is shown)
speaks. Each session runs first on the exact path; the same turns are then fed to a session on
a shortlist — exact ``argpartition`` over one cosine scan (``fused=False``), each ANN backend
registered in ``VECTOR_INDEXES`` (cosine search), the fused search (cosine + attribute evidence,
the default) by one exact scan, and the fused search by :class:`~minterpr.index.fused_ivf.FusedIVF`
— so the final rankings compare like with like (recall@10 of the shortlist's final top-10 against
the exact path's). ``--persist``: the FusedIVF path runs on a gallery store (saved with its fused
index to a temporary folder, then reopened memory-mapped, as ``chat --index`` and the service open
one); build, save and reopen seconds are printed.

Printed per N and path: turn p50 / p95 (ms), the floor (one exact N×D matrix–vector product plus
top-10, measured in the same run), p50 / floor, the text encoding's p50 and the text cache's hit
rate (texts looked up that were cached), recall@10 and the candidates a turn ranked (mean). The
text cache is emptied for every session (a session's own earlier texts are what it hits: each
turn re-encodes the whole conversation); ``--no-text-cache`` turns it off (every text encoded on
every turn: the uncached figure). ``--text-precision int8`` runs the query text encoder with int8
weights (the opt-in of ``load_pipeline``); ``--threads 2`` gives torch, BLAS and ONNX Runtime two
threads (the whole 2-core machine; the default, 1, is steady on a shared one).

Usage:
    python benchmarks/bench_turn_latency.py --sizes 10000,100000,1000000
    python benchmarks/bench_turn_latency.py --sizes 10000 --sessions 3 --json out.json
    python benchmarks/bench_turn_latency.py --sizes 1000000 --backends "" --fused-ivf-options '{"nprobe": 32}'
    python benchmarks/bench_turn_latency.py --sizes 100000 --backends "" --persist --no-text-cache
    python benchmarks/bench_turn_latency.py --sizes 1000000 --backends "" --persist --text-precision int8
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import pkgutil
import resource
import sys
import tempfile
import time
from dataclasses import replace
from typing import Any

import numpy as np

from minterpr import load_pipeline
from minterpr.data.dataset import BuiltDataset
from minterpr.index.fused_ivf import FusedIVF
from minterpr.index.gallery_index import GalleryIndex
from minterpr.index.store.gallery_store import open_gallery, save_gallery
from minterpr.index.vectors.vector_index import VECTOR_INDEXES
from minterpr.interaction.session import Session
from minterpr.interaction.shortlist import ShortlistConfig
from minterpr.interaction.simulators import SIMULATORS

from bench_timing import TextCounts, TimedBackend  # beside this script

SCHEDULE = ("question", "reference", "question")  # the 3 system moves after the description


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def new_session(pipe: Any, index: GalleryIndex, shortlist: ShortlistConfig | None, seed: int) -> Session:
    """A session as ``pipe.session`` makes it, its text encoder's cache emptied (every path encodes its texts)."""
    cache = getattr(pipe.backend, "_text_cache", None)
    if cache is not None:
        cache.clear()
    return Session(
        TimedBackend(pipe.backend),
        index,
        reranking=pipe.rerank_config(),
        shortlist=shortlist,
        schedule=SCHEDULE,
        seed=seed,
    )


def timed(session: Session, move: Any) -> tuple[Any, float, float, int, int]:
    """(step, turn seconds, encoding seconds, texts looked up, of which cached) of one move."""
    t = time.perf_counter()
    step = move()
    return step, time.perf_counter() - t, session.backend.last, *session.backend.hits


def register_backends() -> list[str]:
    """Import every ``minterpr.index`` module so the VectorIndex backends register themselves."""
    import minterpr.index as package

    for info in pkgutil.iter_modules(package.__path__):
        try:
            importlib.import_module(f"minterpr.index.{info.name}")
        except Exception as err:  # an optional dependency missing: that backend is simply not measured
            print(f"# skipped minterpr.index.{info.name}: {type(err).__name__}: {err}", file=sys.stderr)
    return VECTOR_INDEXES.names()


def tile(base: GalleryIndex, n: int, noise: float, seed: int) -> GalleryIndex:
    """``base`` repeated to n rows; each copy's embedding gets N(0, noise²) per dimension, renormalised."""
    rng = np.random.default_rng(seed)
    b = len(base)
    reps = math.ceil(n / b)
    emb = np.empty((n, base.embeddings.shape[1]), dtype=np.float32)  # (N, D)
    chunk = 65_536
    for start in range(0, n, chunk):
        rows = np.arange(start, min(n, start + chunk))
        block = base.embeddings[rows % b] + rng.standard_normal((len(rows), emb.shape[1]), dtype=np.float32) * noise
        block[rows < b] = base.embeddings[rows[rows < b]]  # the first tile is the gallery itself
        emb[rows] = block / np.linalg.norm(block, axis=1, keepdims=True)
    probs = None if base.attribute_probs is None else np.tile(base.attribute_probs.astype(np.float32), (reps, 1))[:n]
    images = [
        base.images[i % b] if i < b else replace(base.images[i % b], path=f"tile{i // b}/{base.images[i % b].path}")
        for i in range(n)
    ]
    return GalleryIndex(images, emb, probs, base.root)


def scan_floor(index: GalleryIndex, queries: np.ndarray, repeats: int = 5) -> float:
    """Median seconds of one exact scan: (N, D) @ (D,) plus the top-10, sorted."""
    times = []
    for _ in range(repeats):
        for q in queries:
            t = time.perf_counter()
            s = index.embeddings @ q
            top = np.argpartition(s, len(s) - 10)[-10:]
            top[np.argsort(-s[top])]
            times.append(time.perf_counter() - t)
    return float(np.median(times))


def exact_session(pipe: Any, index: GalleryIndex, target: Any, seed: int) -> tuple[list[Any], list[tuple], Any]:
    """Describe + 3 turns on the exact path: (history, per-turn (turn, encode) seconds, final step)."""
    session = new_session(pipe, index, None, seed)
    stranger = replace(target, person_id="__not_in_the_gallery__")  # never recognised: shown images are rejected
    user = SIMULATORS.create("oracle").user(stranger, index, query=seed, seed=seed)
    step, *t = timed(session, lambda: session.describe(user.describe()))
    times = [tuple(t)]
    for _ in range(3):
        turn = user.respond(step.action)
        if turn is None:
            break
        step, *t = timed(session, lambda: session.add(turn))
        times.append(tuple(t))
    return session.history, times, step


def replayed(
    pipe: Any, index: GalleryIndex, history: list[Any], seed: int, shortlist: ShortlistConfig
) -> tuple[list[tuple], Any]:
    """The same turns (recorded facts) on a shortlist session: per-turn (turn, encode) seconds, final step."""
    session = new_session(pipe, index, shortlist, seed)
    times = []
    for entry in history:
        step, *t = timed(session, lambda: session.add(entry.turn, facts=entry.facts))
        times.append((*t, len(step.ranking)))
    return times, step


def summary(times: list[tuple]) -> dict[str, float]:
    rows = np.asarray(times, dtype=np.float64)  # (turns, [turn s, encode s, looked up, cached(, candidates)])
    ms = rows[:, :2] * 1e3  # (turns, [turn, encode])
    extra = {"candidates_mean": float(rows[:, 4].mean())} if rows.shape[1] > 4 else {}
    extra["text_cache_hit_rate"] = float(rows[:, 3].sum() / max(rows[:, 2].sum(), 1))
    rank = ms[:, 0] - ms[:, 1]
    return {
        "p50_ms": float(np.percentile(ms[:, 0], 50)),
        "p95_ms": float(np.percentile(ms[:, 0], 95)),
        "encode_p50_ms": float(np.percentile(ms[:, 1], 50)),
        "rank_p50_ms": float(np.percentile(rank, 50)),
        "rank_p95_ms": float(np.percentile(rank, 95)),
        "turns": len(ms),
        **extra,
    }


def build_ann(name: str, index: GalleryIndex, options: dict[str, Any]) -> tuple[Any, float]:
    """A VECTOR_INDEXES backend holding the gallery under ids 0..N-1, and its build seconds."""
    t = time.perf_counter()
    vectors = VECTOR_INDEXES.create(name, dim=index.embeddings.shape[1], **options)
    vectors.add(index.embeddings, np.arange(len(index), dtype=np.int64))
    return vectors, time.perf_counter() - t


def run_size(pipe: Any, base: GalleryIndex, n: int, args: argparse.Namespace, backends: list[str]) -> dict[str, Any]:
    t = time.perf_counter()
    index = tile(base, n, args.noise, args.seed)
    result: dict[str, Any] = {"n": n, "tile_s": time.perf_counter() - t, "paths": {}}
    rng = np.random.default_rng(args.seed)
    targets = [base.images[int(i)] for i in rng.choice(len(base), size=args.sessions, replace=False)]
    result["scan_ms"] = 1e3 * scan_floor(index, index.embeddings[rng.choice(n, 8, replace=False)])
    new_session(pipe, index, None, 0).describe("a person")  # warm-up: first text encoding, BLAS threads
    conversations, exact_times, exact_final = [], [], []
    for s, target in enumerate(targets):
        history, times, step = exact_session(pipe, index, target, args.seed + s)
        conversations.append(history)
        exact_times += times
        exact_final.append(step.ranking[:10])
    result["paths"]["exact"] = {**summary(exact_times), "recall10": 1.0}
    fused = ShortlistConfig(
        size=args.shortlist,
        min_gallery=0,
        anchor_search=not args.no_anchor_search,
        certify=args.certify,
        max_size=args.max_size or None,
    )  # the default: fused
    shortlist = replace(fused, fused=False)  # the cosine search
    variants: list[tuple[str, GalleryIndex, ShortlistConfig]] = []
    if not args.no_cosine:
        variants.append(("shortlist", index, shortlist))
    variants.append(("shortlist+fused scan", index, fused))
    store = None
    if not args.no_fused_ivf:
        t = time.perf_counter()
        ivf = FusedIVF(index.embeddings, index.attribute_probs, **args.fused_ivf_options)
        result.setdefault("build_s", {})["fused_ivf"] = time.perf_counter() - t
        label, gallery = (
            "shortlist+fused IVF",
            GalleryIndex(index.images, index.embeddings, index.attribute_probs, index.root, fused=ivf),
        )
        if args.persist:  # through a store: saved with its fused index, reopened memory-mapped
            store = tempfile.TemporaryDirectory(prefix="bench-turn-store-")
            t = time.perf_counter()
            save_gallery(index, store.name, model_fingerprint="bench", fused_index=ivf)
            result["store_save_s"] = time.perf_counter() - t
            del ivf, gallery
            t = time.perf_counter()
            gallery = open_gallery(store.name, expected_fingerprint="bench").index
            result["store_reopen_s"] = time.perf_counter() - t
            label = "shortlist+fused IVF (store)"
        variants.append((label, gallery, fused))
    for name in backends:
        try:
            vectors, build_s = build_ann(name, index, args.ann_options.get(name, {}))
        except Exception as err:
            print(f"# {name}: could not build ({type(err).__name__}: {err})", file=sys.stderr)
            continue
        result.setdefault("build_s", {})[name] = build_s
        variants.append(
            (
                f"shortlist+{name}",
                GalleryIndex(index.images, index.embeddings, index.attribute_probs, index.root, vectors=vectors),
                shortlist,
            )
        )
    for label, gallery, config in variants:
        times, recalls = [], []
        for s, history in enumerate(conversations):
            turn_times, step = replayed(pipe, gallery, history, args.seed + s, config)
            times += turn_times
            recalls.append(len(set(step.ranking[:10].tolist()) & set(exact_final[s].tolist())) / 10)
        result["paths"][label] = {**summary(times), "recall10": float(np.mean(recalls))}
        del gallery
    variants.clear()
    if store is not None:
        store.cleanup()
    result["peak_rss_mib"] = peak_rss_mib()
    return result


def print_table(results: list[dict[str, Any]], shortlist: int) -> None:
    print(
        "| gallery N | path | one exact scan (N×D mat-vec + top-10) | turn p50 | turn p95 | p50 / scan "
        "| text encoding p50 | text cache hits | ranking p50 | ranking p95 | recall@10 | candidates (mean) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for label, p in r["paths"].items():
            name = label if label == "exact" else label.replace("shortlist", f"shortlist K={shortlist}")
            print(
                f"| {r['n']:,} | {name} | {r['scan_ms']:.2f} ms | {p['p50_ms']:.1f} ms | {p['p95_ms']:.1f} ms | "
                f"{p['p50_ms'] / r['scan_ms']:.1f}× | {p['encode_p50_ms']:.1f} ms | "
                f"{p['text_cache_hit_rate']:.0%} | {p['rank_p50_ms']:.1f} ms | "
                f"{p['rank_p95_ms']:.1f} ms | {p['recall10']:.3f} | {p.get('candidates_mean', r['n']):,.0f} |"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="/work/runs/synth", help="trained run directory")
    parser.add_argument("--data", default="/work/data/synth", help="dataset root (gallery_test.jsonl)")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated gallery sizes N")
    parser.add_argument("--sessions", type=int, default=8, help="sessions (of 4 turns) per size and path")
    parser.add_argument("--shortlist", type=int, default=2000, help="K, the shortlist's size")
    parser.add_argument("--noise", type=float, default=0.015, help="per-dimension std of the tiles' noise")
    parser.add_argument(
        "--backends",
        default=None,
        help="comma-separated VECTOR_INDEXES names to measure (default: every registered one)",
    )
    parser.add_argument("--threads", type=int, default=1, help="BLAS and torch threads (1: steady on a shared machine)")
    parser.add_argument(
        "--ann-options",
        type=json.loads,
        default={},
        help='JSON: backend name -> constructor options, e.g. \'{"faiss_hnsw": {"M": 16}}\'',
    )
    parser.add_argument(
        "--certify",
        type=int,
        default=ShortlistConfig.certify,
        help="results the shortlist certifies (grows until they provably lead; 0 = no certificate)",
    )
    parser.add_argument(
        "--max-size",
        type=int,
        default=ShortlistConfig.max_size,
        help="candidates the shortlist may grow to (0 = up to the whole gallery)",
    )
    parser.add_argument(
        "--no-anchor-search",
        action="store_true",
        help="skip the shortlist's second search with the anchor-blended query",
    )
    parser.add_argument(
        "--fused-ivf-options",
        type=json.loads,
        default={"nprobe": 16},
        help="JSON: FusedIVF options (nlist, nprobe, max_probe, iterations, seed)",
    )
    parser.add_argument("--no-fused-ivf", action="store_true", help="skip the FusedIVF path")
    parser.add_argument("--no-cosine", action="store_true", help="skip the cosine-only argpartition shortlist")
    parser.add_argument(
        "--persist",
        action="store_true",
        help="run the FusedIVF path on a gallery store (saved with it, reopened memory-mapped)",
    )
    parser.add_argument(
        "--no-text-cache",
        action="store_true",
        help="turn the text encoder's cache off (every text encoded every turn: the uncached figure)",
    )
    parser.add_argument(
        "--text-precision",
        choices=("fp32", "int8"),
        default="fp32",
        help="the query text encoder's weights (int8: opt-in, faster, features move a little)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    import torch

    torch.set_num_threads(args.threads)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
    except ImportError:
        print("# threadpoolctl is not installed: BLAS keeps its own thread count", file=sys.stderr)
    registered = register_backends()
    backends = registered if args.backends is None else [b for b in args.backends.split(",") if b]
    pipe = load_pipeline(args.run, text_precision=args.text_precision)
    if args.no_text_cache:
        pipe.backend.text_cache_size = 0  # every text evicted as soon as it is computed: no hit, ever
    if hasattr(pipe.backend, "_featurize"):
        pipe.backend._counts = TextCounts(pipe.backend)
    t = time.perf_counter()
    base = pipe.index_images(BuiltDataset(args.data).gallery("test"), root=args.data, progress=False)
    print(
        f"# embedded {len(base)} gallery images in {time.perf_counter() - t:.1f} s; ANN backends: "
        f"{', '.join(backends) or 'none registered'}",
        file=sys.stderr,
    )
    results = []
    for n in sizes:
        results.append(run_size(pipe, base, n, args, backends))
        print(
            f"# N={n:,} done, peak RSS {results[-1]['peak_rss_mib']:.0f} MiB, build s "
            f"{results[-1].get('build_s', {})}, store save / reopen s "
            f"{results[-1].get('store_save_s', '-')} / {results[-1].get('store_reopen_s', '-')}",
            file=sys.stderr,
        )
    print_table(results, args.shortlist)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"args": vars(args), "base_gallery": len(base), "results": results}, f, indent=1)


if __name__ == "__main__":
    from minterpr.errors import MinterprError

    try:
        sys.exit(main())
    except MinterprError as err:  # a missing dataset or run, a bad file: one line, exit 2
        print(f"bench_turn_latency: {err}", file=sys.stderr)
        sys.exit(2)
