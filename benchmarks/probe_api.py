"""The Python-API probes of ``probe_bad_inputs.py``: one function per kind of probe.

Each probe gets the shared :class:`Ctx` (fixture paths, one loaded pipeline, one indexed
gallery) and the case's argument, and returns ``(outcome, detail)`` with outcome one of
``clear`` (a documented MinterprError with a message), ``ok`` (handled: the expected success,
or a bad record reported rather than raised), ``unclear`` (any other exception), ``silent``
(a wrong result that raised nothing) or ``refused`` (a documented error for valid input).
Probes judge behaviour, not attribute names that may still change.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Callable

import numpy as np

from minterpr.errors import MinterprError

Verdict = tuple[str, str]
PROBES: dict[str, Callable[["Ctx", Any], Verdict]] = {}


class ProbeUnsupported(Exception):
    """The probe cannot run against this tree (a fixture or a public name it needs is missing)."""


def probe(fn):
    PROBES[fn.__name__] = fn
    return fn


def attempt(fn, *args, **kwargs) -> tuple[Any, BaseException | None]:
    try:
        return fn(*args, **kwargs), None
    except (KeyboardInterrupt, SystemExit, ProbeUnsupported):
        raise
    except BaseException as exc:  # noqa: BLE001 - classifying whatever escapes is the point
        if type(exc).__name__ == "ProbeTimeout":
            raise
        return None, exc


def describe_exc(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text[:300]}"


def judge(exc: BaseException) -> Verdict:
    """A documented error with a message is clear; anything else is not."""
    if isinstance(exc, MinterprError) and str(exc).strip():
        return "clear", describe_exc(exc)
    return "unclear", describe_exc(exc)


def expect_outcome(expect: str, value_ok: bool, exc: BaseException | None, what: str) -> Verdict:
    """Verdict of a call that returned (exc None) or raised, against error/ok/either."""
    if exc is not None:
        outcome, detail = judge(exc)
        if outcome == "clear" and expect == "ok":
            return "refused", detail
        return outcome, detail
    if expect == "error":
        return "silent", f"{what} succeeded; a clear refusal was expected"
    return ("ok", "") if value_ok else ("silent", f"{what} returned a wrong result")


class Ctx:
    """What the probes of one family share (built lazily: the dataset family needs no torch)."""

    def __init__(self, fixtures: Path) -> None:
        self.F = fixtures
        self._pipe = None
        self._gallery = None
        self._img_gallery = None

    @property
    def pipe(self):
        if self._pipe is None:
            from minterpr import load_pipeline

            self._pipe = load_pipeline(self.F / "run")
        return self._pipe

    @property
    def gallery_paths(self) -> list[str]:
        from probe_fixtures import test_images

        return test_images(self.F)

    @property
    def gallery(self):
        if self._gallery is None:
            self._gallery = self.pipe.index_images(self.gallery_paths, root=str(self.F / "ds"), progress=False)
        return self._gallery

    @property
    def img_gallery(self):
        """Two images under F/img, so the odd images there are "files under the index root"."""
        if self._img_gallery is None:
            self._img_gallery = self.pipe.index_images(
                ["good.png", "good_copy.png"], root=str(self.F / "img"), progress=False
            )
        return self._img_gallery

    def session(self, **options):
        return self.pipe.session(self.gallery, **options)

    def embed(self, path: Path) -> np.ndarray:
        index = self.pipe.index_images([str(path)], progress=False)
        if len(index) != 1:
            raise ProbeUnsupported(f"{path} was not indexed")
        return np.asarray(index.embeddings[0], np.float64)


# ----------------------------------------------------------------------------- readers
def _reader(fmt: str):
    from minterpr.data.formats import captions, chatpedes, gallery, minterpedes

    return {
        "minterpedes": minterpedes.read_minterpedes,
        "gallery": gallery.read_gallery,
        "chatpedes": chatpedes.read_chatpedes,
        "captions": captions.read_caption_dataset,
    }[fmt]


@probe
def read_strict(ctx: Ctx, arg) -> Verdict:
    """arg = (format, file under F/bad, expect, extra kwargs)."""
    fmt, name, expect, kwargs = arg
    value, exc = attempt(_reader(fmt), ctx.F / "bad" / name, **kwargs)
    return expect_outcome(expect, True, exc, f"read_{fmt}({name})")


@probe
def read_lenient(ctx: Ctx, arg) -> Verdict:
    """Lenient read: the bad record must be reported (or a clear error raised), never accepted quietly."""
    fmt, name, expect, kwargs = arg
    value, exc = attempt(_reader(fmt), ctx.F / "bad" / name, strict=False, **kwargs)
    if exc is not None:
        return expect_outcome("either" if expect == "error" else expect, True, exc, "")
    report = getattr(value, "report", None)
    problems = list(getattr(report, "problems", []) or [])
    if expect == "error" and not problems:
        return "silent", f"strict=False read {len(value[0])} records and reported no problem"
    if expect == "ok" and problems:
        return "refused", f"reported: {problems[0]}"
    return "ok", str(problems[0]) if problems else ""


# ----------------------------------------------------------------------------- runs
@probe
def load_run(ctx: Ctx, arg) -> Verdict:
    """arg = (path relative to F, expect, loader): load_pipeline or models.io.load_model."""
    rel, expect, loader = arg
    path = ctx.F / rel
    if loader == "load_pipeline":
        from minterpr import load_pipeline as fn
    else:
        from minterpr.models.io import load_model as fn

        path = path / "model.pt" if path.is_dir() or not path.suffix else path
    value, exc = attempt(fn, path)
    verdict = expect_outcome(expect, True, exc, f"{loader}({rel})")
    if (ctx.F / "marker" / "api_model_pt_ran").exists():
        return "silent", "unsafe: a pickle payload in the file ran on load"
    return verdict


# ----------------------------------------------------------------------------- sessions
def _state(session) -> tuple:
    step = session.step
    ranking = None if step is None else tuple(int(i) for i in step.ranking)
    return len(session.history), ranking, None if step is None else step.action


def _replay_matches(session, options: dict) -> str | None:
    """None when the session ranks like a fresh replay of its own history, else why not."""
    if not session.history:
        return None
    fresh, exc = attempt(
        type(session).replay, session.history, session.backend, session.index, reranking=session.reranking, **options
    )
    if exc is not None:
        return f"replaying its history fails: {describe_exc(exc)}"
    if _state(fresh)[1:] != _state(session)[1:]:
        return "its ranking or next move differs from a fresh replay of its history"
    return None


def _after_failure(session, options: dict, before: tuple) -> str | None:
    """A failed turn must leave the session as it was, and the next turn must work."""
    if len(session.history) != before[0]:
        return f"history grew from {before[0]} to {len(session.history)} after the failed call"
    if _state(session) != before:
        return "the ranking or next move changed after the failed call"
    _, exc = attempt(session.describe, "she also carried a backpack")
    if exc is not None:
        return f"session poisoned: the next describe() fails: {describe_exc(exc)}"
    return _replay_matches(session, options)


@probe
def turn(ctx: Ctx, arg) -> Verdict:
    """arg = (method, args, expect, options, first): call session.METHOD(*args) after one
    description (or on a fresh session when ``first``); check the session stays consistent."""
    method, args, expect, options, first = arg
    options = dict(options)
    gallery = ctx.img_gallery if options.pop("_gallery", None) == "img" else ctx.gallery
    session = ctx.pipe.session(gallery, **options)
    if not first:
        session.describe("a woman in a red top and blue jeans")
    if callable(args):
        args = args(ctx, session)
    before = _state(session)
    value, exc = attempt(getattr(session, method), *args)
    what = f"{method}({', '.join(_short(a) for a in args)})"
    if exc is not None:
        outcome, detail = expect_outcome(expect, True, exc, what)
        problem = _after_failure(session, options, before)
        return ("silent", f"{detail}; {problem}") if problem else (outcome, detail)
    if expect == "error":
        return "silent", f"{what} succeeded; a clear refusal was expected"
    grew = len(session.history) - before[0]
    if method != "undo" and grew != 1:
        return "silent", f"{what} added {grew} turns"
    problem = _replay_matches(session, options)
    return ("silent", problem) if problem else ("ok", "")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:30] + f"...({len(text)} chars)"


@probe
def feedback_duplicate(ctx: Ctx, arg) -> Verdict:
    """Feedback on each of two rows with the same path must judge that row (or indexing refuses)."""
    paths = ctx.gallery_paths
    index, exc = attempt(ctx.pipe.index_images, [paths[0], paths[0], paths[1]], root=str(ctx.F / "ds"), progress=False)
    if exc is not None:
        return expect_outcome("either", True, exc, "")
    row = arg
    session = ctx.pipe.session(index)
    session.describe("a woman in a red top")
    _, exc = attempt(session.feedback, row, "no, not her")
    if exc is not None:
        return expect_outcome("either", True, exc, "")
    judged = sorted(session.judgements)
    if judged != [row]:
        return "silent", f"feedback on row {row} judged rows {judged}"
    return "ok", ""


@probe
def empty_gallery(ctx: Ctx, arg) -> Verdict:
    index, exc = attempt(ctx.pipe.index_images, [], progress=False)
    if exc is not None:
        return expect_outcome("either", True, exc, "")
    session = ctx.pipe.session(index)
    step, exc = attempt(session.describe, "a man in red")
    if exc is not None:
        return expect_outcome("either", True, exc, "")
    return ("ok", "") if len(step.ranking) == 0 else ("silent", f"{len(step.ranking)} results from an empty gallery")


@probe
def index_call(ctx: Ctx, arg) -> Verdict:
    """arg = (kwargs builder, expect, expected length or None): pipe.index_images(**kwargs)."""
    build, expect, length = arg
    kwargs = build(ctx)
    value, exc = attempt(ctx.pipe.index_images, progress=False, **kwargs)
    ok = exc is not None or length is None or len(value) == length
    return expect_outcome(expect, ok, exc, "index_images")


# ----------------------------------------------------------------------------- images
def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


@probe
def index_image(ctx: Ctx, arg) -> Verdict:
    """arg = (file under F/img, readable, twin, min cosine): index [good, file]. An unreadable file
    is skipped (1 row) or refused; a readable one is indexed and embeds close to its twin."""
    name, readable, twin, min_cos = arg
    files = [str(ctx.F / "img" / "good.png"), str(ctx.F / "img" / name)]
    index, exc = attempt(ctx.pipe.index_images, files, progress=False)
    if exc is not None:
        return expect_outcome("ok" if readable else "either", True, exc, "")
    if not readable:
        if len(index) == 2:
            return "silent", f"the unreadable {name} was indexed as a gallery image"
        return ("ok", "skipped") if len(index) == 1 else ("silent", f"{len(index)} rows for 1 readable image")
    if len(index) != 2:
        return "refused", f"{name} was skipped ({len(index)} rows)"
    if twin:
        c = _cos(np.asarray(index.embeddings[1], np.float64), ctx.embed(ctx.F / "img" / twin))
        white = _cos(ctx.embed(ctx.F / "img" / "white.png"), ctx.embed(ctx.F / "img" / twin))
        if c < min_cos:
            return "silent", f"cosine {c:.3f} with the same picture {twin} (a white image: {white:.3f})"
    return "ok", ""


@probe
def example_image(ctx: Ctx, arg) -> Verdict:
    """arg = (path, expect): session.example(path) after a description (the gallery root is F/ds)."""
    path, expect = arg
    if callable(path):
        path = path(ctx)
    return turn(ctx, ("example", (path,), expect, {"_gallery": "img"}, False))


# ----------------------------------------------------------------------------- chat loop
@probe
def chat_no_with_references(ctx: Ctx, arg) -> Verdict:
    """A bare "no" typed while reference images are shown must not become a new description:
    it judges the references, or the chat asks which one is meant."""
    try:
        from minterpr.cli.shared.chat_loop import ChatLoop
        from minterpr.types import DescriptionTurn
    except ImportError as exc:
        raise ProbeUnsupported(str(exc)) from exc
    session = ctx.session(schedule="references")
    out = io.StringIO()
    _, exc = attempt(lambda: ChatLoop(session, out, top=3).run(io.StringIO(f"a woman in a red top\n{arg}\n")))
    if exc is not None:
        return judge(exc)
    if not session.history:
        return "silent", "the description was lost"
    last = session.history[-1].turn
    if isinstance(last, DescriptionTurn) and last.text.strip() == arg:
        return "silent", f"{arg!r} while references were shown became a new description"
    return "ok", ""


def chat_verdict(expect: str, text: str) -> Verdict:
    """Judge a chat transcript: the error is reported on its line, and the chat goes on to the end
    with results after it (``expect`` "chat": an error is required; "either_chat" / "ok": not)."""
    lines = text.splitlines()
    errors = [k for k, line in enumerate(lines) if "error" in line.lower()]
    results = [k for k, line in enumerate(lines) if line.startswith("  1. ")]
    if not lines or lines[-1].strip() != "bye":
        return "silent", "chat did not reach the end of its input"
    if errors and (not results or results[-1] < errors[-1]):
        return "silent", "no results after the error: the session did not recover"
    if expect == "chat" and not errors:
        return "silent", "the bad line was taken without an error"
    if expect == "ok" and errors:
        return "refused", lines[errors[0]].strip()[:300]
    return ("clear", lines[errors[0]].strip()[:300]) if errors else ("ok", "")


@probe
def chat_script(ctx: Ctx, arg) -> Verdict:
    """arg = (stdin text, expect): the chat loop of ``minterpr chat`` on the shared pipeline."""
    script, expect = arg
    try:
        from minterpr.cli.shared.chat_loop import ChatLoop
    except ImportError as exc:
        raise ProbeUnsupported(str(exc)) from exc
    out = io.StringIO()
    _, exc = attempt(lambda: ChatLoop(ctx.session(), out, top=3).run(io.StringIO(script)))
    if exc is not None:
        return "unclear", f"the chat ended on the error, the conversation is lost: {describe_exc(exc)}"
    return chat_verdict(expect, out.getvalue())


def run_case(ctx: Ctx, name: str, arg: Any) -> Verdict:
    try:
        return PROBES[name](ctx, arg)
    except ProbeUnsupported as exc:
        return "probe failed", f"probe could not run: {exc}"
    except BaseException as exc:  # noqa: BLE001 - a setup step of the probe itself raised
        if type(exc).__name__ == "ProbeTimeout":
            raise
        outcome, detail = judge(exc)
        return outcome, f"(while setting up the probe) {detail}"
