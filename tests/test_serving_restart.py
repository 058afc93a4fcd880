"""A real uvicorn server killed (SIGKILL) in the middle of concurrent sessions and started again:
every acknowledged turn is still there, nothing is doubled, and each session ranks as before."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from support.serving import PASSWORD, USERS, shared_world

LAUNCH = """
import sys, uvicorn
from pathlib import Path
from minterpr.serving.app import create_app
from minterpr.serving.settings import RateSpec, ServeSettings
settings = ServeSettings(data_dir=Path(sys.argv[1]), torch_threads=1, search_rate=RateSpec(1e6, 10**6))
uvicorn.run(create_app(settings), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(data, port, log) -> subprocess.Popen:
    import httpx

    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    process = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, str(data), str(port)], stdout=log, stderr=subprocess.STDOUT, env=env
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server exited"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise AssertionError("the server did not start")


@pytest.mark.slow
def test_a_killed_server_loses_no_acknowledged_turn(tmp_path_factory, tmp_path):
    import httpx

    from minterpr.serving.service import build_services
    from support.serving import settings

    run, store = shared_world(tmp_path_factory)
    data = tmp_path / "state"
    services = build_services(settings(data))
    for name, role in USERS.items():
        services.accounts.create_user(name, PASSWORD, role)
    services.galleries.register("test", store, run)
    ana = services.accounts.login("ana", PASSWORD, client="test").principal
    case = services.cases.open_case(ana, "t", "report 12, authorised by the duty officer", None, None, None).id
    key = services.accounts.create_api_key(ana, "test")[1]
    services.close()
    port = _port()
    log = open(tmp_path / "server.log", "ab")
    server = _start(data, port, log)
    url = f"http://127.0.0.1:{port}"
    acked: dict[str, int] = {}
    last: dict[str, list[int]] = {}
    texts = ["a man in a red jacket", "blue jeans", "a black backpack", "short hair", "white shoes", "a cap"]

    def drive(k: int) -> None:
        http = httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=120)
        sid = http.post("/api/sessions", json={"case_id": case, "gallery": "test"}).json()["session_id"]
        acked[sid] = 0
        for text in texts:
            try:
                response = http.post(f"/api/sessions/{sid}/describe", json={"text": f"{text} {k}"})
            except httpx.TransportError:  # the server went away: was the turn committed?
                while True:
                    try:
                        state = http.get(f"/api/sessions/{sid}").json()
                        break
                    except httpx.TransportError:
                        time.sleep(0.2)
                if state["seq"] == acked[sid] + 1:
                    acked[sid] += 1
                    last[sid] = [r["gallery_index"] for r in state["results"]]
                continue
            assert response.status_code == 200, response.text
            acked[sid] += 1
            last[sid] = [r["gallery_index"] for r in response.json()["results"]]

    threads = [threading.Thread(target=drive, args=(k,)) for k in range(3)]
    for thread in threads:
        thread.start()
    try:
        while sum(acked.values()) < 6:
            time.sleep(0.01)
        server.kill()
        server.wait()
        server = _start(data, port, log)
        for thread in threads:
            thread.join(timeout=300)
        http = httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=120)
        for sid, count in acked.items():
            stored = http.get(f"/api/sessions/{sid}").json()
            assert stored["seq"] == count and stored["turns"] == count
            assert [r["gallery_index"] for r in stored["results"]] == last[sid]
        assert sum(acked.values()) >= 15  # most turns were made; the ones the kill cut may be lost, never doubled
    finally:
        server.kill()
        log.close()
