"""``minterpr chat``: search a gallery in the terminal, with the system asking and showing images.

Type a description; the top results are listed with their scores and which of your words they
match or contradict, then the system's question (answer it by typing) or its reference images.
Commands:

    :feedback K TEXT   judge result K (or shown reference rK): "not her, no backpack"
    :no K [TEXT]       result K is not the person (optionally why)
    :yes K             result K is the person
    :example PATH      search by an example image
    :explain K         all facts result K matches / contradicts
    :undo              take back the last turn
    :help, :quit

Example:
    $ minterpr chat --backend attribute --images data/synth --split test
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from minterpr.cli.simulate import CLIError, add_backend_arguments, build_index, load_backend
from minterpr.data.formats.gallery import read_gallery
from minterpr.types import GalleryImage

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
HELP = __doc__.split("Commands:", 1)[1].split("Example:", 1)[0].rstrip()


def gallery_images(images_dir: Path, gallery: str | None, split: str) -> list[GalleryImage]:
    """The manifest given, else ``gallery_<split>.jsonl`` in the directory, else every image file in it."""
    if gallery is not None:
        return read_gallery(gallery)
    manifest = images_dir / f"gallery_{split}.jsonl"
    if manifest.is_file():
        return read_gallery(manifest)
    files = sorted(p for p in images_dir.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise CLIError(f"no gallery manifest ({manifest.name}) and no images in {images_dir}")
    return [GalleryImage(str(p.relative_to(images_dir)), f"local:{i}") for i, p in enumerate(files)]


class ChatLoop:
    """Reads user lines, drives a Session, writes what the system shows (testable with StringIO)."""

    def __init__(self, session, out: TextIO, top: int = 5) -> None:
        self.session = session
        self.out = out
        self.top = top  # results listed after each turn

    def say(self, text: str = "") -> None:
        print(text, file=self.out)

    def run(self, lines: TextIO) -> int:
        self.say("Describe the person you are looking for (:help for commands, :quit to leave).")
        for raw in lines:
            line = raw.strip()
            if not line:
                continue
            if line in (":quit", ":q", ":exit"):
                break
            try:
                self.handle(line)
            except (ValueError, IndexError, KeyError) as err:
                self.say(f"error: {err.args[0] if err.args else err}")
        self.say("bye")
        return 0

    def _target(self, token: str) -> int:
        """Gallery index of 'K' (rank K of the listed results) or 'rK' (the K-th shown reference)."""
        step = self.session.step
        if step is None:
            raise ValueError("describe the person first")
        if token.lower().startswith("r"):
            action = step.action
            shown = getattr(action, "indices", None)
            k = int(token[1:])
            if not shown or not 1 <= k <= len(shown):
                raise IndexError(f"no shown reference {token}")
            return shown[k - 1]
        k = int(token)
        if not 1 <= k <= len(step.ranking):
            raise IndexError(f"rank {k} out of range 1..{len(step.ranking)}")
        return int(step.ranking[k - 1])

    def handle(self, line: str) -> None:
        session = self.session
        if not line.startswith(":"):
            pending = session.action
            from minterpr.interaction.session import AskQuestion

            step = session.answer(line) if isinstance(pending, AskQuestion) else session.describe(line)
            return self.show(step)
        command, _, rest = line[1:].partition(" ")
        rest = rest.strip()
        if command == "help":
            return self.say(HELP)
        if command == "undo":
            step = session.undo()
            return self.show(step) if step is not None else self.say("(empty) Describe the person.")
        if command in ("feedback", "no", "yes"):
            token, _, text = rest.partition(" ")
            if not token:
                raise ValueError(f":{command} needs a result number, e.g. :{command} 2")
            if command == "yes":
                text = "Yes, this one."
            elif command == "no":
                text = f"Not this one. {text}".strip()
            elif not text:
                raise ValueError(":feedback needs a text, e.g. :feedback 3 not her, no backpack")
            return self.show(session.feedback(self._target(token), text))
        if command == "example":
            return self.show(session.example(rest))
        if command == "explain":
            step = session.step
            i = self._target(rest)
            rank = int((step.ranking == i).nonzero()[0][0])
            return self.say(f"{session.index.images[i].path}: {step.explain(rank).summary()}")
        raise ValueError(f"unknown command :{command} (:help lists them)")

    def show(self, step) -> None:
        from minterpr.interaction.session import AskQuestion, ShowReferences

        index = self.session.index
        for k in range(min(self.top, len(step.ranking))):
            i = int(step.ranking[k])
            self.say(f"{k + 1:>3}. {index.images[i].path}  score {step.scores[k]:.3f}  {step.explain(k).summary()}")
        action = step.action
        if isinstance(action, AskQuestion):
            self.say(f"system: {action.text}")
        elif isinstance(action, ShowReferences):
            ranks = {int(i): r + 1 for r, i in enumerate(step.ranking[:1000])}
            shown = ", ".join(f"r{j + 1} {index.images[i].path} (rank {ranks.get(i, '>1000')})"
                              for j, i in enumerate(action.indices))
            self.say(f"system: {action.text}  {shown}")
            self.say("        (:yes rK if one is the person, :feedback rK how it differs)")
        elif any(self.session.judgements.values()):
            self.say("system: found. (:undo to keep searching, :quit to leave)")
        else:
            self.say("system: nothing more to ask; add details, or judge a result.")


def cmd_chat(args: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    from minterpr.interaction.reranking import RerankConfig
    from minterpr.interaction.session import Session

    images_dir = Path(args.images)
    if not images_dir.is_dir():
        raise CLIError(f"image directory not found: {images_dir}")
    images = gallery_images(images_dir, args.gallery, args.split)
    backend, stored_weight = load_backend(args)
    index = build_index(backend, images, str(images_dir))
    session = Session(backend, index, question_policy=args.questions, reference_policy=args.references,
                      schedule=args.schedule, seed=args.seed,
                      reranking=RerankConfig.with_attribute_weight(stored_weight))
    return ChatLoop(session, stdout or sys.stdout, top=args.top).run(stdin or sys.stdin)


def _handler(args: argparse.Namespace) -> int:
    try:
        return cmd_chat(args)
    except CLIError as err:
        print(f"minterpr chat: error: {err}", file=sys.stderr)
        return 2


def register(subparsers: argparse._SubParsersAction) -> None:
    from minterpr.interaction.policies import QUESTION_POLICIES, REFERENCE_POLICIES, SCHEDULES

    p = subparsers.add_parser("chat", help="interactive search in the terminal",
                              description="Describe a person, answer the system's questions, judge results.")
    add_backend_arguments(p)
    p.add_argument("--images", required=True, metavar="DIR", help="image directory (with gallery_<split>.jsonl, or images)")
    p.add_argument("--gallery", metavar="FILE", help="gallery manifest (default: DIR/gallery_<split>.jsonl)")
    p.add_argument("--split", default="test")
    p.add_argument("--top", type=int, default=5, help="results listed per turn")
    p.add_argument("--questions", default="info_gain", choices=QUESTION_POLICIES.names())
    p.add_argument("--references", default="diverse", choices=REFERENCE_POLICIES.names())
    p.add_argument("--schedule", default="auto", choices=["auto", *SCHEDULES])
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=_handler)
