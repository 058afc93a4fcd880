"""The text parser on real people's words: fact precision, recall and F1 on hand-labelled
CUHK-PEDES captions (tests/data/cuhk_pedes_caption_facts.jsonl, rules in tests/data/README.md).

Prints micro precision/recall/F1 over facts for the whole set and its tune and held-out parts,
per slot and per draw bucket, then the captions with the most errors (their references and the
facts missed or made up). Caption texts are read from ``--captions`` and checked against the
labels' SHA-256; they are printed only with ``--text`` (to the terminal: CUHK-PEDES is for
non-commercial research, never copy its text into the repository).

Usage:
    .venv/bin/python benchmarks/bench_parser_real.py --captions ../shared/data/cuhk_pedes_captions
        [--labels tests/data/cuhk_pedes_caption_facts.jsonl] [--worst 15] [--part tune] [--text]
    .venv/bin/python benchmarks/bench_parser_real.py --captions ../shared/data/cuhk_pedes_captions --draw
        # lists the seeded draw of captions to label (references, and texts with --text)
    .venv/bin/python benchmarks/bench_parser_real.py --captions ../shared/data/cuhk_pedes_captions --style
        [--peta ../shared/data/peta] [--samples 2000]
        # style of real captions vs the synthesiser's first descriptions, both description styles,
        # written for PETA identities (--peta) or for the synthetic world's identities
"""

from __future__ import annotations

import argparse
from pathlib import Path

import random

import numpy as np

from minterpr.data.dialogue_synthesis import DESCRIPTION_STYLES, DialogueSynthesisConfig, synthesize_records
from minterpr.data.formats.captions import read_caption_dataset
from minterpr.data.parser_eval import (
    CUHK_FILES,
    PARTS,
    FactScores,
    caption_texts,
    caption_vocabulary,
    draw_sample,
    evaluate_parser,
    format_fact,
    read_labelled_captions,
    style_statistics,
)
from minterpr.types import GalleryImage

LABELS = Path(__file__).resolve().parents[1] / "tests" / "data" / "cuhk_pedes_caption_facts.jsonl"


def _row(name: str, scores: FactScores, width: int = 16) -> str:
    return (
        f"{name:<{width}} {scores.precision:6.3f} {scores.recall:6.3f} {scores.f1:6.3f} "
        f"{scores.right:6d} {scores.parsed:6d} {scores.labelled:6d}"
    )


def _header(first: str, width: int = 16) -> str:
    return f"{first:<{width}} {'P':>6} {'R':>6} {'F1':>6} {'right':>6} {'parsed':>6} {'labelled':>8}"


def style_report(captions_dir: str, peta: str | None, samples: int) -> None:
    """Print style statistics of the real captions and of synthetic first descriptions, per style."""
    real = [
        c
        for name in CUHK_FILES
        for r in read_caption_dataset(Path(captions_dir) / name, format="cuhk-pedes")
        for c in r.captions
    ]
    if peta:
        from minterpr.data.formats.peta import read_peta

        people = [g for g in read_peta(peta) if g.attributes]
        people = random.Random(0).sample(people, min(samples, len(people)))
        source = f"PETA ({len(people)} images)"
    else:
        from minterpr.data.synthetic.identities import sample_identity

        rng = np.random.default_rng(0)
        people = [GalleryImage(f"{i}.jpg", f"synthetic:{i}", attributes=sample_identity(rng)) for i in range(samples)]
        source = f"synthetic world ({samples} identities)"
    vocabulary = caption_vocabulary(real)
    columns = {"CUHK-PEDES": style_statistics(real, vocabulary)}
    for style in DESCRIPTION_STYLES:
        config = DialogueSynthesisConfig(
            seed=0,
            min_qa_turns=0,
            max_qa_turns=0,
            min_image_turns=0,
            max_image_turns=0,
            records_per_image=1,
            description_style=style,
        )
        texts = [r.sample.dialogue.description for r in synthesize_records(people, people, config)]
        columns[style] = style_statistics(texts, vocabulary)
    print(f"first descriptions written for {source}; vocabulary = words seen twice in the real captions")
    print(f"{'':16}" + "".join(f"{name:>12}" for name in columns))
    for key in columns["CUHK-PEDES"]:
        print(f"{key:16}" + "".join(f"{col[key]:12.3f}" for col in columns.values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--captions", required=True, help="directory with the CUHK-PEDES val/test caption files")
    parser.add_argument("--labels", default=str(LABELS), help="labelled captions (JSON Lines)")
    parser.add_argument("--worst", type=int, default=15, help="how many captions with the most errors to list")
    parser.add_argument(
        "--part",
        choices=PARTS + ("all",),
        default="tune",
        help="which part's errors to list (scores are printed for every part)",
    )
    parser.add_argument("--text", action="store_true", help="also print caption texts (terminal only)")
    parser.add_argument("--draw", action="store_true", help="list the seeded draw of captions to label and stop")
    parser.add_argument(
        "--style", action="store_true", help="compare real captions with synthetic descriptions and stop"
    )
    parser.add_argument("--peta", help="PETA root: write the synthetic descriptions for its identities (with --style)")
    parser.add_argument("--samples", type=int, default=2000, help="identities described (with --style)")
    args = parser.parse_args()

    if args.style:
        style_report(args.captions, args.peta, args.samples)
        return

    if args.draw:
        for n, (ref, text) in enumerate(draw_sample(args.captions)):
            print(f"{n:3d} {ref.part:<7} {ref.drawn:<14} {ref.file} {ref.path} #{ref.caption} {ref.sha256[:12]}")
            if args.text:
                print("      " + " ".join(text.split()))
        return

    labels = read_labelled_captions(args.labels)
    texts = caption_texts(labels, args.captions, labels_file=args.labels)
    print(f"{len(labels)} captions, {sum(len(lab.facts) for lab in labels)} labelled facts")
    print(_header("part"))
    for part in ("all",) + PARTS:
        chosen = [i for i, lab in enumerate(labels) if part in ("all", lab.part)]
        result = evaluate_parser([labels[i] for i in chosen], [texts[i] for i in chosen])
        print(_row(f"{part} ({len(chosen)})", result.micro))
    result = evaluate_parser(labels, texts)
    print("\n" + _header("slot (all parts)"))
    for slot, scores in result.per_slot.items():
        print(_row(slot, scores))
    print("\n" + _header("drawn as"))
    for bucket in dict.fromkeys(lab.drawn for lab in labels):
        chosen = [i for i, lab in enumerate(labels) if lab.drawn == bucket]
        print(_row(bucket, evaluate_parser([labels[i] for i in chosen], [texts[i] for i in chosen]).micro))

    shown = [(item, text) for item, text in zip(result.items, texts) if args.part in ("all", item.label.part)]
    shown.sort(key=lambda pair: -(len(pair[0].missed) + len(pair[0].spurious)))
    print(f"\ncaptions of part {args.part!r} with the most errors:")
    for item, text in shown[: args.worst]:
        if not item.missed and not item.spurious:
            break
        lab = item.label
        print(f"- {lab.file} {lab.path} #{lab.caption} (line {lab.line}, {lab.drawn})")
        if args.text:
            print("    text:     " + " ".join(text.split()))
        print("    missed:   " + ", ".join(format_fact(f) for f in item.missed))
        print("    spurious: " + ", ".join(format_fact(f) for f in item.spurious))


if __name__ == "__main__":
    main()
