"""Small holes closed: login CSRF, a Content-Security-Policy on pages, the database readable by its
owner only, oversized image headers, who acted recorded with every move, audit lines safe for
JavaScript, the interactive API docs without a CDN."""

from __future__ import annotations

import json
import re
import stat
import struct
import zlib

import pytest
from fastapi.testclient import TestClient

from support.serving import PASSWORD, login, open_case, prepare, shared_world

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return shared_world(tmp_path_factory)


@pytest.fixture(scope="module")
def service(world, tmp_path_factory):
    from minterpr.serving.app import create_app

    services = prepare(tmp_path_factory.mktemp("state"), *world)
    with TestClient(create_app(services.settings, services), base_url="http://127.0.0.1") as client:
        yield client, services


def test_a_cross_site_login_is_refused(service):
    client, services = service
    form = {"username": "ana", "password": PASSWORD, "next": "/cases"}
    for header in (
        {"Origin": "https://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Referer": "https://evil.example/page"},
    ):
        client.cookies.clear()
        refused = client.post("/login", data=form, headers=header, follow_redirects=False)
        assert refused.status_code == 403 and "minterpr_session" not in refused.cookies, (header, refused.text)
        api = client.post("/api/auth/login", json={"username": "ana", "password": PASSWORD}, headers=header)
        assert api.status_code == 403 and api.json()["error"]["code"] == "csrf_failed"
    client.cookies.clear()
    same = client.post(
        "/login",
        data=form,
        headers={"Origin": "http://127.0.0.1", "Sec-Fetch-Site": "same-origin"},
        follow_redirects=False,
    )
    assert same.status_code == 303 and "minterpr_session" in same.cookies


def test_pages_carry_a_content_security_policy(service):
    client, _ = service
    client.cookies.clear()
    policy = client.get("/login").headers["content-security-policy"]
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy and "form-action 'self'" in policy
    assert "unsafe-inline" not in policy.split("script-src", 1)[1].split(";")[0]


def test_the_database_and_its_wal_are_readable_by_their_owner_only(service):
    client, services = service
    login(client, "ana")  # a write: the WAL exists
    files = [p for p in services.settings.data_dir.iterdir() if p.name.startswith("minterpr.db")]
    assert {p.name for p in files} >= {"minterpr.db", "minterpr.db-wal"}
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_a_huge_png_header_is_too_large_not_bad():
    from minterpr.serving.errors import ApiError
    from minterpr.serving.uploads import store_upload

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 20000, 20000, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"\x00" * 16))
        + chunk(b"IEND", b"")
    )
    with pytest.raises(ApiError) as caught:
        store_upload(png, "image/png", "unused", max_bytes=10**6, max_pixels=40_000_000)
    assert (caught.value.status, caught.value.code) == (413, "too_large")
    assert "20000x20000" in caught.value.message


def test_moves_record_how_the_user_acted(service):
    client, services = service
    headers = login(client, "ana")
    key = client.post("/api/keys", json={"name": "script"}, headers=headers).json()
    case = open_case(client, headers)
    sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()["session_id"]
    client.post(f"/api/sessions/{sid}/describe", json={"text": "a man in red"}, headers=headers)
    client.post(f"/api/sessions/{sid}/describe", json={"text": "with a bag"}, headers={"X-API-Key": key["key"]})
    moves = [e for e in services.audit.entries(limit=1000) if e["action"] == "query" and e["details"]["session"] == sid]
    assert [(m["details"]["via"], m["details"].get("key")) for m in moves] == [("cookie", None), ("api_key", key["id"])]
    start = [e for e in services.audit.entries(limit=1000) if e["action"] == "session_start"][-1]
    assert start["details"]["via"] == "cookie"


def test_audit_lines_escape_the_javascript_line_separators(service):
    from minterpr.serving.audit import verify_lines

    client, services = service
    services.audit.record(None, "test", None, {"text": "one\u2028two\u2029three"})
    lines = list(services.audit.export_lines())
    assert not any("\u2028" in line or "\u2029" in line for line in lines)
    assert json.loads(lines[-1])["details"]["text"] == "one\u2028two\u2029three"
    assert verify_lines(lines).ok


def test_the_api_docs_load_nothing_from_outside(service):
    client, _ = service
    page = client.get("/api/docs")
    assert page.status_code == 200
    sources = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", page.text)
    assert sources and not any(re.match(r"(https?:)?//", s) for s in sources), sources
    for source in sources:
        assert client.get(source).status_code == 200, source
    assert "unpkg" not in page.text and "jsdelivr" not in page.text
    assert client.get("/api/docs/static/LICENSE").status_code == 200


def test_the_api_docs_carry_a_content_security_policy_without_inline_script(service):
    """probe_service.py found /api/docs, the one HTML page without a policy (its Swagger UI was started
    by an inline script)."""
    client, _ = service
    page = client.get("/api/docs")
    policy = page.headers.get("content-security-policy", "")
    script = next(d for d in policy.split(";") if d.strip().startswith("script-src"))
    assert "frame-ancestors 'none'" in policy and "'self'" in script and "unsafe-inline" not in script, policy
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page.text, flags=re.S)
    assert scripts and all("src=" in attrs and not body.strip() for attrs, body in scripts), scripts
    init = client.get("/api/docs/init.js")
    assert init.status_code == 200 and "/api/openapi.json" in init.text


def test_uploaded_images_are_readable_by_their_owner_only(service):
    """An uploaded example is a picture of a person: probe_service.py found it stored 0644 (the umask's)."""
    import io

    from PIL import Image

    client, services = service
    headers = login(client, "ana")
    case = open_case(client, headers)
    sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()["session_id"]
    buffer = io.BytesIO()
    Image.new("RGB", (32, 64), (200, 10, 10)).save(buffer, "PNG")
    done = client.post(
        f"/api/sessions/{sid}/example/upload",
        files={"file": ("p.png", buffer.getvalue(), "image/png")},
        headers=headers,
    )
    assert done.status_code == 200, done.text
    stored = [p for p in services.settings.uploads_dir.rglob("*") if p.is_file()]
    assert stored
    for path in stored:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, path.parent
