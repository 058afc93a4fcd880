"""JSON log lines (``minterpr serve --log-format json``): one object a line, with the request id
of the request being served, for log collectors.

Example:
    >>> import logging
    >>> record = logging.LogRecord("minterpr", logging.INFO, "x.py", 1, "gallery %r", ("lobby",), None)
    >>> line = JsonFormatter().format(record)
    >>> sorted(json.loads(line)), json.loads(line)["message"]
    (['level', 'logger', 'message', 'request_id', 'time'], "gallery 'lobby'")
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

from minterpr.serving.metrics import request_id


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", "request_id"[, "exception"]}`` per record (ASCII-safe)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": request_id(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=True)


def json_log_config(level: str) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for uvicorn (``log_config=``) writing JSON lines to stderr for
    uvicorn's loggers and ``minterpr``'s."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    loggers = {
        name: {"handlers": ["json"], "level": level.upper(), "propagate": False}
        for name in ("uvicorn", "uvicorn.access", "minterpr")
    }
    loggers["uvicorn.error"] = {"level": level.upper()}  # propagates to "uvicorn"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "minterpr.serving.logs.JsonFormatter"}},
        "handlers": {"json": handler},
        "loggers": loggers,
    }
