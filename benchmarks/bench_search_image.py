"""'Search with this image' through the session: one example-image turn, ranked as a session ranks it.

On a re-id manifest (``minterpr data reid``'s ``peta_test.jsonl``: PETA's test identities, cameras
from the file names) every crop is a gallery image; the queries are one crop per identity and camera
(:func:`minterpr.data.reid.query_gallery_split`, seeded). For each query a fresh session over the
whole gallery takes one turn, ``session.example(query)``; the ranking is read with the query itself
and the same person's crops from the query's camera left out (the targets: the same identity's other
crops, other cameras only). Printed per row: R@1/5/10 and mAP (percent).

Rows: ``embedding`` = the gallery without calibrated appearance (today's ranking: the attribute
model's query for the image), ``appearance λe=…`` = with the appearance model's vectors and its
same-person calibration, the backend's score blended with the appearance cosine at each
``--lambdas`` value (``RerankConfig.example_lambda``; choose it on ``peta_val``, report on test).

Usage:
    .venv/bin/python benchmarks/bench_search_image.py --data data/reid/peta_test.jsonl --run shipped \\
        --appearance runs/reid/best.pt [--lambdas 0,0.3,0.5] [--cache /tmp/index.npz] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np


def _index(pipeline: Any, images: list, cache: str | None) -> Any:
    """The gallery index of every crop (embeddings + appearance), cached in ``cache`` (.npz) when named."""
    from minterpr.index.gallery_index import GalleryIndex
    from minterpr.runtime.appearance import with_appearance
    from minterpr.types import GalleryImage

    gallery = [GalleryImage(i.path, i.person_id, camera_id=i.camera) for i in images]
    if cache and Path(cache).is_file():
        stored = np.load(cache)
        if list(stored["paths"]) == [g.path for g in gallery]:
            index = GalleryIndex(gallery, stored["embeddings"], attribute_probs=stored["probs"], root=None)
            return with_appearance(index, stored["appearance"], pipeline.appearance.same_person)
    index = pipeline.index_images(gallery, root=None, progress=False, strict=True)
    if cache:
        np.savez(
            cache,
            paths=np.array([g.path for g in gallery]),
            embeddings=index.embeddings,
            probs=index.attribute_probs,
            appearance=index.appearance,
        )
    return index


def _scores(pipeline: Any, index: Any, query: list, config: Any) -> dict[str, float]:
    """R@1/5/10 and mAP (%) of one example turn per query, over ``index``."""
    hits1 = hits5 = hits10 = 0
    aps = []
    for q in query:
        step = pipeline.session(index, reranking=config, schedule="questions", shortlist=None).example(q.path)
        kept = [
            int(i)
            for i in step.ranking
            if index.images[i].path != q.path
            and not (index.images[i].person_id == q.person_id and index.images[i].camera_id == q.camera)
        ]
        same = np.array([index.images[i].person_id == q.person_id for i in kept])
        first = int(np.argmax(same))
        hits1 += first < 1
        hits5 += first < 5
        hits10 += first < 10
        found = np.flatnonzero(same)
        aps.append(float(np.mean((np.arange(len(found)) + 1) / (found + 1))))
    n = len(query)
    return {"R@1": 100 * hits1 / n, "R@5": 100 * hits5 / n, "R@10": 100 * hits10 / n, "mAP": 100 * float(np.mean(aps))}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="re-id manifest (minterpr data reid)")
    parser.add_argument("--run", default="shipped", help="retrieval run (default: shipped)")
    parser.add_argument("--appearance", required=True, help="appearance model best.pt with its same_person.json")
    parser.add_argument("--lambdas", default="0,0.3,0.5", help="example_lambda values, comma-separated")
    parser.add_argument("--seed", type=int, default=0, help="seed of the query draw")
    parser.add_argument("--cache", help="an .npz to keep the gallery index in between runs")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)

    from minterpr.data.reid import query_gallery_split, read_manifest
    from minterpr.errors import MinterprError
    from minterpr.runtime.appearance import with_appearance
    from minterpr.runtime.pipeline import load_pipeline

    try:
        lambdas = [float(v) for v in args.lambdas.split(",")]
        images = read_manifest(args.data)
        query, _ = query_gallery_split(images, seed=args.seed)
        pipeline = load_pipeline(args.run, appearance=args.appearance)
        if pipeline.appearance.same_person is None:
            raise ValueError(f"{args.appearance}: no same_person.json (run `minterpr calibrate appearance` first)")
        start = time.perf_counter()
        index = _index(pipeline, images, args.cache)
    except (MinterprError, ValueError, OSError) as exc:
        parser.exit(2, f"bench_search_image: error: {exc}\n")
    print(f"{len(query)} queries over {len(index)} crops (indexed in {time.perf_counter() - start:.0f} s)", flush=True)
    base = pipeline.rerank_config()
    rows: list[dict[str, Any]] = []
    for name, gallery, config in [
        ("embedding", with_appearance(index, None), base),
        *[(f"appearance λe={lam:g}", index, base.with_(example_lambda=lam)) for lam in lambdas],
    ]:
        start = time.perf_counter()
        row = {
            "ranking": name,
            **{k: round(v, 1) for k, v in _scores(pipeline, gallery, query, config).items()},
            "seconds": round(time.perf_counter() - start, 1),
        }
        rows.append(row)
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "data": args.data,
                    "run": args.run,
                    "appearance": args.appearance,
                    "queries": len(query),
                    "rows": rows,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
