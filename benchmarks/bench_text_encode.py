"""Where a search turn's query encoding goes, on the torch and the ONNX Runtime text engine.

One session turn calls ``NeuralBackend.encode_turns`` on the whole conversation; earlier turns'
text features are cached, so the turn runs the text encoder on its one new utterance, then the
turn encoder and dialogue memory over all R turns. Printed per engine and thread count (median
ms over ``--repeats`` turns, each with a new utterance): the whole ``encode_turns``, and its
parts — tokenisation, the text encoder's forward on one utterance, the featurizer call (both),
building the dialogue batch from cached features, and the turn encoder + memory. The ONNX
queries are checked against torch's (min cosine over the conversation's R queries).

Usage:
    python benchmarks/bench_text_encode.py --run /work/runs/synth --threads 1,2
    python benchmarks/bench_text_encode.py --run /work/runs/synth --json out.json
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Callable

import numpy as np
import torch

from minterpr import load_pipeline
from minterpr.index.gallery_index import GalleryIndex
from minterpr.types import DescriptionTurn, QATurn, Turn

CONVERSATION = [
    DescriptionTurn("a young woman in a long red coat with black trousers, carrying a grey shoulder bag"),
    QATurn("What colour are the shoes?", "white"),
    QATurn("Is the person wearing a hat?", "no"),
]


def new_turn(i: int) -> Turn:
    """A never-seen utterance (the cache cannot answer it), of a typical Q&A length."""
    return QATurn(f"Does the person carry a backpack or bag number {i}?", "yes")


def median_ms(fn: Callable[[int], object], repeats: int, start: int) -> float:
    times = []
    for i in range(repeats):
        t = time.perf_counter()
        fn(start + i)
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times))


def measure(run: str, engine: str, threads: int, repeats: int) -> tuple[dict[str, float], np.ndarray]:
    """Per-part median ms for one engine and thread count, and the queries of a fixed conversation."""
    torch.set_num_threads(threads)
    backend = load_pipeline(run, engine=engine).backend
    model, featurize = backend.model, backend._featurize
    index = GalleryIndex([], np.zeros((0, model.embed_dim), np.float32))
    text = model.text_encoder
    offset = 10_000 * threads + (0 if engine == "torch" else 5_000)  # new texts in every configuration
    for i in range(3):  # warm-up (and the export, for ONNX)
        backend.encode_turns(CONVERSATION + [new_turn(offset - 10 + i)], index)
    row = {
        "encode_turns": median_ms(lambda i: backend.encode_turns(CONVERSATION + [new_turn(i)], index), repeats, offset)
    }
    utterance = lambda i: f"{new_turn(i).question} {new_turn(i).answer}"  # noqa: E731 - as qa_text
    row["tokenize"] = median_ms(lambda i: text.tokenize([utterance(i)]), repeats, offset)
    tokens = text.tokenize([utterance(0)])
    if featurize.engine_name == "onnx":
        row["text_forward"] = median_ms(lambda i: featurize._onnx(tokens), repeats, 0)
    else:
        with torch.inference_mode():
            row["text_forward"] = median_ms(lambda i: text(tokens), repeats, 0)
    row["featurize_1_text"] = median_ms(lambda i: featurize([utterance(i)]), repeats, offset + repeats)
    turns = CONVERSATION + [new_turn(offset)]
    row["dialogue_batch_cached"] = median_ms(lambda i: backend.dialogue_batch([turns], index), repeats, 0)
    batch = backend.dialogue_batch([turns], index)
    with torch.inference_mode():
        row["turn_encoder_memory"] = median_ms(lambda i: model.encode_dialogues(batch), repeats, 0)
    return row, backend.encode_turns(turns[:-1] + [new_turn(0)], index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", default="/work/runs/synth", help="trained run directory")
    parser.add_argument("--threads", default="1,2", help="comma-separated torch / ONNX Runtime thread counts")
    parser.add_argument("--engines", default="torch,onnx", help="comma-separated text engines")
    parser.add_argument("--repeats", type=int, default=50, help="turns timed per part")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    results, queries = [], {}
    for threads in (int(t) for t in args.threads.split(",")):
        for engine in args.engines.split(","):
            row, queries[engine] = measure(args.run, engine, threads, args.repeats)
            if "torch" in queries and engine != "torch":
                reference = queries["torch"]
                cosine = (reference * queries[engine]).sum(1) / (
                    np.linalg.norm(reference, axis=1) * np.linalg.norm(queries[engine], axis=1)
                )
                row["min_cosine_vs_torch"] = float(cosine.min())
            results.append({"engine": engine, "threads": threads, **{k: round(v, 4) for k, v in row.items()}})
            print(
                f"engine={engine:5s} threads={threads}  "
                + "  ".join(f"{k}={v:.3f}" if k != "min_cosine_vs_torch" else f"{k}={v:.6f}" for k, v in row.items()),
                flush=True,
            )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
