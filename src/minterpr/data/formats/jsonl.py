"""Shared pieces of the dataset readers and writers: streaming JSON Lines and JSON array
readers, strict and lenient error routing, atomic writes, image checks and JSON type names.

The line reader works in binary mode and decodes each line on its own, so a 100 MB file is
read in bounded memory and one line with bad bytes or bad JSON does not stop the lines after
it. Blank (whitespace-only) lines are skipped; they still count for line numbers.

Limits, each a ``FILE:LINE: <record>: reason`` problem rather than a crash: a line longer than
:data:`MAX_LINE_BYTES` is skipped unread; a record nested deeper than
:data:`~minterpr.data.formats.safejson.MAX_JSON_DEPTH`, holding NaN, an infinite number or a
lone surrogate escape is refused (see :mod:`.safejson`).

Strict versus lenient: every reader takes an optional :class:`ReadReport`. Without one, the
first problem raises :class:`DataError`; with one, each problem is added to the report, the bad
record is skipped and reading goes on.

Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.jsonl")
    >>> with atomic_writer(path) as f:
    ...     _ = f.write('{"a": 1}\\n\\n{"a": 2\\n' + "[" * 5000 + "\\n")
    >>> report = ReadReport(path)
    >>> [(line, value) for line, value in iter_json_lines(path, report)]
    [(1, {'a': 1})]
    >>> [(p.line, p.field, p.reason) for p in report.problems]  # doctest: +NORMALIZE_WHITESPACE
    [(3, '<record>', "invalid JSON: Expecting ',' delimiter at column 8"),
     (4, '<record>', 'nested deeper than 100 arrays/objects')]
"""

from __future__ import annotations

import codecs
import json
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Generic, Iterator, NamedTuple, TypeVar

from minterpr.data.errors import DataError, ReadReport
from minterpr.data.formats.safejson import JSONProblem, decode_at
from minterpr.data.paths import resolve_under
from minterpr.errors import InputError
from minterpr.fileio import atomic_open
from minterpr.types import split_person_id

T = TypeVar("T")

# Field name of problems that concern a whole line or record (bad bytes, bad JSON, not an object).
RECORD = "<record>"
MAX_LINE_BYTES = 16 << 20  # longest JSON Lines record read (16 MiB; real records are a few KB)
_WHITESPACE = re.compile(r"[ \t\n\r]*")

_JSON_TYPE_NAMES = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}


class ReadResult(NamedTuple, Generic[T]):
    """What a lenient read returns: the good records and the report of what was skipped.

    It unpacks like a pair: ``samples, report = read_minterpedes(path, strict=False)``.
    """

    records: list[T]  # the records that passed validation, in file order
    report: ReadReport  # problems (skipped records) and warnings, each naming file, line and field


def json_type(value: object) -> str:
    """The JSON name of a parsed value's type (``"object"``, ``"array"``, ``"string"`` ...)."""
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def short(value: object, limit: int = 60) -> str:
    """``repr`` of a value cut to ``limit`` characters, for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def route(error: DataError, report: ReadReport | None) -> None:
    """Strict mode (no report) raises ``error``; lenient mode records it and returns."""
    if report is None:
        raise error
    report.add(error)


def _problem(file: str, line: int, problem: JSONProblem) -> DataError:
    return DataError(file, line, problem.field, problem.reason)


def iter_json_lines(
    path: str | os.PathLike[str], report: ReadReport | None = None, *, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, object]]:
    """Yield ``(line_number, value)`` for each parsed line of a JSON Lines file (1-based lines).

    Problems (bad UTF-8, bad JSON, a truncated last line, a line over ``max_line_bytes``, the
    limits of :mod:`.safejson`) raise :class:`DataError` without a report and are recorded in
    it otherwise. A file whose first non-blank character is ``[`` is a JSON array, not JSON
    Lines: that is one error for the whole file and nothing is read.
    """
    file = str(path)
    with open(path, "rb") as f:
        line_no = 0
        seen_content = False
        while True:
            raw = f.readline(max_line_bytes + 1)  # bounded: a 2 GB line is never held in memory
            if not raw:
                break
            line_no += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):  # skip the rest of the line unread
                    raw = f.readline(1 << 20)
                route(
                    DataError(
                        file, line_no, RECORD, f"line longer than {max_line_bytes:,} bytes, the limit for one record"
                    ),
                    report,
                )
                continue
            if line_no == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            stripped = raw.strip()
            if not stripped:
                continue
            if not seen_content:
                seen_content = True
                if stripped.startswith(b"["):
                    route(
                        DataError(
                            file,
                            line_no,
                            RECORD,
                            "this is a JSON array, not JSON Lines: expected one JSON object per line",
                        ),
                        report,
                    )
                    return
            try:
                text = raw.decode("utf-8").rstrip(" \t\r\n")  # errors then point into the line, not past it
            except UnicodeDecodeError as exc:
                route(
                    DataError(
                        file, line_no, RECORD, f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
                    ),
                    report,
                )
                continue
            try:
                value, end = decode_at(text, _WHITESPACE.match(text).end())  # type: ignore[union-attr]
                if end != len(text):
                    raise JSONProblem(f"invalid JSON: extra data after the record at column {end + 1}")
            except JSONProblem as problem:
                # The last line without its newline is where a killed writer stops.
                if problem.line and not raw.endswith(b"\n"):
                    problem.reason += " (last line, no newline at the end: truncated?)"
                route(_problem(file, line_no, problem), report)
                continue
            yield line_no, value


def iter_json_array(
    path: str | os.PathLike[str], report: ReadReport | None = None
) -> Iterator[tuple[int, int, object]]:
    """Yield ``(line, record_number, value)`` for each element of a top-level JSON array.

    Elements are decoded one at a time so each keeps the line it starts on, and the limits of
    :mod:`.safejson` apply per element. Invalid JSON or bad UTF-8 cannot be resynchronised
    inside one document: it is one problem (with the line from the decoder) and reading stops
    there; an element refused for its content (too deep, NaN, a lone surrogate) is one problem
    and reading goes on with the next.
    """
    file = str(path)
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        route(
            DataError(
                file, data.count(b"\n", 0, exc.start) + 1, RECORD, f"invalid UTF-8 (byte 0x{data[exc.start]:02x})"
            ),
            report,
        )
        return
    del data
    if text.startswith(codecs.BOM_UTF8.decode("utf-8")):
        text = text[1:]
    pos = _WHITESPACE.match(text, 0).end()  # type: ignore[union-attr]
    if pos == len(text) or text[pos] != "[":
        what = (
            "an empty file"
            if pos == len(text)
            else ("object (JSON Lines?)" if text[pos] == "{" else f"{short(text[pos : pos + 20])}")
        )
        route(
            DataError(file, text.count("\n", 0, pos) + 1, RECORD, f"expected a JSON array of records, got {what}"),
            report,
        )
        return
    pos = _WHITESPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
    line, line_pos = 1, 0  # line number of line_pos; advanced incrementally to each record start
    number = 0
    if text.startswith("]", pos):
        pos += 1
    else:
        while True:
            line += text.count("\n", line_pos, pos)
            line_pos = pos
            number += 1
            try:
                value, end = decode_at(text, pos)
            except JSONProblem as problem:
                if not problem.line:  # refused for its content: the record is skipped, reading goes on
                    route(DataError(file, line, problem.field, f"{problem.reason} (record {number})"), report)
                    end = _skip_value(text, pos)
                    if end is None:
                        return
                else:
                    reason = (
                        "invalid JSON: the file ends inside the array (truncated?)"
                        if problem.at_end
                        else problem.reason
                    )
                    route(DataError(file, problem.line, problem.field, reason), report)
                    return
            else:
                yield line, number, value
            pos = _WHITESPACE.match(text, end).end()  # type: ignore[union-attr]
            if text.startswith(",", pos):
                pos = _WHITESPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
                continue
            if text.startswith("]", pos):
                pos += 1
                break
            route(
                DataError(
                    file,
                    text.count("\n", 0, pos) + 1,
                    RECORD,
                    "invalid JSON: expected ',' or ']' after a record"
                    if pos < len(text)
                    else "invalid JSON: the file ends inside the array (truncated?)",
                ),
                report,
            )
            return
    pos = _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]
    if pos < len(text):
        route(DataError(file, text.count("\n", 0, pos) + 1, RECORD, "invalid JSON: extra data after the array"), report)


_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_TOKEN = re.compile(_STRING + r"|[\[\]{}]")
_SCALAR = re.compile(_STRING + r"|[^,\]\s]+")


def _skip_value(text: str, pos: int) -> int | None:
    """End of the syntactically valid but refused value starting at ``pos`` (brackets counted
    outside strings); None when it does not end, and reading cannot go on."""
    if text[pos] not in "[{":
        match = _SCALAR.match(text, pos)
        return match.end() if match else None
    depth = 0
    for match in _TOKEN.finditer(text, pos):
        token = match.group()
        if token in "[{":
            depth += 1
        elif token in "]}":
            depth -= 1
            if depth == 0:
                return match.end()
    return None


@contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[IO[str]]:
    """Open a UTF-8 text file for writing that appears at ``path`` only once fully written
    (:func:`minterpr.fileio.atomic_open`: a crash never leaves a half-written dataset)."""
    with atomic_open(path, "w") as f:
        yield f


class ImageChecker:
    """Answers whether image files exist under a root directory and stay inside it (see
    :func:`minterpr.data.paths.resolve_under`); remembers each answer because targets and
    reference images repeat many times in a dialogue file."""

    def __init__(self, root: str | os.PathLike[str], *, allow_outside_root: bool = False) -> None:
        self.root = Path(root)
        self.allow_outside_root = allow_outside_root  # the user's opt-in for manifests that point elsewhere
        self._known: dict[str, str | None] = {}

    def problem(self, image_path: str) -> str | None:
        """Why ``image_path`` cannot be read (it leaves the root, or no such file), or None."""
        if image_path in self._known:
            return self._known[image_path]
        try:
            full = resolve_under(self.root, image_path, allow_outside=self.allow_outside_root)
        except InputError as exc:
            reason: str | None = str(exc)
        else:
            reason = None if os.path.isfile(full) else f"image not found: {full}"
        self._known[image_path] = reason
        return reason

    def exists(self, image_path: str) -> bool:
        return self.problem(image_path) is None

    def missing_reason(self, image_path: str) -> str:
        return self.problem(image_path) or f"image not found: {self.root / image_path}"


def image_checker(
    data_path: str | os.PathLike[str],
    image_root: str | os.PathLike[str] | None,
    check_images: bool,
    allow_outside_root: bool = False,
) -> ImageChecker | None:
    """The checker a reader uses: ``image_root``, else the data file's own directory."""
    if not check_images:
        return None
    return ImageChecker(
        image_root if image_root is not None else Path(data_path).parent, allow_outside_root=allow_outside_root
    )


def local_int_id(pid: str, namespace: str) -> int:
    """The integer local part of ``"namespace:123"``, for formats that store integer ids.

    Raises ValueError when the id belongs to another namespace or its local part is not the
    canonical decimal form of an integer ("007" would not survive the round trip).
    """
    ns, local = split_person_id(pid)
    if ns != namespace:
        raise ValueError(f"person id {pid!r} is not in namespace {namespace!r}")
    try:
        value = int(local)
    except ValueError:
        raise ValueError(f"person id {pid!r}: local part {local!r} must be an integer for this format") from None
    if str(value) != local:
        raise ValueError(
            f"person id {pid!r}: local part {local!r} is not a canonical integer (expected {str(value)!r})"
        )
    return value


def dumps_record(record: dict[str, object], where: str) -> str:
    """One record as compact UTF-8 JSON; unserialisable values (or NaN) become a ValueError."""
    try:
        return json.dumps(record, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: cannot be written as JSON: {exc}") from None
