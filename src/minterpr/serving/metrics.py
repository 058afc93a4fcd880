"""Prometheus metrics of one app (prometheus-client, a registry per app) and the request id.

Served at ``GET /metrics`` in the text format, to an admin (cookie or API key) or to whoever
sends ``Authorization: Bearer <settings.metrics_token>``; anyone else gets 401/403. What it holds:

- ``minterpr_request_seconds{route, method}``: latency histogram by route template (the turn routes
  ``/api/sessions/{session_id}/describe`` … are the turn latencies);
- ``minterpr_responses_total{route, status}``: responses by HTTP status (errors are the 4xx/5xx);
- ``minterpr_rate_limited_total{limit}``: requests refused by the login (per client, per account)
  and turn limits;
- ``minterpr_sessions_live`` (computed in memory) and ``minterpr_sessions`` (stored);
- ``minterpr_ingest_jobs{status}`` and ``minterpr_ingest_progress{job, field}`` (the numbers of
  each running job's progress).

Every response carries ``X-Request-ID`` (the client's, when it sent a short safe one, else a new
one); :func:`request_id` returns it while the request runs (logs carry it).

Example:
    >>> valid_request_id("abc-123"), valid_request_id("x" * 200), valid_request_id("a b")
    (True, False, False)
"""

from __future__ import annotations

import contextvars
import re
import time
import uuid
from typing import Any

_REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("minterpr_request_id", default=None)
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
HEADER = "x-request-id"


def request_id() -> str | None:
    """The id of the request being served (None outside one)."""
    return _REQUEST_ID.get()


def valid_request_id(value: str) -> bool:
    """Whether a client's X-Request-ID is kept (1-64 letters, digits or . _ : -); else a new one is made."""
    return bool(_SAFE_ID.match(value))


class Metrics:
    """The collectors of one app; :meth:`middleware` measures requests, :meth:`render` answers a scrape."""

    def __init__(self, services: Any) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.services = services
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "minterpr_request_seconds",
            "request latency by route template",
            ["route", "method"],
            registry=self.registry,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
        )
        self.responses = Counter(
            "minterpr_responses",
            "responses by route template and HTTP status",
            ["route", "status"],
            registry=self.registry,
        )
        limited = Gauge(
            "minterpr_rate_limited_total", "requests refused by a rate limit", ["limit"], registry=self.registry
        )
        for name, limiter in (
            ("login_client", services.accounts.client_limiter),
            ("login_account", services.accounts.login_limiter),
            ("search", services.search.limiter),
        ):
            limited.labels(name).set_function(lambda limiter=limiter: limiter.refused)
        Gauge("minterpr_sessions_live", "search sessions computed in memory", registry=self.registry).set_function(
            lambda: len(services.search._live)
        )
        self._stored = Gauge("minterpr_sessions", "search sessions stored", registry=self.registry)
        self._jobs = Gauge("minterpr_ingest_jobs", "ingestion jobs by status", ["status"], registry=self.registry)
        self._progress = Gauge(
            "minterpr_ingest_progress",
            "numbers in a running ingestion job's progress",
            ["job", "field"],
            registry=self.registry,
        )

    def render(self) -> tuple[bytes, str]:
        """(body, content type) of a scrape; the database figures are read now."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
        from sqlalchemy import func, select

        from minterpr.serving.db import IngestJob, SearchSession

        with self.services.db.transaction() as tx:
            self._stored.set(tx.scalar(select(func.count()).select_from(SearchSession)) or 0)
            counts = dict(tx.execute(select(IngestJob.status, func.count()).group_by(IngestJob.status)).all())
            running = tx.execute(select(IngestJob.id, IngestJob.progress).where(IngestJob.status == "running")).all()
        self._jobs.clear()
        for status, count in counts.items():
            self._jobs.labels(status).set(count)
        self._progress.clear()
        jobs = self.services.jobs
        for job_id, stored in running:
            live = getattr(jobs, "_progress", {}).get(job_id) if jobs is not None else None
            for field, value in (live or stored or {}).items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    self._progress.labels(job_id, field).set(value)
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class RequestMetrics:
    """ASGI middleware: a request id for each request (header in and out, :func:`request_id` inside)
    and its latency and status counted by route template (unmatched paths count as "other")."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        sent = dict(scope.get("headers") or []).get(HEADER.encode(), b"").decode("latin-1")
        rid = sent if valid_request_id(sent) else uuid.uuid4().hex
        token = _REQUEST_ID.set(rid)
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {**message, "headers": [*message.get("headers", []), (HEADER.encode(), rid.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            route = getattr(scope.get("route"), "path", None) or "other"
            self.metrics.latency.labels(route, scope.get("method", "")).observe(time.perf_counter() - started)
            self.metrics.responses.labels(route, str(status)).inc()
            _REQUEST_ID.reset(token)
