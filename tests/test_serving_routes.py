"""Every operation of the OpenAPI spec answers its documented success to a valid request, and the
spec names each path's parameters as the path does (a fuzzer that only looks for 500s misses a
route that answers 422 to everything)."""

from __future__ import annotations

import io
import re
import shutil
import threading

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from support.serving import PASSWORD, login, open_case, prepare, shared_world

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return shared_world(tmp_path_factory)


def _client(world, folder, **overrides):
    from minterpr.serving.app import create_app

    services = prepare(folder, *world, import_roots=(world[1].parent,), **overrides)
    shutil.copytree(world[1].parent / "crops", services.settings.incoming_dir / "lobby")
    return TestClient(create_app(services.settings, services)), services


@pytest.fixture()
def service(world, tmp_path):
    from minterpr.vlm.config import VLMConfig

    # a model no use is switched on for (sessions ask it nothing): what the caption route needs to queue a job
    client, services = _client(world, tmp_path / "state", vlm=VLMConfig("http://127.0.0.1:9/v1", "m"))
    with client:
        yield client, services


def _operations(spec: dict) -> dict[tuple[str, str], dict]:
    return {(method.upper(), path): op for path, ops in spec["paths"].items() for method, op in ops.items()}


def test_every_path_parameter_is_named_as_in_its_path(service):
    client, _ = service
    for (method, path), op in _operations(client.get("/api/openapi.json").json()).items():
        declared = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
        assert declared == set(re.findall(r"\{(\w+)\}", path)), (method, path, declared)


def test_every_documented_success_is_reachable(service, world):
    client, services = service
    operations = _operations(client.get("/api/openapi.json").json())
    reached: set[tuple[str, str]] = set()

    def call(method: str, template: str, url: str | None = None, **kwargs):
        response = client.request(method, url or template, **kwargs)
        successes = {int(code) for code in operations[(method, template)]["responses"] if code.startswith("2")}
        assert response.status_code in successes, (method, url or template, response.status_code, response.text)
        reached.add((method, template))
        return response

    call("GET", "/healthz")
    headers = {
        "X-CSRF-Token": call("POST", "/api/auth/login", json={"username": "root", "password": PASSWORD}).json()[
            "csrf_token"
        ]
    }
    call("GET", "/api/auth/me")
    key = call("POST", "/api/keys", json={"name": "routes"}, headers=headers).json()
    call("GET", "/api/keys")
    call("DELETE", "/api/keys/{key_id}", f"/api/keys/{key['id']}", headers=headers)
    call("GET", "/api/galleries")
    call(
        "POST",
        "/api/galleries",
        json={"name": "again", "directory": str(world[1]), "run_dir": str(world[0])},
        headers=headers,
    )
    case = call(
        "POST",
        "/api/cases",
        json={
            "title": "routes",
            "purpose": "report 2026-17, duty officer",
            "cameras": None,
            "start": None,
            "end": None,
        },
        headers=headers,
    ).json()["id"]
    call("GET", "/api/cases")
    call("GET", "/api/cases/{case_id}", f"/api/cases/{case}")
    view = call("POST", "/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()
    url = f"/api/sessions/{view['session_id']}"
    call("GET", "/api/cases/{case_id}/sessions", f"/api/cases/{case}/sessions")
    call("GET", "/api/sessions/{session_id}", url)
    first = call(
        "POST", "/api/sessions/{session_id}/describe", url + "/describe", json={"text": "a man in red"}, headers=headers
    ).json()["results"][0]["gallery_index"]
    call("POST", "/api/sessions/{session_id}/undo", url + "/undo", headers=headers)
    action = call(
        "POST", "/api/sessions/{session_id}/describe", url + "/describe", json={"text": "in jeans"}, headers=headers
    ).json()["action"]
    if action and action["kind"] == "question":
        call("POST", "/api/sessions/{session_id}/answer", url + "/answer", json={"text": "not sure"}, headers=headers)
    else:  # an untrained model asks no questions; answering is tested in tests/test_session.py
        refused = client.post(url + "/answer", json={"text": "not sure"}, headers=headers)
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_turn", refused.text
        reached.add(("POST", "/api/sessions/{session_id}/answer"))
    call(
        "POST",
        "/api/sessions/{session_id}/feedback",
        url + "/feedback",
        json={"gallery_index": first, "text": "maybe"},
        headers=headers,
    )
    call("POST", "/api/sessions/{session_id}/example", url + "/example", json={"gallery_index": first}, headers=headers)
    buffer = io.BytesIO()
    Image.new("RGB", (32, 64), (10, 200, 30)).save(buffer, "JPEG")
    call(
        "POST",
        "/api/sessions/{session_id}/example/upload",
        url + "/example/upload",
        files={"file": ("x.jpg", buffer.getvalue(), "image/jpeg")},
        headers=headers,
    )
    call("GET", "/api/sessions/{session_id}/images/{gallery_index}", f"{url}/images/{first}")
    call(
        "GET", "/api/sessions/{session_id}/images/{gallery_index}/frame", f"{url}/images/0/frame"
    )  # person 0 has frames
    call(
        "POST",
        "/api/sessions/{session_id}/confirm",
        url + "/confirm",
        json={"gallery_index": first, "acknowledge": True},
        headers=headers,
    )
    refused = client.get(f"{url}/follow/{first}")  # a gallery without appearance vectors (tests/test_follow.py)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "no_appearance", refused.text
    reached.add(("GET", "/api/sessions/{session_id}/follow/{gallery_index}"))
    call("POST", "/api/sessions/{session_id}/export", url + "/export", headers=headers)
    call("POST", "/api/cases/{case_id}/close", f"/api/cases/{case}/close", headers=headers)
    assert client.get(f"/api/cases/{case}").json()["status"] == "closed"
    call("GET", "/api/admin/users")
    call(
        "POST",
        "/api/admin/users",
        json={"username": "newcomer", "password": PASSWORD, "role": "viewer"},
        headers=headers,
    )
    call("POST", "/api/admin/retention", json={"days": 3650}, headers=headers)
    gate = threading.Event()
    services.jobs._pool.submit(gate.wait, 30)  # occupy the single worker: the job waits in the queue
    body = {"gallery": "lobby", "source": str(services.settings.incoming_dir / "lobby"), "run": str(world[0])}
    job = call("POST", "/api/ingest", json=body, headers=headers).json()["id"]
    call("GET", "/api/ingest")
    call("GET", "/api/ingest/{job_id}", f"/api/ingest/{job}")
    call("POST", "/api/ingest/{job_id}/cancel", f"/api/ingest/{job}/cancel", headers=headers)
    captioning = call("POST", "/api/ingest/caption", json={"gallery": "test"}, headers=headers).json()["id"]
    assert client.post(f"/api/ingest/{captioning}/cancel", headers=headers).json()["kind"] == "caption"
    gate.set()
    services.jobs.wait(job)
    assert services.jobs.wait(captioning).status == "cancelled"  # before it asked the model anything
    resumed = call("POST", "/api/ingest/{job_id}/resume", f"/api/ingest/{job}/resume", headers=headers).json()["id"]
    services.jobs.wait(resumed)
    call("GET", "/api/ingest/{job_id}/events", f"/api/ingest/{job}/events")
    auditor = TestClient(client.app)
    login(auditor, "aud")
    for path in ("/api/audit/entries", "/api/audit/export", "/api/audit/verify"):
        response = auditor.get(path)
        assert response.status_code == 200, (path, response.text)
        reached.add(("GET", path))
    call("POST", "/api/auth/logout", headers=headers)
    assert set(operations) - reached == set()


def _jpeg() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 64), (200, 30, 10)).save(buffer, "JPEG")
    return buffer.getvalue()


def test_uploads_work_with_a_relative_data_folder(world, tmp_path, monkeypatch):
    from pathlib import Path

    from minterpr.serving.app import create_app

    monkeypatch.chdir(tmp_path)
    services = prepare(Path("state"), *world)  # as `minterpr serve --data state`
    with TestClient(create_app(services.settings, services)) as client:
        headers = login(client, "ana")
        case = open_case(client, headers)
        sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()[
            "session_id"
        ]
        done = client.post(
            f"/api/sessions/{sid}/example/upload", files={"file": ("x.jpg", _jpeg(), "image/jpeg")}, headers=headers
        )
        assert done.status_code == 200 and done.json()["turns"] == 1, done.text
        services.search.forget()  # replayed from the stored events: the upload is found again
        assert client.get(f"/api/sessions/{sid}").json()["turns"] == 1


def test_error_messages_name_no_server_folder():
    from minterpr.errors import ImageError, TurnError
    from minterpr.serving.errors import from_library, public_message

    err = from_library(ImageError("/srv/minterpr/galleries/lobby/crops/p1_0.png", "truncated"))
    assert (err.status, err.code, err.message) == (422, "bad_image", "p1_0.png: truncated")
    said = public_message(str(TurnError("image path 'a/b.png': no such image file (/home/ana/out/uploads/ab/c.png)")))
    assert "/home" not in said and "c.png" in said and "'a/b.png'" in said


def test_uploads_are_checked_before_anything_is_stored(world, tmp_path):
    from minterpr.serving.settings import RateSpec

    client, services = _client(world, tmp_path / "state", upload_rate=RateSpec(0.001, 3))
    client.__enter__()
    headers = login(client, "ana")
    sid = client.post(
        "/api/sessions", json={"case_id": open_case(client, headers), "gallery": "test"}, headers=headers
    ).json()["session_id"]
    bob = TestClient(client.app)
    bob_headers = login(bob, "bob")
    uploads = services.settings.uploads_dir

    def stored() -> list[str]:
        return sorted(str(p.relative_to(uploads)) for p in uploads.rglob("*")) if uploads.exists() else []

    def upload(who: TestClient, session: str, who_headers: dict):
        return who.post(
            f"/api/sessions/{session}/example/upload",
            files={"file": ("x.jpg", _jpeg(), "image/jpeg")},
            headers=who_headers,
        )

    assert upload(client, "0" * 32, headers).status_code == 404
    assert upload(bob, sid, bob_headers).status_code == 403  # another analyst's session
    assert stored() == []
    answers = [upload(client, sid, headers).status_code for _ in range(services.settings.upload_rate.burst + 3)]
    assert answers.count(200) == services.settings.upload_rate.burst and answers[-1] == 429, answers
    assert len(stored()) == 2  # the session's folder and the one image (named by content)
    client.__exit__(None, None, None)


def test_reads_by_others_and_refusals_are_audited(service):
    client, services = service
    headers = login(client, "ana")
    case = open_case(client, headers)
    view = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()
    sid = view["session_id"]
    first = client.post(f"/api/sessions/{sid}/describe", json={"text": "a man in red"}, headers=headers).json()[
        "results"
    ][0]["gallery_index"]
    before = services.audit.head()[0]
    vic = TestClient(client.app)
    vic_headers = login(vic, "vic")
    assert vic.get(f"/api/sessions/{sid}").status_code == 200
    assert vic.get(f"/api/sessions/{sid}/images/{first}?full=true").status_code == 200
    frame = client.get(f"/api/sessions/{sid}/images/1/frame")  # the analyst's own read of a frame: audited too
    assert frame.status_code == 200 and frame.headers["content-type"] == "image/jpeg"
    with Image.open(io.BytesIO(frame.content)) as drawn:  # the box (x 48-80, y 16-80) drawn in amber
        assert drawn.size == (128, 96) and drawn.getpixel((48, 40))[2] < 90 < drawn.getpixel((48, 40))[0]
    missing = client.get(f"/api/sessions/{sid}/images/5/frame")  # person 1: a crop without its frame
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "frame_unavailable"
    assert (
        vic.post(
            "/api/cases",
            json={"title": "t", "purpose": "report 12, authorised", "cameras": None, "start": None, "end": None},
            headers=vic_headers,
        ).status_code
        == 403
    )
    assert (
        client.post(
            "/api/admin/users", json={"username": "mal", "password": PASSWORD, "role": "admin"}, headers=headers
        ).status_code
        == 403
    )
    bob = TestClient(client.app)
    bob_headers = login(bob, "bob")
    assert bob.post(f"/api/sessions/{sid}/describe", json={"text": "x y"}, headers=bob_headers).status_code == 403
    logged = [e for e in services.audit.entries(after=before, limit=100) if e["action"] != "login"]
    said = [
        (
            e["user"],
            e["action"],
            e["case"],
            e["details"].get("path"),
            e["details"].get("status"),
            e["details"].get("code"),
        )
        for e in logged
    ]
    assert said == [
        ("vic", "session_read", case, None, None, None),
        ("vic", "image_read", case, None, None, None),
        ("ana", "frame_read", case, None, None, None),
        ("vic", "refused", None, "/api/cases", 403, "forbidden"),
        ("ana", "refused", None, "/api/admin/users", 403, "forbidden"),
        ("bob", "refused", None, f"/api/sessions/{sid}/describe", 403, "forbidden"),
    ], said
    assert logged[0]["details"] == {"session": sid}
    assert logged[1]["details"] == {"session": sid, "gallery_index": first, "full": True}
    assert logged[2]["details"] == {"session": sid, "gallery_index": 1}
    assert logged[3]["details"]["method"] == "POST" and logged[3]["details"]["via"] == "cookie"
    assert services.audit.verify().ok
