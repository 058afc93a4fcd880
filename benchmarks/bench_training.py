"""Training throughput with cached frozen features (and without, for comparison).

Runs a config (default: ``synthetic``, EfficientNet-Lite0 + frozen MiniLM) for one short
epoch per stage on the first ``--samples`` training dialogues, and prints:

* the time to build the feature caches (frozen image stems, frozen text features), per item;
* training samples/s per stage with the caches, measured on the second of two epochs;
* with ``--compare-uncached``: the same stages with ``cache_features=false`` (stems and texts
  recomputed every step).

Usage:
    .venv/bin/python benchmarks/bench_training.py [--data DATASET_DIR] [--config synthetic]
        [--samples 256] [--batch-size 32] [--threads N] [--compare-uncached] [--set key=value ...]

DATASET_DIR is a directory made by ``minterpr data synth`` (train/val jsonl + manifests); without
it a small synthetic world (150 / 40 / 40 identities) is built once into
.minterpr_cache/bench_training_data (reused by later runs).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from minterpr.training.config import load_config
from minterpr.training.stages import apply_freezing, stage_data
from minterpr.training.trainer import Trainer


def run(config: str, data: str, samples: int, batch_size: int, extra: list[str], cached: bool) -> dict:
    # two epochs per stage: the first pays one-off costs (kernel selection, allocator growth),
    # the second is what every later epoch costs
    two_epochs = [f"stages.{i}.epochs=2" for i in range(len(load_config(config).stages))]
    overrides = [
        f"data.root={data}",
        f"data.max_train_samples={samples}",
        "data.max_val_samples=64",
        f"batch_size={batch_size}",
        "progress=false",
        *two_epochs,
        "checkpoint_every_steps=100000",
        f"cache_features={str(cached).lower()}",
        *extra,
    ]
    cfg = load_config(config, overrides)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp) / "run")
        cache_seconds = {}
        if cached:  # build the caches once, timed, so the training loop below only reads them
            for stage in cfg.stages:
                apply_freezing(trainer.model, stage)
                t0 = time.perf_counter()
                stage_data(
                    stage, trainer.train_split, trainer.identities, trainer.source, trainer.model.config.max_turns
                )
                cache_seconds[stage.name] = time.perf_counter() - t0
        trainer.run()
    return {
        "cache_seconds": cache_seconds,
        "samples_per_second": {stage: rates[-1] for stage, rates in trainer.throughput.items()},
    }


def small_synthetic_dataset(out_dir: Path) -> Path:
    from minterpr.data.synthetic.dataset import SyntheticDatasetConfig, build_synthetic_dataset
    from minterpr.data.synthetic.world import SyntheticWorldConfig

    world = SyntheticWorldConfig(train_identities=150, val_identities=40, test_identities=40)
    build_synthetic_dataset(out_dir, SyntheticDatasetConfig(world=world), progress=True)
    return out_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="dataset directory (default: build a small synthetic world)")
    parser.add_argument("--config", default="synthetic")
    parser.add_argument("--samples", type=int, default=256, help="training dialogues used")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--compare-uncached", action="store_true", help="also time cache_features=false")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.data is None:
        args.data = str(small_synthetic_dataset(Path(".minterpr_cache") / "bench_training_data"))
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, config {args.config}, "
        f"{args.samples} dialogues, batch {args.batch_size}"
    )
    cached = run(args.config, args.data, args.samples, args.batch_size, args.set, cached=True)
    for stage, seconds in cached["cache_seconds"].items():
        print(f"cache build for {stage:<10}: {seconds:7.2f} s (first run only; later runs read RUN_DIR/cache)")
    for stage, rate in cached["samples_per_second"].items():
        print(f"cached   {stage:<10}: {rate:8.1f} training samples/s")
    if args.compare_uncached:
        uncached = run(args.config, args.data, args.samples, args.batch_size, args.set, cached=False)
        for stage, rate in uncached["samples_per_second"].items():
            speedup = cached["samples_per_second"].get(stage, float("nan")) / rate
            print(f"uncached {stage:<10}: {rate:8.1f} training samples/s (cache speed-up x{speedup:.1f})")


if __name__ == "__main__":
    main()
