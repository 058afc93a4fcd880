"""Time the synthetic world: single-image render speed and a full build_world at the default size.

Usage:
    python benchmarks/bench_synth.py [--out DIR] [--workers 2] [--grid /tmp/synth_grid.png] [--scale 1.0]

Prints the per-image render time on one core, then images, seconds and images/s for the
build (render + JPEG save) with the given number of workers, and the CPU time it used (a figure
that other load on the machine does not inflate). ``--scale`` shrinks the world
(0.1 = a tenth of the default identities) for a quick check.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from minterpr.data.synthetic import SyntheticWorldConfig, build_world, make_cameras, make_sample_grid, render_person
from minterpr.data.synthetic.twins import sample_population


def _cpu_seconds() -> float:
    """User + system CPU time of this process and its finished children (the pool workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def bench_render(n: int = 300) -> float:
    """CPU milliseconds per rendered image (no JPEG), one process, scene caches warm.

    CPU time, not wall time, so that other work on the machine does not inflate the figure."""
    rng = np.random.default_rng(0)
    people = sample_population(n, rng)
    cams = make_cameras(6, rng)
    for cam in cams:  # draw each camera's scene once, as a worker does
        render_person(people[0], view="front", camera=cam, rng=rng)
    start = time.process_time()
    for i, attrs in enumerate(people):
        render_person(attrs, view=("front", "back", "side")[i % 3], camera=cams[i % 6], rng=np.random.default_rng(i))
    return (time.process_time() - start) / n * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: a temporary one)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the default identity counts")
    parser.add_argument("--grid", type=Path, default=None, help="also write a sample grid PNG here")
    args = parser.parse_args()

    print(f"render_person: {bench_render():.2f} CPU ms/image (one core, 256x128, no JPEG)", flush=True)
    base = SyntheticWorldConfig()
    config = dataclasses.replace(
        base,
        workers=args.workers,
        train_identities=round(base.train_identities * args.scale),
        val_identities=round(base.val_identities * args.scale),
        test_identities=round(base.test_identities * args.scale),
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        start, cpu_start = time.perf_counter(), _cpu_seconds()
        world = build_world(out, config, progress=True)
        seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu_start
        n = sum(len(v) for v in world.values())
        size = sum(p.stat().st_size for p in Path(out, "images").rglob("*.jpg"))
    ids = config.train_identities + config.val_identities + config.test_identities
    print(
        f"build_world: {ids} identities, {n} images, {seconds:.1f} s, {n / seconds:.0f} images/s "
        f"({config.workers} workers, {size / 2**20:.1f} MiB of JPEG)"
    )
    print(
        f"build_world CPU: {cpu:.1f} s in all, {cpu / n * 1000:.1f} ms/image "
        f"(wall time on an idle machine is about CPU / workers)"
    )
    if args.grid is not None:
        print(f"sample grid: {make_sample_grid(args.grid, seed=0)}")


if __name__ == "__main__":
    main()
