"""The error types minterpr documents: what escapes the public API and the CLI, and why.

Everything a user can get wrong (a broken file, an unfinished dataset, a run directory that is
not one, a turn that cannot be made) raises a :class:`MinterprError` with a message that names
the file, the line or the argument, and what to do. Anything else that escapes is a bug.

The command line turns a ``MinterprError`` into one line ``minterpr COMMAND: error: MESSAGE``
and exit code 2 (docs/errors.md has the table). Each class also derives from the built-in
exception a caller would have caught before it existed (``ValueError``, ``OSError``), so code
written against those keeps working.

Example:
    >>> err = RunError("runs/x/model.pt", "the file is empty (0 bytes)")
    >>> str(err)
    'runs/x/model.pt: the file is empty (0 bytes)'
    >>> isinstance(err, MinterprError), isinstance(TurnError("no text"), ValueError)
    (True, True)
"""

from __future__ import annotations

import os


class MinterprError(Exception):
    """Base of every documented minterpr error (CLI: one line, exit code 2)."""


class InputError(MinterprError, ValueError):
    """A bad argument at the public API: wrong type, empty or oversized text, index out of range."""


class TurnError(InputError):
    """A session turn that could not be made. The session is exactly as it was before the call."""


class _PathError(MinterprError):
    """An error about one file or directory: ``PATH: reason``."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = os.fspath(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class RunError(_PathError, ValueError):
    """A run directory or model file that cannot be loaded (missing, empty, truncated, not a
    minterpr model, written for an encoder this installation lacks, weights that do not fit)."""


class DatasetError(_PathError, ValueError):
    """A dataset directory that is missing, unfinished, or mixed from two builds; the message
    names the command that rebuilds it."""


class ImageError(_PathError, OSError):
    """An image file that cannot be read or decoded."""


def first_line(err: BaseException) -> str:
    """The first line of an exception's message, or its type's name when it has none: what a
    one-line report of a third-party error quotes.

    >>> first_line(OSError("401 Unauthorized\\nmore detail")), first_line(ValueError())
    ('401 Unauthorized', 'ValueError')
    """
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
