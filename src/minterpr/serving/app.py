"""The application: ``create_app(settings)`` builds the FastAPI app over the service layer.

The JSON API lives under ``/api`` (OpenAPI at ``/api/openapi.json``, interactive docs at
``/api/docs``); the page routes, when the page module is installed
(``minterpr.serving.pages.search.register(app)``), take the rest. Every refused request gets the one
error shape of :mod:`~minterpr.serving.errors`; request bodies are capped at
``settings.max_request_bytes`` before anything reads them.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from fastapi.testclient import TestClient
    >>> client = TestClient(create_app(ServeSettings(data_dir=Path(tempfile.mkdtemp()))))
    >>> client.get("/healthz").json()
    {'status': 'ok', 'galleries': 0}
    >>> response = client.get("/api/cases")
    >>> response.status_code, response.json()["error"]["code"]
    (401, 'unauthenticated')
"""

from __future__ import annotations

import importlib.util
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from minterpr.serving.errors import ApiError, install_error_handlers
from minterpr.serving.service import Services, build_services
from minterpr.serving.settings import ServeSettings

_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]


class _Limits:
    """ASGI middleware: bodies larger than ``max_bytes`` are refused (413) — by their Content-Length
    up front, or when a chunked body grows past it — and security headers are added to responses."""

    def __init__(self, app: Any, max_bytes: int, paths: dict[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.paths = dict(paths or {})  # path -> its own cap (the ingestion page's video upload)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        cap = self.paths.get(scope.get("path", ""), self.max_bytes)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > cap):
            return await _refuse(send, cap)
        seen = 0
        too_large = False  # the body grew past the cap: whatever the app answers becomes a 413
        replaced = False

        async def limited_receive() -> dict:
            nonlocal seen, too_large
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > cap:
                    too_large = True
                    raise _TooLarge()
            return message

        async def send_checked(message: dict) -> None:
            nonlocal replaced
            if replaced:
                return
            if message["type"] == "http.response.start":
                if too_large:
                    replaced = True
                    return await _refuse(send, cap)
                message = {**message, "headers": [*message.get("headers", []), *_SECURITY_HEADERS]}
            await send(message)

        try:
            await self.app(scope, limited_receive, send_checked)
        except _TooLarge:
            if not replaced:
                await _refuse(send, cap)


class _AuditRefusals:
    """ASGI middleware: every 403 leaves an audit entry ``refused`` — who (the principal the request
    authenticated as, if any), what (method, path) and the outcome (status, error code) — whichever
    route, page or check refused it."""

    def __init__(self, app: Any, services: Services) -> None:
        self.app, self.services = app, services

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        status = 0

        async def watched(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            if status == 403:
                from starlette.concurrency import run_in_threadpool

                state = scope.get("state") or {}
                principal = state.get("principal")
                details = {
                    "method": scope.get("method"),
                    "path": scope.get("path"),
                    "status": status,
                    "code": state.get("refusal"),
                    "via": getattr(principal, "via", None),
                }
                await run_in_threadpool(self.services.audit.record, principal, "refused", None, details)


class _TooLarge(Exception):
    pass


async def _refuse(send: Any, max_bytes: int) -> None:
    import json

    body = json.dumps(ApiError(413, "too_large", f"the request body is larger than {max_bytes} bytes").body()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *_SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


_DOCS_INIT = """window.ui = SwaggerUIBundle({url: "/api/openapi.json", dom_id: "#swagger-ui", layout: "BaseLayout",
  deepLinking: true, showExtensions: true, showCommonExtensions: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset]});
"""
# the pages' policy (minterpr.serving.pages.site), with Swagger UI's inline SVG images (data:) and its styles
DOCS_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)


def _offline_docs(app: Any) -> None:
    """``/api/docs``: Swagger UI from the vendored copy in ``static/swagger-ui`` (no CDN: the docs
    work where the service cannot reach the internet, and load nothing from a third party), started
    by a script file rather than an inline one, so the page carries a Content-Security-Policy
    without 'unsafe-inline' scripts like every other page."""
    from pathlib import Path

    from fastapi.responses import HTMLResponse, Response
    from fastapi.staticfiles import StaticFiles

    assets = "/api/docs/static"
    app.mount(
        assets, StaticFiles(directory=Path(__file__).resolve().parent / "static" / "swagger-ui"), name="swagger-ui"
    )
    page = (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>minterpr API</title>\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1.0">\n'
        f'<link type="text/css" rel="stylesheet" href="{assets}/swagger-ui.css">\n'
        f'<link rel="icon" href="{assets}/favicon-32x32.png">\n</head>\n<body>\n<div id="swagger-ui"></div>\n'
        f'<script src="{assets}/swagger-ui-bundle.js"></script>\n<script src="/api/docs/init.js"></script>\n'
        f"</body>\n</html>\n"
    )

    @app.get("/api/docs", include_in_schema=False)
    def docs() -> Any:
        return HTMLResponse(page, headers={"Content-Security-Policy": DOCS_POLICY, "Cache-Control": "no-store"})

    @app.get("/api/docs/init.js", include_in_schema=False)
    def docs_init() -> Any:
        return Response(_DOCS_INIT, media_type="application/javascript")


def create_app(settings: ServeSettings, services: Services | None = None) -> Any:
    """The FastAPI app over ``services`` (built from ``settings`` when not given; closed on shutdown)."""
    from fastapi import FastAPI

    from minterpr.serving.api import search as api
    from minterpr.serving.api import admin as api_admin
    from minterpr.serving.api import metrics as api_metrics
    from minterpr.serving.metrics import Metrics, RequestMetrics

    services = services or build_services(settings)

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        yield
        services.close()

    app = FastAPI(
        title="minterpr",
        version="1",
        lifespan=lifespan,
        openapi_url="/api/openapi.json",
        docs_url=None,
        redoc_url=None,
        description="Interactive person search over gallery stores, in cases with an audit trail. "
        "Results are similarities, never identities.",
    )
    app.state.services = services
    app.state.settings = settings
    install_error_handlers(app)
    _offline_docs(app)
    app.include_router(api.router)
    app.include_router(api_admin.router)
    app.include_router(api_metrics.router)
    app.state.metrics = Metrics(services)
    if services.jobs is not None:
        from minterpr.serving.api import jobs as api_jobs

        app.include_router(api_jobs.router)
    if importlib.util.find_spec("minterpr.serving.pages.search") is not None:
        from minterpr.serving.pages import search as pages

        pages.register(app)
    app.add_middleware(_AuditRefusals, services=services)
    app.add_middleware(
        _Limits,
        max_bytes=settings.max_request_bytes,  # a video upload: its size and the form's
        paths={"/ingest/upload": settings.max_video_bytes + 64 * 1024},
    )
    app.add_middleware(RequestMetrics, metrics=app.state.metrics)  # outermost: every response gets its id
    return app
