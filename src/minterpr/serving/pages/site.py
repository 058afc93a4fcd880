"""What every page shares: the template environment, :class:`Pages` (the services, rendering with the
pages' Content-Security-Policy, permission checks, the HTML error page) and the small form and redirect
helpers the route modules use."""

import datetime as dt
import hashlib
from pathlib import Path
from typing import Any

from minterpr.interaction.match import percent
from minterpr.serving.errors import ApiError
from minterpr.serving.times import as_datetime, when

HERE = Path(__file__).resolve().parent.parent  # serving/: its static/ and templates/
STATIC, TEMPLATES = HERE / "static", HERE / "templates"
# pages use their own script, style and images only: an injected script or style, a form posting
# elsewhere or a frame around the page is refused by the browser
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'"
)
_TITLES = {
    400: "Bad request",
    401: "Please log in",
    403: "Not allowed",
    404: "Not found",
    409: "Conflict",
    413: "Too large",
    422: "Cannot do that",
    429: "Too many requests",
    500: "Something went wrong",
}


TIME_PATTERN = r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?"  # the time fields: 24-hour UTC, "2026-03-02 08:30"


def _static_version(name: str) -> str:
    return hashlib.sha256((STATIC / name).read_bytes()).hexdigest()[:10]


def _environment() -> Any:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    versions = {name: _static_version(name) for name in ("minterpr.css", "htmx.min.js", "minterpr.js")}
    env.globals["static"] = lambda name: f"/static/{name}?v={versions.get(name, '0')}"
    env.filters["when"] = when
    env.filters["percent"] = percent
    env.globals["time_pattern"] = TIME_PATTERN
    return env


class Pages:
    """The page routes' shared state: the template environment and the service container."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.env = _environment()

    # ----- helpers -----------------------------------------------------------------------------
    @property
    def services(self) -> Any:
        return self.app.state.services

    @property
    def settings(self) -> Any:
        return self.services.settings

    def render(self, request: Any, template: str, status: int = 200, **context: Any) -> Any:
        from fastapi.responses import HTMLResponse

        from minterpr.serving.deps import csrf_token

        context.setdefault("user", None)
        context.setdefault("csrf", csrf_token(request) or "")
        html = self.env.get_template(template).render(**context)
        return HTMLResponse(
            html,
            status_code=status,
            headers={"Cache-Control": "no-store", "Content-Security-Policy": CONTENT_SECURITY_POLICY},
        )

    def allowed(self, user: Any, permission: str) -> bool:
        from minterpr.serving.security import allowed

        return user is not None and allowed(user.role, permission)

    def need(self, user: Any, permission: str) -> None:
        """403 unless ``user``'s role has ``permission`` (the case service leaves the check to its routes)."""
        if not self.allowed(user, permission):
            raise ApiError(403, "forbidden", f"the {user.role} role may not do this ({permission})")

    def error_page(self, request: Any, status: int, code: str, message: str) -> Any:
        """The app's HTML error renderer: a page whose ``#workspace`` holds the message (htmx swaps it
        in place); an htmx request that lost its login is sent to the login page."""
        from fastapi.responses import Response

        if status == 401 and request.headers.get("hx-request"):
            return Response(status_code=204, headers={"HX-Redirect": "/login"})
        user = (
            self.services.accounts.from_login_token(request.cookies.get("minterpr_session", ""))
            if request.cookies.get("minterpr_session")
            else None
        )
        return self.render(
            request,
            "error.html",
            status,
            user=user,
            http_status=status,
            title=_TITLES.get(status, "Error"),
            message=message,
            code=code,
        )

    def galleries(self) -> list[Any]:
        return list(self.services.galleries.list())

    def cameras(self, gallery: str | None = None, scope: Any = None) -> list[str]:
        """Cameras of one gallery (or all), narrowed to a case's camera scope when it has one."""
        names: set[str] = set()
        for g in self.galleries():
            if gallery is None or g.name == gallery:
                names.update(c for c in (g.cameras or ()) if c)
        if scope:
            names &= set(scope)
        return sorted(names)


def form_datetime(value: str | None, field: str) -> dt.datetime | None:
    if not value:
        return None
    moment = as_datetime(value)
    if moment is None:
        raise ApiError(422, "invalid", f"{field}: not a date and time: {value!r}", field=field)
    return moment


def redirect(url: str) -> Any:
    from fastapi.responses import RedirectResponse

    return RedirectResponse(url, status_code=303)


def safe_next(value: str | None) -> str:
    """Only a local path: ``/cases/3``, never ``//evil.example`` or ``https://...``."""
    if value and value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/cases"
