"""Checks on what a user hands a :class:`~minterpr.interaction.session.Session`, before any computing.

Every public move of a session runs its arguments through these functions first, so that
nothing malformed reaches the parser, the tokenizer or the image loader. They raise
:class:`~minterpr.errors.TurnError` (an ``InputError``, hence a ``ValueError``) naming the
argument and what is wrong with it:

- text must be a ``str`` of at most ``max_chars`` characters that encodes as UTF-8 (no lone
  surrogates); control characters other than tab and newline (and the Unicode line / paragraph
  separators) become spaces; a user's own text must not be empty or whitespace only;
- a gallery position is an ``int`` or numpy integer (not ``bool``) within ``0..N-1``;
- an image path is a non-empty ``str`` or path-like naming a gallery image, or an existing file
  under the index root (anywhere, with ``allow_external``; see :func:`~minterpr.data.paths.resolve_under`);
- a turn is one of the four turn records, its fields checked as above (:func:`checked_turn`), and a
  session's own options are in range (:func:`check_options`, InputError).

Example:
    >>> clean_text("a man\\x00in red\\r", "text")
    'a man in red '
    >>> clean_text("   ", "text")
    Traceback (most recent call last):
    ...
    minterpr.errors.TurnError: text is empty; say something about the person
    >>> gallery_position(True, 10, "gallery_index")
    Traceback (most recent call last):
    ...
    minterpr.errors.TurnError: gallery_index must be an int, got bool
"""

from __future__ import annotations

import os
import unicodedata
from typing import Any

import numpy as np

from minterpr.data.paths import resolve_under
from minterpr.errors import InputError, TurnError
from minterpr.index.gallery_index import GalleryIndex
from minterpr.types import DescriptionTurn, ExampleTurn, QATurn, ReferenceTurn, Turn

DEFAULT_MAX_TEXT_CHARS = 2000  # a long description is a few hundred characters
_KEEP = frozenset("\t\n")
_LINE_SEPARATORS = frozenset("\u2028\u2029")  # split lines like a newline would, without being one


def _is_control(char: str) -> bool:
    return char not in _KEEP and (unicodedata.category(char) == "Cc" or char in _LINE_SEPARATORS)


def clean_text(value: Any, what: str, max_chars: int = DEFAULT_MAX_TEXT_CHARS, *, allow_empty: bool = False) -> str:
    """``value`` checked as user text (see the module doc), control characters replaced by spaces."""
    if not isinstance(value, str):
        raise TurnError(f"{what} must be a str, got {type(value).__name__}")
    if len(value) > max_chars:
        raise TurnError(f"{what} is too long: {len(value):,} characters (at most {max_chars:,})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise TurnError(
            f"{what} is not valid text: character {err.start} is a lone surrogate "
            f"(U+{ord(value[err.start]):04X}); was it decoded with the wrong encoding?"
        ) from err
    if any(_is_control(c) for c in value):
        value = "".join(" " if _is_control(c) else c for c in value)
    if not allow_empty and not value.strip():
        raise TurnError(f"{what} is empty; say something about the person")
    return value


def gallery_position(value: Any, size: int, what: str = "gallery_index") -> int:
    """``value`` as a position in a gallery of ``size`` images."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TurnError(f"{what} must be an int, got {type(value).__name__}")
    position = int(value)
    if not 0 <= position < size:
        raise TurnError(f"{what} {position} out of range 0..{size - 1}")
    return position


def image_path(value: Any, index: GalleryIndex, *, allow_external: bool, what: str = "image path") -> str:
    """``value`` as the path of an image the session may read (gallery paths are always allowed);
    the path is returned as given (``str``), relative to ``index.root`` unless absolute."""
    if not isinstance(value, (str, os.PathLike)):
        raise TurnError(f"{what} must be a str or path, got {type(value).__name__}")
    path = os.fspath(value)
    if not isinstance(path, str):
        raise TurnError(f"{what} must be a str or path, got {type(path).__name__}")
    if not path.strip():
        raise TurnError(f"{what} is empty; name an image file")
    if index.index_of(path) is not None:
        return path
    if index.root is None and not allow_external:
        raise TurnError(
            f"{what} {path!r} is not a gallery image, and the gallery has no image root to "
            "look under (allow external images to read other files)"
        )
    try:
        resolved = resolve_under(index.root, path, allow_outside=allow_external)
        os.fsencode(resolved)
    except InputError as err:
        raise TurnError(f"{what}: {err}") from err
    except UnicodeError as err:
        raise TurnError(f"{what} {path!r} is not a valid file name") from err
    if not os.path.isfile(resolved):
        raise TurnError(f"{what} {path!r}: no such image file ({resolved})")
    return path


def check_options(
    index: Any,
    num_references: Any,
    history_k: Any,
    max_text_chars: Any,
    match_temperature: Any,
    policy_temperature: Any,
) -> None:
    """A session's own options checked (InputError): a non-empty :class:`GalleryIndex` and counts in range."""
    if not isinstance(index, GalleryIndex):
        raise InputError(f"index must be a GalleryIndex, got {type(index).__name__}")
    if len(index) == 0:
        raise InputError("the gallery index is empty: there is nothing to search (index at least one image)")
    for name, value, low in (
        ("num_references", num_references, 1),
        ("history_k", history_k, 0),
        ("max_text_chars", max_text_chars, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InputError(f"{name} must be an int >= {low}, got {value!r}")
    for name, value in (("match_temperature", match_temperature), ("policy_temperature", policy_temperature)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
            raise InputError(f"{name} must be a positive number, got {value!r}")


def checked_turn(turn: Any, index: GalleryIndex, max_chars: int, allow_external: bool) -> Turn:
    """``turn`` with its fields checked (empty text allowed: a recorded turn may have none)."""

    def text(value: Any, what: str) -> str:
        return clean_text(value, what, max_chars, allow_empty=True)

    def image(value: Any, what: str) -> str:
        return image_path(value, index, allow_external=allow_external, what=what)

    if isinstance(turn, DescriptionTurn):
        return DescriptionTurn(text(turn.text, "description text"))
    if isinstance(turn, QATurn):
        return QATurn(text(turn.question, "question text"), text(turn.answer, "answer text"))
    if isinstance(turn, ReferenceTurn):
        return ReferenceTurn(image(turn.reference_path, "reference image path"), text(turn.feedback, "feedback text"))
    if isinstance(turn, ExampleTurn):
        return ExampleTurn(image(turn.image_path, "image path"))
    raise TurnError(
        f"not a turn: {type(turn).__name__} (expected DescriptionTurn, QATurn, ReferenceTurn or ExampleTurn)"
    )
