"""Training steps of several jobs sharing one machine, by torch threads per job (prints a table).

Each job is a separate process running the same training step (an image encoder's forward,
backward and AdamW update on a random batch) with ``torch.set_num_threads(T)``; all jobs start
together and the table gives each setting's median seconds per step over the jobs. It shows what
``--torch-threads`` is for: jobs whose threads together exceed the cores wait on each other's
thread barriers (docs/benchmarks.md, "Threads").

Run:
    python benchmarks/bench_threads.py                          # 2 jobs, 1 and 2 threads each, OSNet x0.25
    python benchmarks/bench_threads.py --jobs 1 2 --threads 1 2 --encoder efficientnet_lite0 --size 160 80
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

from minterpr.cli.shared.common import positive_int


def job(encoder: str, size: tuple[int, int], batch: int, steps: int, threads: int, start, out) -> None:
    """One process: ``steps`` timed training steps after one warm-up, each step's seconds to ``out``."""
    import torch

    from minterpr.models.encoders import create_image_encoder

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = create_image_encoder(encoder, pretrained=False, channels_last=True).train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-4)
    images = torch.randn(batch, 3, *size)  # (B, 3, H, W)

    def step() -> None:
        features = model(images)
        loss = sum(value.float().pow(2).mean() for value in features.values())
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()

    step()  # warm-up: allocations and kernel choice
    start.wait()  # every job times the same moments
    seconds = []
    for _ in range(steps):
        began = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - began)
    out.put(seconds)


def run_setting(args: argparse.Namespace, jobs: int, threads: int) -> float:
    """Median seconds per step over ``jobs`` concurrent processes of ``threads`` threads each."""
    context = mp.get_context("spawn")  # a fresh torch per job: no inherited thread pool
    start, out = context.Barrier(jobs), context.Queue()
    procs = [
        context.Process(target=job, args=(args.encoder, tuple(args.size), args.batch, args.steps, threads, start, out))
        for _ in range(jobs)
    ]
    for proc in procs:
        proc.start()
    seconds = [s for _ in procs for s in out.get()]
    for proc in procs:
        proc.join()
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=positive_int, nargs="+", default=[2], help="concurrent processes (default 2)")
    parser.add_argument(
        "--threads", type=positive_int, nargs="+", default=[1, 2], help="torch threads per job (default 1 2)"
    )
    parser.add_argument("--encoder", default="osnet", help="an IMAGE_ENCODERS name (default osnet)")
    parser.add_argument("--size", type=positive_int, nargs=2, default=[192, 96], metavar=("H", "W"))
    parser.add_argument("--batch", type=positive_int, default=64)
    parser.add_argument("--steps", type=positive_int, default=5, help="timed steps per job (default 5)")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; {args.encoder} {args.size[0]}x{args.size[1]}, batch {args.batch}")
    print(f"{'jobs':>5}{'threads/job':>13}{'s/step':>9}{'images/s (all jobs)':>21}")
    for jobs in args.jobs:
        for threads in args.threads:
            median = run_setting(args, jobs, threads)
            print(f"{jobs:>5}{threads:>13}{median:>9.2f}{jobs * args.batch / median:>21.1f}", flush=True)


if __name__ == "__main__":
    main()
