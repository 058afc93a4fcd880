"""Attribute recognition of a trained model's attribute head on one split of a dataset.

A thin wrapper over ``minterpr eval-attributes`` (module
:mod:`minterpr.evaluation.attribute_metrics`): label mA, instance accuracy / precision / recall
/ F1 as Jia et al. 2021 define them, and per ontology slot the head's most probable value
(correct when it is one of the image's values) against always answering the split's majority
value. Images whose slot is unlabelled do not count for that slot. With a per-slot answer
calibration stored with the model (``minterpr calibrate slots``) it also reports the calibrated
answers' slot accuracy beside the raw one.

Usage:
    .venv/bin/python benchmarks/bench_attributes.py --run RUN_DIR --data DATASET_DIR [--split val] \\
        [--image-root DIR] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from minterpr.cli.main import main as minterpr_main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="run directory (model.pt) or a model file")
    parser.add_argument("--data", required=True, help="dataset directory with gallery_<split>.jsonl")
    parser.add_argument("--split", default="val")
    parser.add_argument("--image-root", help="image root (default: --data)")
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()
    argv = ["eval-attributes", "--run", args.run, "--gallery", str(Path(args.data) / f"gallery_{args.split}.jsonl")]
    argv += ["--image-root", args.image_root] if args.image_root else []
    argv += ["--json", args.json] if args.json else []
    return minterpr_main(argv)


if __name__ == "__main__":
    sys.exit(main())
