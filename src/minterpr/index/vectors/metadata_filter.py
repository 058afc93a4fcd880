"""Metadata filters evaluated as one boolean mask over stored rows, without a Python loop per row.

:func:`minterpr.index.vectors.vector_index.matches` is the reference: one record, one filter. Here a
:class:`MetadataColumns` keeps, for each key a filter has used, a column built once from the
records (and extended on add): a ``value -> rows`` map for equality and list conditions, and the
numeric and string values sorted with their rows, so a :class:`Range` is two binary searches. A
camera or time-window filter over 1M rows costs a few numpy operations after the first use of the
key. Values the fast paths cannot compare exactly (lists, dicts, integers beyond 2**53, NaN) and
Range bounds that are not numbers or strings are evaluated with the reference, row by row, so the
mask always equals ``[matches(r, where) for r in records]`` (tests/test_vector_index_conformance.py).

Example:
    >>> records = [{"camera": "cam1", "time": 3}, {"camera": "cam2", "time": 7}, {"time": 5}]
    >>> columns = MetadataColumns()
    >>> columns.mask(records, {"time": Range(4, 10)}).tolist()
    [False, True, True]
    >>> columns.mask(records, {"camera": ["cam1", "cam2"], "time": Range(high=5)}).tolist()
    [True, False, False]
"""

from __future__ import annotations

import math
import threading
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.index.vectors.vector_index import Filter, Range, matches

EXACT_FLOAT_INT = 2**53  # integers beyond this are not exact in float64: compared by the reference


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


class _Column:
    """One key's values over the rows that have it."""

    def __init__(self) -> None:
        self.equal: dict[Any, list[int]] = {}  # hashable value -> rows (NaN excluded: never equal)
        self.num_rows: list[int] = []  # rows with an exact numeric value (bool, int <= 2**53, float)
        self.num_values: list[float] = []
        self.str_rows: list[int] = []  # rows with a str value
        self.str_values: list[str] = []
        self.other_rows: list[int] = []  # rows whose value only the reference can compare
        self.other_values: list[Any] = []
        self.present_rows: list[int] = []  # rows with the key and a value that is not None
        self._sorted: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # "num"/"str" -> (values, rows) sorted
        self._equal_arrays: dict[Any, np.ndarray] = {}

    def extend(self, records: Sequence[Mapping[str, Any]], key: str, start: int) -> None:
        for offset, record in enumerate(records):
            if key not in record:
                continue
            value, row = record[key], start + offset
            if value is None:
                continue
            self.present_rows.append(row)
            if _is_nan(value):
                self.other_rows.append(row)
                self.other_values.append(value)
                continue
            try:
                self.equal.setdefault(value, []).append(row)
            except TypeError:  # unhashable (list, dict): equals no scalar
                pass
            if isinstance(value, str):
                self.str_rows.append(row)
                self.str_values.append(value)
            elif isinstance(value, (bool, float)) or (isinstance(value, int) and abs(value) <= EXACT_FLOAT_INT):
                self.num_rows.append(row)
                self.num_values.append(float(value))
            else:
                self.other_rows.append(row)
                self.other_values.append(value)
        self._sorted.clear()
        self._equal_arrays.clear()

    def equal_rows(self, value: Any) -> np.ndarray:
        if _is_nan(value):
            return np.empty(0, np.int64)
        try:
            cached = self._equal_arrays.get(value)
        except TypeError:
            return np.empty(0, np.int64)
        if cached is None:
            cached = np.asarray(self.equal.get(value, ()), dtype=np.int64)
            self._equal_arrays[value] = cached
        return cached

    def _sorted_view(self, kind: str) -> tuple[np.ndarray, np.ndarray]:
        if kind not in self._sorted:
            if kind == "num":
                values, rows = np.asarray(self.num_values, np.float64), np.asarray(self.num_rows, np.int64)
            else:
                values, rows = np.asarray(self.str_values, dtype=str), np.asarray(self.str_rows, np.int64)
            order = np.argsort(values, kind="stable")
            self._sorted[kind] = (values[order], rows[order])
        return self._sorted[kind]

    def range_rows(self, condition: Range) -> np.ndarray | None:
        """Rows in the range, or None when the bounds need the reference on every row."""
        low, high = condition.low, condition.high
        if low is None and high is None:
            return np.asarray(self.present_rows, np.int64)
        bounds = [b for b in (low, high) if b is not None]
        if any(_is_nan(b) for b in bounds):  # every comparison with NaN is false
            return np.empty(0, np.int64)
        if all(isinstance(b, str) for b in bounds):
            kind = "str"
        elif all(isinstance(b, (bool, float)) or (isinstance(b, int) and abs(b) <= EXACT_FLOAT_INT) for b in bounds):
            kind = "num"
        else:  # huge ints, lists, mixed types: the reference decides
            return None
        values, rows = self._sorted_view(kind)
        begin = 0 if low is None else int(np.searchsorted(values, low, side="left"))
        end = len(values) if high is None else int(np.searchsorted(values, high, side="right"))
        found = rows[begin:end] if end > begin else np.empty(0, np.int64)
        if self.other_rows:  # huge ints, NaN: the reference decides
            extra = [r for r, v in zip(self.other_rows, self.other_values) if condition.contains(v)]
            found = np.concatenate([found, np.asarray(extra, np.int64)])
        return found


class MetadataColumns:
    """Per-key columns over a list of records, built on a key's first use (thread safe)."""

    def __init__(self) -> None:
        self._columns: dict[str, _Column] = {}
        self._count = 0  # records the columns cover
        self._lock = threading.Lock()

    def invalidate(self) -> None:
        """Forget every column (after rows were renumbered)."""
        with self._lock:
            self._columns.clear()
            self._count = 0

    def _column(self, records: Sequence[Mapping[str, Any]], key: str) -> _Column:
        with self._lock:
            if self._count != len(records):  # records were appended since: extend what we hold
                for name, column in self._columns.items():
                    column.extend(records[self._count :], name, self._count)
                self._count = len(records)
            column = self._columns.get(key)
            if column is None:
                column = _Column()
                column.extend(records, key, 0)
                self._columns[key] = column
            return column

    def mask(self, records: Sequence[Mapping[str, Any]], where: Filter | None) -> np.ndarray:
        """(n,) bool: ``matches(records[i], where)`` for every row i."""
        n = len(records)
        result = np.ones(n, dtype=bool)
        if not where:
            return result
        for key, condition in where.items():
            column = self._column(records, key)
            if isinstance(condition, Range):
                rows = column.range_rows(condition)
                if rows is None:
                    rows = np.asarray(
                        [r for r in column.present_rows if matches(records[r], {key: condition})], np.int64
                    )
            elif isinstance(condition, (list, tuple, set, frozenset)):
                parts = [column.equal_rows(value) for value in condition]
                rows = np.concatenate(parts) if parts else np.empty(0, np.int64)
            else:
                rows = column.equal_rows(condition)
            selected = np.zeros(n, dtype=bool)
            selected[rows] = True
            result &= selected
        return result


def reference_mask(records: Sequence[Mapping[str, Any]], where: Filter | None) -> np.ndarray:
    """The same mask by the reference :func:`matches`, one record at a time (for tests)."""
    return np.fromiter((matches(r, where) for r in records), dtype=bool, count=len(records))
