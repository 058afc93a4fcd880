"""Follow this person through the API (in process): after a confirmation, the crops that may show the same
person per camera in time order with their same-person probabilities; each confirmed on its own with
``follow_of``, recorded with its probability in the timeline, the export and the audit; refused in one
line before a confirmation, and for a gallery without appearance vectors (naming the command that adds them)."""

from __future__ import annotations

import io
import json
import math
import zipfile

import pytest

from support.web import PASSWORD, build_gallery, prepare_service, tiny_appearance

pytest.importorskip("fastapi", reason="the service is not installed")
from fastapi.testclient import TestClient  # noqa: E402

from minterpr.index.store.gallery_append import rewrite_metadata  # noqa: E402
from minterpr.index.store.gallery_store import open_gallery  # noqa: E402
from minterpr.interaction.appearance import SamePersonCalibration  # noqa: E402
from minterpr.serving.app import create_app  # noqa: E402
from minterpr.serving.galleries import parse_time  # noqa: E402
from minterpr.serving.settings import RateSpec, ServeSettings  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")
# tiny_appearance's fit: a random appearance model's cosines all lie near 1, a steep fit spreads them over (0, 1)
FIT = SamePersonCalibration(scale=60.0, bias=-57.0, base_rate=0.01, pairs=10, split="val", auc=80.0)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    folder = tmp_path_factory.mktemp("follow")
    looks = tiny_appearance(folder)
    run, store, _ = build_gallery(folder / "with", identities=6, views=3, appearance=looks)
    # each view is its own track ("t<pid>_<view>"): link the three tracks of people 0-2, as ingestion would
    metadata = open_gallery(store).metadata
    rewrite_metadata(
        store, [{**m, **({"link": f"L{m['track'][1]}"} if m["track"][1] in "012" else {})} for m in metadata]
    )
    prepare_service(folder / "data", run, store)
    _, bare, _ = build_gallery(folder / "without", identities=3, views=2, run=run)
    # the service's pipelines load the appearance model (serve --appearance PATH)
    # turns not rate-limited: a linked group is judged as several turns at once
    settings = ServeSettings(
        data_dir=folder / "data",
        demo_gallery="demo",
        login_rate=RateSpec(100.0, 100),
        search_rate=RateSpec(1000.0, 1000),
        appearance=str(looks),
    )
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        response = client.post("/api/auth/login", json={"username": "ana", "password": PASSWORD})
        assert response.status_code == 200, response.text
        client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
        services = client.app.state.services
        services.galleries.register("bare", bare, run, by="test")
        yield client


def _session(client, gallery="demo"):
    case = client.post(
        "/api/cases",
        json={
            "title": "Follow",
            "purpose": "report 9: a bag taken on the platform",
            "cameras": None,
            "start": None,
            "end": None,
        },
    )
    assert case.status_code == 201, case.text
    view = client.post("/api/sessions", json={"case_id": case.json()["id"], "gallery": gallery})
    assert view.status_code == 201, view.text
    sid = view.json()["session_id"]
    view = client.post(f"/api/sessions/{sid}/describe", json={"text": "a man in a black coat"}).json()
    return sid, view["results"][0]["gallery_index"]


def test_candidates_per_camera_in_time_order_and_a_confirmation_with_its_probability(client):
    sid, top = _session(client)
    refused = client.get(f"/api/sessions/{sid}/follow/{top}")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "not_confirmed"
    assert (
        client.post(f"/api/sessions/{sid}/confirm", json={"gallery_index": top, "acknowledge": True}).status_code == 200
    )
    view = client.get(f"/api/sessions/{sid}/follow/{top}").json()
    assert view["gallery_index"] == top and "not an identification" in view["statement"]
    assert view["base_rate"] == FIT.base_rate
    lanes = view["cameras"]
    shown = [c for lane in lanes for c in lane["candidates"]]
    assert shown and top not in [c["gallery_index"] for c in shown]
    for lane in lanes:
        assert {c["camera"] for c in lane["candidates"]} == {lane["camera"]}
        times = [parse_time(c["time"]) for c in lane["candidates"]]
        assert times == sorted(times)
        assert all(0.2 <= c["same_person"] <= 1 for c in lane["candidates"])
    firsts = [parse_time(lane["candidates"][0]["time"]) for lane in lanes]
    assert firsts == sorted(firsts) and not any(math.isnan(t) for t in firsts)
    best = max(shown, key=lambda c: c["same_person"])
    turn = client.post(
        f"/api/sessions/{sid}/confirm",
        json={"gallery_index": best["gallery_index"], "acknowledge": True, "follow_of": top},
    ).json()
    entry = turn["timeline"][-1]
    assert (entry["kind"], entry["follow_of"], entry["same_person"]) == ("confirm", top, best["same_person"])
    confirmed = {c["gallery_index"]: c for c in turn["confirmed_all"]}
    assert confirmed[best["gallery_index"]]["same_person"] == best["same_person"]
    again = client.get(f"/api/sessions/{sid}/follow/{top}").json()
    judged = {c["gallery_index"]: c["judgement"] for lane in again["cameras"] for c in lane["candidates"]}
    assert judged[best["gallery_index"]] is True
    export = client.post(f"/api/sessions/{sid}/export").json()
    followed = [im for im in export["images"] if im["gallery_index"] == best["gallery_index"]]
    assert followed and followed[0]["same_person"] == best["same_person"] and followed[0]["follow_of"] == top
    # the confirmation survives a restart: rebuilt from the event log with its probability
    client.app.state.services.search.forget()
    entry = client.get(f"/api/sessions/{sid}").json()["timeline"][-1]
    assert (entry["follow_of"], entry["same_person"]) == (top, best["same_person"])


def test_follow_reads_and_confirmations_are_audited(client):
    import json

    from sqlalchemy import select

    from minterpr.serving.db import AuditRow

    sid, top = _session(client)
    client.post(f"/api/sessions/{sid}/confirm", json={"gallery_index": top, "acknowledge": True})
    lanes = client.get(f"/api/sessions/{sid}/follow/{top}").json()["cameras"]
    other = lanes[0]["candidates"][0]["gallery_index"]
    client.post(f"/api/sessions/{sid}/confirm", json={"gallery_index": other, "acknowledge": True, "follow_of": top})
    with client.app.state.services.db.transaction() as tx:
        rows = [
            (r.action, json.loads(r.details)) for r in tx.execute(select(AuditRow).order_by(AuditRow.seq)).scalars()
        ]
    mine = [(action, details) for action, details in rows if details.get("session") == sid]
    shown = [details for action, details in mine if action == "follow_shown"]
    assert shown and shown[0]["gallery_index"] == top and shown[0]["candidates"]
    confirms = [details for action, details in mine if action == "confirm"]
    assert confirms[-1]["gallery_index"] == other and confirms[-1]["follow_of"] == top
    assert 0 < confirms[-1]["same_person"] <= 1


def test_bad_follow_requests_are_one_line_each(client):
    sid, top = _session(client)
    unconfirmed = client.post(
        f"/api/sessions/{sid}/confirm",
        json={"gallery_index": top, "acknowledge": True, "follow_of": top + 1 if top == 0 else 0},
    )
    assert unconfirmed.status_code == 409 and unconfirmed.json()["error"]["code"] == "not_confirmed"
    client.post(f"/api/sessions/{sid}/confirm", json={"gallery_index": top, "acknowledge": True})
    itself = client.post(
        f"/api/sessions/{sid}/confirm", json={"gallery_index": top, "acknowledge": True, "follow_of": top}
    )
    assert itself.status_code == 422 and itself.json()["error"]["field"] == "follow_of"
    far = client.get(f"/api/sessions/{sid}/follow/{10**9}")
    assert far.status_code == 422 and far.json()["error"]["code"] == "out_of_scope"
    bare_sid, bare_top = _session(client, "bare")
    client.post(f"/api/sessions/{bare_sid}/confirm", json={"gallery_index": bare_top, "acknowledge": True})
    refused = client.get(f"/api/sessions/{bare_sid}/follow/{bare_top}")
    error = refused.json()["error"]
    assert refused.status_code == 409 and error["code"] == "no_appearance"
    assert "no appearance vectors" in error["message"] and "`minterpr index build --update`" in error["message"]
    assert "\n" not in error["message"]


def test_the_page_shows_the_lanes_after_a_confirmation_and_says_why_not_without_vectors(client):
    import re

    response = client.post(
        "/login", data={"username": "ana", "password": PASSWORD, "next": "/cases"}, follow_redirects=False
    )
    assert response.status_code == 303
    csrf = client.cookies["minterpr_csrf"]
    client.headers["X-CSRF-Token"] = csrf
    for gallery, expected in (
        ("demo", "may be the same person: "),
        (
            "bare",
            "has no appearance vectors, which following a person needs: add them with `minterpr index build --update`",
        ),
    ):
        sid, top = _session(client, gallery)
        page = client.get(f"/sessions/{sid}").text
        assert "Follow this person" not in page  # nothing before a confirmation
        page = client.post(
            f"/sessions/{sid}/confirm", data={"csrf_token": csrf, "gallery_index": str(top), "acknowledge": "yes"}
        ).text
        assert "Follow this person" in page and expected in page.replace("&#39;", "'")
        if gallery == "demo":
            candidate = re.search(r'id="follow-(\d+)"', page).group(1)
            page = client.post(
                f"/sessions/{sid}/confirm",
                data={"csrf_token": csrf, "gallery_index": candidate, "acknowledge": "yes", "follow_of": str(top)},
            ).text
            assert f'class="candidate confirmed" id="follow-{candidate}"' in page
            view = client.get(f"/api/sessions/{sid}").json()
            assert view["timeline"][-1]["follow_of"] == top
            p = view["timeline"][-1]["same_person"]
            archive = zipfile.ZipFile(
                io.BytesIO(client.post(f"/sessions/{sid}/export", data={"csrf_token": csrf}).content)
            )
            images = {im["gallery_index"]: im for im in json.loads(archive.read("match.json"))["images"]}
            assert images[int(candidate)]["role"] == "confirmed"
            assert (images[int(candidate)]["same_person"], images[int(candidate)]["follow_of"]) == (p, top)
            assert images[top]["same_person"] is None
            assert "may be the same person, " in archive.read("report.html").decode("utf-8")


def _linked_result(client, sid):
    """A result of a linked person (people 0-2) not judged yet: (gallery_index, the gallery's metadata)."""
    view = client.get(f"/api/sessions/{sid}?top=18").json()
    linked = [r for r in view["results"] if r["linked_tracks"] and r["judgement"] is None]
    assert linked and all(r["linked_tracks"] == 2 for r in linked)
    return linked[0]["gallery_index"]


def test_a_linked_group_is_judged_only_when_the_analyst_asks(client):
    metadata = open_gallery(client.app.state.services.galleries.get("demo").directory).metadata
    group = lambda i: {k for k, m in enumerate(metadata) if m.get("link") == metadata[i]["link"]}  # noqa: E731
    sid, _ = _session(client)
    one = _linked_result(client, sid)
    view = client.post(f"/api/sessions/{sid}/confirm", json={"gallery_index": one, "acknowledge": True}).json()
    assert [c["gallery_index"] for c in view["confirmed_all"]] == [one]  # its linked tracks untouched
    lanes = client.get(f"/api/sessions/{sid}/follow/{one}").json()["cameras"]
    flags = {c["gallery_index"]: c["linked"] for lane in lanes for c in lane["candidates"]}
    assert flags and all(flag == (i in group(one)) for i, flag in flags.items())
    sid, _ = _session(client)
    one = _linked_result(client, sid)
    view = client.post(
        f"/api/sessions/{sid}/confirm", json={"gallery_index": one, "acknowledge": True, "group": True}
    ).json()
    assert {c["gallery_index"] for c in view["confirmed_all"]} == group(one)  # one crop per linked track
    assert [t["kind"] for t in view["timeline"][-3:]] == ["confirm"] * 3
    other = next(
        r["gallery_index"]
        for r in client.get(f"/api/sessions/{sid}?top=18").json()["results"]
        if r["linked_tracks"] and r["judgement"] is None
    )
    view = client.post(
        f"/api/sessions/{sid}/feedback", json={"gallery_index": other, "text": "not this person", "group": True}
    ).json()
    assert "timeline" in view, view
    ruled = [t["gallery_index"] for t in view["timeline"] if t["kind"] == "feedback"]
    assert set(ruled) == group(other)
    refused = client.post(f"/api/sessions/{sid}/feedback", json={"gallery_index": other, "text": "no", "group": "yes"})
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "group"


def test_a_served_gallery_with_the_models_vectors_is_searched_by_appearance(client):
    galleries = client.app.state.services.galleries
    served = galleries.get(name="demo")
    assert served.index.appearance is not None and served.index.same_person is not None
    assert served.index.same_person == served.pipeline.appearance.same_person
    bare = galleries.get(name="bare")
    assert bare.index.appearance is None and bare.index.same_person is None  # searched as before
