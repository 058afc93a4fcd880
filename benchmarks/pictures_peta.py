"""Ranked-results strips for a few PETA test dialogues: what a trained PETA run returns on real images.

Replays ``--queries`` recorded dialogues of a PETA dataset folder (``minterpr data peta`` wrote it)
against that split's whole gallery with a trained run, exactly as ``minterpr eval`` scores them,
and draws one strip per dialogue (:mod:`minterpr.evaluation.pictures`): a row per round with the
turn it added, the top-k images with rank and score, the target framed green, other images of the
target's identity light green, the references the user rejected crossed red.

PETA is research-only data: the strips show its images, so they are written to a folder you name
outside the repository (or under its ignored ``outputs/`` / ``runs/``), never into ``docs/``; the
docs show only synthetic-world strips (docs/images/ranked_strip_synthetic.png).

Usage:
    python benchmarks/pictures_peta.py --run runs/peta --data data/peta --out /tmp/peta_strips \\
        [--queries 4] [--seed 0 | --dialogue K ...] [--split test] [--top 8] [--device cpu]

It draws from any dataset folder in minterpr's layout; the synthetic strip in the docs came from
a small synthetic world (``--out`` under ``outputs/``, then copied to docs/images/).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWED_INSIDE = ("outputs", "runs")  # ignored folders of the repository


def check_out(out: Path) -> None:
    """Refuse a folder in the repository other than its ignored outputs/ and runs/."""
    resolved = out.resolve()
    if resolved == ROOT or ROOT in resolved.parents:
        inside = resolved.relative_to(ROOT).parts
        if not inside or inside[0] not in ALLOWED_INSIDE:
            sys.exit(
                f"--out {out}: PETA images must not enter the repository; choose a folder outside it "
                f"(or under {' or '.join(f'{d}/' for d in ALLOWED_INSIDE)}, which git ignores)"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, help="a trained PETA run (directory, model file or exported model)")
    parser.add_argument("--data", required=True, help="the PETA dataset folder `minterpr data peta` wrote")
    parser.add_argument("--out", required=True, help="folder for the strips (outside the repository)")
    parser.add_argument("--queries", type=int, default=4, help="dialogues drawn (default 4)")
    parser.add_argument(
        "--dialogue",
        type=int,
        action="append",
        metavar="K",
        help="draw dialogue K of the split instead (repeatable; 0-based record number)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    parser.add_argument("--split", default="test", help="split whose dialogues and gallery are used (default test)")
    parser.add_argument("--top", type=int, default=8, help="images per row (default 8)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    args = parser.parse_args(argv)
    out, data = Path(args.out), Path(args.data)
    check_out(out)

    from minterpr.data.build import require_built_dataset
    from minterpr.data.formats.gallery import read_gallery
    from minterpr.data.formats.minterpedes import read_minterpedes
    from minterpr.evaluation.picture_recorders import RankRecorder, sample_queries
    from minterpr.evaluation.pictures import StripConfig, write_ranked_strip
    from minterpr.evaluation.static import dialogue_turns, evaluate_dialogues
    from minterpr.runtime.run import load_run

    started = time.time()
    trained = load_run(args.run, device=args.device)
    require_built_dataset(data)  # a finished, unchanged `minterpr data peta` folder
    samples = read_minterpedes(data / f"{args.split}.jsonl")
    gallery = read_gallery(data / f"gallery_{args.split}.jsonl")
    picks = sorted(set(args.dialogue)) if args.dialogue else sample_queries(len(samples), args.queries, args.seed)
    if picks and not 0 <= picks[-1] < len(samples) or picks and picks[0] < 0:
        sys.exit(f"--dialogue: {args.split}.jsonl has dialogues 0..{len(samples) - 1}")
    chosen = [samples[q] for q in picks]
    position = {image.path: i for i, image in enumerate(gallery)}
    recorder = RankRecorder(range(len(chosen)), [position.get(s.target_path) for s in chosen], args.top)
    evaluate_dialogues(
        trained.backend(),
        chosen,
        gallery,
        str(data),
        {"dataset": str(data)},
        progress=True,
        reranking=trained.extras.rerank_config(),
        observe=recorder,
    )
    for k, (q, sample) in enumerate(zip(picks, chosen)):
        views = recorder.views(k, dialogue_turns(sample), position.get)
        target = position.get(sample.target_path)
        person = gallery[target].person_id if target is not None else sample.person_id
        ranks = " -> ".join("?" if v.target_rank is None else str(v.target_rank + 1) for v in views)
        path = write_ranked_strip(
            out / f"{args.split}_{q:05d}.png",
            views,
            gallery,
            root=data,
            target=target,
            target_person=person,
            config=StripConfig(top_k=args.top),
            title=f"{args.split} dialogue {q}, target {person}: rank {ranks}",
        )
        print(f"{path}: target rank per round {ranks}")
    print(f"{len(picks)} strips in {time.time() - started:.0f} s ({len(gallery)} gallery images)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
