"""The conversation of ``minterpr chat`` (:mod:`minterpr.cli.commands.chat`): :class:`ChatLoop` reads
the user's lines, drives a Session and writes what the system shows.

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
"""

from __future__ import annotations

import os
from typing import Iterable, TextIO

from minterpr.cli.shared.chat_lines import decode_line, reply_verdict, result_line, understood_line
from minterpr.errors import InputError, MinterprError

HELP = __doc__.split("Commands:", 1)[1].split("Nothing typed", 1)[0].rstrip()


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
                line = decode_line(raw)
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
        from minterpr.evaluation.picture_recorders import session_views
        from minterpr.evaluation.pictures import StripConfig, write_ranked_strip

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
