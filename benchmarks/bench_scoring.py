"""The scoring configuration's weights, measured by simulated searches: decide on val, confirm on test.

A simulated user (the oracle by default: it describes the target, answers the questions, rules out
what it is shown with what differs and confirms the target; ``--simulator witness``: the text-only
witness, which cannot recognise a face and says "could be" to look-alikes) searches for one target
per identity of ``--split`` with the ``auto`` schedule. The same searches run once per point of the
grid of ``--vary FIELD=V1,V2,...`` (fields of :class:`~minterpr.interaction.reranking.RerankConfig`;
several ``--vary`` give their product), each point over the model's stored scoring config. The
defaults live in ``RerankConfig``; a point changes them only for this measurement. Prints one JSON
line per point: R@1 and R@5 by round, BRI and seconds; ``--json`` keeps them all.

    python benchmarks/bench_scoring.py --run shipped --data data/peta_cw --split val --limit 300 \\
        --vary rejection_penalty=0.25,0.5,1.0 --vary anchor_lambda=0.5,0.7,0.9
    python benchmarks/bench_scoring.py --run shipped --data data/peta_cw --split val --limit 300 \\
        --simulator witness --rounds 5 --vary plausible_lambda=1.0,0.7,0.5,0.3
    python benchmarks/bench_scoring.py --run shipped --data data/peta_cw --split val --limit 300 \\
        --simulator witness --policy-temperature 0.02,0.05,0.1,fitted

``--policy-temperature`` measures the temperature of the candidate distribution the policies and the
``auto`` schedule choose moves by (a number, or ``fitted``: the model's fitted match temperature),
crossed with the ``--vary`` grid.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time

from minterpr.evaluation.ceilings import add_ceiling_arguments


def parse_vary(items: list[str]) -> list[tuple[str, list[object]]]:
    """``["a=1,2", "b=true,false"]`` -> ``[("a", [1.0, 2.0]), ("b", [True, False])]``; ValueError naming the item."""
    out = []
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not name or not values:
            raise ValueError(f"--vary {item!r}: expected FIELD=V1,V2,...")
        parsed: list[object] = []
        for text in values.split(","):
            low = text.strip().lower()
            if low in ("true", "false"):
                parsed.append(low == "true")
                continue
            try:
                parsed.append(float(text))
            except ValueError:
                raise ValueError(f"--vary {item!r}: {text!r} is not a number, true or false") from None
        out.append((name, parsed))
    return out


def pooled(reports, value) -> float:
    """The mean of ``value(report)`` over ``[(searches, report), ...]``, weighted by searches (the pooled figure)."""
    total = sum(n for n, _ in reports)
    return sum(n * value(report) for n, report in reports) / total


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, help="trained run, exported model dir or 'shipped'")
    parser.add_argument("--data", required=True, help="dataset directory with gallery_<split>.jsonl")
    parser.add_argument("--split", default="val", help="val (to decide) or test (to confirm)")
    parser.add_argument("--limit", type=int, default=300, help="targets (one per identity, seeded)")
    parser.add_argument("--rounds", type=int, default=5, help="turns after the description")
    parser.add_argument("--simulator", choices=("oracle", "witness"), default="oracle")
    parser.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="FIELD=V1,V2,...",
        help="a scoring field and the values to measure (repeat for a grid)",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[0],
        help="each seed draws other targets (one image per identity) and another conversation; "
        "the figures pool them (a small val split gives more searches)",
    )
    parser.add_argument(
        "--policy-temperature",
        default=None,
        metavar="T1,T2,...",
        help="the policies' temperatures to measure: numbers or 'fitted' (default: the policies' own)",
    )
    parser.add_argument(
        "--appearance",
        default="none",
        metavar="none|auto|shipped|PATH",
        help="the appearance model whose vectors the gallery carries (image-to-image comparisons: duplicates, "
        "rejections, plausible references); default none, as the figures recorded before it",
    )
    add_ceiling_arguments(parser)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    if min(args.seeds) < 0 or len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds: distinct integers >= 0, got {' '.join(map(str, args.seeds))}")

    from pathlib import Path

    from minterpr.data.formats.gallery import read_gallery
    from minterpr.errors import InputError, MinterprError
    from minterpr.evaluation.ceilings import Ceilings
    from minterpr.evaluation.online import one_target_per_identity, simulate
    from minterpr.interaction.policies import policy_temperature
    from minterpr.interaction.reranking import RerankConfig
    from minterpr.interaction.simulators import WitnessSimulator
    from minterpr.runtime.pipeline import load_pipeline

    manifest = Path(args.data) / f"gallery_{args.split}.jsonl"
    rows = []
    try:
        grid = parse_vary(args.vary)
        points = [
            dict(zip([name for name, _ in grid], values))
            for values in itertools.product(*[values for _, values in grid])
        ]
        for point in points:  # a bad field or value fails before any work
            RerankConfig().with_(**point)
        given = [] if args.policy_temperature is None else args.policy_temperature.split(",")
        for value in given:
            policy_temperature(value, 1.0)
        ceilings = Ceilings.from_args(args)
        if not manifest.is_file():
            print(f"bench_scoring: no gallery manifest {manifest}", file=sys.stderr)
            return 2
        pipeline = load_pipeline(args.run, appearance=args.appearance)
        if ceilings.identity_appearance is not None and pipeline.appearance is None:
            raise InputError("--identity-appearance needs an appearance model (--appearance)")
        run = pipeline.run
        temperatures = [policy_temperature(v, run.extras.match_temperature()) for v in given] or [None]
        # one point per (temperature, grid point); None: the policies' own
        points = [
            {**({"policy_temperature": t} if t is not None else {}), **point} for t in temperatures for point in points
        ]
        backend = run.backend()
        gallery = read_gallery(manifest)
        index = backend.index_images(gallery, root=args.data, progress=False).require_complete("bench_scoring")
        if pipeline.appearance is not None:
            index = pipeline.appearance.add_to(index)
        index = ceilings.apply(index)
        drawn = {seed: one_target_per_identity(gallery, args.limit, seed) for seed in args.seeds}
        for point in points:
            start = time.perf_counter()
            reports = []
            for seed, targets in drawn.items():
                simulator = WitnessSimulator() if args.simulator == "witness" else "oracle"
                reports.append(
                    (
                        len(targets),
                        simulate(
                            backend,
                            index,
                            targets,
                            rounds=args.rounds,
                            simulator=simulator,
                            seed=seed,
                            schedule="auto",
                            reranking=run.rerank_config().with_(
                                **{k: v for k, v in point.items() if k != "policy_temperature"}
                            ),
                            policy_temperature=point.get("policy_temperature"),
                        ),
                    )
                )
            row = {
                **point,
                "split": args.split,
                "simulator": args.simulator,
                "appearance": pipeline.appearance_fingerprint,
                "label_reading": args.label_reading,
                "identity_appearance": args.identity_appearance,
                "seeds": args.seeds,
                "searches": sum(n for n, _ in reports),
            }
            for name in ("r1", "r5"):
                row[name] = [
                    round(pooled(reports, lambda rep, r=r, name=name: rep.rounds[r][name]), 1)
                    for r in range(args.rounds + 1)
                ]
            row["bri"] = round(pooled(reports, lambda rep: rep.bri), 3)
            row["seconds"] = round(time.perf_counter() - start, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    except (ValueError, MinterprError) as err:  # a bad --vary, field or value; a broken run or manifest
        print(f"bench_scoring: {err}", file=sys.stderr)
        return 2
    if args.json:
        Path(args.json).write_text(json.dumps({"run": args.run, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
