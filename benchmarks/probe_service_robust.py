"""Robustness probes of ``probe_service.py``: traversal, bad bodies and images, login CSRF, headers,
file modes, audit tampering (probe_service_audit.py), kill -9 in the middle of turns, concurrency, the rate limits."""

from __future__ import annotations

import io
import json
import secrets

from probe_service_audit import audit_tamper
from probe_service_common import PASSWORD, Ctx, fill, got, png_bytes, start_session
from probe_service_raw import png_header, raw


# ----------------------------------------------------------------------------- traversal
def traversal(ctx: Ctx) -> None:
    cat = "path traversal"
    sid = ctx.sid
    for path in (
        "/static/../minterpr.db",
        "/static/..%2fminterpr.db",
        "/static/%2e%2e/%2e%2e/state/minterpr.db",
        "/static/%2e%2e%2f%2e%2e%2fstate%2fminterpr.db",
        "/static/../../../../../../etc/passwd",
        "/static//etc/passwd",
        "/static/..\\..\\minterpr.db",
        f"/api/sessions/{sid}/images/..%2f..%2fetc%2fpasswd",
        f"/api/sessions/{sid}/images/0/..%2f..%2f..%2fminterpr.db",
        "/api/sessions/..%2f..%2fminterpr.db",
        f"/sessions/{sid}/thumb/..%2f..%2fminterpr.db",
        f"/sessions/{sid}/frame/%2e%2e",
        "/ingest/..%2f..%2fetc%2fpasswd",
    ):
        status, body = raw(ctx, "GET", path, {"X-API-Key": ctx.keys["ana"]})
        leaked = b"SQLite format 3" in body or b"root:x:0:0" in body
        ctx.record(
            cat,
            f"GET {path}",
            "4xx, no file content",
            f"{status}{' LEAK' if leaked else ''}",
            400 <= status < 500 and not leaked,
        )
    outside = ctx.work / "pwned"
    for filename in ("../../../pwned/p.png", str(outside / "q.png"), "..\\..\\pwned\\r.png", "....//....//pwned/s.png"):
        with ctx.http("ana") as http:
            r = http.post(f"/api/sessions/{sid}/example/upload", files={"file": (filename, png_bytes(), "image/png")})
        stored = [
            p
            for p in ctx.data.rglob("*")
            if p.is_file() and p.suffix in (".png", ".jpg", ".bin") and "uploads" not in p.relative_to(ctx.data).parts
        ]
        ctx.record(
            cat,
            f"upload named {filename!r}",
            "stored under uploads/ only (the name is not used)",
            f"{got(r)}, {len(stored)} outside",
            not outside.exists() and not stored and r.status_code < 500,
        )
    world = ctx.work / "world"
    for directory in (
        "/etc",
        str(ctx.data / ".." / ".."),
        "/",
        str(world / "store"),
        str(ctx.data / ".." / "world" / "store"),
    ):
        with ctx.http("root") as http:
            r = http.post(
                "/api/galleries", json={"name": "trav", "directory": directory, "run_dir": str(world / "run")}
            )
        ctx.record(
            cat, f"register a gallery at {directory}", "403 outside_roots", got(r), got(r) == "403 outside_roots"
        )
    for source in (
        "/etc",
        str(ctx.data / "minterpr.db"),
        str(ctx.data / "minterpr.db-wal"),
        str(ctx.data),
        str(ctx.data.parent),
        str(ctx.data / "uploads"),
        str(ctx.data / "incoming" / ".." / "minterpr.db"),
        "/proc/self/environ",
        "../../etc",
    ):
        with ctx.http("root") as http:
            r = http.post("/api/ingest", json={"gallery": "trav", "source": source})
            text = r.text
        # the message may repeat what was asked and name the incoming folder it asks for, nothing else of the server's
        told = text.replace(json.dumps(source)[1:-1], "").replace(str(ctx.data.resolve() / "incoming"), "")
        ok = r.status_code == 403 and str(ctx.data.resolve()) not in told and str(ctx.data) not in told
        ctx.record(cat, f"ingest from {source}", "403, the message names no other server path", got(r), ok)
    with ctx.http("root") as http:
        r = http.post(
            "/api/ingest",
            json={
                "gallery": "trav",
                "source": str(ctx.data / "incoming"),
                "detector": "onnx",
                "detector_model": "/etc/passwd",
            },
        )
    ctx.record(cat, "an ONNX detector model at /etc/passwd", "403", got(r), r.status_code == 403)


# ----------------------------------------------------------------------------- bodies
def malformed(ctx: Ctx) -> None:
    cat = "oversized and malformed bodies"
    sid = start_session(ctx, "ana", ctx.case, turns=0)
    url = f"/api/sessions/{sid}/describe"
    key = {"X-API-Key": ctx.keys["ana"], "Content-Type": "application/json"}
    big = json.dumps({"text": "x" * (2 << 20)}).encode()
    cases: list[tuple[str, dict[str, str], bytes, tuple[int, ...]]] = [
        ("a 2 MiB JSON body (cap 1 MiB)", key, big, (413,)),
        ("Content-Length 10^12 on a small body", {**key, "Content-Length": str(10**12)}, b'{"text": "a"}', (413,)),
        (
            "Content-Length not a number (uvicorn's parser refuses it: 400, plain text)",
            {**key, "Content-Length": "abc"},
            b'{"text": "a"}',
            (400,),
        ),
        ("invalid JSON", key, b"{not json", (422,)),
        ("100,000 nested arrays", key, b"[" * 100_000 + b"]" * 100_000, (400, 422)),
        ("a 1001-character text", key, json.dumps({"text": "a" * 1001}).encode(), (422,)),
        ("a NUL in the text", key, b'{"text": "a \\u0000 man"}', (422,)),
        ("a lone surrogate", key, b'{"text": "a \\ud800 man"}', (422,)),
        ("JSON sent as text/plain", {**key, "Content-Type": "text/plain"}, b'{"text": "a man"}', (415, 422)),
        ("an array body", key, b'["a man"]', (422,)),
        ("an extra field", key, b'{"text": "a man", "role": "admin"}', (422,)),
        ("1e400 as the text", key, b'{"text": 1e400}', (422,)),
        ("1 MiB of spaces", key, b" " * (1 << 20) + b"{}", (413, 422)),
        ("invalid UTF-8", key, b'{"text": "a \xff\xfe man"}', (400, 422)),
        ("duplicate keys", key, b'{"text": "a", "text": "a man in red"}', (200, 422)),
    ]
    for name, headers, body, statuses in cases:
        status, data = raw(ctx, "POST", url, headers, body)
        try:
            shaped = set(json.loads(data)) == {"error"}
        except ValueError:
            shaped = False
        ctx.record(
            cat,
            name,
            "/".join(map(str, statuses)) + " in the one error shape",
            f"{status}{'' if shaped else ' (not the error shape)'}",
            status in statuses and (shaped or status == 200 or "parser" in name),
        )
    for name, body in (
        ("gallery_index -1", {"gallery_index": -1, "text": "no"}),
        ("gallery_index 2^70", {"gallery_index": 2**70, "text": "no"}),
        ("gallery_index 1.5", {"gallery_index": 1.5, "text": "no"}),
        ("gallery_index true", {"gallery_index": True, "text": "no"}),
        ("gallery_index as a string", {"gallery_index": "0", "text": "no"}),
    ):
        with ctx.http("ana") as http:
            r = http.post(f"/api/sessions/{sid}/feedback", json=body)
        ctx.record(cat, f"feedback with {name}", "422", got(r), r.status_code == 422)
    for top in ("0", "100000", "abc", "-1"):
        with ctx.http("ana") as http:
            r = http.get(f"/api/sessions/{sid}", params={"top": top})
        ctx.record(cat, f"top={top}", "422", got(r), r.status_code == 422)
    with ctx.http("ana") as http:
        r = http.post(f"/api/sessions/{sid}/example/upload", data={"x": "1"})
        ctx.record(cat, "an upload without a file", "422", got(r), r.status_code == 422)
        r = http.post(f"/api/sessions/{sid}/example/upload", files={"file": ("e.png", b"", "image/png")})
        ctx.record(cat, "an empty upload", "4xx", got(r), 400 <= r.status_code < 500)
        r = http.post(
            f"/api/sessions/{sid}/example/upload", files={"file": ("b.png", b"\x89PNG" + b"0" * 300_000, "image/png")}
        )
        ctx.record(cat, "an upload over max_upload_bytes", "413", got(r), r.status_code == 413)
        r = http.put("/api/cases", json={})
        ctx.record(cat, "PUT on a POST route", "405", got(r), r.status_code == 405)
        r = http.get("/api/auth/me", headers={"X-Request-ID": "x" * 10_000})
        rid = r.headers.get("x-request-id", "")
        ctx.record(
            cat,
            "a 10,000-character X-Request-ID",
            "replaced by a short one",
            f"{len(rid)} characters",
            0 < len(rid) <= 64,
        )
    fields = "&".join(f"f{k}=v" for k in range(5000)).encode()
    status, _ = raw(ctx, "POST", "/login", {"Content-Type": "application/x-www-form-urlencoded"}, fields)
    ctx.record(cat, "a 5000-field login form", "4xx", str(status), 400 <= status < 500)


def images(ctx: Ctx) -> None:
    from PIL import Image

    cat = "huge and broken images"
    sids = {who: start_session(ctx, who, ctx.case, turns=0) for who in ("dan", "carl")}  # 12 uploads at once each

    def encoded(fmt: str, size: tuple[int, int] = (32, 64), mode: str = "RGB") -> bytes:
        buffer = io.BytesIO()
        Image.new(mode, size).save(buffer, fmt)
        return buffer.getvalue()

    tries = [
        ("a valid PNG (the control)", png_bytes(), "image/png", (200,)),
        ("a 20000x20000 PNG header", png_header(20000, 20000), "image/png", (413,)),
        ("a 100000x1000 PNG header", png_header(100_000, 1000), "image/png", (413,)),
        ("a 7000x7000 PNG header (49 Mpx)", png_header(7000, 7000), "image/png", (413,)),
        ("a 2^31-1 square PNG header", png_header(2**31 - 1, 2**31 - 1), "image/png", (413, 422)),
        ("an 8000x8000 PNG that decompresses (64 Mpx)", encoded("PNG", (8000, 8000), "L"), "image/png", (413,)),
        ("a 0x0 PNG header", png_header(0, 0), "image/png", (415, 422)),
        ("a truncated PNG", png_bytes()[:60], "image/png", (415, 422)),
        ("random bytes", secrets.token_bytes(2048), "image/png", (415, 422)),
        (
            "an SVG with a script",
            b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
            "image/svg+xml",
            (415, 422),
        ),
        ("a GIF", encoded("GIF"), "image/gif", (415, 422)),
        ("a TIFF", encoded("TIFF"), "image/tiff", (415, 422)),
        ("a PNG sent as image/jpeg", png_bytes(), "image/jpeg", (200, 415, 422)),
    ]
    for k, (name, data, content_type, statuses) in enumerate(tries):
        who = ("dan", "carl")[k % 2]
        with ctx.http(who) as http:
            r = http.post(f"/api/sessions/{sids[who]}/example/upload", files={"file": ("x", data, content_type)})
        ctx.record(cat, name, "/".join(map(str, statuses)), got(r), r.status_code in statuses)


# ----------------------------------------------------------------------------- login CSRF, headers, files
def login_csrf(ctx: Ctx) -> None:
    import httpx

    cat = "login CSRF"
    own = ctx.url
    for name, headers in (
        ("Origin another site", {"Origin": "https://evil.example"}),
        ("Referer another site", {"Referer": "https://evil.example/page"}),
        ("Sec-Fetch-Site cross-site", {"Sec-Fetch-Site": "cross-site"}),
        ("Origin null", {"Origin": "null"}),
        ("Origin this host as a subdomain of another", {"Origin": own + ".evil.example"}),
        ("Origin this host on another port", {"Origin": "http://127.0.0.1:1"}),
    ):
        for path in ("/api/auth/login", "/login"):
            body = {"username": "carl", "password": PASSWORD}
            r = httpx.post(
                own + path, headers=headers, **({"json": body} if path.startswith("/api") else {"data": body})
            )
            ctx.record(
                cat,
                f"{name}: POST {path}",
                "403, no cookie",
                got(r),
                r.status_code == 403 and "minterpr_session" not in r.cookies,
            )
    for path, status in (("/api/auth/login", 200), ("/login", 303)):
        body = {"username": "carl", "password": PASSWORD}
        r = httpx.post(
            own + path,
            headers={"Origin": own, "Sec-Fetch-Site": "same-origin"},
            **({"json": body} if path.startswith("/api") else {"data": body}),
        )
        ctx.record(cat, f"control: a same-origin POST {path}", str(status), got(r), r.status_code == status)


def csp(ctx: Ctx) -> None:

    cat = "Content-Security-Policy on pages"
    pages = [(p, "ana") for m, p in ctx.page_routes if m == "GET" and not p.startswith("/static")]
    pages += [("/login", None), ("/api/docs", None), ("/no/such/page", "ana"), (f"/cases/{10**6}", "ana")]
    for path, who in pages:
        who = "root" if who and "ingest" in path else who  # the ingestion pages are the admin's
        with ctx.http(who, via="cookie") if who else ctx.http(None) as http:
            r = http.get(fill(path, ctx))
        kind = r.headers.get("content-type", "")
        if not kind.startswith("text/html"):
            continue  # images, redirects: not pages
        policy = r.headers.get("content-security-policy", "")
        script = next((d for d in policy.split(";") if d.strip().startswith("script-src")), "")
        ok = (
            "frame-ancestors 'none'" in policy
            and "default-src 'self'" in policy
            and "unsafe-inline" not in script
            and r.headers.get("x-content-type-options") == "nosniff"
        )
        ctx.record(
            cat,
            f"GET {path} ({r.status_code})",
            "CSP self, no inline script, no framing; nosniff",
            policy[:60] or "no CSP",
            ok,
        )


def file_modes(ctx: Ctx) -> None:
    cat = "state file modes"
    files = [ctx.data / n for n in ("minterpr.db", "minterpr.db-wal", "minterpr.db-shm")]
    files += [p for p in (ctx.data / "uploads").rglob("*") if p.is_file()][:5]
    for path in files:
        if not path.exists():
            ctx.record(cat, path.name, "exists (0600)", "missing", path.name != "minterpr.db")
            continue
        mode = path.stat().st_mode & 0o777
        ctx.record(cat, str(path.relative_to(ctx.data)), "no group/other access", oct(mode), not mode & 0o077)


ROBUST = {
    "traversal": traversal,
    "malformed": malformed,
    "images": images,
    "login_csrf": login_csrf,
    "csp": csp,
    "file_modes": file_modes,
    "audit_tamper": audit_tamper,
}
