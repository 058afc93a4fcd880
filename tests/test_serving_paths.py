"""Every server path a request names goes through one policy (minterpr.serving.paths): the OpenAPI
schema's path-like request fields are enumerated, and each must refuse the service's own database."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from support.serving import login, prepare, shared_world

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# a request property whose name says it is a path (a new one without the policy's mark fails the first test)
PATHLIKE = re.compile(r"(^|_)(path|dir|directory|folder|file|source|run|model|root|store|playlist)s?($|_)")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return shared_world(tmp_path_factory)


@pytest.fixture()
def admin(world, tmp_path):
    from minterpr.serving.app import create_app

    services = prepare(tmp_path / "state", *world)
    services.settings.incoming_dir.mkdir(parents=True, exist_ok=True)
    client = TestClient(create_app(services.settings, services))
    with client:
        yield client, login(client, "root"), services


def _request_fields(app) -> list[tuple[str, str, str, dict]]:
    """(method, route, schema, property) of every JSON request body property in the OpenAPI document."""
    spec = app.openapi()
    found = []
    for route, operations in spec["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            for media in content.values():
                ref = media.get("schema", {}).get("$ref", "")
                if ref:
                    name = ref.rsplit("/", 1)[-1]
                    for prop, schema in spec["components"]["schemas"][name].get("properties", {}).items():
                        found.append((method, route, name, prop, schema))
    return found


def _baseline(schema: str, services, world) -> dict:
    """A request of ``schema`` whose paths all pass the policy (one field is then pointed at the database)."""
    incoming = services.settings.incoming_dir / "clean"
    incoming.mkdir(exist_ok=True)
    bodies = {
        "IngestRequest": {
            "gallery": "lobby",
            "source": str(incoming),
            "run": str(world[0]),
            "detector": "onnx",
            "detector_model": str(incoming / "detector.onnx"),
        },
        "RegisterGalleryRequest": {"name": "again", "directory": str(incoming), "run_dir": str(incoming)},
    }
    assert schema in bodies, f"add a baseline request for {schema} (it names a server path)"
    return bodies[schema]


def test_every_path_like_request_field_is_marked_for_the_policy(admin):
    client, _, _ = admin
    fields = _request_fields(client.app)
    assert any(prop == "source" for *_, prop, _ in fields)  # the enumeration sees the request bodies
    unmarked = [
        f"{schema}.{prop}"
        for _, _, schema, prop, spec in fields
        if PATHLIKE.search(prop)
        and "x-server-path" not in spec
        and spec.get("format") != "binary"
        and "contentMediaType" not in spec
    ]  # an upload's bytes name no path
    assert not unmarked, f"path-like request fields outside the path policy (declare them with server_path): {unmarked}"


def test_every_marked_path_refuses_the_database_its_links_and_folders_of_links(admin, world):
    client, headers, services = admin
    database = services.settings.data_dir / "minterpr.db"
    assert database.exists()
    incoming = services.settings.incoming_dir
    (incoming / "db-link").symlink_to(database)
    (incoming / "links").mkdir()
    (incoming / "links" / "model.pt").symlink_to(database)
    marked = [(m, r, s, p) for m, r, s, p, spec in _request_fields(client.app) if "x-server-path" in spec]
    assert {p for *_, p in marked} >= {"source", "run", "detector_model", "directory", "run_dir"}
    for method, route, schema, prop in marked:
        for bad in (
            database,
            database.with_name("minterpr.db-wal"),
            incoming / "db-link",
            incoming / "links",
            services.settings.data_dir,
        ):
            body = {**_baseline(schema, services, world), prop: str(bad)}
            response = client.request(method.upper(), route, json=body, headers=headers)
            assert response.status_code == 403, (route, prop, bad, response.text)
            error = response.json()["error"]
            assert error["code"] == "outside_roots" and error["field"] == prop, (route, prop, bad, error)
    # the server's database still works: a new session and a user are written
    assert (
        client.post(
            "/api/admin/users",
            json={"username": "later", "password": "a long enough password 1", "role": "analyst"},
            headers=headers,
        ).status_code
        == 201
    )


def test_the_policy_keeps_what_it_allowed(admin, world):
    from minterpr.serving.paths import check_path

    _, _, services = admin
    settings = services.settings
    assert check_path(settings, "source", settings.incoming_dir, "input") is None
    assert check_path(settings, "directory", settings.galleries_dir / "lobby", "store") is None
    assert check_path(settings, "run", world[0], "run", known=[str(world[0])]) is None
    assert check_path(settings, "run", world[0], "run").status == 403  # outside the roots, not serving a gallery
    assert check_path(settings, "source", settings.uploads_dir, "input").status == 403
    assert check_path(settings, "directory", settings.uploads_dir, "store").status == 403


def test_the_caption_route_enforces_the_gallery_name_pattern():
    from pydantic import ValidationError

    from minterpr.serving.schemas.jobs import CaptionRequest

    assert CaptionRequest(gallery="lobby.v2").gallery == "lobby.v2"
    for bad in ("../../etc", ".hidden", "a/b"):
        with pytest.raises(ValidationError, match="pattern"):
            CaptionRequest(gallery=bad)


def test_an_input_may_not_reach_outside_through_links_or_playlists(admin, world, tmp_path):
    from minterpr.serving.paths import check_path

    _, _, services = admin
    settings = services.settings
    incoming = settings.incoming_dir
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (incoming / "crops").mkdir()
    (incoming / "crops" / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    assert check_path(settings, "source", incoming / "crops", "input") is None
    (incoming / "crops" / "b.png").symlink_to(outside / "secret.png")
    refused = check_path(settings, "source", incoming / "crops", "input")
    assert refused.status == 403 and "b.png links outside" in refused.message
    (incoming / "cam.m3u8").write_text(f"#EXTM3U\n#EXTINF:10,\n{outside / 'video.mp4'}\nhttp://example.invalid/x.ts\n")
    (incoming / "list.txt").write_text(f"ffconcat version 1.0\nfile '{outside / 'video.mp4'}'\n")
    for name in ("cam.m3u8", "list.txt"):
        refused = check_path(settings, "source", incoming / name, "input")
        assert refused is not None and "playlist" in refused.message, name
    video = incoming / "cam.avi"
    video.write_bytes(b"RIFF\x00\x10\x00\x00AVI LIST" + bytes(200))
    assert check_path(settings, "source", video, "input") is None


def test_another_method_on_the_caption_route_is_405_not_a_job_id(admin):
    client, headers, _ = admin
    response = client.get("/api/ingest/caption", headers=headers)
    assert response.status_code == 405 and response.headers["allow"] == "POST", response.text
    assert client.get("/api/ingest/" + "0" * 32, headers=headers).status_code == 404  # job ids still route
