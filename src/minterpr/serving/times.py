"""Times as the pages show them: UTC, 24-hour, ``YYYY-MM-DD HH:MM:SS`` (one place for pages.py and looking.py).

Example:
    >>> when("2026-12-01T10:02:03+00:00"), when(None), when(0)
    ('2026-12-01 10:02:03', '', '1970-01-01 00:00:00')
"""

from __future__ import annotations

import datetime as dt
from typing import Any


def when(value: Any) -> str:
    """A time for people: ``2026-12-01 10:02:03`` from a datetime or an ISO string ('' for None)."""
    if value is None or value == "":
        return ""
    moment = as_datetime(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment is not None else str(value)


def as_datetime(value: Any) -> dt.datetime | None:
    """Naive datetime from a datetime, a UNIX time or an ISO string; None when it is none of those."""
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        moment = dt.datetime.fromtimestamp(value, dt.timezone.utc)
    elif isinstance(value, str) and value.strip():
        try:
            moment = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    if moment.tzinfo is not None:  # the service keeps times in UTC; naive means UTC
        moment = moment.astimezone(dt.timezone.utc)
    return moment.replace(tzinfo=None)
