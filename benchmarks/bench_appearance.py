"""Appearance: which embedding finds the same person in another camera ("search with this image").

On a re-id manifest (``minterpr data reid``: ``test.jsonl`` for CUHK03, ``peta_test.jsonl`` for
PETA's test identities with the cameras their file names give), every embedding named is scored
with the field's cross-camera protocol (:func:`minterpr.evaluation.reid.reid_metrics`: one query
per identity and camera, same-camera matches left out): a retrieval run's image embedding
(``--run``, e.g. ``shipped``: today's "search with this image"), torchreid OSNet weights used as
they are (``--weights``), a trained appearance model (``--model RUN/best.pt``). ``--only PREFIX``
keeps the identities whose id starts with it (``peta-grid:`` = the GRID fold, a camera set the
appearance training never sees). ``--rerank K1,K2,LAMBDA[,QE_K,QE_ALPHA]`` (repeatable; ``default`` = the settings
chosen on val) adds a line per embedding and setting after k-reciprocal re-ranking
(:mod:`minterpr.index.reciprocal`). Prints one line per embedding; ``--json`` writes them.

Usage:
    .venv/bin/python benchmarks/bench_appearance.py --data data/reid/peta_test.jsonl --run shipped \\
        --weights ../shared/weights/osnet_x0_25_msmt17.pth --model runs/reid/best.pt [--only peta-grid:] \\
        [--rerank default --rerank 20,6,0.3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np


def _run_embeddings(run: str, images: list, batch_size: int) -> np.ndarray:
    """A retrieval run's image embeddings (as a gallery index stores them), in ``images`` order."""
    from minterpr.runtime.run import load_run
    from minterpr.types import GalleryImage

    backend = load_run(run, device="cpu").backend(batch_size)
    index = backend.index_images([GalleryImage(i.path, i.person_id) for i in images], root=None, strict=True)
    return np.asarray(index.embeddings, dtype=np.float32)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="re-id manifest (minterpr data reid)")
    parser.add_argument("--run", action="append", default=[], help="retrieval run: its image embedding (repeatable)")
    parser.add_argument(
        "--weights", action="append", default=[], help="torchreid OSNet x0.25 file, untuned (repeatable)"
    )
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        help="appearance model: a directory or a reid run's best.pt (repeatable)",
    )
    parser.add_argument("--only", help="keep identities whose id starts with this (a fold)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the query draw")
    parser.add_argument(
        "--rerank",
        action="append",
        default=[],
        metavar="K1,K2,LAMBDA[,QE_K,QE_ALPHA]",
        help="also re-ranked (repeatable; 'default')",
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)

    from minterpr.data.reid import query_gallery_split, read_manifest, split_labels
    from minterpr.errors import MinterprError
    from minterpr.evaluation.reid import reid_metrics, reid_metrics_from_distances
    from minterpr.index.reciprocal import ReciprocalConfig, k_reciprocal_distances
    from minterpr.models.reid import ReidModel, ReidModelConfig
    from minterpr.models.reid_dir import load_reid_any
    from minterpr.training.reid import CropCache, embed_images

    try:
        settings = [ReciprocalConfig() if r == "default" else ReciprocalConfig.parse(r) for r in args.rerank]
        images = [i for i in read_manifest(args.data) if not args.only or i.person_id.startswith(args.only)]
        query, gallery = query_gallery_split(images, seed=args.seed)
        if not query:
            raise ValueError(
                f"{args.data}: no identity seen by two known cameras{' under ' + args.only if args.only else ''}"
            )
    except (MinterprError, ValueError, OSError) as exc:
        parser.exit(2, f"bench_appearance: error: {exc}\n")
    both = query + gallery
    cache = CropCache((256, 128))
    rows: list[dict[str, Any]] = []
    sources = (
        [("run", r) for r in args.run] + [("weights", w) for w in args.weights] + [("model", m) for m in args.model]
    )
    for kind, source in sources:
        start = time.perf_counter()
        try:
            if kind == "run":
                features = _run_embeddings(source, both, args.batch_size)
            else:
                model = (
                    load_reid_any(source) if kind == "model" else ReidModel(ReidModelConfig(), weights=source).eval()
                )
                features = embed_images(model, both, cache, args.batch_size).numpy()
        except (MinterprError, ValueError, OSError) as exc:
            parser.exit(2, f"bench_appearance: error: {source}: {exc}\n")
        q, g = features[: len(query)], features[len(query) :]
        labels = split_labels(query, gallery)
        try:
            scored = [("", reid_metrics(q, g, *labels))]
            for c in settings:
                reranked = reid_metrics_from_distances(k_reciprocal_distances(q, g, c), *labels)
                scored.append((f"+rerank:{c.label()}", reranked))
        except ValueError as exc:
            parser.exit(2, f"bench_appearance: error: {exc}\n")
        for suffix, metrics in scored:
            row = {
                "embedding": f"{kind}:{source}{suffix}",
                **{k: round(v, 1) if isinstance(v, float) else v for k, v in metrics.to_dict().items()},
                "seconds": round(time.perf_counter() - start, 1),
            }
            rows.append(row)
            print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"data": args.data, "only": args.only, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
