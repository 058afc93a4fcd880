"""``minterpr eval-reid``: how well an appearance model tells one person from another.

The field's protocol on a re-id manifest (``minterpr data reid``'s ``test.jsonl``): one query
crop per identity and camera (seeded), the rest the gallery, same-identity crops of the query's
own camera left out; rank-1/5/10, mAP and mINP (:mod:`minterpr.evaluation.reid`). The model is a
reid run's ``best.pt`` or an appearance model directory (``--model``) or a torchreid OSNet state dict (``--weights``, never
fine-tuned here: the baseline). ``--rerank`` adds the same scores after k-reciprocal re-ranking
(:mod:`minterpr.index.reciprocal`; settings chosen on val unless given as K1,K2,LAMBDA[,QE_K,QE_ALPHA]), printed
beside the plain ones: the field reports both.

Example:
    $ minterpr eval-reid --model runs/reid/best.pt --data data/reid/test.jsonl
    $ minterpr eval-reid --weights ../shared/weights/osnet_x0_25_msmt17.pth --data data/reid/test.jsonl --json -
    $ minterpr eval-reid --model models/osnet-x0_25-reid --data data/reid/test.jsonl --rerank
"""

from __future__ import annotations

import argparse
import sys

from minterpr.cli.shared.common import add_common_options, write_json

COMMAND = "minterpr eval-reid"


def run(args: argparse.Namespace) -> int:
    from minterpr.data.errors import DataError
    from minterpr.data.reid import query_gallery_split, read_manifest, split_labels
    from minterpr.errors import MinterprError
    from minterpr.evaluation.reid import reid_metrics, reid_metrics_from_distances
    from minterpr.index.reciprocal import ReciprocalConfig, k_reciprocal_distances
    from minterpr.models.device import resolve_device
    from minterpr.models.reid import ReidModel, ReidModelConfig
    from minterpr.models.reid_dir import load_reid_any
    from minterpr.training.reid import CropCache, embed_images

    try:
        rerank = (
            None if args.rerank is None else ReciprocalConfig.parse(args.rerank) if args.rerank else ReciprocalConfig()
        )
        images = read_manifest(args.data)
        query, gallery = query_gallery_split(images, seed=args.seed)
        if args.model:
            model = load_reid_any(args.model)  # a run's best.pt or an appearance model directory
        else:
            model = ReidModel(ReidModelConfig(width=args.width), weights=args.weights).eval()
        model.to(resolve_device(args.device))
        cache = CropCache(model.config.image_size)
        q = embed_images(model, query, cache, args.batch_size).numpy()  # (Q, F)
        g = embed_images(model, gallery, cache, args.batch_size).numpy()  # (G, F)
        labels = split_labels(query, gallery)
        metrics = reid_metrics(q, g, *labels)
        reranked = (
            None if rerank is None else reid_metrics_from_distances(k_reciprocal_distances(q, g, rerank), *labels)
        )
    except (DataError, MinterprError, ValueError, OSError) as err:
        print(f"{COMMAND}: error: {err}", file=sys.stderr)
        return 2
    report = {
        "data": args.data,
        "model": args.model or args.weights,
        "seed": args.seed,
        "query": len(query),
        "gallery": len(gallery),
        **metrics.to_dict(),
    }
    if rerank is not None and reranked is not None:
        report["reranked"] = {**rerank.to_dict(), **reranked.to_dict()}
    if args.json:
        write_json(args.json, report)
    if args.json != "-":
        print(
            f"{len(query)} queries, {len(gallery)} gallery crops ({metrics.skipped} queries without a "
            f"cross-camera match)"
        )
        print(_LINE.format(**metrics.to_dict()))
        if rerank is not None and reranked is not None:
            print(f"re-ranked ({rerank.label()}: k1, k2, lambda, query expansion k and alpha):")
            print(_LINE.format(**reranked.to_dict()))
    return 0


_LINE = "rank-1 {rank1:.1f}  rank-5 {rank5:.1f}  rank-10 {rank10:.1f}  mAP {mAP:.1f}  mINP {mINP:.1f}"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval-reid",
        help="score an appearance model (rank-k, mAP, mINP)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--model",
        metavar="BEST_PT",
        help="a reid run's best.pt (minterpr train --config reid) or an appearance model directory "
        "(models/osnet-x0_25-reid)",
    )
    source.add_argument("--weights", metavar="PTH", help="a torchreid OSNet state dict, used as it is")
    parser.add_argument("--width", default="x0_25", help="OSNet width of --weights (default x0_25)")
    parser.add_argument("--data", required=True, metavar="MANIFEST", help="a re-id manifest (minterpr data reid)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the query draw (default 0)")
    parser.add_argument(
        "--rerank",
        nargs="?",
        const="",
        metavar="K1,K2,LAMBDA[,QE_K,QE_ALPHA]",
        help="also score after re-ranking (default 8,3,0.3,5,3: k-reciprocal k1, k2, lambda, query expansion k and "
        "alpha, chosen on val)",
    )
    parser.add_argument("--batch-size", type=int, default=128, help="crops per forward pass (default 128)")
    parser.set_defaults(handler=run)
    add_common_options(parser, device=True, json=True, needs=("model",))
