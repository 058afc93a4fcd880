"""Access probes of ``probe_service.py``: credentials, CSRF, roles, other users, case scope (probe_service_scope.py).

Each family takes the shared :class:`probe_service.Ctx` and records one result per probe with what
was expected; the routes come from the app (``ctx.operations``: the OpenAPI operations with the
permission their ``require`` names; ``ctx.page_routes``: the page routes), not from a list here.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from typing import Any

from probe_service_scope import scope
from probe_service_common import PASSWORD, USERS, Ctx, body_for, fill, got, is_refusal, png_bytes, uploads_count  # noqa: F401

ROLE_OF = {"viewer": "vic", "analyst": "ana", "admin": "root", "auditor": "aud"}  # one actor per role
WRITES = {"POST", "PUT", "PATCH", "DELETE"}
UNAUTHENTICATED = {"/healthz", "/api/auth/login", "/login", "/api/docs", "/api/docs/init.js"}  # answer anyone by design


FORMS = {
    "/cases": {"title": "t", "purpose": "a purpose of ten characters"},
    "/cases/{case_id}/sessions": {"gallery": "test"},
    "/sessions/{sid}/{move}": {"text": "a man in red"},
    "/ingest": {"gallery": "probe", "source": "incoming"},
}


def send(ctx: Ctx, http: Any, method: str, path: str, *, page: bool = False, **kw: Any) -> Any:
    """``method path`` with its valid body (JSON for the API, a form for pages, a file for uploads)."""
    url = fill(path, ctx)
    if method not in WRITES:
        return http.request(method, url, **kw)
    if path.endswith("/example/upload"):
        return http.request(method, url, files={"file": ("p.png", png_bytes(), "image/png")}, **kw)
    if page:
        data = {**FORMS.get(path, {}), **kw.pop("data", {})}
        return http.request(method, url, data=data, **kw)
    return http.request(method, url, json=body_for(ctx, path), **kw)


# ----------------------------------------------------------------------------- no credentials
def no_credentials(ctx: Ctx) -> None:
    cat = "no credentials"
    with ctx.http(None) as http:
        for op in ctx.operations:
            if op["path"] in UNAUTHENTICATED:
                continue
            r = send(ctx, http, op["method"], op["path"])
            ctx.record(
                cat,
                f"{op['method']} {op['path']}",
                "401 unauthenticated",
                got(r),
                is_refusal(r, (401,), "unauthenticated"),
            )
        for method, path in ctx.page_routes:
            if path in UNAUTHENTICATED or path.startswith("/static"):
                continue
            r = send(ctx, http, method, path, page=True)
            redirect = r.status_code in (302, 303, 307) and r.headers.get("location", "").startswith("/login")
            ctx.record(
                cat,
                f"page {method} {path}",
                "a redirect to /login, or 401/403",
                f"{r.status_code} {r.headers.get('location', '')}".strip(),
                redirect or r.status_code in (401, 403),
            )
        r = http.get("/metrics")
        ctx.record(cat, "GET /metrics", "401/403", got(r), r.status_code in (401, 403))


# ----------------------------------------------------------------------------- forged, expired, revoked
def _expire_logins(ctx: Ctx, username: str) -> None:
    """Set every login of ``username`` to have expired an hour ago (a second writer on the live database)."""
    con = sqlite3.connect(ctx.data / "minterpr.db", timeout=30)
    with con:
        con.execute(
            "UPDATE logins SET expires = ? WHERE user_id = (SELECT id FROM users WHERE username = ?)",
            (time.time() - 3600, username),
        )
    con.close()


def forged(ctx: Ctx) -> None:
    import httpx

    cat = "forged, expired, revoked credentials"
    ana_key = ctx.keys["ana"]
    tries: list[tuple[str, dict[str, str], dict[str, str]]] = [
        ("random session cookie", {}, {"minterpr_session": secrets.token_urlsafe(32)}),
        ("a 200-character session cookie", {}, {"minterpr_session": "A" * 200}),
        ("the CSRF token as the session cookie", {}, {"minterpr_session": ctx.csrf["ana"]}),
        ("an empty session cookie", {}, {"minterpr_session": ""}),
        ("a JWT with alg none as the cookie", {}, {"minterpr_session": "eyJhbGciOiJub25lIn0.eyJzdWIiOiJyb290In0."}),
        ("a random API key", {"X-API-Key": "mk_" + secrets.token_urlsafe(32)}, {}),
        (
            "ana's key with its last character changed",
            {"X-API-Key": ana_key[:-1] + ("A" if ana_key[-1] != "A" else "B")},
            {},
        ),
        ("ana's key's prefix only", {"X-API-Key": ana_key[:12]}, {}),
        ("ana's key upper-cased", {"X-API-Key": ana_key.upper()}, {}),
        ("the key as a Bearer token", {"Authorization": f"Bearer {ana_key}"}, {}),
        ("a key in the query string", {}, {}),
    ]
    for name, headers, cookies in tries:
        for method, path in (("GET", "/api/auth/me"), ("POST", "/api/cases")):
            with httpx.Client(base_url=ctx.url, headers=headers, cookies=cookies, timeout=30) as http:
                params = {"api_key": ana_key} if "query" in name else None
                r = http.request(method, path, params=params, json=body_for(ctx, path) if method == "POST" else None)
            ctx.record(cat, f"{name}: {method} {path}", "401", got(r), r.status_code == 401)
    # a revoked key
    with ctx.http("ana") as http:
        made = http.post("/api/keys", json={"name": "to revoke"}).json()
        http.delete(f"/api/keys/{made['id']}")
    with httpx.Client(base_url=ctx.url, headers={"X-API-Key": made["key"]}, timeout=30) as http:
        r = http.get("/api/auth/me")
    ctx.record(cat, "a revoked API key", "401", got(r), r.status_code == 401)
    # a logged-out login, an expired login (dan's)
    for kind in ("logged out", "expired"):
        login = httpx.post(ctx.url + "/api/auth/login", json={"username": "dan", "password": PASSWORD})
        cookies, token = dict(login.cookies), login.json()["csrf_token"]
        with httpx.Client(base_url=ctx.url, cookies=cookies, headers={"X-CSRF-Token": token}, timeout=60) as http:
            if kind == "logged out":
                http.post("/api/auth/logout")
                http.cookies = httpx.Cookies(cookies)  # the old cookie again, as a thief who copied it would send it
            else:
                _expire_logins(ctx, "dan")
            answers = [
                (method, path, http.request(method, path, json=body_for(ctx, path) if method == "POST" else None))
                for method, path in (("GET", "/api/auth/me"), ("POST", "/api/cases"), ("GET", "/cases"))
            ]
        for method, path, r in answers:
            ok = r.status_code == 401 or (path == "/cases" and r.status_code == 303)
            ctx.record(cat, f"a {kind} login cookie: {method} {path}", "401 (a page: redirect to /login)", got(r), ok)
    with httpx.Client(base_url=ctx.url, headers={"Authorization": "Bearer " + secrets.token_urlsafe(16)}) as http:
        r = http.get("/metrics")
    ctx.record(cat, "a wrong metrics token", "401/403", got(r), r.status_code in (401, 403))
    with ctx.http("ana") as http:
        r = http.get("/metrics")
    ctx.record(cat, "an analyst's key on /metrics", "403", got(r), r.status_code == 403)


# ----------------------------------------------------------------------------- CSRF
def actor_for(permission: str | None, path: str) -> str:
    """A user allowed to make the request (so that only the CSRF token decides)."""
    from minterpr.serving.security import allowed

    if path.startswith("/ingest") or path.startswith("/api/ingest"):
        return "root"
    for user in ("ana", "root", "aud"):
        if permission is None or allowed(USERS[user], permission):
            return user
    return "root"


def csrf(ctx: Ctx) -> None:
    import httpx

    cat = "CSRF on state-changing routes"
    routes = [
        (op["method"], op["path"], op["permission"], False)
        for op in ctx.operations
        if op["method"] in WRITES and op["path"] != "/api/auth/login"
    ]
    routes += [(m, p, None, True) for m, p in ctx.page_routes if m in WRITES and p != "/login"]
    for method, path, permission, page in routes:
        who = actor_for(permission, path)
        jar, token = ctx.cookies[who], ctx.csrf[who]
        other = ctx.csrf["bob" if who != "bob" else "ana"]
        forged_token = secrets.token_urlsafe(24)
        variants = {
            "no token": ({}, jar, {}, {}),
            "a wrong X-CSRF-Token": ({"X-CSRF-Token": forged_token}, jar, {}, {}),
            "a forged double-submit pair": (
                {"X-CSRF-Token": forged_token},
                {**jar, "minterpr_csrf": forged_token},
                {},
                {},
            ),
            "another user's token": ({"X-CSRF-Token": other}, {**jar, "minterpr_csrf": other}, {}, {}),
            "an empty X-CSRF-Token": ({"X-CSRF-Token": ""}, jar, {}, {}),
            "the token in the query string": ({}, jar, {"csrf_token": token}, {}),
            "the header without the csrf cookie": (
                {"X-CSRF-Token": token},
                {k: v for k, v in jar.items() if k != "minterpr_csrf"},
                {},
                {},
            ),
        }
        if page:
            variants["a wrong csrf_token form field"] = ({}, jar, {}, {"csrf_token": forged_token})
        for name, (headers, cookies, params, form) in variants.items():
            with httpx.Client(base_url=ctx.url, headers=headers, cookies=cookies, timeout=60) as http:
                extra = {"data": form} if page and form else {}
                r = send(ctx, http, method, path, page=page, params=params, **extra)
            ok = r.status_code == 403 and (page or got(r).endswith("csrf_failed"))
            ctx.record(cat, f"{name}: {'page ' if page else ''}{method} {path} as {who}", "403 csrf_failed", got(r), ok)
    with ctx.http("ana", via="cookie", headers={"X-CSRF-Token": ctx.csrf["ana"]}) as http:  # the control
        r = http.post(f"/api/sessions/{ctx.sid}/describe", json={"text": "white shoes"})
    ctx.record(cat, "control: the right token is accepted", "200", got(r), r.status_code == 200)


# ----------------------------------------------------------------------------- roles
def roles(ctx: Ctx) -> None:
    from minterpr.serving.security import allowed

    cat = "role escalation"
    for op in ctx.operations:
        if op["permission"] is None:
            continue
        for role, who in ROLE_OF.items():
            if allowed(role, op["permission"]):
                continue
            with ctx.http(who) as http:
                r = send(ctx, http, op["method"], op["path"])
            ctx.record(
                cat,
                f"{role} {op['method']} {op['path']} ({op['permission']})",
                "403 forbidden",
                got(r),
                is_refusal(r, (403,), "forbidden"),
            )
    for who, role in (("ana", "admin"), ("vic", "admin"), ("aud", "analyst")):
        with ctx.http(who) as http:
            r = http.post("/api/admin/users", json={"username": f"x{who}", "password": PASSWORD, "role": role})
        ctx.record(cat, f"{USERS[who]} creates an {role}", "403", got(r), r.status_code == 403)
    with ctx.http("root") as http:
        r = http.post("/api/admin/users", json={"username": "xsuper", "password": PASSWORD, "role": "superuser"})
    ctx.record(cat, "admin creates a role that does not exist", "422", got(r), r.status_code == 422)
    import httpx

    r = httpx.post(ctx.url + "/api/auth/login", json={"username": "vic", "password": PASSWORD, "role": "admin"})
    ctx.record(cat, "a login naming its own role", "422 (extra field)", got(r), r.status_code == 422)
    with ctx.http("ana") as http:
        key = http.post("/api/keys", json={"name": "role?"}).json()["key"]
    me = httpx.get(ctx.url + "/api/auth/me", headers={"X-API-Key": key}).json()
    ctx.record(
        cat, "a key made by an analyst acts as an analyst", "analyst", str(me.get("role")), me.get("role") == "analyst"
    )
    for who, method, path in (
        ("vic", "POST", "/cases"),
        ("vic", "POST", "/sessions/{sid}/{move}"),
        ("vic", "POST", "/cases/{case_id}/close"),
        ("aud", "POST", "/cases/{case_id}/sessions"),
        ("ana", "GET", "/ingest"),
        ("ana", "POST", "/ingest"),
        ("vic", "POST", "/sessions/{sid}/export"),
    ):
        with ctx.http(who, via="cookie", headers={"X-CSRF-Token": ctx.csrf[who]}) as http:
            r = send(ctx, http, method, path, page=True, data={"csrf_token": ctx.csrf[who]})
        ctx.record(cat, f"page: {USERS[who]} {method} {path}", "403", got(r), r.status_code == 403)


def _audited(ctx: Ctx, action: str, user: str, after: int) -> bool:
    with ctx.http("aud") as http:
        entries = http.get("/api/audit/entries", params={"after": after, "limit": 1000}).json()
    return any(e["action"] == action and e["user"] == user for e in entries)


def _audit_seq(ctx: Ctx) -> int:
    with ctx.http("aud") as http:
        entries = http.get("/api/audit/entries", params={"after": 0, "limit": 1000}).json()
        while len(entries) == 1000:
            more = http.get("/api/audit/entries", params={"after": entries[-1]["seq"], "limit": 1000}).json()
            if not more:
                break
            entries = more
    return int(entries[-1]["seq"]) if entries else 0


# ----------------------------------------------------------------------------- other users
def other_users(ctx: Ctx) -> None:
    cat = "other users' sessions and cases"
    sid = ctx.sid
    for move in ("describe", "answer", "feedback", "example", "undo", "confirm", "export", "example/upload"):
        before = uploads_count(ctx)
        with ctx.http("bob") as http:
            r = send(ctx, http, "POST", f"/api/sessions/{{session_id}}/{move}")
        ok = r.status_code == 403 and uploads_count(ctx) == before
        ctx.record(cat, f"bob {move} in ana's session", "403, nothing stored", got(r), ok)
    before = uploads_count(ctx)
    with ctx.http("ana") as http:
        r = http.post(f"/api/sessions/{'f' * 32}/example/upload", files={"file": ("p.png", png_bytes(), "image/png")})
    ctx.record(
        cat,
        "an upload into a session that does not exist",
        "404, nothing stored",
        got(r),
        r.status_code == 404 and uploads_count(ctx) == before,
    )
    with ctx.http("bob", via="cookie", headers={"X-CSRF-Token": ctx.csrf["bob"]}) as http:
        r = http.post(f"/sessions/{sid}/describe", data={"text": "a man", "csrf_token": ctx.csrf["bob"]})
        ctx.record(cat, "bob's page move in ana's session", "403", got(r), r.status_code == 403)
        r = http.post(f"/cases/{ctx.case}/close", data={"csrf_token": ctx.csrf["bob"]})
        ctx.record(cat, "bob closes ana's case (page)", "403", got(r), r.status_code == 403)
    with ctx.http("bob") as http:
        r = http.post(f"/api/cases/{ctx.case}/close")
        ctx.record(cat, "bob closes ana's case (API)", "403", got(r), r.status_code == 403)
        r = http.delete(f"/api/keys/{ctx.key_ids['ana']}")
        ctx.record(cat, "bob revokes ana's API key", "403/404", got(r), r.status_code in (403, 404))
        keys = http.get("/api/keys").json()
        ctx.record(
            cat,
            "bob lists keys: only his own",
            "1 key named probe",
            str([k.get("name") for k in keys]),
            all(k.get("id") != ctx.key_ids["ana"] for k in keys),
        )
    with ctx.http("ana") as http:
        r = http.get("/api/auth/me")
    ctx.record(cat, "ana's key still works after bob's attempts", "200", got(r), r.status_code == 200)
    jar = {"minterpr_session": ctx.cookies["ana"]["minterpr_session"], "minterpr_csrf": ctx.csrf["bob"]}
    import httpx

    with httpx.Client(base_url=ctx.url, cookies=jar, headers={"X-CSRF-Token": ctx.csrf["bob"]}) as http:
        r = http.post(f"/api/sessions/{sid}/describe", json={"text": "a man"})
    ctx.record(cat, "ana's cookie with bob's CSRF token", "403 csrf_failed", got(r), got(r) == "403 csrf_failed")
    for who, what, path, action in (
        ("bob", "session", f"/api/sessions/{sid}", "session_read"),
        ("vic", "session", f"/api/sessions/{sid}", "session_read"),
        ("bob", "full image", f"/api/sessions/{sid}/images/0?full=true", "image_read"),
        ("vic", "thumbnail", f"/api/sessions/{sid}/images/1", "image_read"),
        ("bob", "frame", f"/api/sessions/{sid}/images/0/frame", "frame_read"),
        ("vic", "page image", f"/sessions/{sid}/image/0", "image_read"),
    ):
        after = _audit_seq(ctx)
        with ctx.http(who, via="cookie" if path.startswith("/sessions") else "key") as http:
            r = http.get(path)
        ok = r.status_code == 200 and _audited(ctx, action, who, after)
        ctx.record(cat, f"{who} reads ana's {what}: allowed and audited", f"200 and a {action} entry", got(r), ok)
    after = _audit_seq(ctx)
    with ctx.http("vic") as http:
        r = http.post("/api/cases", json=body_for(ctx, "/api/cases"))
    ctx.record(
        cat,
        "a refused request is audited",
        "403 and a refused entry",
        got(r),
        r.status_code == 403 and _audited(ctx, "refused", "vic", after),
    )


ACCESS = {
    "no_credentials": no_credentials,
    "forged": forged,
    "csrf": csrf,
    "roles": roles,
    "other_users": other_users,
    "scope": scope,
}
