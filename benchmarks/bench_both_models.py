"""Gallery crops/s with both shipped models (issue 36 item 5: >= 150 crops/s on 2 cores, ONNX Runtime).

What ``index_images`` pays per crop when the attribute model and the appearance model both embed
it: the attribute model (EfficientNet-Lite2 at 160x80, ``models/peta-pa100k-lite2``) and the
appearance model (OSNet x0.25 at 256x128, flip-averaged, ``models/osnet-x0_25-reid``).

1. **forward**: crops/s of each network alone on pixels already in memory (batch ``--batch``),
   per engine, of both together (one crop through both: 1 / (1/a + 1/b)), and on ONNX Runtime of
   both on one-thread lanes side by side, as ``index_images`` runs them (``both_on_lanes``);
2. **end to end**: crops/s of ``load_pipeline(RUN, engine=..., image_precision=...).index_images(crops)``
   (decode and resize for each model, both forwards, probabilities), appearance on and off.

The machine is shared: each figure is the best of ``--repeats`` runs; the load average is printed.

Example:
    $ python benchmarks/bench_both_models.py --data data/peta_cw --count 256 --threads 2 --json /tmp/both.json
    $ python benchmarks/bench_both_models.py --data data/peta_cw --engines onnx --image-precisions fp32,int8
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import torch

from minterpr.data.dataset import BuiltDataset
from minterpr.runtime.image_batches import LANE_BATCH, lane_count
from minterpr.runtime.pipeline import load_pipeline


def best_rate(count: int, work: Callable[[], Any], repeats: int) -> float:
    """Items per second of ``work`` (``count`` items), the best of ``repeats`` runs after one warm-up."""
    work()
    best = min(_timed(work) for _ in range(repeats))
    return count / best


def _timed(work: Callable[[], Any]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def forward_rates(pipe: Any, paths: list[str], batch: int, repeats: int) -> dict[str, float]:
    """Crops/s of each network on preloaded pixels, with the pipeline's engines."""
    looks = pipe.appearance
    backend = pipe.backend
    attr_pixels = torch.stack([pipe.model.preprocess.load(p) for p in paths])
    look_pixels = torch.stack([looks.model.preprocess.load(p) for p in paths])
    images = backend._images  # the attribute model's image tower engine (torch or onnx)

    def attributes() -> None:
        for start in range(0, len(paths), batch):
            chunk = attr_pixels[start : start + batch]
            if images.engine_name == "onnx":
                images.onnx(chunk)
            else:
                with torch.inference_mode():
                    pipe.model.encode_images(chunk)

    def appearance() -> None:
        for start in range(0, len(paths), batch):
            looks.embed_pixels(look_pixels[start : start + batch])

    a = best_rate(len(paths), attributes, repeats)
    b = best_rate(len(paths), appearance, repeats)
    rates = {
        "attribute_engine": images.engine_name,
        "appearance_engine": looks.engine_name,
        "attribute_crops_s": round(a, 1),
        "appearance_crops_s": round(b, 1),
        "both_crops_s": round(1 / (1 / a + 1 / b), 1),
    }
    lanes = lane_count(images.engine_name) if looks.engine_name == images.engine_name else 1
    if lanes > 1:  # what index_images does on ONNX Runtime: one-thread sessions, a batch per lane
        attribute_lane, appearance_lane = images.onnx.lane(), looks._engine.onnx.lane()

        def both_on_lanes() -> None:
            def one(start: int) -> None:
                attribute_lane(attr_pixels[start : start + LANE_BATCH])
                appearance_lane(look_pixels[start : start + LANE_BATCH])

            with ThreadPoolExecutor(lanes) as pool:
                list(pool.map(one, range(0, len(paths), LANE_BATCH)))

        rates.update(lanes=lanes, both_on_lanes_crops_s=round(best_rate(len(paths), both_on_lanes, repeats), 1))
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a built PETA dataset (its gallery_test.jsonl)")
    parser.add_argument("--count", type=int, default=256, help="crops measured (default 256)")
    parser.add_argument("--batch", type=int, default=32, help="forward batch (default 32)")
    parser.add_argument("--threads", type=int, default=2, help="torch / ONNX Runtime threads (default 2)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per figure, the best kept (default 2)")
    parser.add_argument("--engines", default="onnx,torch", help="engines to measure (default onnx,torch)")
    parser.add_argument("--run", default="shipped", help="the attribute model (default: the shipped one)")
    parser.add_argument(
        "--image-precisions",
        default="fp32",
        help="the attribute model's image precisions, e.g. fp32,int8 (int8: its model directory's "
        "int8 image tower, ONNX Runtime only; default fp32)",
    )
    parser.add_argument("--json", help="write the results here")
    parser.add_argument(
        "--appearance",
        default="shipped",
        help="the appearance model (default: the shipped one; load_pipeline's choices)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    images = BuiltDataset(args.data).gallery("test")[: args.count]
    root = str(Path(args.data).absolute())
    paths = [os.path.join(root, image.path) for image in images]
    results: dict[str, Any] = {"count": len(paths), "threads": args.threads, "load_before": os.getloadavg()}
    runs = [(e, p) for e in args.engines.split(",") for p in args.image_precisions.split(",")]
    for engine, precision in [(e, p) for e, p in runs if p == "fp32" or e != "torch"]:
        pipe = load_pipeline(args.run, engine=engine, image_precision=precision, appearance=args.appearance)
        row = {"image_precision": precision, **forward_rates(pipe, paths, args.batch, args.repeats)}
        both = best_rate(len(paths), lambda: pipe.index_images(images, root=root, progress=False), args.repeats)
        pipe.appearance = None
        alone = best_rate(len(paths), lambda: pipe.index_images(images, root=root, progress=False), args.repeats)
        row.update(end_to_end_both_crops_s=round(both, 1), end_to_end_attribute_only_crops_s=round(alone, 1))
        results[engine if precision == "fp32" else f"{engine}-{precision}"] = row
        print(engine, precision, json.dumps(row), flush=True)
    results["load_after"] = os.getloadavg()
    print("load average before / after:", results["load_before"], results["load_after"])
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    from minterpr.errors import MinterprError

    try:
        sys.exit(main())
    except MinterprError as err:  # a missing dataset or run, a bad file: one line, exit 2
        print(f"bench_both_models: {err}", file=sys.stderr)
        sys.exit(2)
