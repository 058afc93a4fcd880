"""R@1 per round with and without each vision-language model use, from the reports of docs/vlm.md.

Reads ``minterpr simulate`` / ``minterpr eval`` JSON reports (the first is the baseline, normally
the run without a model) and prints, per report: R@1 per round (95 % Wilson interval half-width in
the last round), the change from the baseline per round, and what the model cost per turn
(calls, cached, fell back, tokens, latency; per run for ``eval``). ``--plot OUT.png`` draws R@1 per
round of every report with its 95 % band.

Example (after the commands of docs/vlm.md "Measuring R@1 per round with each use"):
    python benchmarks/vlm_compare.py none.json vlm_reading.json vlm_asking.json vlm_anchor.json \\
        vlm_rerank.json vlm_caption.json vlm_all.json --plot vlm_r1.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from minterpr.evaluation.report import EvaluationReport, num_queries, percent_interval, plot_metric_per_round


def cost(extra: dict) -> str:
    """One cell: what the model cost (per turn for simulate, the run's total for eval)."""
    usage = extra.get("vlm")
    captioned = extra.get("protocol", {}).get("vlm_captioned")
    if not usage:
        return "no model" if captioned is None else f"no model at search time; MTG captions on {captioned} crops"
    if usage.get("per_turn"):
        t = usage["per_turn"]
        return (
            f"{t['calls']:.2f} calls/turn ({t['cached']:.2f} cached, {t['fallbacks']:.2f} fell back), "
            f"{t['tokens']:.0f} tokens, {1000 * t['latency_s']:.1f} ms"
        )
    t = usage.get("total", {})
    return (
        f"{t.get('calls', 0)} calls ({t.get('cached', 0)} cached, {t.get('failed', 0)} fell back), "
        f"{t.get('prompt_tokens', 0) + t.get('completion_tokens', 0):,} tokens, {t.get('latency_s', 0):.1f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path, help="JSON reports; the first is the baseline")
    parser.add_argument("--plot", type=Path, help="R@1 per round of every report, as a PNG")
    args = parser.parse_args()
    reports = {path.stem: EvaluationReport.load(path) for path in args.reports}
    raw = {path.stem: json.loads(path.read_text(encoding="utf-8")) for path in args.reports}
    base_name, base = next(iter(reports.items()))
    rounds = max(len(r.rounds) for r in reports.values())
    width = max(len(name) for name in reports)
    print(f"{'R@1':<{width}} " + " ".join(f"round {k}".rjust(8) for k in range(rounds)) + "   ±95 %   n")
    for name, report in reports.items():
        cells = [f"{row['r1']:8.1f}" for row in report.rounds]
        n = num_queries(report)
        low, high = percent_interval(report.rounds[-1]["r1"], n) if n else (float("nan"), float("nan"))
        print(f"{name:<{width}} " + " ".join(cells) + f"  {(high - low) / 2:6.1f}  {n}")
    print(f"\nchange from {base_name} (points)")
    for name, report in list(reports.items())[1:]:
        cells = [f"{row['r1'] - b['r1']:+8.1f}" for row, b in zip(report.rounds, base.rounds)]
        print(f"{name:<{width}} " + " ".join(cells))
    print("\ncost")
    for name in reports:
        print(f"{name:<{width}} {cost(raw[name])}")
    if args.plot:
        plot_metric_per_round(reports, args.plot, "r1", title="R@1 per round with each VLM use")
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
