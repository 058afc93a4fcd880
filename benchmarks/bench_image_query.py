"""Query by image: how well a run's image embedding finds other images of the same person.

Re-ranking after feedback compares the gallery with the images the user judged (a shown image
confirmed as "like her" pulls its neighbours up, a rejected one pushes them down), so the image
embedding's identity quality is what that feedback can use. This benchmark measures it directly,
as single-shot re-identification: every image of a gallery manifest whose person has at
least one other image there is a query; the gallery is every *other* image (the query itself is
left out); the score is the cosine of the model's image embeddings (as stored in a gallery
index), ranked by :func:`minterpr.evaluation.metrics.leave_one_out_ranks`. Printed: queries,
R@1/5/10, mAP and mINP (percent).

PETA's manifests record no camera per image, so, unlike Market-1501's protocol, images of the
same person from the same camera are not removed from the gallery: figures are higher than a
cross-camera protocol would give, and comparable between runs on the same manifest.

Usage:
    .venv/bin/python benchmarks/bench_image_query.py --run runs/peta --gallery data/peta/gallery_test.jsonl \\
        [--image-root DIR] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from minterpr.evaluation.metrics import leave_one_out_ranks


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="run directory (model.pt) or a model file")
    parser.add_argument("--gallery", required=True, help="gallery manifest (person ids and images)")
    parser.add_argument("--image-root", help="image root (default: the manifest's folder)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)

    from minterpr.data.formats.gallery import read_gallery
    from minterpr.errors import MinterprError
    from minterpr.runtime.run import load_run

    gallery = Path(args.gallery)
    try:
        images = read_gallery(gallery)
        trained = load_run(args.run, device="cpu")
        start = time.perf_counter()
        index = trained.backend(args.batch_size).index_images(
            images, root=args.image_root or str(gallery.parent), progress=False
        )
        index.require_complete(f"bench_image_query ({gallery})")
    except (MinterprError, OSError) as exc:  # a missing or broken manifest, run or image: one line, no traceback
        parser.exit(2, f"bench_image_query: error: {exc}\n")
    embeddings = np.asarray(index.embeddings, dtype=np.float32)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True).clip(min=1e-12)
    _, ranks = leave_one_out_ranks(embeddings, [image.person_id for image in index.images])
    figures: dict[str, Any] = {
        "run": args.run,
        "gallery": str(gallery),
        "images": len(index.images),
        "queries": int(len(ranks.first)),
        "encode_s": time.perf_counter() - start,
        **{k: round(v, 2) for k, v in ranks.summary().items()},
    }
    print(" ".join(f"{k}={v}" for k, v in figures.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
