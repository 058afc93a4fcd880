"""Search sessions over HTTP: every move, stored as events; rankings equal the replay of the
stored events and a fresh Session driven by the same moves; restarts continue; scope is enforced."""

from __future__ import annotations

import io

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from support.serving import login, open_case, prepare, shared_world

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return shared_world(tmp_path_factory)


@pytest.fixture()
def app_client(world, tmp_path):
    from minterpr.serving.app import create_app

    services = prepare(tmp_path / "state", *world)
    with TestClient(create_app(services.settings, services)) as client:
        yield client, services


def _png(colour=(200, 30, 30), size=(32, 64)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, "PNG")
    return buffer.getvalue()


def _ranking(view) -> list[int]:
    return [r["gallery_index"] for r in view["results"]]


def _session_ranking(session, positions, top=10) -> list[int]:
    return [positions.to_gallery(i) for i in session.step.ranking[:top].tolist()]


def test_every_move_is_stored_and_replays_to_the_same_rankings(app_client, world):
    from minterpr.interaction.session import Session
    from minterpr.serving.events import CONFIRM_TEXT, session_options

    client, services = app_client
    headers = login(client, "ana")
    case = open_case(client, headers)
    view = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()
    sid = view["session_id"]
    assert view["results"] == [] and view["turns"] == 0 and view["in_scope"] == 24
    moves = [
        ("describe", {"text": "a man in a red jacket"}),
        ("feedback", {"gallery_index": 4, "text": "not him: no backpack"}),
        ("example", {"gallery_index": 7}),
        ("describe", {"text": "he wore blue jeans"}),
        ("undo", None),
        ("describe", {"text": "he wore black shoes"}),
    ]
    views = []
    for kind, body in moves:
        response = client.post(f"/api/sessions/{sid}/{kind}", json=body, headers=headers)
        assert response.status_code == 200, response.text
        views.append(response.json())
    upload = client.post(
        f"/api/sessions/{sid}/example/upload", headers=headers, files={"file": ("me.png", _png(), "image/png")}
    )
    assert upload.status_code == 200, upload.text
    views.append(upload.json())
    last = views[-1]
    assert last["seq"] == 7 and last["turns"] == 5
    assert [t["kind"] for t in last["timeline"]] == ["describe", "feedback", "example", "describe", "example"]
    # the fast path (in memory) equals the plain reference (replay of the stored events) ...
    live = services.search._live[sid]
    reference = services.search.reference(sid)
    assert np.array_equal(live.session.step.ranking, reference.step.ranking)
    assert np.allclose(live.session.step.scores, reference.step.scores)
    # ... and a fresh Session driven by the same moves through the Python API
    loaded = services.galleries.get("test")
    fresh = Session(loaded.backend, loaded.index, **session_options(live.options, loaded.pipeline.rerank_config()))
    fresh.describe("a man in a red jacket")
    fresh.feedback(4, "not him: no backpack")
    fresh.example(loaded.index.images[7].path)
    fresh.describe("he wore blue jeans")
    fresh.undo()
    fresh.describe("he wore black shoes")
    uploaded = list((services.settings.uploads_dir / sid).iterdir())
    assert len(uploaded) == 1 and uploaded[0].suffix == ".png"
    fresh.example(str(uploaded[0]))
    assert _session_ranking(fresh, live.positions) == _ranking(last)
    # the confirmation step: acknowledge required, similarity reported, never identity
    target = last["results"][0]["gallery_index"]
    refused = client.post(
        f"/api/sessions/{sid}/confirm", json={"gallery_index": target, "acknowledge": False}, headers=headers
    )
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "acknowledge_required"
    said_yes = client.post(
        f"/api/sessions/{sid}/feedback", json={"gallery_index": target, "text": "yes that's him"}, headers=headers
    )
    assert said_yes.status_code == 422 and said_yes.json()["error"]["code"] == "confirmation_required"
    done = client.post(
        f"/api/sessions/{sid}/confirm", json={"gallery_index": target, "acknowledge": True}, headers=headers
    ).json()
    assert done["confirmed"]["gallery_index"] == target and done["action"] is None
    assert "not an identification" in done["confirmed"]["statement"]
    assert done["timeline"][-1]["text"] == CONFIRM_TEXT
    export = client.post(f"/api/sessions/{sid}/export", headers=headers)
    assert export.status_code == 200, export.text
    record = export.json()
    assert record["confirmed"]["gallery_index"] == target and len(record["images"]) == 3  # the track's crops
    assert len(record["conversation"]) == 6
    # the analyst sees gallery-relative paths, never where the server keeps the crops
    root = str(services.galleries.get("test").index.root)
    assert root not in export.text and all(not image["path"].startswith("/") for image in record["images"])
    assert all("absolute_path" not in image for image in record["images"])
    # after a "restart" (nothing in memory) the session continues where it was
    services.search.forget()
    again = client.get(f"/api/sessions/{sid}", headers=headers).json()
    assert _ranking(again) == _ranking(done) and again["confirmed"] == done["confirmed"]
    assert again["timeline"] == done["timeline"] and again["seq"] == 9


def test_the_conversation_continues_after_a_restart(app_client):
    client, services = app_client
    headers = login(client, "ana")
    case = open_case(client, headers)
    sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()["session_id"]
    first = client.post(f"/api/sessions/{sid}/describe", json={"text": "a woman in a green coat"}, headers=headers)
    services.search.forget()
    second = client.post(f"/api/sessions/{sid}/describe", json={"text": "with a backpack"}, headers=headers).json()
    assert second["turns"] == 2 and first.json()["seq"] == 1 and second["seq"] == 2
    assert np.array_equal(services.search._live[sid].session.step.ranking, services.search.reference(sid).step.ranking)


def test_scope_is_enforced(app_client):
    client, _ = app_client
    headers = login(client, "ana")
    case = open_case(client, headers, cameras=["cam:north"], start="2026-03-02T08:00:00Z", end="2026-03-02T09:00:00Z")
    wider = client.post(
        "/api/sessions", json={"case_id": case, "gallery": "test", "cameras": ["cam:south"]}, headers=headers
    )
    assert wider.status_code == 403 and wider.json()["error"] == {
        "code": "out_of_scope",
        "field": "cameras",
        "message": "camera 'cam:south' is outside the case's scope (cam:north)",
    }
    later = client.post(
        "/api/sessions", json={"case_id": case, "gallery": "test", "end": "2026-03-03T00:00:00Z"}, headers=headers
    )
    assert later.status_code == 403 and later.json()["error"]["field"] == "end"
    view = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()
    # 8:00..9:00 inclusive (p0..p6), views on cam:north: (p + k) % 3 == 0
    assert view["in_scope"] == 7
    sid = view["session_id"]
    view = client.post(f"/api/sessions/{sid}/describe", json={"text": "a man"}, headers=headers).json()
    assert {r["camera"] for r in view["results"]} == {"cam:north"} and len(view["results"]) == 7
    outside = next(i for i in range(24) if i not in _ranking(view))
    response = client.post(
        f"/api/sessions/{sid}/feedback", json={"gallery_index": outside, "text": "not him"}, headers=headers
    )
    assert response.status_code == 422 and response.json()["error"]["code"] == "out_of_scope"
    image = client.get(f"/api/sessions/{sid}/images/{outside}", headers=headers)
    assert image.status_code == 422
    shown = client.get(f"/api/sessions/{sid}/images/{_ranking(view)[0]}", headers=headers)
    assert shown.status_code == 200 and shown.headers["content-type"] == "image/jpeg"


def test_only_the_sessions_analyst_moves_it_and_roles_are_checked(app_client):
    client, _ = app_client
    headers = login(client, "ana")
    case = open_case(client, headers)
    sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()["session_id"]
    other = TestClient(client.app)
    bob = login(other, "bob")
    response = other.post(f"/api/sessions/{sid}/describe", json={"text": "a man"}, headers=bob)
    assert response.status_code == 403
    viewer = TestClient(client.app)
    vic = login(viewer, "vic")
    assert viewer.get(f"/api/sessions/{sid}").status_code == 200
    assert viewer.post("/api/cases", json={}, headers=vic).status_code in (403, 422)
    assert viewer.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=vic).status_code == 403
    auditor = TestClient(client.app)
    aud = login(auditor, "aud")
    assert auditor.post(f"/api/sessions/{sid}/describe", json={"text": "x"}, headers=aud).status_code == 403
    assert auditor.get("/api/audit/verify").json()["ok"] is True
    assert client.get("/api/audit/verify").status_code == 403  # analysts cannot read the audit log


def test_a_conversation_stops_at_the_models_turn_limit(app_client):
    client, services = app_client
    headers = login(client, "ana")
    case = open_case(client, headers)
    sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()["session_id"]
    limit = services.galleries.get("test").pipeline.model.config.max_turns
    for k in range(limit):
        response = client.post(f"/api/sessions/{sid}/describe", json={"text": f"remark {k}"}, headers=headers)
        assert response.status_code == 200, response.text
        assert {"session", "view", "commit"} <= {p.split(";")[0] for p in response.headers["server-timing"].split(", ")}
    over = client.post(f"/api/sessions/{sid}/describe", json={"text": "one more"}, headers=headers)
    assert over.status_code == 409 and over.json()["error"]["code"] == "turn_limit"
    assert client.post(f"/api/sessions/{sid}/undo", headers=headers).json()["turns"] == limit - 1


def test_a_session_records_its_shortlist_and_an_old_record_replays_the_cosine_search():
    from minterpr.interaction.shortlist import ShortlistConfig
    from minterpr.serving.events import session_options

    new = session_options({"seed": 1, "shortlist": ShortlistConfig().to_dict()}, reranking=None)
    assert new["shortlist"] == ShortlistConfig() and new["shortlist"].fused  # today's default, as recorded
    old = session_options({"seed": 1}, reranking=None)  # stored before sessions recorded their shortlist
    assert old["shortlist"] == ShortlistConfig(fused=False)
    with pytest.raises(Exception, match="shortlist|unknown|field"):
        session_options({"seed": 1, "shortlist": {"no_such_field": 3}}, reranking=None)


def test_a_withdrawn_fact_is_stored_and_replays_as_if_never_said(app_client):
    """A removed chip: the service withdraws the fact (a ``forget`` event); the session then ranks as a
    fresh session whose history never recorded it, and a restart rebuilds exactly that."""
    from support.serving import PASSWORD

    from minterpr.interaction.session import Session
    from minterpr.serving.events import session_options

    client, services = app_client
    headers = login(client, "ana")
    case = open_case(client, headers)
    sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()["session_id"]
    ana = services.accounts.login("ana", PASSWORD, client="test").principal
    services.search.describe(ana, sid, "a man in a red jacket with a backpack")
    services.search.describe(ana, sid, "he wore blue jeans")
    said = services.search.view(ana, sid).timeline[0].facts
    assert "top colour: red" in said
    view = services.search.withdraw_fact(ana, sid, 0, said.index("top colour: red"))
    assert "top colour: red" not in view.timeline[0].facts and view.timeline[1].facts  # only that fact went
    live = services.search._live[sid]
    entries = live.session.history
    loaded = live.gallery
    fresh = Session(
        loaded.backend,
        live.session.index,
        **session_options(live.options, loaded.pipeline.rerank_config(), loaded.pipeline.evidence_policy()),
    )
    for entry in entries:  # the turns as recorded now: the first without the fact
        fresh.add(entry.turn, facts=entry.facts)
    assert _session_ranking(fresh, live.positions) == _ranking(view.model_dump())
    services.search.forget()  # nothing in memory: rebuilt from the events, the withdrawal included
    again = services.search.view(ana, sid)
    assert _ranking(again.model_dump()) == _ranking(view.model_dump()) and again.timeline == view.timeline
    with pytest.raises(Exception, match="has no fact"):
        services.search.withdraw_fact(ana, sid, 0, 99)
