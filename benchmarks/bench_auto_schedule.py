"""The ``auto`` schedule's threshold: online R@1 per round and the moves made, for each ``Schedule.confident``.

``auto`` shows references when the people shown hold at least ``confident`` of the candidate mass
(:func:`~minterpr.interaction.schedule.shown_person_mass`), else it makes the move expected to tell
more. With appearance vectors a shown person's mass counts their appearance neighbours, so the
threshold chosen on embedding duplicates may no longer hold: this sweeps it, on val (choose there),
then confirm the chosen value once on test. Oracle users, one target per identity, as ``minterpr
simulate``. Prints one JSON line per value and a table.

    PYTHONPATH=src python benchmarks/bench_auto_schedule.py --run shipped --appearance shipped \\
        --data data/peta_cw --split val --limit 200 --confident 0.35 0.6 0.8 1.01
(1.01: the mass rule never fires; each turn makes the move of more expected information)
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", required=True, help="a run directory, model directory or 'shipped'")
    p.add_argument("--appearance", default=None, help="appearance model ('shipped', a directory or best.pt)")
    p.add_argument("--data", required=True, help="built dataset directory")
    p.add_argument("--split", default="val")
    p.add_argument("--limit", type=int, default=200, help="targets, one per identity")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--confident", type=float, nargs="+", default=[0.35, 0.6, 0.8, 1.01])
    args = p.parse_args(argv)

    from minterpr import load_pipeline
    from minterpr.data.dataset import BuiltDataset
    from minterpr.evaluation.online import one_target_per_identity, simulate
    from minterpr.interaction.schedule import Schedule

    start = time.perf_counter()
    pipeline = load_pipeline(args.run, device="cpu")
    dataset = BuiltDataset(args.data)
    gallery = dataset.gallery(args.split)
    index = pipeline.backend.index_images(gallery, root=str(dataset.image_root))
    if args.appearance:
        from minterpr.runtime.appearance import load_appearance

        index = load_appearance(args.appearance).add_to(index)
    targets = one_target_per_identity(gallery, args.limit, args.seed)
    print(f"{len(targets)} targets over {len(gallery)} images, indexed in {time.perf_counter() - start:.0f} s")
    rows = []
    for confident in args.confident:
        t = time.perf_counter()
        report = simulate(
            pipeline.backend,
            index,
            targets,
            question_policy="info_gain",
            reference_policy="diverse",
            schedule=Schedule(confident=confident),
            rounds=args.rounds,
            simulator="oracle",
            seed=args.seed,
            reranking=pipeline.rerank_config(),
        )
        r1 = [round(r["r1"], 1) for r in report.to_dict()["rounds"]]
        row = {"confident": confident, "r1": r1, "moves": report.extra["moves"], "seconds": time.perf_counter() - t}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n| confident | R@1 rounds 0 → {args.rounds} | questions / references |\n|---|---|---|")
    for row in rows:
        moves = row["moves"]
        print(
            f"| {row['confident']} | {' → '.join(map(str, row['r1']))} | "
            f"{moves.get('question', 0)} / {moves.get('reference', 0)} |"
        )
    return 0


if __name__ == "__main__":
    from minterpr.errors import MinterprError

    try:
        sys.exit(main())
    except MinterprError as err:  # a missing dataset or run, a bad file: one line, exit 2
        print(f"bench_auto_schedule: {err}", file=sys.stderr)
        sys.exit(2)
