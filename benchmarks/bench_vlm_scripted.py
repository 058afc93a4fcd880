"""R@1 per round with each vision-language model use on and off, against a scripted "sighted" endpoint.

A :class:`~minterpr.vlm.testing.ScriptedServer` on loopback answers as
:class:`~minterpr.vlm.testing.Sighted`: a model that sees each gallery image's true attributes
(``accurate``), or gets ``--wrong`` of its (image, slot) readings wrong (``wrong``). For each mode and
each use, ``minterpr simulate`` runs in this process with ``--vlm-url`` pointing at it (the client,
the session and the report are the ones users run), after one run without a model (the baseline);
``caption`` runs ``minterpr vlm caption`` on the gallery first and searches with ``--vlm-captions``. It prints R@1 per round of every run and writes each report as JSON under ``--out``.
This measures what the plumbing does with sensible answers, not what a real model would buy.

Usage:
    python benchmarks/bench_vlm_scripted.py --data DIR --backend attribute --limit 100
    python benchmarks/bench_vlm_scripted.py --data /tmp/peta_cw --split val --run shipped --limit 100 \\
        --uses anchor --modes accurate,wrong
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import sys
import time
from pathlib import Path

from minterpr.cli.main import main as cli
from minterpr.data.dataset import BuiltDataset
from minterpr.vlm.testing import ScriptedServer, Sighted


def truth_map(data: str, split: str) -> dict[str, dict]:
    """sha256 of each gallery image's bytes -> its true attributes (what the sighted server knows)."""
    out = {}
    for image in BuiltDataset(data).gallery(split):
        with open(os.path.join(data, image.path), "rb") as f:
            out[hashlib.sha256(f.read()).hexdigest()] = dict(image.attributes or {})
    return out


def run(args: argparse.Namespace, name: str, extra: list[str]) -> list[float]:
    out = Path(args.out) / f"{name}.json"
    model = ["--run", args.run] if args.run else ["--backend", args.backend]
    if args.attribute_noise is not None:
        model += ["--attribute-noise", str(args.attribute_noise)]
    command = [
        "simulate",
        *model,
        "--data",
        args.data,
        "--split",
        args.split,
        "--rounds",
        str(args.rounds),
        "--limit",
        str(args.limit),
        "--simulator",
        args.simulator,
        "--seed",
        str(args.seed),
        "-q",
        "--json",
        str(out),
        *extra,
    ]
    started = time.time()
    with contextlib.redirect_stdout(io.StringIO()):  # simulate's own table: the JSON report has it
        code = cli(command)
    if code != 0:
        raise SystemExit(f"simulate failed: {' '.join(command)}")
    r1 = [float(r["r1"]) for r in json.loads(out.read_text())["rounds"]]
    print(f"{name:<24} " + " ".join(f"{v:5.1f}" for v in r1) + f"   ({time.time() - started:.0f} s)", flush=True)
    return r1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="dataset dir with gallery_<split>.jsonl")
    p.add_argument("--split", default="test")
    p.add_argument("--run", default=None, help="a trained run (or 'shipped'); else --backend")
    p.add_argument("--backend", default="attribute")
    p.add_argument("--attribute-noise", type=float, default=None, help="attribute backend: a noisy classifier")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--simulator", default="oracle")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--uses", default="reading,asking,anchor,rerank,caption", help="each use measured alone, comma-separated"
    )
    p.add_argument("--modes", default="accurate,wrong", help="accurate, wrong (readings wrong at --wrong)")
    p.add_argument("--wrong", type=float, default=0.15)
    p.add_argument("--out", default="/tmp/bench_vlm_scripted")
    args = p.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    truth = truth_map(args.data, args.split)
    print(f"{len(truth)} images; R@1 (%) per round 0..{args.rounds}", flush=True)
    run(args, "none", [])
    for mode in args.modes.split(","):
        wrong = 0.0 if mode == "accurate" else args.wrong
        with ScriptedServer([Sighted(truth, wrong=wrong, seed=args.seed)], repeat=True) as server:
            endpoint = ["--vlm-url", server.url, "--vlm-model", "sighted"]
            for use in args.uses.split(","):
                if use != "caption":
                    run(args, f"{use}-{mode}", [*endpoint, "--vlm-uses", use])
                    continue
                captions = str(Path(args.out) / f"captions-{mode}.jsonl")  # MTG at ingestion, then searched with
                with contextlib.redirect_stdout(io.StringIO()):
                    code = cli(
                        [
                            "vlm",
                            "caption",
                            "--gallery",
                            os.path.join(args.data, f"gallery_{args.split}.jsonl"),
                            "--root",
                            args.data,
                            "--out",
                            captions,
                            "-q",
                            *endpoint,
                        ]
                    )
                if code != 0:
                    raise SystemExit("vlm caption failed")
                run(args, f"caption-{mode}", ["--vlm-captions", captions])
    return 0


if __name__ == "__main__":
    from minterpr.errors import MinterprError

    try:
        sys.exit(main())
    except MinterprError as err:  # a missing dataset or run, a bad file: one line, exit 2
        print(f"bench_vlm_scripted: {err}", file=sys.stderr)
        sys.exit(2)
