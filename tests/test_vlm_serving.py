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
            sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"},
                              headers=headers).json()["session_id"]
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
    assert all(c["case"] == case and c["details"]["endpoint"] == endpoint.url + "/chat/completions"
               and c["details"]["model"] == "m" for c in calls)
    assert "sk-never-in-the-log" not in log
    assert endpoint.requests[0]["headers"]["Authorization"] == "Bearer sk-never-in-the-log"


def test_the_page_says_which_facts_the_model_read():
    """The conversation's chips name a model's fact as such (the user may remove it like any other)."""
    from types import SimpleNamespace

    from minterpr.interaction.history import HistoryEntry, ModelFact
    from minterpr.language.phrasing import Fact
    from minterpr.serving.schemas import TimelineEntry
    from minterpr.serving.views import timeline
    from minterpr.types import DescriptionTurn

    entry = HistoryEntry(DescriptionTurn("a woman, red top"), (Fact("gender", ("female",)),
                                                               ModelFact("upper_colour", ("red",))), ())
    said = TimelineEntry(seq=1, kind="describe", text="a woman, red top", user="ana", time=0.0)
    live = SimpleNamespace(timeline=[said], session=SimpleNamespace(history=[entry]))
    facts = timeline(live)[0].facts
    assert facts[0] == "gender: female" and facts[1].endswith("(read by the model)") and "red" in facts[1]
