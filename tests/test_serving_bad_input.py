"""Bad requests: every one is a clear 4xx in the one error shape, and changes nothing; a
property-based run over the OpenAPI spec (schemathesis) finds no 500."""

from __future__ import annotations

import io
import random
import struct
import zlib

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from support.serving import login, open_case, prepare, shared_world

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return shared_world(tmp_path_factory)


@pytest.fixture(scope="module")
def service(world, tmp_path_factory):
    from minterpr.serving.app import create_app

    services = prepare(
        tmp_path_factory.mktemp("state"),
        *world,
        max_request_bytes=64 * 1024,
        max_upload_bytes=32 * 1024,
        max_image_pixels=1_000_000,
    )
    client = TestClient(create_app(services.settings, services), raise_server_exceptions=False)
    with client:
        headers = login(client, "ana")
        case = open_case(client, headers)
        sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()[
            "session_id"
        ]
        yield client, headers, sid, services


def refused(response, status: int, code: str | None = None, field: str | None = None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "field"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code, body
    if field is not None:
        assert body["error"]["field"] == field, body
    return body["error"]


def _image(fmt: str, size=(32, 64)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (10, 200, 30)).save(buffer, fmt)
    return buffer.getvalue()


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height (no pixel data worth decoding)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"\x00" * 16))
        + chunk(b"IEND", b"")
    )


def test_bad_json_requests(service):
    client, headers, sid, _ = service
    url = f"/api/sessions/{sid}"
    refused(client.post(url + "/describe", json={"text": "x" * 1001}, headers=headers), 422, "invalid", "text")
    refused(client.post(url + "/describe", json={"text": ""}, headers=headers), 422, "invalid", "text")
    refused(client.post(url + "/describe", json={"text": "   "}, headers=headers), 422, "invalid_turn")
    for raw in (b'{"text": "a \\ud800 man"}', b'{"text": "a \\u0000 man"}'):
        refused(
            client.post(url + "/describe", content=raw, headers={**headers, "content-type": "application/json"}),
            422,
            "invalid",
            "text",
        )
    refused(
        client.post(url + "/describe", json={"text": "a man", "extra": 1}, headers=headers), 422, "invalid", "extra"
    )
    refused(
        client.post(url + "/describe", content=b"{not json", headers={**headers, "content-type": "application/json"}),
        422,
        "invalid",
    )
    refused(
        client.post(url + "/feedback", json={"gallery_index": "x", "text": "no"}, headers=headers),
        422,
        "invalid",
        "gallery_index",
    )
    refused(
        client.post(url + "/feedback", json={"gallery_index": 10**6, "text": "not him"}, headers=headers),
        422,
        "out_of_scope",
        "gallery_index",
    )
    refused(client.post(url + "/answer", json={"text": "red"}, headers=headers), 422, "invalid_turn")
    refused(client.post(url + "/undo", headers=headers), 422, "invalid_turn")
    refused(client.post("/api/sessions/not-a-session-id/undo", headers=headers), 422, "invalid", "session_id")
    refused(client.post(f"/api/sessions/{'0' * 32}/undo", headers=headers), 404, "not_found")
    refused(client.get("/api/nothing"), 404, "not_found")
    refused(client.delete("/api/cases"), 405, "method_not_allowed")
    refused(
        client.post(
            "/api/cases",
            json={"title": "t", "purpose": "short", "cameras": None, "start": None, "end": None},
            headers=headers,
        ),
        422,
        "invalid",
        "purpose",
    )
    refused(
        client.post("/api/cases", json={"title": "t", "purpose": "report 12, authorised"}, headers=headers),
        422,
        "invalid",
    )  # the scope must be stated, null included
    refused(
        client.post("/api/sessions", json={"case_id": 2**53 - 1, "gallery": "test"}, headers=headers),
        404,
        "not_found",
        "case_id",
    )
    refused(
        client.post("/api/sessions", json={"case_id": 2**53, "gallery": "test"}, headers=headers),
        422,
        "invalid",
        "case_id",
    )  # beyond what every JSON parser reads exactly
    assert client.get(url).json()["turns"] == 0  # nothing above changed the session


def test_integers_and_booleans_in_bodies_are_json_integers_and_booleans(service):
    """probe_service.py: lax parsing took ``true`` for gallery index 1 and ``"0"`` for 0, so a sloppy
    client's feedback landed on an image it never named."""
    client, headers, sid, _ = service
    url = f"/api/sessions/{sid}"
    for value in (True, False, "0", "1e0"):
        refused(
            client.post(url + "/feedback", json={"gallery_index": value, "text": "not him"}, headers=headers),
            422,
            "invalid",
            "gallery_index",
        )
        refused(
            client.post(url + "/example", json={"gallery_index": value}, headers=headers),
            422,
            "invalid",
            "gallery_index",
        )
    for value in ("true", 1):
        refused(
            client.post(url + "/confirm", json={"gallery_index": 0, "acknowledge": value}, headers=headers),
            422,
            "invalid",
            "acknowledge",
        )
    refused(
        client.post("/api/sessions", json={"case_id": "1", "gallery": "test"}, headers=headers),
        422,
        "invalid",
        "case_id",
    )
    case = client.get(url, headers=headers).json()["case_id"]  # a session of its own: the module's stays unmoved
    other = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()[
        "session_id"
    ]
    done = client.post(f"/api/sessions/{other}/example", json={"gallery_index": 0.0}, headers=headers)
    assert done.status_code == 200, done.text  # JSON Schema: 0.0 is an integer


def test_the_spec_describes_what_schemathesis_found_refused(service):
    """benchmarks/fuzz_service.py (schemathesis against a live server) found requests valid by the spec
    yet refused, and answers the spec does not name; the spec now says what the service does."""
    client, headers, sid, _ = service
    case = {
        "title": "t",
        "purpose": "report 7, authorised by the duty officer",
        "cameras": None,
        "start": None,
        "end": None,
    }
    # a time is an ISO 8601 string: a number of seconds was taken as a time
    refused(client.post("/api/cases", json={**case, "start": 1039}, headers=headers), 422, "invalid", "start")
    for field, value in (("cameras", []), ("cameras", [" "]), ("title", "   "), ("purpose", " x         ")):
        refused(client.post("/api/cases", json={**case, field: value}, headers=headers), 422, "invalid")
    schema = client.get("/api/openapi.json").json()
    body = schema["components"]["schemas"]["OpenCaseRequest"]["properties"]
    assert any(option.get("minItems") == 1 for option in body["cameras"]["anyOf"]), body["cameras"]
    case_id = schema["components"]["schemas"]["StartSessionRequest"]["properties"]["case_id"]
    assert case_id["maximum"] == 2**53 - 1  # ids every JSON parser reads exactly
    text = schema["components"]["schemas"]["DescribeRequest"]["properties"]["text"]
    assert text["pattern"] == "^[^\\x00]*$"  # no NUL: refused before, now said
    ack = schema["components"]["schemas"]["ConfirmRequest"]["properties"]["acknowledge"]
    assert ack.get("const") is True
    name = schema["components"]["schemas"]["RegisterGalleryRequest"]["properties"]["name"]
    assert name["pattern"] == "^[A-Za-z0-9][A-Za-z0-9_.-]*$"  # a field's own pattern is kept
    # a body that is not text: 400 in the one error shape, and the spec lists 400
    refused(
        client.post(
            f"/api/sessions/{sid}/describe",
            content=b'{"text": "\x80"}',
            headers={**headers, "content-type": "application/json"},
        ),
        400,
        "bad_request",
    )
    assert "400" in schema["paths"]["/api/sessions/{session_id}/describe"]["post"]["responses"]
    # 405 names every method of the path (Starlette named the first route's only)
    answer = client.request("OPTIONS", "/api/admin/users", headers=headers)
    assert answer.status_code == 405 and answer.headers["allow"] == "GET, POST", answer.headers


def test_request_size_is_capped(service):
    client, headers, sid, _ = service
    url = f"/api/sessions/{sid}/describe"
    refused(
        client.post(url, content=b"x" * (65 * 1024), headers={**headers, "content-type": "application/json"}),
        413,
        "too_large",
    )

    def chunks():
        for _ in range(70):
            yield b"x" * 1024

    refused(
        client.post(url, content=chunks(), headers={**headers, "content-type": "application/json"}), 413, "too_large"
    )


def test_bad_uploads(service):
    client, headers, sid, services = service
    url = f"/api/sessions/{sid}/example/upload"

    def upload(data: bytes, kind: str):
        return client.post(url, files={"file": ("x", data, kind)}, headers=headers)

    refused(upload(_image("GIF"), "image/gif"), 415, "unsupported_media_type", "file")
    refused(upload(_image("JPEG"), "image/png"), 415, "unsupported_media_type", "file")
    refused(upload(b"", "image/png"), 422, "bad_image", "file")
    refused(upload(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "image/png"), 422, "bad_image", "file")
    refused(upload(_image("PNG")[:60], "image/png"), 422, "bad_image", "file")  # truncated
    refused(upload(_png_header(5000, 5000), "image/png"), 413, "too_large", "file")  # 25 Mpx claimed
    noisy = Image.frombytes("RGB", (120, 120), random.Random(0).randbytes(120 * 120 * 3))  # ~43 KB as PNG
    buffer = io.BytesIO()
    noisy.save(buffer, "PNG")
    refused(upload(buffer.getvalue(), "image/png"), 413, "too_large", "file")  # > 32 KiB
    # the limits are stated, in one line (issue 36)
    assert upload(buffer.getvalue(), "image/png").json()["error"]["message"] == (
        "the image has more than the 32 KiB an upload may have (the server's max_upload_bytes): send a smaller copy"
    )
    assert (
        upload(_png_header(5000, 5000), "image/png")
        .json()["error"]["message"]
        .startswith("the image is 5000x5000: more than ")
    )
    assert "max_image_pixels" in upload(_png_header(5000, 5000), "image/png").json()["error"]["message"]
    refused(client.post(url, headers=headers), 422, "invalid", "file")
    assert client.get(f"/api/sessions/{sid}").json()["turns"] == 0
    assert not (services.settings.uploads_dir / sid).exists() or not any(
        (services.settings.uploads_dir / sid).iterdir()
    )
    done = upload(_image("WEBP"), "image/webp")
    assert done.status_code == 200 and done.json()["turns"] == 1


@pytest.mark.slow
def test_fuzz_the_openapi_spec_finds_no_server_error(service, tmp_path):
    """schemathesis generates requests for every operation of the spec, valid and not; with an
    admin's API key (every permission but the auditor's) half of the session and case ids are real."""
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, settings
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

    client, headers, sid, services = service
    admin = TestClient(client.app)
    admin_headers = login(admin, "root")
    key = admin.post("/api/keys", json={"name": "fuzz"}, headers=admin_headers).json()["key"]
    case = open_case(admin, admin_headers)
    own = admin.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=admin_headers).json()
    admin.post(f"/api/sessions/{own['session_id']}/describe", json={"text": "a man in red"}, headers=admin_headers)
    schema = schemathesis.openapi.from_asgi("/api/openapi.json", client.app).exclude(
        path_regex="^/api/(keys/\\{key_id\\}|auth/logout|admin/retention)$"
    )  # would end the fuzzing's own access
    seen: dict[str, int] = {}
    succeeded: set[str] = set()  # operations that answered a documented success at least once

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case) -> None:
        params = case.path_parameters or {}
        if "session_id" in params and str(params["session_id"])[:1] in "01234567":
            params["session_id"] = own["session_id"]
        if "case_id" in params and isinstance(params["case_id"], int) and params["case_id"] % 2:
            params["case_id"] = case_id_real
        response = case.call(headers={"X-API-Key": key})
        seen[case.operation.label] = seen.get(case.operation.label, 0) + 1
        if 200 <= response.status_code < 300:
            succeeded.add(case.operation.label)
        case.validate_response(
            response, checks=[not_a_server_error, status_code_conformance, response_schema_conformance]
        )
        if response.status_code >= 400:
            body = response.json()
            assert set(body) == {"error"} and {"code", "message", "field"} == set(body["error"]), body

    case_id_real = case
    operations = list(schema.get_all_operations())
    for result in operations:
        operation = result.ok()
        from hypothesis import given

        given(operation.as_strategy())(check)()
    assert len(seen) >= 25, sorted(seen)
    # with real ids half the time, the reads by id must succeed (not only "no 500"); every operation's
    # documented success is reached by a valid request in tests/test_serving_routes.py
    reads = {
        "GET /api/cases/{case_id}",
        "GET /api/cases/{case_id}/sessions",
        "GET /api/sessions/{session_id}",
        "GET /api/cases",
        "GET /api/galleries",
        "GET /api/auth/me",
    }
    assert reads <= succeeded, sorted(reads - succeeded)
