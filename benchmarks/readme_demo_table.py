"""Rewrite the README's demo table from ``minterpr demo --json``'s file (and keep that file as the record).

Usage:
    minterpr demo --json demo.json
    python benchmarks/readme_demo_table.py demo.json      # README.md's table + benchmarks/data/demo_results.json

tests/test_demo_table.py fails when the README's table is not the one this file makes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout whose README.md is rewritten (minterpr installed from it)

RECORD = ROOT / "benchmarks" / "data" / "demo_results.json"


def main(argv: list[str] | None = None) -> int:
    from minterpr.evaluation.demo_table import demo_table, replace_demo_table

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("demo_json", type=Path, help="the file `minterpr demo --json` wrote")
    args = parser.parse_args(argv)
    readme = ROOT / "README.md"
    try:
        table = demo_table(json.loads(args.demo_json.read_text(encoding="utf-8")))
        text = replace_demo_table(readme.read_text(encoding="utf-8"), table)
    except (OSError, ValueError, KeyError) as err:
        print(f"readme_demo_table: {args.demo_json}: {err}", file=sys.stderr)
        return 2
    readme.write_text(text, encoding="utf-8")
    if args.demo_json.resolve() != RECORD.resolve():
        shutil.copyfile(args.demo_json, RECORD)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
