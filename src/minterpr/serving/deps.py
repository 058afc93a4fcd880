"""FastAPI dependencies: the services, who is asking, what they may do, CSRF for cookie requests.

A request authenticates with the login cookie (``minterpr_session``) or an API key (header
``X-API-Key``). A cookie-authenticated request that changes state (POST, PUT, PATCH, DELETE)
must also carry the login's CSRF token — double submit: header ``X-CSRF-Token`` (or form field
``csrf_token``) equal to the ``minterpr_csrf`` cookie, itself equal to the token stored with the
login. A page on another site can make the browser send the cookies but cannot read them, so it
cannot send the token. API-key requests carry no ambient credential and are exempt.

Example (a route of a page module):
    >>> from fastapi import APIRouter
    >>> router = APIRouter()
    >>> @router.post("/cases/{case_id}/close-page")
    ... def close(case_id: int, request: Request, principal: Principal = Depends(require("case:open"))):
    ...     return get_services(request).cases.close_case(principal, case_id)
    >>> require("case:fly")
    Traceback (most recent call last):
    ...
    ValueError: unknown permission 'case:fly'
"""

from __future__ import annotations

from typing import Any, Callable
from urllib.parse import urlsplit

from fastapi import Depends, Request, Response

from minterpr.serving.accounts import LoginGrant, Principal
from minterpr.serving.errors import ApiError
from minterpr.serving.security import PERMISSIONS, allowed, same
from minterpr.serving.service import Services
from minterpr.serving.settings import ServeSettings

SESSION_COOKIE = "minterpr_session"
CSRF_COOKIE = "minterpr_csrf"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
API_KEY_HEADER = "X-API-Key"
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


def get_services(request: Request) -> Services:
    return request.app.state.services


services_dep = Depends(get_services)


def _principal(request: Request) -> Principal | None:
    services = get_services(request)
    key = request.headers.get(API_KEY_HEADER)
    if key:
        principal = services.accounts.from_api_key(key)
        if principal is None:
            raise ApiError(401, "unauthenticated", "unknown or revoked API key")
        return principal
    token = request.cookies.get(SESSION_COOKIE)
    if token and len(token) <= 100:
        return services.accounts.from_login_token(token)
    return None


async def _check_csrf(request: Request, principal: Principal) -> None:
    if principal.via != "cookie" or request.method in _SAFE:
        return
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        form = await request.form()
        value = form.get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    cookie = request.cookies.get(CSRF_COOKIE)
    if (
        not sent
        or not cookie
        or not principal.csrf_token
        or not (same(sent, cookie) and same(cookie, principal.csrf_token))
    ):
        raise ApiError(
            403,
            "csrf_failed",
            f"missing or wrong CSRF token: send the {CSRF_COOKIE} cookie's value as the {CSRF_HEADER} header",
        )


async def current_user(request: Request) -> Principal:
    """The authenticated principal (401 otherwise), CSRF-checked for cookie requests that change state."""
    principal = _principal(request)
    if principal is None:
        raise ApiError(401, "unauthenticated", "log in (POST /api/auth/login) or send an API key (X-API-Key)")
    request.state.principal = principal  # before the CSRF check: a refusal is audited with who was refused
    await _check_csrf(request, principal)
    return principal


async def optional_user(request: Request) -> Principal | None:
    """The principal or None, without the CSRF check (GET pages that redirect to the login)."""
    try:
        return _principal(request)
    except ApiError:
        return None


def require(permission: str) -> Callable[..., Any]:
    """A dependency: the principal when its role has ``permission``; 403 otherwise."""
    if not any(permission in granted for granted in PERMISSIONS.values()):
        raise ValueError(f"unknown permission {permission!r}")

    async def dependency(principal: Principal = Depends(current_user)) -> Principal:
        if not allowed(principal.role, permission):
            raise ApiError(403, "forbidden", f"the {principal.role} role may not do this ({permission})")
        return principal

    return dependency


def csrf_token(request: Request) -> str | None:
    """The CSRF token to embed in a page (the login's; None when not logged in by cookie)."""
    principal = getattr(request.state, "principal", None)
    if principal is None:
        try:
            principal = _principal(request)
        except ApiError:
            principal = None
    return principal.csrf_token if principal is not None else None


def refuse_cross_site(request: Request) -> None:
    """403 ``csrf_failed`` for a login posted from another site (login CSRF: a page elsewhere must not
    log a browser into an account of its choosing). Browsers say where a request comes from
    (``Sec-Fetch-Site``, ``Origin``, else ``Referer``); it must be this host. A client that sends
    none of them (curl, scripts) is not a browser and not at risk."""
    source = request.headers.get("origin") or request.headers.get("referer")
    foreign = source is not None and (source == "null" or urlsplit(source).netloc != request.headers.get("host"))
    if request.headers.get("sec-fetch-site") == "cross-site" or foreign:
        raise ApiError(
            403, "csrf_failed", "a login sent from another site is refused: log in on this service's own login page"
        )


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def set_login_cookies(response: Response, grant: LoginGrant, settings: ServeSettings) -> None:
    """The session cookie (HttpOnly) and the CSRF cookie (readable by the page's script), both SameSite=Lax."""
    max_age = int(settings.login_ttl_hours * 3600)
    response.set_cookie(
        SESSION_COOKIE,
        grant.token,
        max_age=max_age,
        httponly=True,
        samesite="lax",
        secure=settings.cookie_secure,
        path="/",
    )
    response.set_cookie(
        CSRF_COOKIE,
        grant.csrf_token,
        max_age=max_age,
        httponly=False,
        samesite="lax",
        secure=settings.cookie_secure,
        path="/",
    )


def clear_login_cookies(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/")
    response.delete_cookie(CSRF_COOKIE, path="/")
