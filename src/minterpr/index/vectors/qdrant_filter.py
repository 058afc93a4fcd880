"""The protocol's metadata filters as Qdrant filters, with the reference semantics of ``matches()``.

:func:`to_qdrant_filter` turns ``{key: scalar | list | Range}`` into
``Filter(must=[FieldCondition(...)])``:

* a string -> ``MatchValue``; a list of strings -> ``MatchAny``; an empty list matches nothing;
* a number -> ``Range(gte=v, lte=v)`` (so a stored 5.0 equals 5, as in Python), a bool ->
  ``MatchValue``; because Python has ``True == 1``, a number 0 / 1 also matches a stored bool and
  the other way round (one ``should`` clause each);
* a numeric :class:`~minterpr.index.vectors.vector_index.Range` -> ``Range(gte, lte)`` (plus the stored
  bools inside it);
* a Range of ISO 8601 strings -> ``Range`` on the numeric mirror ``__ts__KEY`` that
  :func:`payload_of` stores beside every ISO-looking string value (seconds since the epoch, naive
  times read as UTC). Strings of one format compare alike as strings and as times, which is the
  reference's documented semantics.

Anything else (a Range of other strings, an open ``Range()``, bool bounds, NaN, keys with
``.``/``[`` that Qdrant would read as a nested path) returns None: the caller evaluates the
reference on the payloads instead (exact, O(N)).

Example:
    >>> f = to_qdrant_filter({"camera": ["c1", "c2"], "time": Range("2026-12-01T10:00:00", None)})
    >>> [c.key for c in f.must]
    ['camera', '__ts__time']
    >>> payload_of({"time": "2026-12-01T00:00:01"})["__ts__time"]
    1796083201.0
    >>> to_qdrant_filter({"name": Range("a", "m")}) is None  # not translatable: reference path
    True
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any, Mapping

import numpy as np

from minterpr.errors import InputError
from minterpr.index.vectors.vector_index import Filter, Range

TS_PREFIX = "__ts__"  # payload key of the numeric mirror of an ISO 8601 value
EMPTY = "empty"  # to_qdrant_filter's answer for a filter that matches no record
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}(:\d{2}(:\d{2}(\.\d+)?)?)?)?(Z|[+-]\d{2}:?\d{2})?$")


def iso_seconds(value: Any) -> float | None:
    """Seconds since the epoch of an ISO 8601 date / datetime string (naive = UTC), else None."""
    if not isinstance(value, str) or not _ISO.match(value):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _plain(value: Any, key: str) -> Any:
    """A payload value Qdrant can store (numpy scalars -> Python)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"metadata {key!r}: {value!r} cannot be stored in Qdrant (not finite)")
    return value


def payload_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """The Qdrant payload of one metadata record: its values, plus ``__ts__KEY`` for ISO times."""
    payload: dict[str, Any] = {}
    for key, value in record.items():
        if not isinstance(key, str) or key.startswith(TS_PREFIX):
            raise InputError(f"metadata keys must be strings not starting with {TS_PREFIX!r}, got {key!r}")
        payload[key] = _plain(value, key)
        seconds = iso_seconds(value)
        if seconds is not None:
            payload[TS_PREFIX + key] = seconds
    return payload


def metadata_of(payload: Mapping[str, Any] | None) -> dict[str, Any]:
    """The caller's record back from a payload (the mirrors dropped)."""
    return {k: v for k, v in (payload or {}).items() if not k.startswith(TS_PREFIX)}


def _number(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and not (isinstance(value, float) and math.isnan(value))
    )


def _bool_clauses(m: Any, key: str, low: Any, high: Any) -> list[Any]:
    """Stored bools that Python's ``low <= value <= high`` accepts (True == 1, False == 0)."""
    return [
        m.FieldCondition(key=key, match=m.MatchValue(value=b))
        for b in (False, True)
        if (low is None or int(b) >= low) and (high is None or int(b) <= high)
    ]


def _scalar(m: Any, key: str, value: Any) -> Any | None:
    """One equality condition (a ``should`` group where Python's cross-type equality needs it)."""
    if isinstance(value, str):
        return m.FieldCondition(key=key, match=m.MatchValue(value=value))
    if isinstance(value, bool):
        return m.Filter(
            should=[
                m.FieldCondition(key=key, match=m.MatchValue(value=value)),
                m.FieldCondition(key=key, range=m.Range(gte=int(value), lte=int(value))),
            ]
        )
    if _number(value):
        clauses = [m.FieldCondition(key=key, range=m.Range(gte=value, lte=value)), *_bool_clauses(m, key, value, value)]
        return clauses[0] if len(clauses) == 1 else m.Filter(should=clauses)
    return None


def _range(m: Any, key: str, condition: Range) -> Any | None:
    low, high = condition.low, condition.high
    bounds = [b for b in (low, high) if b is not None]
    if not bounds:
        return None  # Range(): any non-null value; the reference decides
    if all(_number(b) for b in bounds):
        clauses = [m.FieldCondition(key=key, range=m.Range(gte=low, lte=high)), *_bool_clauses(m, key, low, high)]
        return clauses[0] if len(clauses) == 1 else m.Filter(should=clauses)
    seconds = [iso_seconds(b) for b in (low, high)]
    if all(isinstance(b, str) for b in bounds) and all(
        s is not None for s, b in zip(seconds, (low, high)) if b is not None
    ):
        return m.FieldCondition(key=TS_PREFIX + key, range=m.Range(gte=seconds[0], lte=seconds[1]))
    return None


def to_qdrant_filter(where: Filter | None) -> Any:
    """A ``qdrant_client.models.Filter`` for ``where`` (None for no filter too), :data:`EMPTY` when
    it matches nothing, or None when it has no exact translation (see the module doc)."""
    from qdrant_client import models as m

    if not where:
        return m.Filter(must=[])
    must: list[Any] = []
    for key, condition in where.items():
        if "." in key or "[" in key or key.startswith(TS_PREFIX):
            return None
        if isinstance(condition, Range):
            clause = _range(m, key, condition)
        elif isinstance(condition, (list, tuple, set, frozenset)):
            values = list(condition)
            if not values:
                return EMPTY
            if all(isinstance(v, str) for v in values):
                clause = m.FieldCondition(key=key, match=m.MatchAny(any=values))
            else:
                parts = [_scalar(m, key, v) for v in values]
                clause = None if any(p is None for p in parts) else m.Filter(should=parts)
        else:
            clause = _scalar(m, key, condition)
        if clause is None:
            return None
        must.append(clause)
    return m.Filter(must=must)
