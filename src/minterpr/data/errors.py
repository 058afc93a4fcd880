"""Errors and reports for dataset readers: every problem names its file, line and field.

Strict mode raises the first :class:`DataError`; lenient mode records each problem in a
:class:`ReadReport` and skips the record, so nothing is dropped silently.

Example:
    >>> report = ReadReport("train.jsonl")
    >>> report.add(DataError("train.jsonl", 3, "conversations", "expected 5 messages, got 4"))
    >>> print(report.problems[0])
    train.jsonl:3: conversations: expected 5 messages, got 4
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minterpr.errors import MinterprError


class DataError(MinterprError, ValueError):
    """A bad record: ``FILE:LINE: field: reason`` (line is 1-based; 0 when not line-based)."""

    def __init__(self, file: str, line: int, field_name: str, reason: str) -> None:
        self.file = str(file)
        self.line = int(line)
        self.field = field_name
        self.reason = reason
        super().__init__(self.format())

    def format(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.reason}"


@dataclass
class ReadReport:
    """What a lenient read skipped or flagged; ``ok`` is True when nothing is wrong."""

    file: str  # the file read
    records_read: int = 0  # records returned to the caller
    problems: list[DataError] = field(default_factory=list)  # records skipped, one error each
    warnings: list[DataError] = field(default_factory=list)  # reported but not skipped

    def add(self, error: DataError) -> None:
        self.problems.append(error)

    def warn(self, error: DataError) -> None:
        self.warnings.append(error)

    @property
    def skipped(self) -> int:
        return len(self.problems)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        return f"{self.file}: {self.records_read} records read, {self.skipped} skipped, {len(self.warnings)} warnings"
