"""The service with a vision-language model (serve --vlm-url): every call audited with the case,
never the key; a session rebuilt from its events ranks as it did."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from support.serving import login, open_case, prepare, shared_world
from minterpr.vlm.config import VLMConfig
from minterpr.vlm.testing import ScriptedServer, reply, valid_answer


def answer(body):
    """Valid answers; the judgements favour the fifth candidate (so a replay without them would differ)."""
    schema = body["response_format"]["json_schema"]["schema"]
    if "scores" in schema["properties"]:
        return reply(json.dumps({"scores": [0.1, 0.1, 0.1, 0.1, 0.99]}))
    return valid_answer(body)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return shared_world(tmp_path_factory)


def test_every_model_call_is_audited_without_the_key(world, tmp_path, monkeypatch):
    from minterpr.serving.app import create_app

    monkeypatch.setenv("TEST_VLM_KEY", "sk-never-in-the-log")
    with ScriptedServer([answer], repeat=True) as endpoint:
        config = VLMConfig(endpoint.url, "m", key_env="TEST_VLM_KEY", uses=("asking", "rerank"))
        services = prepare(tmp_path / "state", *world, vlm=config)
        client = TestClient(create_app(services.settings, services))
        with client:
            headers = login(client, "ana")
            case = open_case(client, headers)
            sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()[
                "session_id"
            ]
            view = client.post(f"/api/sessions/{sid}/describe", json={"text": "a woman in red"}, headers=headers)
            assert view.status_code == 200, view.text
            ranking = [r["gallery_index"] for r in view.json()["results"]]
            services.search.forget()  # the next read rebuilds the session from its events
            again = client.get(f"/api/sessions/{sid}", headers=headers).json()
            auditor = TestClient(client.app)
            login(auditor, "aud")
            log = auditor.get("/api/audit/export").text
    assert [r["gallery_index"] for r in again["results"]] == ranking  # the judgements replayed from the events
    entries = [json.loads(line) for line in log.splitlines()]
    calls = [e for e in entries if e["action"] == "vlm_call"]
    purposes = {c["details"]["purpose"] for c in calls}
    assert "rerank" in purposes and purposes <= {"asking", "rerank"} and len(calls) == len(endpoint.requests)
    assert all(
        c["case"] == case
        and c["details"]["endpoint"] == endpoint.url + "/chat/completions"
        and c["details"]["model"] == "m"
        for c in calls
    )
    assert "sk-never-in-the-log" not in log
    assert endpoint.requests[0]["headers"]["Authorization"] == "Bearer sk-never-in-the-log"


def test_the_page_says_which_facts_the_model_read():
    """The conversation's chips name a model's fact as such (the user may remove it like any other)."""
    from types import SimpleNamespace

    from minterpr.interaction.history import HistoryEntry, ModelFact
    from minterpr.language.phrasing import Fact
    from minterpr.serving.schemas.search import TimelineEntry
    from minterpr.serving.views import timeline
    from minterpr.types import DescriptionTurn

    entry = HistoryEntry(
        DescriptionTurn("a woman, red top"), (Fact("gender", ("female",)), ModelFact("upper_colour", ("red",))), ()
    )
    said = TimelineEntry(seq=1, kind="describe", text="a woman, red top", user="ana", time=0.0)
    live = SimpleNamespace(timeline=[said], session=SimpleNamespace(history=[entry]))
    facts = timeline(live)[0].facts
    assert facts[0] == "gender: female" and facts[1].endswith("(read by the model)") and "red" in facts[1]


def test_the_models_facts_are_marked_on_the_page_and_in_the_api_and_removed_like_any_other(world, tmp_path):
    """Through the service: a fact the model read shows as a marked chip (and as "vlm" in the API), the
    page's remove button withdraws it, and a session rebuilt from its events keeps it removed without
    asking the model again."""
    import html
    import re

    from minterpr.serving.app import create_app

    read = json.dumps(
        {
            "facts": [
                {"slot": "carried", "values": ["umbrella"], "negated": False},
                {"slot": "gender", "values": ["female"], "negated": False},
            ]
        }
    )
    umbrella, woman = "carried items: umbrella (read by the model)", "gender: female (read by the model)"
    with ScriptedServer([reply(read)]) as endpoint:
        services = prepare(tmp_path / "state", *world, vlm=VLMConfig(endpoint.url, "m", uses=("reading",)))
        client = TestClient(create_app(services.settings, services))
        with client:
            headers = login(client, "ana")
            case = open_case(client, headers)
            sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()[
                "session_id"
            ]
            said = client.post(
                f"/api/sessions/{sid}/describe",
                json={"text": "someone with a brolly, out in the drizzle"},
                headers=headers,
            ).json()["timeline"][0]
            page = html.unescape(client.get(f"/sessions/{sid}").text)
            chips = re.findall(r'<li class="chip( model)?" data-source="(\w+)"><span>([^<]+)</span>', page)
            removed = client.post(
                f"/sessions/{sid}/withdraw",
                data={"csrf_token": headers["X-CSRF-Token"], "turn": "0", "fact": "0"},
                follow_redirects=False,
            )
            after = client.get(f"/api/sessions/{sid}", headers=headers).json()["timeline"][0]
            services.search.forget()  # rebuilt from its events: the withdrawal replayed, the model not asked
            rebuilt = client.get(f"/api/sessions/{sid}", headers=headers).json()
            assert "timeline" in rebuilt, rebuilt
            rebuilt = rebuilt["timeline"][0]
    assert said["facts"] == [umbrella, woman] and said["fact_sources"] == ["vlm", "vlm"]
    assert chips == [(" model", "vlm", umbrella), (" model", "vlm", woman)]
    assert f"Remove “{umbrella}” (turn 1)" in page  # each marked chip has its remove button
    assert removed.status_code == 303
    assert after["facts"] == [woman] and after["fact_sources"] == ["vlm"]
    assert rebuilt == after and len(endpoint.requests) == 1


def test_a_failing_endpoint_is_said_on_the_page_and_in_the_api(world, tmp_path):
    """Issue 40: a slow or failing endpoint was silent (the user waited its deadline every turn)."""
    from minterpr.serving.app import create_app
    from minterpr.vlm.testing import status

    with ScriptedServer([status(500)], repeat=True) as endpoint:
        config = VLMConfig(endpoint.url, "m", uses=("rerank",), max_retries=0, skip_turns=2)
        services = prepare(tmp_path / "state", *world, vlm=config)
        client = TestClient(create_app(services.settings, services))
        with client:
            headers = login(client, "ana")
            case = open_case(client, headers)
            sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()[
                "session_id"
            ]
            view = client.post(f"/api/sessions/{sid}/describe", json={"text": "a woman in red"}, headers=headers)
            page = client.get(f"/sessions/{sid}").text
            second = client.post(
                f"/api/sessions/{sid}/describe", json={"text": "she had a backpack"}, headers=headers
            ).json()
    notice = view.json()["model_notice"]
    assert notice.startswith(f"the model at {endpoint.url} failed") and "for the next 2 turns" in notice
    assert 'id="model-notice"' in page and "searching without it" in page
    assert "searching without it" in second["model_notice"] and len(endpoint.requests) == 1  # skipped
