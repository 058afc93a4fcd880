"""Throughput of the real encoders on CPU: images/s and texts/s (prints a table).

Run:
    python benchmarks/bench_encoders.py            # 2 threads, batch 32
    python benchmarks/bench_encoders.py --threads 1 --repeats 3

Images: efficientnet_lite0 and mobilenet_v2 at 256x128 and 128x64, channels_last off/on,
eval mode under torch.inference_mode, then with BatchNorm folded into the convs
(``fuse_batchnorm()``, the gallery-extraction setting). Texts: minilm on pedestrian-description-length
sentences. Members whose weights package is missing are reported and skipped.
"""

from __future__ import annotations

import argparse
import time

import torch

from minterpr.models.encoders import create_image_encoder, create_text_encoder

DESCRIPTION = (
    "A young woman with long black hair wears a white short-sleeved shirt, blue jeans and "
    "white sneakers, and carries a brown shoulder bag on her left side."
)


def per_second(run, items: int, repeats: int) -> float:
    """Best-of-``repeats`` rate after one warm-up call (the best run is least disturbed)."""
    run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return items / best


def bench_images(batch: int, repeats: int) -> None:
    print(f"{'encoder':<20}{'input':>10}{'channels_last':>15}{'bn folded':>11}{'images/s':>12}")
    for name in ("efficientnet_lite0", "mobilenet_v2"):
        try:
            encoder = create_image_encoder(name).eval()
        except ImportError as error:
            print(f"{name:<20} skipped: {error}")
            continue
        for fused in (False, True):
            if fused:
                encoder.fuse_batchnorm()
            for height, width in ((256, 128), (128, 64)):
                x = torch.randn(batch, 3, height, width)
                for channels_last in (False, True):
                    encoder.set_channels_last(channels_last)

                    def run() -> None:
                        with torch.inference_mode():
                            encoder(x)

                    rate = per_second(run, batch, repeats)
                    size = f"{height}x{width}"
                    print(f"{name:<20}{size:>10}{str(channels_last):>15}{str(fused):>11}{rate:>12.1f}")


def bench_texts(batch: int, repeats: int) -> None:
    try:
        encoder = create_text_encoder("minilm").eval()
    except ImportError as error:
        print(f"minilm skipped: {error}")
        return
    texts = [DESCRIPTION] * batch
    tokens = encoder.tokenize(texts)

    def run() -> None:
        with torch.inference_mode():
            encoder(tokens)

    def run_with_tokenizer() -> None:
        with torch.inference_mode():
            encoder.encode(texts)

    length = tokens["input_ids"].shape[1]
    print(
        f"minilm ({length} tokens/text): {per_second(run, batch, repeats):.1f} texts/s model only, "
        f"{per_second(run_with_tokenizer, batch, repeats):.1f} texts/s with tokenization"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--batch", type=int, default=32, help="images or texts per forward")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per setting (best is kept)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}")
    bench_images(args.batch, args.repeats)
    bench_texts(args.batch, args.repeats)


if __name__ == "__main__":
    main()
