"""The reader on corrective feedback: fact precision, recall and F1 on hand-labelled utterances said
while ruling out a shown image (tests/data/corrective_utterances.jsonl, rules in tests/data/README.md),
for the facts about the person sought and about the shown image, by part and by kind; then the
utterances with the most errors.

Usage:
    .venv/bin/python benchmarks/bench_feedback_reading.py [--labels tests/data/corrective_utterances.jsonl]
        [--worst 20] [--part tune|heldout|all]
The original caption set is scored by benchmarks/bench_parser_real.py.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from minterpr.data.feedback_eval import KINDS, SIDES, evaluate_feedback, read_labelled_utterances
from minterpr.data.parser_eval import PARTS, FactScores, format_fact
from minterpr.language.feedback_reading import read_feedback

LABELS = Path(__file__).resolve().parents[1] / "tests" / "data" / "corrective_utterances.jsonl"


def _row(name: str, scores: FactScores) -> str:
    return (
        f"{name:<22} {scores.precision:6.3f} {scores.recall:6.3f} {scores.f1:6.3f} "
        f"{scores.right:6d} {scores.parsed:6d} {scores.labelled:8d}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labels", default=str(LABELS), help="labelled utterances (JSON Lines)")
    parser.add_argument("--worst", type=int, default=20, help="how many utterances with the most errors to list")
    parser.add_argument("--part", choices=PARTS + ("all",), default="tune", help="which part's errors to list")
    args = parser.parse_args()

    items = read_labelled_utterances(args.labels)
    print(
        f"{len(items)} utterances, {sum(len(i.target) for i in items)} target facts, "
        f"{sum(len(i.shown) for i in items)} shown-image facts"
    )
    print(f"{'':<22} {'P':>6} {'R':>6} {'F1':>6} {'right':>6} {'parsed':>6} {'labelled':>8}")
    groups = [("all", items)] + [(part, [i for i in items if i.part == part]) for part in PARTS]
    groups += [(kind, [i for i in items if i.kind == kind]) for kind in KINDS]
    for name, chosen in groups:
        scores = evaluate_feedback(chosen)
        for side in SIDES:
            print(_row(f"{side} {name} ({len(chosen)})", scores[side].micro))
    both = evaluate_feedback(items)
    errors = []
    for t, s in zip(both["target"].items, both["shown"].items):
        if args.part in ("all", t.label.part):
            errors.append((len(t.missed) + len(t.spurious) + len(s.missed) + len(s.spurious), t, s))
    errors.sort(key=lambda e: -e[0])
    print(f"\nutterances of part {args.part!r} with the most errors:")
    for count, t, s in errors[: args.worst]:
        if not count:
            break
        print(f"- {t.label.id} ({t.label.kind}) {t.label.text!r}")
        reading = read_feedback(t.label.text)
        print(
            "    read:   target "
            + ", ".join(map(format_fact, reading.target))
            + " | shown "
            + ", ".join(map(format_fact, reading.shown))
        )
        for side, item in (("target", t), ("shown", s)):
            if item.missed or item.spurious:
                print(
                    f"    {side}: missed "
                    + ", ".join(map(format_fact, item.missed))
                    + "; spurious "
                    + ", ".join(map(format_fact, item.spurious))
                )


if __name__ == "__main__":
    main()
