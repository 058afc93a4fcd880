"""One error shape for every refused request: ``{"error": {"code", "message", "field"}}``.

:class:`ApiError` is what the service layer raises for anything a caller got wrong; the app's
handlers (:func:`install_error_handlers`) turn it, FastAPI's validation errors, Starlette's
HTTP errors (404, 405) and the library's documented errors into that shape. Anything else is a
bug: it is logged with its traceback and answered 500 ``internal`` without details.

Example:
    >>> err = ApiError(404, "not_found", "no case 7", field="case_id")
    >>> err.body()
    {'error': {'code': 'not_found', 'message': 'no case 7', 'field': 'case_id'}}
"""

from __future__ import annotations

import logging
import re
from typing import Any

from minterpr.errors import ImageError, InputError, MinterprError

log = logging.getLogger("minterpr.serving")

_STATUS_CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    410: "gone",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid",
    429: "rate_limited",
    500: "internal",
}


def allowed_methods(app: Any, path: str) -> str | None:
    """The methods the OpenAPI spec lists for ``path`` (``"GET, POST"``), None when no operation matches.

    >>> from fastapi import FastAPI
    >>> app = FastAPI()
    >>> _ = app.get("/cases/{case_id}")(lambda case_id: None), app.post("/cases/{case_id}")(lambda case_id: None)
    >>> allowed_methods(app, "/cases/7"), allowed_methods(app, "/nowhere")
    ('GET, POST', None)
    """
    for template, operations in app.openapi().get("paths", {}).items():
        pattern = re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, path):
            return ", ".join(sorted(method.upper() for method in operations))
    return None


class ApiError(MinterprError):
    """A refused request: HTTP status, a stable machine code, a sentence for people, the field at fault
    (a documented error: on the command line it prints as one line, exit 2)."""

    def __init__(
        self, status: int, code: str, message: str, *, field: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "field": self.field}}


# an absolute path (POSIX or Windows) of at least one folder: what a message must not show a caller
_ABSOLUTE_PATH = re.compile(r"""(?<![\w.'/])(?:[A-Za-z]:)?[/\\](?:[^\s'"()<>,;:/\\]+[/\\])+([^\s'"()<>,;:/\\]*)""")


def public_message(message: str) -> str:
    """``message`` with every absolute path cut to its last part: a caller learns which file, not
    where the server keeps it.

    >>> public_message("cannot read /srv/minterpr/uploads/ab/c.png: truncated")
    'cannot read c.png: truncated'
    """
    return _ABSOLUTE_PATH.sub(lambda m: m.group(1), message)


def from_library(err: MinterprError, field: str | None = None) -> ApiError:
    """A documented library error as a 4xx: an unreadable image 422 ``bad_image``, other input 422 ``invalid``
    (the message without server paths)."""
    message = public_message(str(err))
    if isinstance(err, ImageError):
        return ApiError(422, "bad_image", message, field=field)
    if isinstance(err, InputError):
        return ApiError(422, "invalid", message, field=field)
    return ApiError(409, "unavailable", message, field=field)


def _validation_field(loc: Any) -> str | None:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header", "cookie")] if loc else []
    return ".".join(parts) or (str(loc[0]) if loc else None)


def install_error_handlers(app: Any) -> None:
    """Register the handlers on a FastAPI ``app``; ``app.state.html_error_renderer`` (if set) renders
    errors of non-API paths for browsers asking for HTML."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    def respond(request: Any, err: ApiError) -> Any:
        request.state.refusal = err.code  # for the audit entry of a 403 (app._AuditRefusals)
        renderer = getattr(request.app.state, "html_error_renderer", None)
        path = request.url.path
        if renderer is not None and not path.startswith("/api") and "text/html" in request.headers.get("accept", ""):
            return renderer(request, err.status, err.code, err.message)
        return JSONResponse(err.body(), status_code=err.status, headers=err.headers)

    @app.exception_handler(ApiError)
    async def api_error(request: Any, err: ApiError) -> Any:
        return respond(request, err)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Any, err: RequestValidationError) -> Any:
        problems = err.errors()
        first = problems[0] if problems else {}
        field = _validation_field(first.get("loc"))
        message = str(first.get("msg", "invalid request"))
        if field:
            message = f"{field}: {message}"
        if len(problems) > 1:
            message += f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})"
        return respond(request, ApiError(422, "invalid", message, field=field))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Any, err: StarletteHTTPException) -> Any:
        code = _STATUS_CODES.get(err.status_code, "error")
        message = err.detail if isinstance(err.detail, str) else code.replace("_", " ")
        headers = dict(err.headers or {})
        if err.status_code == 405:  # Starlette names the methods of the first route of the path only
            headers["Allow"] = allowed_methods(request.app, request.url.path) or headers.get("Allow", "")
        return respond(request, ApiError(err.status_code, code, message, headers=headers))

    @app.exception_handler(MinterprError)
    async def library_error(request: Any, err: MinterprError) -> Any:
        return respond(request, from_library(err))

    @app.exception_handler(Exception)
    async def unexpected(request: Any, err: Exception) -> Any:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return respond(request, ApiError(500, "internal", "internal error; the server log has the details"))
