"""Attribute recipe comparison (issue 24): a short image-tuning-only run per setting, val and test mA.

Every setting is one ``minterpr train`` with the given config and ``--set`` overrides (common
ones first, then the setting's own), the retrieval stages switched off and no attribute-weight
selection (``stages.N.epochs=0``, ``select_attribute_weight=false``): only the image tuning runs.
Each run is then scored with ``minterpr eval-attributes`` on the dataset's val and test galleries
(p > 0.5). Prints a Markdown table: val mA (the figure to decide on), test mA, PETA-35 mA on test
(PETA's 35 standard attributes; "-" when the labels have none), the mean per-label ROC AUC on val
and test (how well labels are ranked, whatever the threshold), instance F1 on test, and minutes (the tuning's own
clock, and the whole command's). Runs already finished under ``--out`` are reused (delete them to
retrain). Choose on val; read test only to confirm.

Usage (the three options of docs/model.md, against the plain recipe, on PETA):
    .venv/bin/python benchmarks/bench_recipe.py --data data/peta --out runs/recipe --config peta \\
        --set image_tuning.epochs=3 \\
        --setting plain \\
        --setting logit-norm model.attribute_logit_norm=true \\
        --setting mixup image_tuning.feature_mixup_alpha=0.4 \\
        --setting progressive "image_tuning.progressive_sizes=[[2,128,64]]"
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

from minterpr.cli.main import main as minterpr_main
from minterpr.data.dataset import BuiltDataset

# only the image tuning: no retrieval stage, no selection of the attribute weight on val
TUNING_ONLY = [
    "stages.0.epochs=0",
    "stages.1.epochs=0",
    "stages.2.epochs=0",
    "select_attribute_weight=false",
    "progress=false",
]


def _minterpr(*args: str) -> None:
    """One ``minterpr`` command in this process; its own output goes to stderr (stdout: the table)."""
    with contextlib.redirect_stdout(sys.stderr):
        code = minterpr_main(list(args))
    if code != 0:
        raise SystemExit(f"minterpr {' '.join(args[:1])} failed (exit {code}): {' '.join(args)}")


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def run_setting(name: str, overrides: list[str], args: argparse.Namespace) -> dict[str, object]:
    """Train (or reuse) the setting's run and score it; its row of the table as a dict."""
    run_dir = Path(args.out) / _slug(name)
    if not (run_dir / "model.pt").is_file():
        started = time.time()
        sets = [item for o in [*args.set, *overrides, *TUNING_ONLY] for item in ("--set", o)]
        _minterpr("train", "--config", args.config, "--data", args.data, "--out", str(run_dir), *sets)
        (run_dir / "train_seconds.txt").write_text(f"{time.time() - started:.0f}\n")
    row: dict[str, object] = {"setting": name, "overrides": overrides}
    data = Path(args.data)
    for split in ("val", "test"):
        report_path = run_dir / f"attributes_{split}.json"
        if not report_path.is_file():
            _minterpr(
                "eval-attributes",
                "--run",
                str(run_dir),
                "--gallery",
                str(BuiltDataset(data).gallery_path(split)),
                "--image-root",
                args.image_root or str(data),
                "--quiet",
                "--json",
                str(report_path),
            )
        report = json.loads(report_path.read_text())
        label_based = report["label_based"]
        row[f"{split}_mA"], row[f"{split}_peta35_mA"] = label_based["mA"], label_based["peta35_mA"]
        row[f"{split}_auc"] = mean_auc(report["labels"])
        row[f"{split}_f1"] = report["instance_based"]["f1"]
        # mean slot accuracy against always answering the majority value, reported wherever mA is
        row[f"{split}_slot"], row[f"{split}_majority"] = (
            report["slot_mean"]["accuracy"],
            report["slot_mean"]["majority_accuracy"],
        )
    history = [json.loads(line) for line in (run_dir / "image_tuning" / "metrics.jsonl").read_text().splitlines()]
    row["tuning_minutes"] = history[-1]["seconds"] / 60 if history else 0.0
    row["wall_minutes"] = float((run_dir / "train_seconds.txt").read_text()) / 60
    return row


def mean_auc(labels: list[dict[str, object]]) -> float | None:
    """Mean per-label ROC AUC of an ``eval-attributes`` report's labels (those with one): how well the
    model ranks, whatever the threshold; None when no label has one.

    Example:
        >>> mean_auc([{"auc": 80.0}, {"auc": None}, {"auc": 70.0}])
        75.0
    """
    aucs = [float(label["auc"]) for label in labels if label.get("auc") is not None]
    return sum(aucs) / len(aucs) if aucs else None


def table(rows: list[dict[str, object]]) -> str:
    """The Markdown table of :func:`run_setting` rows."""

    def figure(value: object, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    lines = [
        "| setting | val mA | test mA | PETA-35 mA (test) | val / test mean label AUC | test instance F1 "
        "| test slot accuracy / majority | tuning min | wall min |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['setting']} | {figure(r['val_mA'])} | {figure(r['test_mA'])} | {figure(r['test_peta35_mA'])} "
        f"| {figure(r['val_auc'])} / {figure(r['test_auc'])} | {figure(r['test_f1'])} "
        f"| {figure(r.get('test_slot'))} / {figure(r.get('test_majority'))} "
        f"| {figure(r['tuning_minutes'])} | {figure(r['wall_minutes'])} |"
        for r in rows
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="dataset directory (gallery_val.jsonl, gallery_test.jsonl, ...)")
    parser.add_argument("--out", required=True, help="one run directory per setting goes here")
    parser.add_argument("--config", default="peta", help="training config (name or YAML file); it must tune")
    parser.add_argument("--image-root", help="image root of the galleries (default: --data)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every setting")
    parser.add_argument(
        "--setting",
        action="append",
        nargs="+",
        required=True,
        metavar="NAME [KEY=VALUE ...]",
        help="a setting: its name, then its own overrides (repeat for each setting)",
    )
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    names = [s[0] for s in args.setting]
    if len(set(map(_slug, names))) != len(names):
        parser.error(f"setting names must differ: {names}")
    rows = [run_setting(setting[0], setting[1:], args) for setting in args.setting]
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
