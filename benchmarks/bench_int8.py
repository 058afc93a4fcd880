"""Int8 image models (ONNX Runtime static quantisation): speed, drift and accuracy against float32.

Each model is exported to ONNX as the runtime exports it (the attribute model's image tower,
``export_onnx_image_tower``; the appearance model, ``export_onnx_reid``), quantised with
``minterpr.models.onnx_int8.quantize_static_onnx`` (what ``minterpr models quantize`` writes: ONNX
Runtime's static QDQ, per-channel int8 weights, uint8 activations) calibrated on ``--calibration`` crops of the **val** split, then measured on the **test** split:

- speed: crops/s of float32 and int8 on ``--count`` test crops (batch ``--batch``, ``--threads``
  intra-op threads, the best of ``--repeats``; pixels decoded beforehand);
- drift: cosine of the int8 embedding with the float32 one (min, mean), and for the attribute model
  the share of label decisions (logit > 0) unchanged;
- accuracy on every test crop: the attribute model's mA and PETA-35 mA (sigmoid of the logits, no
  calibration), the appearance model's cross-camera rank-1 and mAP (every crop a query against
  all, ``evaluation.reid``'s protocol).

Nothing here changes what minterpr runs: the figures say whether an int8 engine is worth shipping.

    python benchmarks/bench_int8.py --data data/peta_cw --json int8.json
    python benchmarks/bench_int8.py --data DIR --run RUN --appearance none   # the attribute model only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np


def session(model_bytes: bytes, threads: int) -> Callable[[np.ndarray], list[np.ndarray]]:
    """A CPU session of ``model_bytes`` as a function: pixels (B, 3, H, W) -> its outputs."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # the quantised graph's unused-initializer warnings
    run = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    name = run.get_inputs()[0].name
    return lambda pixels: run.run(None, {name: np.ascontiguousarray(pixels, dtype=np.float32)})


def outputs(forward: Callable[[np.ndarray], list[np.ndarray]], pixels: np.ndarray, batch: int) -> list[np.ndarray]:
    """Every output of ``forward`` over ``pixels`` in batches, concatenated."""
    parts = [forward(pixels[i : i + batch]) for i in range(0, len(pixels), batch)]
    return [np.concatenate([p[k] for p in parts]) for k in range(len(parts[0]))]


def crops_per_second(forward: Callable[[np.ndarray], Any], pixels: np.ndarray, batch: int, repeats: int) -> float:
    outputs(forward, pixels[:batch], batch)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        outputs(forward, pixels, batch)
        best = min(best, time.perf_counter() - start)
    return len(pixels) / best


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)


def measure(
    name: str,
    model_bytes: bytes,
    pixels: Callable[[list[str]], np.ndarray],
    calibration: list[str],
    test: list[str],
    args: argparse.Namespace,
    accuracy: Callable[[list[np.ndarray]], dict[str, float]],
) -> dict[str, Any]:
    """Float32 and int8 figures of one exported model (see the module doc)."""
    from minterpr.models.onnx_int8 import quantize_static_onnx

    int8 = quantize_static_onnx(model_bytes, pixels(calibration))  # what `minterpr models quantize` writes
    test_pixels = pixels(test)  # (N, 3, H, W)
    row: dict[str, Any] = {"model": name, "calibration_crops": len(calibration), "test_crops": len(test)}
    results = {}
    for kind, data in (("float32", model_bytes), ("int8", int8)):
        forward = session(data, args.threads)
        row[f"{kind}_crops_s"] = round(
            crops_per_second(forward, test_pixels[: args.count], args.batch, args.repeats), 1
        )
        results[kind] = outputs(forward, test_pixels, args.batch)
        row[kind] = accuracy(results[kind])
    agree = cosines(results["float32"][0], results["int8"][0])
    row["cosine_min"], row["cosine_mean"] = round(float(agree.min()), 4), round(float(agree.mean()), 4)
    if len(results["float32"]) > 1:  # the attribute model: (embedding, logits)
        same = (results["float32"][1] > 0) == (results["int8"][1] > 0)
        row["label_decisions_unchanged"] = round(float(same.mean()), 4)
    row["int8_bytes"] = len(int8)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a built dataset with gallery_val.jsonl and gallery_test.jsonl")
    parser.add_argument("--run", default="shipped", help="the attribute model: 'shipped', a run or model dir")
    parser.add_argument("--appearance", default="shipped", help="the appearance model, or 'none' to skip it")
    parser.add_argument("--calibration", type=int, default=160, help="val crops the quantisation is calibrated on")
    parser.add_argument("--count", type=int, default=256, help="test crops timed (accuracy uses them all)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="ONNX Runtime intra-op threads")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs, the best kept")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    for name in ("calibration", "count", "batch", "threads", "repeats"):
        if getattr(args, name) < 1:
            print(f"bench_int8: --{name} must be >= 1, got {getattr(args, name)}", file=sys.stderr)
            return 2

    from minterpr.data.dataset import BuiltDataset
    from minterpr.data.label_maps import peta35_labels
    from minterpr.errors import MinterprError
    from minterpr.evaluation.attribute_metrics import attribute_metrics
    from minterpr.evaluation.reid import reid_metrics
    from minterpr.models.onnx_export import export_onnx_image_tower
    from minterpr.models.onnx_reid import export_onnx_reid
    from minterpr.runtime.image_batches import load_readable
    from minterpr.runtime.pipeline import load_pipeline

    try:
        dataset = BuiltDataset(args.data)
        val, test = dataset.gallery("val"), dataset.gallery("test")
        pipeline = load_pipeline(
            args.run, device="cpu", appearance=None if args.appearance == "none" else args.appearance
        )
    except (MinterprError, OSError) as err:  # a broken run, a missing split manifest
        print(f"bench_int8: {err}", file=sys.stderr)
        return 2
    root = str(dataset.image_root)
    calibration = [os.path.join(root, i.path) for i in val[: args.calibration]]
    paths = [os.path.join(root, i.path) for i in test]

    def reader(model: Any) -> Callable[[list[str]], np.ndarray]:
        return lambda files: load_readable(model.preprocess, files)[0].numpy()  # every crop must read

    def attributes(result: list[np.ndarray]) -> dict[str, float]:
        metrics = attribute_metrics(1.0 / (1.0 + np.exp(-result[1])), test, auc=False)
        return {"mA": round(metrics.mA, 2), "peta35_mA": round(float(metrics.subset_mA(peta35_labels())[0]), 2)}

    def appearance(result: list[np.ndarray]) -> dict[str, float]:
        people, cameras = [i.person_id for i in test], [i.camera_id or "" for i in test]
        scores = reid_metrics(result[0], result[0], people, people, cameras, cameras).to_dict()
        return {"rank1": round(scores["rank1"], 2), "mAP": round(scores["mAP"], 2)}

    rows = [
        measure(
            "attribute",
            export_onnx_image_tower(pipeline.model),
            reader(pipeline.model),
            calibration,
            paths,
            args,
            attributes,
        )
    ]
    if pipeline.appearance is not None:
        model = pipeline.appearance.model
        rows.append(measure("appearance", export_onnx_reid(model), reader(model), calibration, paths, args, appearance))
    for row in rows:
        print(json.dumps(row), flush=True)
    if len(rows) == 2:
        both = {k: round(1 / sum(1 / r[f"{k}_crops_s"] for r in rows), 1) for k in ("float32", "int8")}
        mixed = round(1 / (1 / rows[0]["int8_crops_s"] + 1 / rows[1]["float32_crops_s"]), 1)
        print(json.dumps({"both_forwards_crops_s": {**both, "attribute_int8_appearance_float32": mixed}}))
    if args.json:
        Path(args.json).write_text(json.dumps({"data": args.data, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
