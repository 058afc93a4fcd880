"""Parsing untrusted JSON: limits on nesting, refusal of what is not plain JSON, one error type.

Python's ``json`` module accepts more than JSON and can fail in ways a reader must not pass
on: a 2 KB line of 1,000 nested brackets overflows its stack (RecursionError), ``NaN`` and
``Infinity`` parse as floats, ``1e999`` becomes infinity, a 5,000-digit integer raises a
ValueError that talks about ``sys.set_int_max_str_digits``, and ``"\\ud800"`` gives a string
that cannot be written back as UTF-8. :func:`loads` and :func:`decode_at` turn each of these
into a :class:`JSONProblem` with a plain reason (and the field, for a value deep inside), so
dataset readers report ``FILE:LINE: field: reason`` and nothing else escapes.

Limits (documented in docs/data.md):

* :data:`MAX_JSON_DEPTH` arrays/objects nested inside each other per record;
* numbers must be finite (no NaN/Infinity, no float beyond 1.8e308, no integer of more than
  4,300 digits);
* strings and keys must be valid Unicode (no lone surrogate escapes).

The checks cost a ``str.count`` per record; values are walked only when a record has more
brackets than the depth limit or a surrogate escape.

Example:
    >>> loads('{"a": [1, 2]}')
    {'a': [1, 2]}
    >>> loads("[" * 1000 + "]" * 1000)
    Traceback (most recent call last):
    ...
    minterpr.data.formats.safejson.JSONProblem: nested deeper than 100 arrays/objects
    >>> loads('{"a": NaN}')
    Traceback (most recent call last):
    ...
    minterpr.data.formats.safejson.JSONProblem: invalid JSON: NaN is not a JSON number
    >>> try:
    ...     loads('{"text": ["ok", "\\\\udc80"]}')
    ... except JSONProblem as exc:
    ...     print(exc.field, "|", exc.reason)
    text[1] | invalid text: a lone surrogate escape (\\udc80) is not a Unicode character
"""

from __future__ import annotations

import json
import math
import re

MAX_JSON_DEPTH = 100  # arrays/objects nested in one record; real records nest 5 deep at most

# A \\uD800-\\uDFFF escape: half of a surrogate pair, or a lone one that is no character.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_WHITESPACE = re.compile(r"[ \t\n\r]*")


class JSONProblem(ValueError):
    """Why a JSON text was refused: ``reason``, the ``field`` (a JSON path such as
    ``chats[0].value``, or ``"<record>"`` for the whole text) and the 1-based ``line`` and
    ``column`` within the text when known (0 otherwise); ``at_end`` when the text ended
    before the value did (a truncated file or line)."""

    def __init__(
        self, reason: str, field: str = "<record>", line: int = 0, column: int = 0, at_end: bool = False
    ) -> None:
        self.reason, self.field, self.line, self.column, self.at_end = reason, field, line, column, at_end
        super().__init__(reason)


def _reject_constant(name: str) -> float:
    raise JSONProblem(f"invalid JSON: {name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONProblem(f"invalid JSON: number {text[:30]} is too large for a 64-bit float")
    return value


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def _join(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def check_value(value: object, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`JSONProblem` when ``value`` nests deeper than ``max_depth`` or holds a
    string (or key) that is not valid Unicode. Iterative: any depth is safe to check."""
    stack: list[tuple[object, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            _check_text(item, path)
            continue
        if not isinstance(item, (list, dict)):
            continue
        if depth >= max_depth:
            top = re.split(r"[.\[]", path, maxsplit=1)[0] if path else ""
            raise JSONProblem(f"nested deeper than {max_depth} arrays/objects", top or "<record>")
        if isinstance(item, dict):
            for key, child in item.items():
                _check_text(key, _join(path, "<key>"))
                stack.append((child, depth + 1, _join(path, key)))
        else:
            stack.extend((child, depth + 1, _join(path, k)) for k, child in enumerate(item))


def _check_text(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = f"\\u{ord(text[exc.start]):04x}"
        raise JSONProblem(
            f"invalid text: a lone surrogate escape ({bad}) is not a Unicode character", path or "<record>"
        ) from None


def _needs_walk(text: str, start: int, end: int, max_depth: int) -> bool:
    """Cheap test: could ``text[start:end]`` nest too deep or hold a surrogate escape?"""
    if text.count("[", start, end) + text.count("{", start, end) > max_depth:
        return True
    return text.find("\\u", start, end) >= 0 and _SURROGATE_ESCAPE.search(text, start, end) is not None


def decode_at(text: str, pos: int = 0, max_depth: int = MAX_JSON_DEPTH) -> tuple[object, int]:
    """Decode the JSON value starting at ``text[pos]``: ``(value, end)`` like
    ``JSONDecoder.raw_decode``, with the limits of this module; raises :class:`JSONProblem`."""
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except JSONProblem:
        raise
    except json.JSONDecodeError as exc:
        where = f"{exc.msg} column" if exc.msg.endswith(" at") else f"{exc.msg} at column"  # "starting at"
        raise JSONProblem(
            f"invalid JSON: {where} {exc.colno}",
            line=exc.lineno,
            column=exc.colno,
            at_end=exc.pos >= len(text.rstrip(" \t\n\r")),
        ) from None
    except RecursionError:
        raise JSONProblem(f"nested deeper than {max_depth} arrays/objects") from None
    except ValueError as exc:  # an integer of more than 4,300 digits, from int()
        digits = "digits" in str(exc)
        raise JSONProblem(
            "invalid JSON: an integer with too many digits" if digits else f"invalid JSON: {exc}"
        ) from None
    if _needs_walk(text, pos, end, max_depth):
        check_value(value, max_depth)
    return value, end


def loads(text: str, max_depth: int = MAX_JSON_DEPTH) -> object:
    """One JSON document (surrounding whitespace allowed); raises :class:`JSONProblem`."""
    start = _WHITESPACE.match(text, 0).end()  # type: ignore[union-attr]
    value, end = decode_at(text, start, max_depth)
    end = _WHITESPACE.match(text, end).end()  # type: ignore[union-attr]
    if end != len(text):
        line = text.count("\n", 0, end) + 1
        raise JSONProblem(f"invalid JSON: extra data after the value at line {line}", line=line)
    return value
