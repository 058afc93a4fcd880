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
  under the index root (anywhere, with ``allow_external``; see :func:`~minterpr.data.paths.resolve_under`).

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
