"""Stage ablation: what each progressive training stage contributes, and the single-shot baseline.

Trains one model per variant with ``minterpr train`` (same config, seed and data; only the
list of stages differs), then replays the test dialogues with ``minterpr eval`` and prints a
Markdown table of R@1 per round (with the attribute evidence at the weight each run chose on
val; embedding only too for the full model and the baseline), plus the training time. Pass
``--set cache_dir=DIR`` so the variants share one feature cache. Variants:

* ``full``: attributes -> alignment -> dialogue (the config as shipped);
* ``no attributes stage``: alignment -> dialogue;
* ``no alignment stage``: attributes -> dialogue;
* ``dialogue stage only``;
* ``baseline (descriptions only)``: attributes -> alignment, selected on round 0, evaluated
  on the same rounds (its query still reads every turn, but was never trained on them) and with
  ``--description-only`` (IRRA-style single-shot retrieval: every round = the description).

Usage:
    .venv/bin/python benchmarks/bench_stage_ablation.py --data DATASET_DIR --out RUNS_DIR
        [--config synthetic] [--set key=value ...] [--only full,baseline]

Runs already finished in RUNS_DIR are reused (delete them to retrain).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

VARIANTS: dict[str, list[str]] = {  # name -> extra --set overrides
    "full": [],
    "no attributes stage": ["stages=[alignment,dialogue]"],
    "no alignment stage": ["stages=[attributes,dialogue]"],
    "dialogue stage only": ["stages=[dialogue]"],
    # as configs/synthetic_baseline.yaml: the dialogue stage's epochs go to the alignment stage
    "baseline (descriptions only)": ["stages=[attributes,alignment]", "stages.1.epochs=5", "selection_metric=r1@0"],
}


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")


def _minterpr(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "minterpr", *args], check=True)


def run_variant(name: str, overrides: list[str], args: argparse.Namespace) -> dict[str, object]:
    run_dir = Path(args.out) / _slug(name)
    started = time.time()
    if not (run_dir / "model.pt").is_file():
        sets = [item for o in [*args.set, *overrides, "progress=false"] for item in ("--set", o)]
        _minterpr("train", "--config", args.config, "--data", args.data, "--out", str(run_dir), *sets)
        (run_dir / "train_seconds.txt").write_text(f"{time.time() - started:.0f}\n")
    data = Path(args.data)
    common = ["--run", str(run_dir), "--data", str(data / "test.jsonl"), "--image-root", str(data), "--quiet"]
    result: dict[str, object] = {"train_seconds": float((run_dir / "train_seconds.txt").read_text())}
    evals: dict[str, list[str]] = {"fused": []}  # at the weight the run chose on val
    if name in ("full", "baseline (descriptions only)") or args.all_scores:
        evals["embedding"] = ["--attribute-weight", "0"]
    if name.startswith("baseline"):
        evals["description only, fused"] = ["--description-only"]
    for key, extra in evals.items():
        out = run_dir / f"eval_test_{_slug(key)}.json"
        if not out.is_file():
            _minterpr("eval", *common, "--json", str(out), *extra)
        report = json.loads(out.read_text())
        result[key] = [row["r1"] for row in report["rounds"]]
        result[f"{key} w"] = report["protocol"]["scoring"]["attribute_weight"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="dataset directory (minterpr data synth / data peta)")
    parser.add_argument("--out", required=True, help="directory for the runs (one sub-directory per variant)")
    parser.add_argument("--config", default="synthetic")
    parser.add_argument("--set", action="append", default=[], help="override for every variant (repeatable)")
    parser.add_argument("--only", help="comma-separated variant names (default: all)")
    parser.add_argument(
        "--all-scores",
        action="store_true",
        help="also evaluate every variant without the attribute evidence (default: full and baseline)",
    )
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}: must be among {list(VARIANTS)}")
    results = {name: run_variant(name, VARIANTS[name], args) for name in names}
    print("| variant | scores | R@1 per round (0 = description) | train s |")
    print("|---|---|---|---|")
    for name, result in results.items():
        for key in ("embedding", "fused", "description only, fused"):
            if key in result:
                label = key if key == "embedding" else f"{key} (w={result[f'{key} w']:g})"
                rounds = " / ".join(f"{v:.1f}" for v in result[key])  # type: ignore[union-attr]
                print(f"| {name} | {label} | {rounds} | {result['train_seconds']:.0f} |")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
