"""``minterpr chat``: search a gallery in the terminal, with the system asking and showing images.

Type a description; the top results are listed with their camera and time (when the gallery
records them), their match probability (the page's bounded similarity) and which of your words they
match or contradict, then the system's question (answer it by typing) or its reference images.
Commands:

    :feedback K TEXT   judge result K (or shown reference rK): "not her, no backpack"
    :no K [TEXT]       result K is not the person (optionally why)
    :yes K             result K is the person
    :example PATH      search by an example image (a gallery path, or any image file)
    :explain K         all facts result K matches / contradicts
    :facts             every fact taken from what you said, numbered (the model's marked)
    :forget K          withdraw fact K of :facts (e.g. one the model read wrongly): re-ranked without it
    :undo              take back the last line's turns
    :save FILE         save the conversation (JSON; it replays with Session.load_history)
    :help, :quit

    While reference images are shown, a plain line with a verdict answers them: with one image
    shown, "no", "not her, no backpack", "yes" or "maybe" judges it; with several, "no ..." (or
    "none of them ...") rejects each of them (the reasons count once) and "yes" / "maybe" asks
    which one (:yes rK). A line with no verdict ("she had a red scarf") is a remark about the person.

Nothing typed ends the chat but :quit or the end of input: an error is printed as
``error: ...`` and the conversation is exactly as before the line (lines that are not valid
UTF-8 are reported and skipped). ``--transcript FILE`` rewrites the conversation to FILE after
every turn (and continues the one in FILE if it exists), so a crash loses nothing; where it was
saved is printed on leaving. ``--show DIR`` draws the ranking after every turn (one row per
turn: what was said, the top results, rejected images crossed) as ``DIR/turn_<N>.png`` and
prints its path. The terminal is the user's own, so ``:example`` may read any file.

Example:
    $ minterpr chat --backend attribute --images data/synth --split test --transcript chat.json
    $ minterpr chat --run runs/synth --index galleries/synth-test  # a store from `minterpr index build`
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterable, TextIO

from minterpr.cli.shared.common import (
    CLIError,
    add_backend_arguments,
    add_common_options,
    build_index,
    check_backend_arguments,
    gallery_images,
    load_backend,
    load_pipeline_of,
    show_progress,
)
from minterpr.cli.shared.vlm_options import add_caption_arguments, add_vlm_arguments, vlm_config
from minterpr.errors import InputError, MinterprError
from minterpr.language.dialogue_acts import verdict

HELP = __doc__.split("Commands:", 1)[1].split("Nothing typed", 1)[0].rstrip()
# A reply that judges shown images (the value is then read by dialogue_acts.verdict); anything
# else said while images are shown is a remark about the person.
_VERDICT = re.compile(
    r"^\s*(yes|yeah|yep|yup|correct|exactly|no|nope|nah|not|none|neither|wrong|maybe|perhaps|possibly)\b"
    r"|\b(not sure|can't tell|cannot tell|no idea|could be|might be|this one|that one|none of)\b"
    r"|\b(that's|that is|this is|it's|it is|isn't|is not)\s+(definitely\s+)?"
    r"(her|him|them|the (one|person|man|woman|guy|lady))\b"
    r"|\bnot (her|him|them)\b"
)


def reply_verdict(text: str) -> tuple[bool, bool | None]:
    """(whether ``text`` judges a shown image, and its verdict: True yes, False no, None unsure).

    >>> reply_verdict("Not her, no backpack."), reply_verdict("yes!"), reply_verdict("she wore a red scarf")
    ((True, False), (True, True), (False, None))
    """
    first_clause = re.split(r"[.;!?]", text.lower().replace("\u2019", "'"), maxsplit=1)[0]
    if _VERDICT.search(first_clause) is None:
        return False, None
    return True, verdict(text)


def result_line(k: int, image: Any, time: str | None, match: float, summary: str) -> str:
    """One listed result: rank, path, camera and time when known, the match probability (as the page
    shows it) and which facts it matches or contradicts.

    >>> from minterpr.types import GalleryImage
    >>> result_line(0, GalleryImage("c/1.png", "p", "lobby:cam1"), "2026-12-01T10:00:00", 0.42, "matches: red")
    '  1. c/1.png  lobby:cam1  2026-12-01T10:00:00  match 42 %  matches: red'
    """
    from minterpr.interaction.match import percent

    where = "  ".join(part for part in (image.camera_id, time) if part)
    return f"{k + 1:>3}. {image.path}{'  ' + where if where else ''}  match {percent(match)}  {summary}".rstrip()


class ChatLoop:
    """Reads user lines, drives a Session, writes what the system shows (testable with StringIO).

    ``transcript``: a file the conversation is rewritten to after every turn (None: only :save).
    """

    def __init__(
        self,
        session,
        out: TextIO,
        top: int = 5,
        transcript: str | os.PathLike[str] | None = None,
        show: str | os.PathLike[str] | None = None,
        times: list[str | None] | None = None,
    ) -> None:
        self.session = session
        self.times = times  # each gallery image's capture time (a store's metadata), None when unknown
        self.out = out
        self.top = top  # results listed after each turn
        self.transcript = None if transcript is None else os.fspath(transcript)  # saved after every turn
        self.show_dir = None if show is None else os.fspath(show)  # a ranked strip written here after every turn
        self.saved_to: str | None = None  # where the conversation was last saved
        self._saved_history: list = []  # the history as it was saved there
        self._line_turns: list[int] = []  # turns each line added, for :undo

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def run(self, lines: Iterable[str | bytes]) -> int:
        """Chat until :quit or the end of ``lines`` (text, or bytes decoded as UTF-8 one line at a time)."""
        self.say("Describe the person you are looking for (:help for commands, :quit to leave).")
        try:
            for number, raw in enumerate(lines, 1):
                line = _decode(raw)
                if line is None:
                    self.say(f"error: line {number} is not valid UTF-8 text; skipped")
                    continue
                line = line.strip()
                if not line:
                    continue
                if line in (":quit", ":q", ":exit"):
                    break
                self._line(line)
        except KeyboardInterrupt:
            self.say("interrupted")
        self.say(self._farewell())
        self.say("bye")
        return 0

    def _line(self, line: str) -> None:
        """Handle one line; report any error on its own line, then save the transcript if the
        conversation changed."""
        session = self.session
        turns, step = len(session.history), session.step
        try:
            self.handle(line)
        except (MinterprError, ValueError, IndexError, KeyError) as err:
            message = err.args[0] if isinstance(err, KeyError) and err.args else err
            self.say(f"error: {message}")
        except Exception as err:  # a bug: the session is unchanged (turns are atomic), so keep chatting
            self.say(f"error: unexpected {type(err).__name__}: {err} (the conversation is kept; please report this)")
        finally:  # even on Ctrl-C: a turn made is a turn kept
            if self.transcript is not None and (len(session.history) != turns or session.step is not step):
                try:
                    self._save(self.transcript)
                except MinterprError as err:
                    self.say(f"error: the transcript was not saved: {err}")

    def _save(self, path: str | os.PathLike[str]) -> str:
        self.saved_to = self.session.save_history(path)
        self._saved_history = self.session.history
        return self.saved_to

    def _farewell(self) -> str:
        history = self.session.history
        if self.saved_to is not None and self._saved_history == history:
            return f"conversation saved to {self.saved_to}"
        if self.saved_to is not None:
            return f"conversation last saved to {self.saved_to}; the turns since are not saved"
        if history:
            turns = f"{len(history)} turn{'s' * (len(history) != 1)}"
            return f"({turns} not saved: :save FILE or --transcript FILE keeps them)"
        return "(nothing to save)"

    def _target(self, token: str) -> int:
        """Gallery index of 'K' (rank K of the listed results) or 'rK' (the K-th shown reference)."""
        step = self.session.step
        if step is None:
            raise InputError("describe the person first")
        reference = token[:1].lower() == "r"
        number = token[1:] if reference else token
        if not number.isdigit():
            raise InputError(f"expected a result number K or a shown reference rK, got {token!r}")
        k = int(number)
        if reference:
            shown = getattr(step.action, "indices", None)
            if not shown or not 1 <= k <= len(shown):
                raise InputError(f"no shown reference {token}" + (f" (r1..r{len(shown)})" if shown else ""))
            return shown[k - 1]
        if not 1 <= k <= len(step.ranking):
            raise InputError(f"rank {k} out of range 1..{len(step.ranking)}")
        return int(step.ranking[k - 1])

    def handle(self, line: str) -> None:
        from minterpr.interaction.session import AskQuestion, ShowReferences

        session = self.session
        if not line.startswith(":"):
            action = session.action
            if isinstance(action, ShowReferences) and action.indices:
                return self._reply_to_shown(line, action.indices)
            step = session.answer(line) if isinstance(action, AskQuestion) else session.describe(line)
            return self._turns(1, step)
        command, _, rest = line[1:].partition(" ")
        rest = rest.strip()
        if command == "help":
            return self.say(HELP)
        if command == "undo":
            return self._undo()
        if command in ("feedback", "no", "yes"):
            token, _, text = rest.partition(" ")
            if not token:
                raise InputError(f":{command} needs a result number, e.g. :{command} 2")
            if command == "yes":
                text = "Yes, this one."
            elif command == "no":
                text = f"Not this one. {text}".strip()
            elif not text.strip():
                raise InputError(":feedback needs a text, e.g. :feedback 3 not her, no backpack")
            return self._turns(1, session.feedback(self._target(token), text))
        if command == "example":
            if not rest:
                raise InputError("usage: :example PATH (an image of the person: a gallery path or any image file)")
            return self._turns(1, session.example(self._example_path(rest)))
        if command == "save":
            if not rest:
                raise InputError("usage: :save FILE (the conversation as JSON)")
            return self.say(f"saved {len(session.history)} turns to {self._save(rest)}")
        if command == "facts":
            return self.say(self._facts_list())
        if command == "forget":
            return self._forget(rest)
        if command == "explain":
            step = session.step
            i = self._target(rest)
            return self.say(f"{session.index.images[i].path}: {step.explain_image(i).summary()}")  # ranked or not
        raise InputError(f"unknown command :{command} (:help lists them)")

    def _facts_list(self) -> str:
        from minterpr.interaction.history import describe_said, said_facts

        facts = said_facts(self.session.history)
        if not facts:
            return "(no facts yet)"
        return "\n".join(f"{k:>3}. {describe_said(fact)}  (turn {turn + 1})" for k, (turn, fact) in enumerate(facts, 1))

    def _forget(self, token: str) -> None:
        """Withdraw fact K of :facts; the ranking is recomputed as if it had never been said."""
        from minterpr.interaction.history import describe_said, said_facts

        facts = said_facts(self.session.history)
        if not token.isdigit() or not 1 <= int(token) <= len(facts):
            raise InputError(
                f"usage: :forget K, K a fact number of :facts (1..{len(facts)})"
                if facts
                else "there is no fact to forget yet"
            )
        turn, fact = facts[int(token) - 1]
        step = self.session.withdraw_fact(turn, fact)
        self.say(f"forgot: {describe_said(fact)} (turn {turn + 1})")
        self._show_results(step)

    def _turns(self, count: int, step) -> None:
        self._line_turns.append(count)
        self.show(step)

    def _undo(self) -> None:
        session = self.session
        count = min(self._line_turns[-1] if self._line_turns else 1, len(session.history))
        if count == 0:
            session.undo()  # nothing to undo: its TurnError says so
        for _ in range(count):
            step = session.undo()
        if self._line_turns:
            self._line_turns.pop()
        self.show(step) if step is not None else self.say("(empty) Describe the person.")

    def _reply_to_shown(self, line: str, shown: tuple[int, ...]) -> None:
        """A plain line while references are shown (see the module doc)."""
        session = self.session
        judges, value = reply_verdict(line)
        if not judges:
            self.say("(a remark about the person; answer the shown images with yes / no, or :feedback rK)")
            return self._turns(1, session.describe(line))
        if len(shown) == 1:
            return self._turns(1, session.feedback(shown[0], line))
        if value is not False:
            word = "yes" if value else "feedback"
            raise InputError(f"which of the {len(shown)} shown images? e.g. :{word} r1" + ("" if value else " maybe"))
        added = 0
        try:  # the reasons go with the first image only: they describe the person, once
            for k, i in enumerate(shown):
                step = session.feedback(i, line if k == 0 else "Not this one.")
                added += 1
        except BaseException:
            for _ in range(added):  # the line is one move: all of it or none
                session.undo()
            raise
        self.say(f"(rejected r1..r{len(shown)}; :undo takes them all back)")
        self._turns(added, step)

    def _example_path(self, path: str) -> str:
        """A gallery path or a file under the image root as given; else a file relative to the
        current directory (as a user typing a path means it), made absolute."""
        index = self.session.index
        path = os.path.expanduser(path)
        if index.index_of(path) is not None:
            return path
        under_root = os.path.join(index.root, path) if index.root else path
        if not os.path.isfile(under_root) and os.path.isfile(path):
            return os.path.abspath(path)
        return path

    def show(self, step) -> None:
        if self.session.history:  # what the system took from the turn, the model's facts marked as such
            self.say(understood_line(self.session.history[-1]))
        vlm = self.session.vlm
        if vlm is not None and vlm.notice:  # a failing or slow endpoint is said, not waited on in silence
            self.say(f"note: {vlm.notice}")
        self._show_results(step)

    def _show_results(self, step) -> None:
        from minterpr.interaction.session import AskQuestion, ShowReferences

        index = self.session.index
        matches = step.match()  # the bounded match probability the page shows, not the raw score
        for k in range(min(self.top, len(step.ranking))):
            i = int(step.ranking[k])
            self.say(
                result_line(
                    k,
                    index.images[i],
                    self.times[i] if self.times else None,
                    float(matches[k]),
                    step.explain(k).summary(),
                )
            )
        action = step.action
        if isinstance(action, AskQuestion):
            self.say(f"system: {action.text}")
        elif isinstance(action, ShowReferences):
            ranks = {int(i): r + 1 for r, i in enumerate(step.ranking[:1000])}
            shown = ", ".join(
                f"r{j + 1} {index.images[i].path} (rank {ranks.get(i, '>1000')})" for j, i in enumerate(action.indices)
            )
            self.say(f"system: {action.text}  {shown}")
            if len(action.indices) == 1:
                self.say("        (reply yes, or no and how the person differs)")
            else:
                self.say('        (:yes rK if one is the person, "no ..." if none is, :feedback rK how one differs)')
        elif any(self.session.judgements.values()):
            self.say("system: found. (:undo to keep searching, :quit to leave)")
        else:
            self.say("system: nothing more to ask; add details, or judge a result.")
        if self.show_dir is not None:
            try:
                self.say(f"picture: {self._picture()}")
            except (OSError, MinterprError) as err:  # the turn stands; only its picture is missing
                self.say(f"error: the picture was not written: {err}")

    def _picture(self) -> str:
        """The conversation so far as a ranked strip (one row per turn), DIR/turn_<N>.png."""
        from minterpr.evaluation.pictures import StripConfig, session_views, write_ranked_strip

        session = self.session
        path = os.path.join(self.show_dir, f"turn_{len(session.history):03d}.png")
        top = max(1, min(8, self.session.history_k))
        write_ranked_strip(
            path,
            session_views(session, top),
            session.index.images,
            root=session.index.root,
            title=f"chat: {len(session.history)} turn(s)",
            config=StripConfig(top_k=top),
            allow_outside_root=True,
        )
        return path


def understood_line(entry: Any) -> str:
    """The chat's line of what a turn was read as: its facts (a model's marked), or that nothing was.

    >>> from minterpr.interaction.history import HistoryEntry, ModelFact
    >>> from minterpr.language.phrasing import Fact
    >>> from minterpr.types import DescriptionTurn
    >>> understood_line(HistoryEntry(DescriptionTurn("a man, red top"),
    ...                              (Fact("gender", ("male",)), ModelFact("upper_colour", ("red",))), ()))
    'understood: gender: male; top colour: red (read by the model)'
    >>> understood_line(HistoryEntry(DescriptionTurn("qwerty"), (), ()))
    'understood: nothing in this turn (say it another way)'
    """
    from minterpr.interaction.history import describe_said

    if not entry.facts:
        return "understood: " + (
            "nothing in this turn (say it another way)" if not entry.understood else "no attribute, only the verdict"
        )
    return "understood: " + "; ".join(describe_said(f) for f in entry.facts)


def _decode(raw: str | bytes) -> str | None:
    """A line as text; None when it is not valid UTF-8 (or holds undecodable-byte escapes)."""
    try:
        if isinstance(raw, bytes):
            return raw.decode("utf-8")
        raw.encode("utf-8")  # lone surrogates: a text stream decoded with errors="surrogateescape"
        return raw
    except UnicodeError:
        return None


def cmd_chat(args: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    from minterpr.interaction.session import Session

    out = stdout or sys.stdout
    check_backend_arguments(args)
    times = None
    if getattr(args, "index", None) is not None:  # a stored gallery (`minterpr index build`): no re-embedding
        backend, reranking, index = open_for_chat(args)  # refuses a store another model built
        times = store_times(args.index, len(index))
    else:
        images_dir = Path(args.images)
        if not images_dir.is_dir():
            raise CLIError(f"image directory not found: {images_dir}")
        images = gallery_images(images_dir, args.gallery, args.split)
        backend, reranking = load_backend(args)  # the run's stored scoring, else the defaults
        index = build_index(
            backend,
            images,
            str(images_dir),
            complete=False,  # chat reports skipped images
            progress=show_progress(args),
        )
    if args.vlm_captions:  # MTG: the captions' evidence beside the image model's (minterpr vlm caption)
        from minterpr.vlm.caption import use_captions

        index, captioned = use_captions(index, args.vlm_captions, args.vlm_caption_weight)
        print(
            f"MTG captions: {captioned.get('vlm_captioned', 0)} of {len(index)} images"
            + ("" if captioned else f" ({args.vlm_captions} holds none)"),
            file=out,
        )
    skipped = tuple(getattr(index, "skipped", ()) or ())
    if skipped:  # one line, then the chat goes on without them
        path, reason = skipped[0]
        print(f"{len(skipped)} images could not be read and were left out, e.g. {path}: {reason}", file=out)
    # the user's own terminal: example images may be any file the user can read
    options = dict(
        question_policy=args.questions,
        reference_policy=args.references,
        schedule=args.schedule,
        seed=args.seed,
        reranking=reranking,
        allow_external_images=True,
        vlm=_assistant(args),
    )
    transcript = getattr(args, "transcript", None)
    loop = ChatLoop(
        Session(backend, index, **options),
        out,
        top=args.top,
        transcript=transcript,
        show=getattr(args, "show", None),
        times=times,
    )
    if transcript is not None:
        if os.path.exists(transcript):
            loop.session = Session.load_history(transcript, backend, index, **options)
            print(f"continuing the conversation in {transcript} ({len(loop.session.history)} turns)", file=out)
            if loop.session.step is not None:
                loop.show(loop.session.step)
        loop._save(transcript)  # an unwritable FILE fails now, not after the first turn
    # bytes, decoded line by line: a line that is not UTF-8 is that line's error, not the chat's end
    lines = stdin if stdin is not None else getattr(sys.stdin, "buffer", sys.stdin)
    return loop.run(lines)


def _handler(args: argparse.Namespace) -> int:
    try:
        return cmd_chat(args)
    except CLIError as err:
        print(f"minterpr chat: error: {err}", file=sys.stderr)
        return 2


def _assistant(args: argparse.Namespace) -> Any:
    """The --vlm-* model for the session (docs/vlm.md), or None."""
    config = vlm_config(args)
    if config is None:
        return None
    from minterpr.vlm.assist import VLMAssistant

    return VLMAssistant(config)


# the in-chat commands of the module doc, for `minterpr chat --help`
_IN_CHAT = (
    "in-chat commands (a line starting with ':'):\n"
    + textwrap.indent(
        textwrap.dedent(__doc__.split("Commands:\n", 1)[1].split("\n\n    While", 1)[0]).strip("\n"), "  "
    )
    if __doc__
    else ""
)


def register(subparsers: argparse._SubParsersAction) -> None:
    from minterpr.interaction.policies import QUESTION_POLICIES, REFERENCE_POLICIES, SCHEDULES

    p = subparsers.add_parser(
        "chat",
        help="interactive search in the terminal (reads standard input)",
        description="Describe a person, answer the system's questions, judge results. "
        "Reads one line at a time from standard input (a terminal, or a "
        "file / pipe: `minterpr chat ... < lines.txt`) until :quit or its end.",
        epilog=_IN_CHAT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_backend_arguments(p, default_run="shipped")  # real photos by default: the shipped real-pixel model
    add_vlm_arguments(p)
    add_caption_arguments(p)
    gallery = p.add_mutually_exclusive_group(required=True)
    gallery.add_argument("--images", metavar="DIR", help="image directory (with gallery_<split>.jsonl, or images)")
    gallery.add_argument(
        "--index",
        metavar="INDEX_DIR",
        help="a gallery store built by `minterpr index build` with --run's model (nothing is re-embedded)",
    )
    p.add_argument("--gallery", metavar="FILE", help="gallery manifest (default: DIR/gallery_<split>.jsonl)")
    p.add_argument("--split", default="test")
    p.add_argument("--top", type=int, default=5, help="results listed per turn")
    p.add_argument("--questions", default="info_gain", choices=QUESTION_POLICIES.names())
    p.add_argument("--references", default="diverse", choices=REFERENCE_POLICIES.names())
    p.add_argument("--schedule", default="auto", choices=["auto", *SCHEDULES])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--transcript",
        metavar="FILE",
        help="save the conversation to FILE after every turn (continues FILE if it exists)",
    )
    p.add_argument(
        "--show",
        metavar="DIR",
        help="after every turn, draw the ranking so far (one row per turn) as DIR/turn_<N>.png and print its path",
    )
    p.set_defaults(handler=_handler)
    add_common_options(p, device=True)


def store_times(directory: str | os.PathLike[str], count: int) -> list[str | None] | None:
    """Each image's capture time from a store's metadata (``time``), or None when it records none."""
    from minterpr.index.store.gallery_store import open_gallery

    metadata = getattr(open_gallery(directory, mmap=True, fused=False), "metadata", None)
    if not metadata or len(metadata) != count:
        return None
    times = [m.get("time") if isinstance(m, dict) else None for m in metadata]
    return [str(t) if t is not None else None for t in times] if any(t is not None for t in times) else None


def open_for_chat(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """``chat --index DIR``: (backend, scoring, index) of ``--run`` and the store, which must be
    one that model built (DatasetError otherwise: one line, exit 2)."""
    from minterpr.index.store.gallery_store import load_gallery

    if getattr(args, "backend", None) is not None or getattr(args, "run", None) is None:  # --run has a default
        raise CLIError("--index needs --run RUN: the model that built the store embeds the queries")
    if not Path(args.index).is_dir():
        raise CLIError(f"gallery store not found: {args.index} (build one with `minterpr index build`)")
    pipeline = load_pipeline_of(args)
    index = load_gallery(args.index, expected_fingerprint=pipeline.fingerprint)
    return pipeline.backend, pipeline.rerank_config(), index
