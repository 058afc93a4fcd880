"""Time ``minterpr data validate`` on a generated MInterPEDES file (~100 MB by default).

Prints the file size, seconds, records/s and the validating process's peak RSS (from
``resource.getrusage(RUSAGE_CHILDREN)``), next to the peak RSS of a bare ``minterpr --version``
so the cost of validation itself is visible. Streaming validation should keep the peak far
below the file size.

Usage:
    .venv/bin/python benchmarks/bench_validate.py [--size-mb 100] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = (
    "man woman young old wearing black white red blue grey jacket shirt jeans skirt shoes sneakers "
    "backpack handbag carrying long short hair glasses hat walking street holding umbrella striped"
).split()


def sentence(rng: random.Random, n_min: int, n_max: int) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(n_min, n_max)))


def make_record(rng: random.Random, target: int, pid: int) -> dict:
    t, i = rng.randint(0, 5), rng.randint(0, 3)
    conversations = [{"from": "human", "value": sentence(rng, 15, 60)}]
    for _ in range(t):
        conversations += [
            {"from": "gpt", "value": sentence(rng, 5, 12) + "?"},
            {"from": "human", "value": sentence(rng, 2, 15)},
        ]
    for _ in range(i):
        conversations += [{"from": "gpt", "value": "<image>"}, {"from": "human", "value": sentence(rng, 5, 25)}]
    return {
        "file_path": f"CUHK01/{target:07d}.png",
        "id": pid,
        "t_conversation_length": t,
        "i_conversation_length": i,
        "conversations": conversations,
        "image": [f"CUHK01/{rng.randrange(10**6):07d}.png" for _ in range(i)],
    }


def generate(path: Path, size_bytes: int, seed: int) -> int:
    """Write records until the file reaches size_bytes; two dialogues per target image."""
    rng = random.Random(seed)
    written = records = 0
    with open(path, "w", encoding="utf-8") as f:
        while written < size_bytes:
            target = records // 2
            line = json.dumps(make_record(rng, target, pid=target // 3)) + "\n"
            f.write(line)
            written += len(line)
            records += 1
    if records % 2:  # keep every target paired, so the run prints no warnings
        line = json.dumps(make_record(rng, records // 2, pid=records // 6)) + "\n"
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)
        records += 1
    return records


def run_child(args: list[str]) -> tuple[float, int, subprocess.CompletedProcess]:
    """Run a child; returns (seconds, its peak RSS in MiB, the process). Linux ru_maxrss is KiB."""
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    # RUSAGE_CHILDREN's maxrss is the largest over waited-for children so far: run the larger last.
    return seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=100.0, help="size of the generated file")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.jsonl"
        t0 = time.perf_counter()
        records = generate(path, int(args.size_mb * 2**20), args.seed)
        size_mb = path.stat().st_size / 2**20
        print(f"generated {records:,} records, {size_mb:.1f} MiB in {time.perf_counter() - t0:.1f} s")
        _, base_rss, _ = run_child([sys.executable, "-m", "minterpr", "--version"])
        seconds, rss, proc = run_child([sys.executable, "-m", "minterpr", "data", "validate", str(path)])
        if proc.returncode != 0:
            print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
            return 1
        print(proc.stdout.strip())
        print(f"validate: {seconds:.2f} s, {records / seconds:,.0f} records/s, {size_mb / seconds:.1f} MiB/s")
        print(f"peak RSS: {rss} MiB while validating (bare `minterpr --version`: {base_rss} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
