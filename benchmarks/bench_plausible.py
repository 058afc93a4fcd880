"""Plausible references: how strongly an image the user could not rule out should pull the ranking.

A text-only witness (:class:`~minterpr.interaction.simulators.WitnessSimulator`: it knows a caption
written from the target's labels, answers from it, corrects what it is shown, and cannot recognise a
face, so shown the target or a look-alike that fits everything it remembers it says "could be",
"maybe") searches for one target per identity of ``--split``. The same searches run once per
``--lambdas`` value of :attr:`~minterpr.interaction.reranking.RerankConfig.plausible_lambda` (1.0: the
blend off, the behaviour before it). Decide on val, confirm on test; the default lives in
``RerankConfig``. Prints one line per value: R@1 and R@5 by round, and BRI.

    python benchmarks/bench_plausible.py --run shipped --data data/peta_cw --split val --limit 300
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, help="trained run, exported model dir or 'shipped'")
    parser.add_argument("--data", required=True, help="dataset directory with gallery_<split>.jsonl")
    parser.add_argument("--split", default="val", help="val (to decide) or test (to confirm)")
    parser.add_argument("--limit", type=int, default=300, help="targets (one per identity, seeded)")
    parser.add_argument("--rounds", type=int, default=3, help="witness turns after the description")
    parser.add_argument("--lambdas", type=float, nargs="+", default=[1.0, 0.9, 0.8, 0.7, 0.6, 0.5])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)

    from pathlib import Path

    from minterpr.data.formats.gallery import read_gallery
    from minterpr.errors import MinterprError
    from minterpr.evaluation.online import one_target_per_identity, simulate
    from minterpr.interaction.reranking import RerankConfig
    from minterpr.interaction.simulators import WitnessSimulator
    from minterpr.runtime import load_run

    manifest = Path(args.data) / f"gallery_{args.split}.jsonl"
    rows = []
    try:
        for lam in args.lambdas:  # a bad value fails before any work
            RerankConfig(plausible_lambda=lam)
        if not manifest.is_file():
            print(f"bench_plausible: no gallery manifest {manifest}", file=sys.stderr)
            return 2
        run = load_run(args.run)
        backend = run.backend()
        gallery = read_gallery(manifest)
        index = backend.index_images(gallery, root=args.data, progress=False).require_complete("bench_plausible")
        targets = one_target_per_identity(gallery, args.limit, args.seed)
        for lam in args.lambdas:
            start = time.perf_counter()
            report = simulate(backend, index, targets, rounds=args.rounds, simulator=WitnessSimulator(),
                              seed=args.seed, reranking=run.rerank_config().with_(plausible_lambda=lam))
            row = {"plausible_lambda": lam, "split": args.split, "targets": len(targets),
                   "r1": [round(r["r1"], 1) for r in report.rounds], "r5": [round(r["r5"], 1) for r in report.rounds],
                   "bri": round(report.bri, 3), "seconds": round(time.perf_counter() - start, 1)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    except MinterprError as err:
        print(f"bench_plausible: {err}", file=sys.stderr)
        return 2
    if args.json:
        Path(args.json).write_text(json.dumps({"run": args.run, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
