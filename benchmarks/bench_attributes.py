"""Attribute recognition of a trained model's attribute head, per ontology slot.

For every image of a split's gallery manifest, the head's most probable label of each slot is
compared with the manifest's labels: correct when it is one of them (a jacket may be red
*and* white). The majority baseline always answers the split's most frequent label of the
slot. Images whose slot is unlabelled do not count for that slot. The attribute evidence of
the re-ranking (and of the static score's fusion) is only as good as these figures.

Usage:
    .venv/bin/python benchmarks/bench_attributes.py --run RUN_DIR --data DATASET_DIR [--split val]
"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np

from minterpr.data.formats.gallery import read_gallery
from minterpr.data.ontology import ONTOLOGY
from minterpr.index.neural_backend import NeuralBackend
from minterpr.models import load_model


def slot_accuracy(probs: np.ndarray, images: list) -> dict[str, tuple[float, float, int]]:
    """slot -> (head accuracy %, majority accuracy %, images counted)."""
    labels = ONTOLOGY.flat_labels()
    out: dict[str, tuple[float, float, int]] = {}
    for slot in ONTOLOGY.slot_names:
        columns = [j for j, (s, _) in enumerate(labels) if s == slot]
        values = [labels[j][1] for j in columns]
        truth = [(i, set((image.attributes or {}).get(slot) or ())) for i, image in enumerate(images)]
        truth = [(i, t) for i, t in truth if t]
        if not truth:
            continue
        majority = Counter(v for _, t in truth for v in t).most_common(1)[0][0]
        predicted = [values[int(probs[i, columns].argmax())] for i, _ in truth]
        head = float(np.mean([p in t for p, (_, t) in zip(predicted, truth)]))
        base = float(np.mean([majority in t for _, t in truth]))
        out[slot] = (100 * head, 100 * base, len(truth))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="run directory (model.pt) or a model file")
    parser.add_argument("--data", required=True, help="dataset directory with gallery_<split>.jsonl")
    parser.add_argument("--split", default="val")
    parser.add_argument("--image-root", help="image root (default: --data)")
    args = parser.parse_args()
    run = Path(args.run)
    model = load_model(run / "model.pt" if run.is_dir() else run)
    images = read_gallery(Path(args.data) / f"gallery_{args.split}.jsonl")
    index = NeuralBackend(model).index_images(images, args.image_root or args.data, progress=True)
    table = slot_accuracy(np.asarray(index.attribute_probs), images)
    print(f"{'slot':<16} {'head %':>7} {'majority %':>10} {'images':>7}")
    for slot, (head, base, n) in table.items():
        print(f"{slot:<16} {head:7.1f} {base:10.1f} {n:7d}")
    heads, bases = zip(*[(h, b) for h, b, _ in table.values()])
    print(f"{'mean':<16} {np.mean(heads):7.1f} {np.mean(bases):10.1f}")


if __name__ == "__main__":
    main()
