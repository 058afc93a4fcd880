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
    body = {"gallery": "lobby", "source": str(incoming), "run": str(world[0]), "camera": "lobby:cam1",
            "start": "2026-03-05T10:00:00Z"}
    started = client.post("/api/ingest", json=body, headers=headers)
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
