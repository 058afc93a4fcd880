"""Ingestion jobs through the service: start, live progress (polled and server-sent), cancel,
the new gallery searchable when the job is done; sources only from the allowed folders."""

from __future__ import annotations

import json
import shutil
import threading

import pytest
from fastapi.testclient import TestClient

from support.serving import login, open_case, prepare, shared_world

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return shared_world(tmp_path_factory)


@pytest.fixture()
def admin(world, tmp_path):
    from minterpr.serving.app import create_app

    services = prepare(tmp_path / "state", *world)
    incoming = services.settings.incoming_dir / "lobby"
    shutil.copytree(world[1].parent / "crops", incoming)
    client = TestClient(create_app(services.settings, services))
    with client:
        yield client, login(client, "root"), services, incoming


def test_a_folder_of_crops_becomes_a_searchable_gallery(admin, world):
    client, headers, services, incoming = admin
    body = {
        "gallery": "lobby",
        "source": str(incoming),
        "run": str(world[0]),
        "camera": "lobby:cam1",
        "start": "2026-03-05T10:00:00Z",
    }
    started = client.post("/api/ingest", json=body, headers={**headers, "X-Request-ID": "ingest-1"})
    assert started.status_code == 202, started.text
    job = started.json()
    assert job["status"] in ("queued", "running", "done")
    with client.stream("GET", f"/api/ingest/{job['id']}/events") as stream:
        events = [line for line in stream.iter_lines() if line.startswith("event:") or line.startswith("data:")]
    assert events[-2] == "event: end" and json.loads(events[-1][5:])["status"] == "done"
    done = client.get(f"/api/ingest/{job['id']}").json()
    assert done["status"] == "done" and done["progress"]["result"]["rows_added"] == 24, done
    assert done["message"] == "24 images added to lobby"
    galleries = {g["name"]: g for g in client.get("/api/galleries").json()}
    assert galleries["lobby"]["images"] == 24 and galleries["lobby"]["cameras"] == ["lobby:cam1"]
    assert galleries["lobby"]["time_start"].startswith("2026-03-05T10:00:00")
    case = open_case(client, headers, cameras=["lobby:cam1"])
    view = client.post("/api/sessions", json={"case_id": case, "gallery": "lobby"}, headers=headers).json()
    view = client.post(f"/api/sessions/{view['session_id']}/describe", json={"text": "a man"}, headers=headers).json()
    assert len(view["results"]) == 10 and view["results"][0]["camera"] == "lobby:cam1"
    again = client.post("/api/ingest", json=body, headers=headers).json()  # the same job again: nothing redone
    assert services.jobs.wait(again["id"]).status == "done"
    assert client.get("/api/galleries").json()[0]["images"] == 24
    assert client.post(f"/api/ingest/{job['id']}/cancel", headers=headers).status_code == 409
    actions = [e["action"] for e in services.audit.entries(limit=1000)]
    assert actions.count("ingest_start") == 2 and actions.count("ingest_done") == 2
    # the job's entries, written by its thread, carry the id of the request that started it
    first = [e["action"] for e in services.audit.entries(limit=1000) if e["request"] == "ingest-1"]
    assert first == ["ingest_start", "gallery_register", "ingest_done"]


def test_a_queued_job_is_cancelled_and_sources_are_checked(admin, world, tmp_path):
    client, headers, services, incoming = admin
    gate = threading.Event()
    services.jobs._pool.submit(gate.wait, 30)  # occupy the single worker: the next job waits in the queue
    body = {"gallery": "lobby", "source": str(incoming), "run": str(world[0])}
    job = client.post("/api/ingest", json=body, headers=headers).json()
    assert job["status"] == "queued"
    cancelled = client.post(f"/api/ingest/{job['id']}/cancel", headers=headers)
    assert cancelled.status_code == 200
    gate.set()
    assert services.jobs.wait(job["id"]).status == "cancelled"
    assert "lobby" not in {g["name"] for g in client.get("/api/galleries").json()}
    outside = client.post("/api/ingest", json={**body, "source": str(tmp_path)}, headers=headers)
    assert outside.status_code == 403 and outside.json()["error"]["code"] == "outside_roots"
    missing = client.post("/api/ingest", json={**body, "source": str(incoming / "nothing")}, headers=headers)
    assert missing.status_code == 422 and missing.json()["error"]["field"] == "source"
    no_run = client.post("/api/ingest", json={"gallery": "other", "source": str(incoming)}, headers=headers)
    assert no_run.status_code == 422 and no_run.json()["error"]["field"] == "run"
    analyst = TestClient(client.app)
    assert analyst.post("/api/ingest", json=body, headers=login(analyst, "ana")).status_code == 403


def _frames(folder, count=8):
    """A folder of ``count`` 128 x 96 frames of one video."""
    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for k in range(count):
        Image.fromarray(rng.integers(0, 255, (96, 128, 3), dtype=np.uint8)).save(folder / f"{k:03d}.png")
    return folder


def test_a_job_with_an_onnx_detector_and_its_checks(admin, world, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from support.onnx_models import constant_detector_model

    client, headers, services, incoming = admin
    root = services.settings.incoming_dir
    frames = _frames(root / "clip")
    # two people side by side (overlapping boxes would be "crowded": tracked, never cropped)
    model = constant_detector_model(root / "det.onnx", [[8, 4, 28, 60, 0.9, 0], [30, 2, 60, 62, 0.8, 0]])
    crowded = constant_detector_model(root / "crowded.onnx", [[8, 4, 40, 60, 0.9, 0], [30, 2, 60, 62, 0.8, 0]])
    body = {
        "gallery": "clip",
        "source": str(frames),
        "frames": True,
        "every": 1,
        "run": str(world[0]),
        "detector": "onnx",
        "detector_model": model,
    }
    refused = {
        "no model": ({**body, "detector_model": None}, 422),
        "model with hog": ({**body, "detector": "hog"}, 422),
        "outside the roots": ({**body, "detector_model": str(tmp_path / "det.onnx")}, 403),
        "not a model": ({**body, "detector_model": str(frames / "000.png")}, 422),
    }
    for name, (request, status) in refused.items():
        answer = client.post("/api/ingest", json=request, headers=headers)
        assert answer.status_code == status, (name, answer.text)
        assert answer.json()["error"]["field"] == "detector_model", name
    # yolox-nano not in the server's model cache (the tests' is empty): refused before anything runs
    answer = client.post(
        "/api/ingest", json={**body, "detector": "yolox-nano", "detector_model": None}, headers=headers
    )
    assert answer.status_code == 422 and "minterpr models fetch yolox-nano" in answer.json()["error"]["message"]
    job = client.post("/api/ingest", json=body, headers=headers).json()
    done = services.jobs.wait(job["id"])
    assert done.status == "done", done.message
    assert done.progress["result"]["tracks"] >= 1 and done.progress["detections"] == 16  # 2 per frame
    stored = client.get(f"/api/ingest/{job['id']}").json()
    assert stored["status"] == "done" and stored["progress"]["result"]["rejected"] == {}
    job = client.post(
        "/api/ingest", json={**body, "gallery": "crowd", "detector_model": crowded}, headers=headers
    ).json()
    done = services.jobs.wait(job["id"])  # every detection crowded: no store, and the job says why
    assert done.status == "failed" and "no crops of one person were kept" in done.message
    assert "crowded" in done.message and "crowd" not in {
        g["name"] for g in client.get("/api/galleries", headers=headers).json()
    }
    # the default detector: no YOLOX-nano in the (tests' empty) model cache, so HOG, and the job says so
    job = client.post(
        "/api/ingest", json={**body, "gallery": "auto", "detector": "auto", "detector_model": None}, headers=headers
    ).json()
    done = services.jobs.wait(job["id"])  # HOG finds nobody in noise: no crops, and why, and the fallback
    assert "people detector: OpenCV's HOG" in done.message and "minterpr models fetch yolox-nano" in done.message


def test_the_ingest_page_chooses_the_detector_and_shows_progress(admin, world):
    import re

    client, headers, services, incoming = admin
    page = client.get("/ingest")
    assert page.status_code == 200, page.text[:2000]
    html = page.text
    assert 'name="detector" value="hog"' in html and 'name="detector" value="onnx"' in html
    assert 'name="detector_model"' in html and "No ingestion jobs yet." in html
    assert 'name="detector" value="auto" checked' in html and 'name="detector" value="yolox-nano"' in html
    from minterpr.models.zoo import DEFAULT_REAL_MODEL, shipped_models_dir

    shipped = str(shipped_models_dir() / DEFAULT_REAL_MODEL)  # the model list: the shipped one preselected
    assert f'<option value="{shipped}" selected>shipped: {DEFAULT_REAL_MODEL}' in html
    assert f'<option value="{world[0]}">run: {world[0]}</option>' in html  # the registered gallery's run
    assert 'id="every" name="every" type="number"' in html and 'id="best_k" name="best_k" type="number"' in html
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)
    form = {"csrf_token": csrf, "gallery": "lobby", "source": str(incoming), "run": str(world[0]), "detector": "onnx"}
    refused = client.post("/ingest", data=form)
    assert refused.status_code == 422 and 'role="alert"' in refused.text
    assert 'id="detector_model" name="detector_model"' in refused.text and 'aria-invalid="true"' in refused.text
    assert f'value="{incoming}"' in refused.text  # what was typed is kept
    wrong = client.post("/ingest", data={**form, "detector": "hog", "every": "2.5"})  # not a whole number: its field
    assert wrong.status_code == 422 and "every: a whole number" in wrong.text and 'aria-invalid="true"' in wrong.text
    assert f'<option value="{world[0]}" selected>' in wrong.text  # the model chosen is kept
    started = client.post(
        "/ingest", data={**form, "detector": "hog", "every": "1", "best_k": "2"}, follow_redirects=False
    )
    assert started.status_code == 303 and started.headers["location"] == "/ingest"
    job = services.jobs.list()[-1]
    assert services.jobs.wait(job.id).status == "done"
    fragment = client.get("/ingest/jobs")
    assert fragment.status_code == 200
    assert f'data-job="{job.id}" data-status="done"' in fragment.text
    assert '<progress max="1" value="1">' in fragment.text and "24 images added to lobby" in fragment.text
    assert "hx-trigger" not in fragment.text  # nothing runs: the page stops polling
    assert "/ingest" in client.get("/cases").text  # the admin's menu links it


def test_the_ingest_page_is_for_admins(admin, world):
    from support.serving import USERS, login

    client, headers, services, incoming = admin
    client.cookies.clear()
    assert client.get("/ingest", follow_redirects=False).headers["location"].startswith("/login")
    analyst = next(name for name, role in USERS.items() if role == "analyst")
    login(client, analyst)
    assert client.get("/ingest").status_code == 403 and client.get("/ingest/jobs").status_code == 403
    assert 'href="/ingest"' not in client.get("/cases").text


def test_a_cancelled_job_resumes_by_its_id(admin, world):
    client, headers, services, incoming = admin
    gate = threading.Event()
    services.jobs._pool.submit(gate.wait, 30)  # occupy the single worker: the job waits in the queue
    body = {"gallery": "lobby", "source": str(incoming), "run": str(world[0]), "camera": "lobby:cam1"}
    job = client.post("/api/ingest", json=body, headers=headers).json()
    early = client.post(f"/api/ingest/{job['id']}/resume", headers=headers)  # not stopped: nothing to resume
    assert (
        early.status_code == 409 and "only a cancelled, interrupted or failed job" in early.json()["error"]["message"]
    )
    assert client.post(f"/api/ingest/{job['id']}/cancel", headers=headers).status_code == 200
    gate.set()
    assert services.jobs.wait(job["id"]).status == "cancelled"
    resumed = client.post(f"/api/ingest/{job['id']}/resume", headers=headers)
    assert resumed.status_code == 202, resumed.text
    again = resumed.json()
    assert again["id"] != job["id"] and again["gallery"] == "lobby" and again["source"] == str(incoming.absolute())
    done = services.jobs.wait(again["id"])
    assert done.status == "done" and done.message == "24 images added to lobby"
    assert client.get("/api/galleries").json()[0]["cameras"] == ["lobby:cam1"]  # the recorded request, camera and all
    assert client.post(f"/api/ingest/{again['id']}/resume", headers=headers).status_code == 409  # done
    assert client.post(f"/api/ingest/{'0' * 32}/resume", headers=headers).status_code == 404
    resume = [e for e in services.audit.entries(limit=1000) if e["action"] == "ingest_resume"]
    assert len(resume) == 1 and resume[0]["details"] == {"job": again["id"], "resumes": job["id"]}
    # the page: a Resume button on the stopped job, none on the finished one; it posts as the API does
    import re

    fragment = client.get("/ingest/jobs").text
    assert fragment.count(">Resume</button>") == 1 and f'action="/ingest/{job["id"]}/resume"' in fragment
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/ingest").text).group(1)
    posted = client.post(f"/ingest/{job['id']}/resume", data={"csrf_token": csrf}, follow_redirects=False)
    assert posted.status_code == 303 and services.jobs.wait(services.jobs.list()[-1].id).status == "done"
    refused = client.post(f"/ingest/{again['id']}/resume", data={"csrf_token": csrf})
    assert refused.status_code == 409 and 'role="alert"' in refused.text


def test_a_video_uploaded_from_the_page_is_checked_then_becomes_the_source(admin, world, tmp_path):
    import re

    cv2 = pytest.importorskip("cv2")
    import numpy as np

    client, headers, services, incoming = admin
    video = tmp_path / "cam.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (128, 96))
    for k in range(12):
        writer.write(np.full((96, 128, 3), 20 * k, np.uint8))
    writer.release()
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/ingest").text).group(1)
    assert 'enctype="multipart/form-data"' in client.get("/ingest").text
    uploads = services.settings.incoming_dir / "uploads"
    not_video = client.post(
        "/ingest/upload", data={"csrf_token": csrf}, files={"video": ("cam.mp4", b"not a video", "video/mp4")}
    )
    assert not_video.status_code == 422 and "not a video that can be read" in not_video.text
    assert 'id="video" name="video" type="file"' in not_video.text and 'aria-invalid="true"' in not_video.text
    assert not uploads.exists() or not any(uploads.iterdir())  # nothing kept
    named = client.post("/ingest/upload", data={"csrf_token": csrf}, files={"video": ("notes.txt", b"x", "text/plain")})
    assert named.status_code == 415 and "not a video file name" in named.text
    big = b"\0" * (services.settings.max_request_bytes + 1024)  # past any other request's cap, under a video's
    assert (
        client.post("/ingest", data={"csrf_token": csrf}, files={"video": ("cam.mp4", big, "video/mp4")}).status_code
        == 413
    )
    large = client.post("/ingest/upload", data={"csrf_token": csrf}, files={"video": ("cam.mp4", big, "video/mp4")})
    assert large.status_code == 422 and "not a video that can be read" in large.text  # read whole, then refused
    none = client.post("/ingest/upload", data={"csrf_token": csrf})
    assert none.status_code == 422 and "choose a video file" in none.text
    done = client.post(
        "/ingest/upload", data={"csrf_token": csrf}, files={"video": ("cam.avi", video.read_bytes(), "video/x-msvideo")}
    )
    assert done.status_code == 200 and 'id="upload-done"' in done.text
    stored = list(uploads.iterdir())
    assert len(stored) == 1 and stored[0].suffix == ".avi" and stored[0].read_bytes() == video.read_bytes()
    assert f'value="{stored[0]}"' in done.text  # the form's source is the upload
    assert (
        client.post("/ingest/upload", files={"video": ("cam.avi", video.read_bytes(), "video/x-msvideo")}).status_code
        == 403
    )
    form = {"csrf_token": csrf, "gallery": "street", "source": str(stored[0]), "run": str(world[0]), "detector": "hog"}
    assert client.post("/ingest", data=form, follow_redirects=False).status_code == 303
    ran = services.jobs.wait(services.jobs.list()[-1].id)  # grey frames: no person, so no crop (a failed job says so)
    assert ran.status in ("done", "failed") and ran.source == str(stored[0]) and "not found" not in ran.message, ran
    assert [e["action"] for e in services.audit.entries(limit=1000)].count("video_upload") == 1


def test_a_source_naming_no_users_home_is_a_field_error(admin):
    """The fuzzer's "~0": expanding a home of no user on this server was a 500."""
    client, headers, _, _ = admin
    refused = client.post("/api/ingest", json={"gallery": "g", "source": "~no-such-user-here/x"}, headers=headers)
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "source", refused.text
