"""Choose re-ranking's settings (k-reciprocal k1, k2, lambda; query expansion k, alpha) on val, never test.

Embeds each val manifest's query/gallery split once with the appearance model, scores every
setting of the grid with the field's cross-camera protocol, prints one line per setting and manifest
and names the setting with the best mean mAP over the manifests (the default of
:class:`minterpr.index.reciprocal.ReciprocalConfig` was chosen this way; docs/benchmarks.md). A
manifest whose name says test is refused: the choice would leak the test split.

Usage:
    .venv/bin/python benchmarks/select_rerank.py --model models/osnet-x0_25-reid \\
        --data data/reid/val.jsonl --data data/reid/peta_val.jsonl [--k1 4,8,12,20 --k2 1,3,6 --lam 0.1,0.3,0.6 \\
        --qe-k 0,3,5,8 --qe-alpha 1,3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any, Sequence


def _numbers(text: str, kind: type, option: str) -> list:
    """The comma-separated values of ``--option``; ValueError naming the option and the text."""
    try:
        values = [kind(p) for p in text.split(",") if p.strip()]
    except ValueError:
        values = []
    if not values:
        raise ValueError(f"--{option}: {text!r} is not a comma-separated list of {kind.__name__} values")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="appearance model directory or a reid run's best.pt")
    parser.add_argument("--data", action="append", required=True, help="val re-id manifest (repeatable)")
    parser.add_argument("--k1", default="4,6,8,12,20,30", help="k1 values (default 4,6,8,12,20,30)")
    parser.add_argument("--k2", default="1,3,6", help="k2 values (default 1,3,6)")
    parser.add_argument("--lam", default="0.1,0.3,0.6", help="lambda values (default 0.1,0.3,0.6)")
    parser.add_argument("--qe-k", default="0,3,5,8", help="query expansion k values, 0 = none (default 0,3,5,8)")
    parser.add_argument("--qe-alpha", default="1,3", help="query expansion alpha values (default 1,3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the query draw")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--json", help="also write every row and the choice here")
    args = parser.parse_args(argv)

    from minterpr.data.reid import query_gallery_split, read_manifest, split_labels
    from minterpr.errors import MinterprError
    from minterpr.evaluation.reid import reid_metrics, reid_metrics_from_distances
    from minterpr.index.reciprocal import ReciprocalConfig, k_reciprocal_distances
    from minterpr.models.reid_dir import load_reid_any
    from minterpr.training.reid import CropCache, embed_images

    leaked = [d for d in args.data if "test" in Path(d).name]
    if leaked:
        parser.exit(2, f"select_rerank: error: {leaked[0]}: a test manifest; choose on val, confirm on test after\n")
    try:
        expansions = sorted(
            {
                (k, a if k else 0.0)
                for k, a in itertools.product(
                    _numbers(args.qe_k, int, "qe-k"), _numbers(args.qe_alpha, float, "qe-alpha")
                )
            }
        )  # (0, alpha) is one setting: no expansion
        grid = [
            ReciprocalConfig(k1, k2, lam, qe_k, qe_alpha)
            for (qe_k, qe_alpha), k1, k2, lam in itertools.product(
                expansions,
                _numbers(args.k1, int, "k1"),
                _numbers(args.k2, int, "k2"),
                _numbers(args.lam, float, "lam"),
            )
        ]
        model = load_reid_any(args.model)
        cache = CropCache(model.config.image_size)
        splits = []
        for path in args.data:
            query, gallery = query_gallery_split(read_manifest(path), seed=args.seed)
            q = embed_images(model, query, cache, args.batch_size).numpy()  # (Q, F)
            g = embed_images(model, gallery, cache, args.batch_size).numpy()  # (G, F)
            labels = split_labels(query, gallery)
            splits.append((path, q, g, labels))
    except (MinterprError, ValueError, OSError) as exc:
        parser.exit(2, f"select_rerank: error: {exc}\n")
    rows: list[dict[str, Any]] = []
    for path, q, g, labels in splits:
        plain = reid_metrics(q, g, *labels)
        rows.append({"data": path, "setting": "none", "rank1": round(plain.cmc[1], 1), "mAP": round(plain.mean_ap, 1)})
        print(" ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)
    mean_map: dict[ReciprocalConfig, float] = {}
    for config in grid:
        maps = []
        for path, q, g, labels in splits:
            m = reid_metrics_from_distances(k_reciprocal_distances(q, g, config), *labels)
            maps.append(m.mean_ap)
            setting = config.label()
            rows.append({"data": path, "setting": setting, "rank1": round(m.cmc[1], 1), "mAP": round(m.mean_ap, 1)})
            print(" ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)
        mean_map[config] = sum(maps) / len(maps)
    best = max(grid, key=lambda c: (mean_map[c], -grid.index(c)))  # first of equals in grid order
    print(f"best by mean val mAP ({mean_map[best]:.2f}): {best.label()} (k1, k2, lambda, query expansion k, alpha)")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"model": args.model, "rows": rows, "best": best.to_dict()}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
