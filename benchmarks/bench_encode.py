"""Gallery encoding speed and the accuracy each faster setting keeps (issue 13: >= 100 images/s on 2 cores).

Three measurements on a trained run's test gallery:

1. **decode + preprocess**: images/s of ``model.preprocess.load`` on one thread (what the
   backend's prefetch thread does while the network runs);
2. **forward** per setting x batch size: images/s of the image network alone (encoder + colour
   branch + heads) on pixels already in memory, and its accuracy against the reference (the
   model in eager float32, batch 64, the path ``index_images`` used before): mean / min cosine
   of the embeddings, max |difference|, agreement of the per-slot attribute argmax, and R@1 of
   the test dialogues' last-round queries against each setting's gallery embeddings;
3. **end to end**: images/s of ``load_pipeline(run, engine=...).index_images(gallery)`` (decode,
   forward, probabilities), for the old path (torch, forward batch 64) and the new engines.

Settings: ``torch`` (reference, channels_last as the run's config), ``torch-nchw`` (channels_last
off), ``torch-fused`` (BatchNorm folded), ``torch-bf16`` (fused + bf16 autocast), ``torch-int8``
(dynamic int8 quantization of the Linear layers), ``torch-compile`` (``--compile``), ``onnx``
(ONNX Runtime, :mod:`minterpr.models.onnx_export`). The machine is shared: every figure is the
best of ``--repeats`` runs and the load average is printed with the results.

Example:
    $ python benchmarks/bench_encode.py --run /work/runs/synth --data /work/data/synth --threads 2 \\
        --json /tmp/bench_encode.json
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from minterpr.data.dataset import BuiltDataset
from minterpr.language.ontology import ONTOLOGY
from minterpr.evaluation.metrics import retrieval_metrics_from_embeddings
from minterpr.evaluation.static import dialogue_turns
from minterpr.fileio import atomic_write_text
from minterpr.index.gallery_index import GalleryIndex
from minterpr.runtime.pipeline import load_pipeline

Forward = Callable[[torch.Tensor], tuple[np.ndarray, np.ndarray]]  # (b,3,H,W) -> (b,D), (b,L)


def best_time(fn: Callable[[], Any], repeats: int) -> float:
    """Fastest of ``repeats`` timed calls after one warm-up call (seconds)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def run_batches(forward: Forward, pixels: torch.Tensor, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """All of ``pixels`` through ``forward`` ``batch`` at a time -> (N, D), (N, L)."""
    outs = [forward(pixels[i : i + batch]) for i in range(0, len(pixels), batch)]
    return np.concatenate([e for e, _ in outs]), np.concatenate([l for _, l in outs])


def torch_forward(model: Any, autocast: bool = False) -> Forward:
    def forward(x: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        ctx = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
        with torch.inference_mode(), ctx:
            out = model.encode_images(x)
        return out["embedding"].float().numpy(), out["attribute_logits"].float().numpy()

    return forward


def image_copy(model: Any) -> Any:
    """A copy of the model sharing its (unused here) text encoder."""
    return copy.deepcopy(model, memo={id(model.text_encoder): model.text_encoder}).eval()


def build_settings(model: Any, names: list[str]) -> dict[str, Callable[[], Forward]]:
    """Setting name -> a builder of its forward (built lazily: compile and export take time)."""

    def fused() -> Any:
        m = image_copy(model)
        m.image_encoder.fuse_batchnorm()
        return m

    def nchw() -> Forward:
        m = image_copy(model)
        m.image_encoder.set_channels_last(False)
        return torch_forward(m)

    def int8() -> Forward:
        m = image_copy(model)
        # every Linear except those whose weight the heads read directly (a quantized one has none)
        linears = {
            name: torch.ao.quantization.default_dynamic_qconfig
            for name, mod in m.named_modules()
            if isinstance(mod, torch.nn.Linear)
            and not name.endswith("attributes.keys")
            and not name.startswith("text_encoder")
        }
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao.quantization deprecation notices
            quantized = torch.ao.quantization.quantize_dynamic(m, linears, dtype=torch.qint8)
        return torch_forward(quantized)

    def compiled() -> Forward:
        m = fused()
        m.encode_images = torch.compile(m.encode_images, dynamic=False)
        return torch_forward(m)

    def onnx() -> Forward:
        from minterpr.models.onnx_export import load_image_engine

        engine = load_image_engine(model)
        return lambda x: engine(x)

    builders = {
        "torch": lambda: torch_forward(model),
        "torch-nchw": nchw,
        "torch-fused": lambda: torch_forward(fused()),
        "torch-bf16": lambda: torch_forward(fused(), autocast=True),
        "torch-int8": int8,
        "torch-compile": compiled,
        "onnx": onnx,
    }
    unknown = sorted(set(names) - set(builders))
    if unknown:
        raise SystemExit(f"unknown settings {unknown}; choose among {sorted(builders)}")
    return {name: builders[name] for name in names}


def accuracy(
    emb: np.ndarray,
    logits: np.ndarray,
    ref_emb: np.ndarray,
    ref_logits: np.ndarray,
    queries: np.ndarray | None,
    query_pids: list[str],
    gallery_pids: list[str],
) -> dict[str, float]:
    """Cosine / max |diff| of embeddings, per-slot argmax agreement, R@1 of the queries."""
    cos = (emb * ref_emb).sum(1) / np.linalg.norm(emb, axis=1) / np.linalg.norm(ref_emb, axis=1)
    agree = [
        np.mean(logits[:, cols].argmax(1) == ref_logits[:, cols].argmax(1)) for cols in ONTOLOGY.slot_columns().values()
    ]
    out = {
        "cos_mean": float(cos.mean()),
        "cos_min": float(cos.min()),
        "emb_max_abs": float(np.abs(emb - ref_emb).max()),
        "logit_max_abs": float(np.abs(logits - ref_logits).max()),
        "argmax_agree_pct": 100.0 * float(np.mean(agree)),
        "argmax_agree_min_slot_pct": 100.0 * float(np.min(agree)),
    }
    if queries is not None:
        out["r1"] = retrieval_metrics_from_embeddings(queries, emb, query_pids, gallery_pids)["r1"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default="/work/runs/synth", help="trained run directory")
    parser.add_argument("--data", default="/work/data/synth", help="dataset root (gallery_test.jsonl, test.jsonl)")
    parser.add_argument("--limit", type=int, default=0, help="first N gallery images (0: all)")
    parser.add_argument("--forward-images", type=int, default=256, help="images per timed forward measurement")
    parser.add_argument("--batch-sizes", default="8,16,32,64", help="forward batch sizes, comma separated")
    parser.add_argument("--settings", default="torch,torch-nchw,torch-fused,torch-bf16,torch-int8,onnx")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile (slow to compile)")
    parser.add_argument("--queries", type=int, default=500, help="test dialogues for R@1 (0: skip R@1)")
    parser.add_argument("--threads", type=int, default=2, help="torch / ONNX Runtime intra-op threads")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs; the best is reported")
    parser.add_argument("--skip-e2e", action="store_true", help="skip the end-to-end index_images timing")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results: dict[str, Any] = {"threads": args.threads, "load_before": os.getloadavg()}

    pipe = load_pipeline(args.run, engine="torch")
    model = pipe.model
    gallery = BuiltDataset(args.data).gallery("test")
    if args.limit:
        gallery = gallery[: args.limit]
    paths = [str(Path(args.data) / g.path) for g in gallery]
    decode_s = best_time(lambda: [model.preprocess.load(p) for p in paths[:400]], args.repeats)
    results["decode_preprocess_img_s"] = min(400, len(paths)) / decode_s
    pixels = torch.stack([model.preprocess.load(p) for p in paths])  # (N, 3, H, W)
    ref_emb, ref_logits = run_batches(torch_forward(model), pixels, 64)

    queries, query_pids = None, []
    if args.queries:
        pid_of = {g.path: g.person_id for g in gallery}  # the dialogues use another id namespace
        samples = [s for s in BuiltDataset(args.data).dialogues("test") if s.target_path in pid_of]
        samples = samples[: args.queries]
        reference = GalleryIndex(gallery, ref_emb, root=args.data)
        queries = np.stack(
            [q[-1] for q in pipe.backend.encode_dialogues([dialogue_turns(s) for s in samples], reference)]
        )
        query_pids = [pid_of[s.target_path] for s in samples]
    gallery_pids = [g.person_id for g in gallery]

    names = args.settings.split(",") + (["torch-compile"] if args.compile else [])
    timed = pixels[: args.forward_images]
    rows = []
    for name, build in build_settings(model, names).items():
        start = time.perf_counter()
        try:
            forward = build()
            forward(timed[:8])  # compile / first run
        except Exception as exc:  # noqa: BLE001 - a setting that fails is reported, not fatal
            rows.append({"setting": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
            print(f"{name:14s} failed: {rows[-1]['error']}", flush=True)
            continue
        row: dict[str, Any] = {"setting": name, "build_s": time.perf_counter() - start}
        for batch in [int(b) for b in args.batch_sizes.split(",")]:
            seconds = best_time(lambda: run_batches(forward, timed, batch), args.repeats)
            row[f"forward_img_s@{batch}"] = len(timed) / seconds
        row.update(accuracy(*run_batches(forward, pixels, 16), ref_emb, ref_logits, queries, query_pids, gallery_pids))
        rows.append(row)
        print(json.dumps({k: round(v, 6) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    results["forward"] = rows

    if not args.skip_e2e:
        e2e = []
        for label, options in (
            ("torch old (forward batch 64)", {"engine": "torch", "forward_batch": 64}),
            ("torch (forward batch 8)", {"engine": "torch"}),
            ("onnx (forward batch 8)", {"engine": "onnx"}),
        ):
            backend = type(pipe.backend)(model, batch_size=64, **options)
            backend.index_images(gallery[:32], root=args.data)  # builds the engine, warms up
            seconds = best_time(lambda: backend.index_images(gallery, root=args.data), args.repeats)
            index = backend.index_images(gallery, root=args.data)
            cos = float(np.min((index.embeddings * ref_emb).sum(1)))
            e2e.append({"setting": label, "img_s": len(gallery) / seconds, "cos_min": cos})
            print(json.dumps(e2e[-1]), flush=True)
        results["end_to_end"] = e2e
    results["load_after"] = os.getloadavg()
    print(
        f"decode+preprocess (1 thread): {results['decode_preprocess_img_s']:.0f} img/s; "
        f"load {results['load_before']} -> {results['load_after']}"
    )
    if args.json:
        atomic_write_text(args.json, json.dumps(results, indent=2))


if __name__ == "__main__":
    from minterpr.errors import MinterprError

    try:
        sys.exit(main())
    except MinterprError as err:  # a missing dataset or run, a bad file: one line, exit 2
        print(f"bench_encode: {err}", file=sys.stderr)
        sys.exit(2)
