"""Injection probes of ``probe_service.py``: hostile strings in every text field of the API, then the
pages that show them (no live markup, no template evaluated) and the users table (still whole)."""

from __future__ import annotations

from probe_service_common import PASSWORD, USERS, Ctx, body_for, got, start_session


# ----------------------------------------------------------------------------- injection
PAYLOADS = (
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "'; DROP TABLE users; --",
    "' OR '1'='1",
    "{{7*7}}",
    "${7*7}",
    "javascript:alert(1)",
    "\u202eevil",
    "line\u2028separator",
    "a\r\nSet-Cookie: pwn=1",
    "%00%0d%0a",
    "../../../../etc/passwd",
    "<svg/onload=alert(1)>",
    "</textarea><script>alert(2)</script>",
)
MARKUP = ("<script", "<img src=x", "<svg/", "</textarea>")


def injection(ctx: Ctx) -> None:
    import httpx

    cat = "injection in text fields"
    sid = start_session(ctx, "ana", ctx.case, turns=0)
    for k, payload in enumerate(PAYLOADS):
        if k and k % 7 == 0:
            sid = start_session(ctx, "ana", ctx.case, turns=0)  # a session reads at most 16 turns
        padded = payload + " a purpose of ten characters"
        fields = [
            ("describe text", "ana", "POST", f"/api/sessions/{sid}/describe", {"text": payload}),
            ("feedback text", "ana", "POST", f"/api/sessions/{sid}/feedback", {"gallery_index": 0, "text": payload}),
            ("case title", "ana", "POST", "/api/cases", {**body_for(ctx, "/api/cases"), "title": payload}),
            ("case purpose", "ana", "POST", "/api/cases", {**body_for(ctx, "/api/cases"), "purpose": padded}),
            ("key name", "ana", "POST", "/api/keys", {"name": payload}),
            (
                "new username",
                "root",
                "POST",
                "/api/admin/users",
                {"username": payload, "password": PASSWORD, "role": "viewer"},
            ),
            ("gallery name", "root", "POST", "/api/galleries", {**body_for(ctx, "/api/galleries"), "name": payload}),
            ("ingest gallery", "root", "POST", "/api/ingest", {**body_for(ctx, "/api/ingest"), "gallery": payload}),
            (
                "session camera filter",
                "ana",
                "POST",
                "/api/sessions",
                {"case_id": ctx.case, "gallery": "test", "cameras": [payload]},
            ),
        ]
        for name, who, method, path, body in fields:
            with ctx.http(who) as http:
                r = http.request(method, path, json=body)
            ctx.record(
                cat,
                f"{name}: {payload!r}",
                "a 2xx or a 4xx, never 500; no header injected",
                got(r),
                r.status_code < 500 and "pwn" not in r.headers.get("set-cookie", ""),
            )
        r = httpx.post(ctx.url + "/api/auth/login", json={"username": payload, "password": PASSWORD})
        ctx.record(cat, f"login username: {payload!r}", "401/422/429", got(r), r.status_code in (401, 422, 429))
    with ctx.http("ana", via="cookie") as http:
        pages = {
            "/cases": http.get("/cases").text,
            "/cases/{case_id}": http.get(f"/cases/{ctx.case}").text,
            "/sessions/{sid}": http.get(f"/sessions/{sid}").text,
        }
    for path, html in pages.items():
        for payload in PAYLOADS:
            if any(m in payload for m in MARKUP):
                ctx.record(
                    cat,
                    f"page {path} shows {payload!r} escaped",
                    "no live markup",
                    "live markup" if payload in html else "escaped",
                    payload not in html,
                )
    ctx.record(
        cat,
        "a template expression is not evaluated on /cases",
        "{{7*7}} shown as text",
        "shown" if "{{7*7}}" in pages["/cases"] else "missing",
        "{{7*7}}" in pages["/cases"],
    )
    with ctx.http("root") as http:
        users = http.get("/api/admin/users").json()
    ctx.record(
        cat,
        "the users table survived",
        "every probe user still there",
        f"{len(users)} users",
        set(USERS) <= {u["username"] for u in users},
    )
