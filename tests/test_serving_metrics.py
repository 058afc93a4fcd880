"""GET /metrics (admins or the metrics token only): request latency by route (turns included),
responses by status, rate-limit refusals, sessions, ingestion jobs; every response carries an
X-Request-ID; JSON logs carry it too."""

from __future__ import annotations

import json
import logging

import pytest
from fastapi.testclient import TestClient

from support.serving import login, open_case, prepare, shared_world

pytest.importorskip("prometheus_client")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _value(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def test_metrics_count_turns_errors_and_refusals_for_admins_and_the_token(tmp_path_factory, tmp_path):
    from minterpr.serving.app import create_app
    from minterpr.serving.settings import RateSpec

    run, store = shared_world(tmp_path_factory)
    services = prepare(
        tmp_path / "state", run, store, metrics_token="s3cret-token-for-prometheus", search_rate=RateSpec(0.01, 2)
    )
    with TestClient(create_app(services.settings, services)) as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        headers = login(client, "ana")
        assert client.get("/metrics").status_code == 403  # an analyst
        case = open_case(client, headers)
        sid = client.post("/api/sessions", json={"case_id": case, "gallery": "test"}, headers=headers).json()[
            "session_id"
        ]
        codes = [
            client.post(f"/api/sessions/{sid}/describe", json={"text": "a man"}, headers=headers).status_code
            for _ in range(3)
        ]
        assert codes == [200, 200, 429]
        scrape = client.get("/metrics", headers={"Authorization": "Bearer s3cret-token-for-prometheus"})
        assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain")
        text = scrape.text
        turn = 'minterpr_request_seconds_count{method="POST",route="/api/sessions/{session_id}/describe"}'
        assert _value(text, turn) == 3
        assert _value(text, 'minterpr_responses_total{route="/api/sessions/{session_id}/describe",status="429"}') == 1
        assert _value(text, 'minterpr_responses_total{route="/metrics",status="401"}') == 2
        assert _value(text, 'minterpr_rate_limited_total{limit="search"}') == 1
        assert _value(text, "minterpr_sessions_live") == 1 and _value(text, "minterpr_sessions ") == 1
        login(client, "root")
        assert client.get("/metrics").status_code == 200  # an admin's cookie


def test_every_response_has_a_request_id_and_json_logs_carry_it(tmp_path, caplog):
    from minterpr.serving.app import create_app
    from minterpr.serving.logs import JsonFormatter
    from minterpr.serving.metrics import request_id
    from minterpr.serving.service import build_services
    from support.serving import settings

    services = build_services(settings(tmp_path / "state"))
    app = create_app(services.settings, services)
    seen = []

    @app.get("/probe")
    def probe() -> dict:
        record = logging.LogRecord("minterpr", logging.INFO, "x.py", 1, "probe", (), None)
        seen.append(json.loads(JsonFormatter().format(record)))
        return {"id": request_id()}

    with TestClient(app) as client:
        mine = client.get("/probe", headers={"X-Request-ID": "trace-42"})
        assert mine.headers["x-request-id"] == "trace-42" and mine.json() == {"id": "trace-42"}
        made = client.get("/healthz", headers={"X-Request-ID": "not safe <script>"})
        assert len(made.headers["x-request-id"]) == 32 and "<" not in made.headers["x-request-id"]
        assert client.get("/api/cases").headers["x-request-id"]  # errors too
    assert seen[0]["request_id"] == "trace-42" and seen[0]["message"] == "probe"


def test_serve_log_format_json_configures_uvicorn():
    from minterpr.cli.main import build_parser
    from minterpr.cli.commands.serve import server_config
    from minterpr.cli.shared.service_state import settings_from

    args = build_parser().parse_args(["serve", "--log-format", "json"])
    config = server_config(object(), settings_from(args), args)
    assert config.log_config["formatters"]["json"]["()"] == "minterpr.serving.logs.JsonFormatter"
    plain = build_parser().parse_args(["serve"])
    assert server_config(object(), settings_from(plain), plain).log_config != config.log_config
