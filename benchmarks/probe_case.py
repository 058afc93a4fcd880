"""A case of ``probe_bad_inputs.py``: what is tried, how, and what a correct minterpr does.

A case is one declarative :class:`Case`. CLI cases run ``python -m minterpr ARGS`` (``{F}`` is
the fixture folder) with optional stdin; API cases name a probe of ``probe_api`` and its
argument. ``expect`` says what is right:

* ``error``    a documented refusal: exit code in ``codes`` (2 by default; 1 or 2 for
               ``data validate``), one short message, no traceback; API: a MinterprError.
* ``ok``       success (exit 0; API: returns, and the result passes the probe's checks).
* ``either``   success or a documented refusal are both right (e.g. a 9 MB line).
* ``report``   a lenient command: exit 0 while naming the skipped record is right too.
* ``chat``     ``minterpr chat`` reports the error on its line and goes on.
``check`` names a post-run test (``CHECKS`` in probe_bad_inputs) that detects a silently wrong
result of a command that exited 0 (a pickle payload that ran, a rerun that repaired nothing).
The cases themselves are in ``probe_cases_data.py``, ``probe_cases_inputs.py`` and
``probe_cases_state.py``; ``probe_cases.py`` lists them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OUTSIDE = r"outside\.png|leaves|outside|root"  # a refused path escape names the path or the root


@dataclass(frozen=True)
class Case:
    name: str  # unique, family/what
    family: str  # dataset, rundir, images, text, chat, indices, gallery, threads, build
    what: str  # one line for the reader
    expect: str  # error | ok | either | report | chat
    cli: tuple[str, ...] | None = None  # argv after `python -m minterpr`
    stdin: bytes | None = None
    codes: tuple[int, ...] = (2,)  # exit codes of a documented refusal
    check: str | None = None  # post-run check for silently wrong results (CLI)
    mentions: str | None = None  # regex a clear error's message must match (it says what is wrong)
    api: str | None = None  # probe function in probe_api
    arg: Any = field(default=None, compare=False)
    timeout: float = 90.0


class Cases(list):
    """The cases of one module, in order, with the two ways of adding one."""

    def cli(self, family: str, name: str, what: str, expect: str, *argv: str, **kw: Any) -> None:
        self.append(Case(f"{family}/{name}", family, what, expect, cli=tuple(argv), **kw))

    def api(self, family: str, name: str, what: str, expect: str, probe: str, arg: Any, **kw: Any) -> None:
        self.append(Case(f"{family}/{name}", family, what, expect, api=probe, arg=arg, **kw))
