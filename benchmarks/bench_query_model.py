"""Throughput of the retrieval model on CPU (prints a table).

Run:
    python benchmarks/bench_query_model.py                 # efficientnet_minilm, 2 threads
    python benchmarks/bench_query_model.py --threads 1 --config mobilenet_minilm

Measures, in eval mode under ``torch.inference_mode``:

* dialogue queries: a batch of 64 dialogues x 7 rounds (description, 4 Q&A, 2 reference
  turns). "cached text" feeds precomputed text features (training with a frozen text
  encoder, or a session re-encoding a conversation); "from raw text" includes the text
  encoder on all 448 turn texts. A dialogue gives 7 queries (one per round); the rate is
  dialogues/s.
* gallery images: ``encode_images`` (backbone + heads) at 128x64 and 256x128, batch 64.
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

import torch

from minterpr.models import create_model

DESCRIPTION = (
    "A young woman with long black hair wears a white short-sleeved shirt, blue jeans and "
    "white sneakers, and carries a brown shoulder bag on her left side."
)
QA = "What colour were her shoes? white"
FEEDBACK = "no, her bag is brown and she is not wearing a hat"
TURN_TYPES = [0, 1, 1, 1, 1, 2, 2]


def per_second(run: Callable[[], object], items: int, repeats: int) -> float:
    """Best-of-``repeats`` rate after one warm-up call (the best run is least disturbed)."""
    run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return items / best


def bench_dialogues(config: str, batch: int, repeats: int) -> None:
    model = create_model(config).eval()
    rounds = len(TURN_TYPES)
    texts = [DESCRIPTION if t == 0 else QA if t == 1 else FEEDBACK for t in TURN_TYPES] * batch
    types = torch.tensor([TURN_TYPES] * batch)
    turn_image = torch.nn.functional.normalize(torch.randn(batch, rounds, model.embed_dim), dim=-1)
    turn_image = turn_image * (types == 2).unsqueeze(-1)
    with torch.inference_mode():
        cached = model.text_features(texts).view(batch, rounds, -1)

    def from_cache() -> None:
        with torch.inference_mode():
            model.encode_dialogues({"turn_types": types, "turn_text": cached, "turn_image": turn_image})

    def from_text() -> None:
        with torch.inference_mode():
            features = model.text_features(texts).view(batch, rounds, -1)
            model.encode_dialogues({"turn_types": types, "turn_text": features, "turn_image": turn_image})

    print(f"\ndialogue queries ({config}, batch {batch} x {rounds} rounds)")
    print(f"{'input':<20}{'dialogues/s':>14}{'queries/s':>12}")
    for name, run in (("cached text", from_cache), ("from raw text", from_text)):
        rate = per_second(run, batch, repeats)
        print(f"{name:<20}{rate:>14.1f}{rate * rounds:>12.1f}")


def bench_images(config: str, batch: int, repeats: int) -> None:
    print(f"\ngallery images ({config}, batch {batch}, encode_images = backbone + heads)")
    print(f"{'input':<20}{'images/s':>14}")
    for height, width in ((128, 64), (256, 128)):
        model = create_model(config, image_size=(height, width)).eval()
        x = torch.randn(batch, 3, height, width)

        def run() -> None:
            with torch.inference_mode():
                model.encode_images(x)

        print(f"{f'{height}x{width}':<20}{per_second(run, batch, repeats):>14.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="efficientnet_minilm", help="MODEL_CONFIGS name")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    bench_dialogues(args.config, args.batch, args.repeats)
    bench_images(args.config, args.batch, args.repeats)


if __name__ == "__main__":
    main()
