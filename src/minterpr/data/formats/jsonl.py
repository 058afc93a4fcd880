"""Shared pieces of the dataset readers and writers: a streaming JSON Lines reader, strict and
lenient error routing, atomic writes, image-existence checks and JSON type names.

The line reader works in binary mode and decodes each line on its own, so a 100 MB file is
read in bounded memory and one line with bad bytes or bad JSON does not stop the lines after
it. Blank (whitespace-only) lines are skipped; they still count for line numbers.

Strict versus lenient: every reader takes an optional :class:`ReadReport`. Without one, the
first problem raises :class:`DataError`; with one, each problem is added to the report, the bad
record is skipped and reading goes on.

Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.jsonl")
    >>> with atomic_writer(path) as f:
    ...     _ = f.write('{"a": 1}\\n\\n{"a": 2\\n')
    >>> report = ReadReport(path)
    >>> [(line, value) for line, value in iter_json_lines(path, report)]
    [(1, {'a': 1})]
    >>> report.problems[0].line, report.problems[0].field
    (3, '<record>')
"""
from __future__ import annotations

import codecs
import json
import os
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Generic, Iterator, NamedTuple, TypeVar

from minterpr.data.errors import DataError, ReadReport
from minterpr.types import split_person_id

T = TypeVar("T")

# Field name of problems that concern a whole line or record (bad bytes, bad JSON, not an object).
RECORD = "<record>"

_JSON_TYPE_NAMES = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string",
                    list: "array", dict: "object"}


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


def iter_json_lines(path: str | os.PathLike[str], report: ReadReport | None = None) -> Iterator[tuple[int, object]]:
    """Yield ``(line_number, value)`` for each parsed line of a JSON Lines file (1-based lines).

    Problems (bad UTF-8, bad JSON, a truncated last line) raise :class:`DataError` without a
    report and are recorded in it otherwise. A file whose first non-blank character is ``[``
    is a JSON array, not JSON Lines: that is one error for the whole file and nothing is read.
    """
    file = str(path)
    with open(path, "rb") as f:
        line_no = 0
        seen_content = False
        for raw in f:
            line_no += 1
            if line_no == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            stripped = raw.strip()
            if not stripped:
                continue
            if not seen_content:
                seen_content = True
                if stripped.startswith(b"["):
                    route(DataError(file, line_no, RECORD,
                                    "this is a JSON array, not JSON Lines: expected one JSON object per line"), report)
                    return
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                route(DataError(file, line_no, RECORD,
                                f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"), report)
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                # The last line without its newline is where a killed writer stops.
                hint = " (last line, no newline at the end: truncated?)" if not raw.endswith(b"\n") else ""
                route(DataError(file, line_no, RECORD, f"invalid JSON: {exc.msg} at column {exc.colno}{hint}"), report)
                continue
            yield line_no, value


@contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[IO[str]]:
    """Open a UTF-8 text file for writing that appears at ``path`` only once fully written.

    The text goes to a temporary file next to ``path`` that replaces it (``os.replace``) when
    the block ends without error; on error the temporary file is removed and ``path`` is left
    as it was, so a crash never leaves a half-written dataset.
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        # "x" mode: a fresh file with the usual umask permissions (mkstemp would make it 0600).
        with open(tmp, "x", encoding="utf-8", newline="\n") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class ImageChecker:
    """Answers whether image files exist under a root directory; remembers each answer because
    targets and reference images repeat many times in a dialogue file."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._known: dict[str, bool] = {}

    def exists(self, image_path: str) -> bool:
        found = self._known.get(image_path)
        if found is None:
            found = self._known[image_path] = (self.root / image_path).is_file()
        return found

    def missing_reason(self, image_path: str) -> str:
        return f"image not found: {self.root / image_path}"


def image_checker(data_path: str | os.PathLike[str], image_root: str | os.PathLike[str] | None,
                  check_images: bool) -> ImageChecker | None:
    """The checker a reader uses: ``image_root``, else the data file's own directory."""
    if not check_images:
        return None
    return ImageChecker(image_root if image_root is not None else Path(data_path).parent)


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
        raise ValueError(f"person id {pid!r}: local part {local!r} is not a canonical integer (expected {str(value)!r})")
    return value


def dumps_record(record: dict[str, object], where: str) -> str:
    """One record as compact UTF-8 JSON; unserialisable values (or NaN) become a ValueError."""
    try:
        return json.dumps(record, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: cannot be written as JSON: {exc}") from None
