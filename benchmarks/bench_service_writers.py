"""Other writers beside the server for ``bench_service.py --writers``: the command line and an ingestion job.

While the concurrent sessions run, a second process writes the same database the documented way
(``minterpr users add NAME --role viewer --data DATA``, password on standard input, once every
``every_s`` seconds), and an admin starts an ingestion job over HTTP (``POST /api/ingest``: a folder
of generated crops in ``DATA/incoming``, embedded by the bench's run into a new gallery) and
follows it to its end. Every failure is collected: a CLI exit status other than 0, an HTTP error,
a job that does not end ``done``.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

PASSWORD = "correct horse battery staple"


def make_crops(folder: Path, n: int = 120, seed: int = 0) -> Path:
    """``n`` small generated person crops (64 x 32 PNG) in ``folder`` (the ingestion job's source)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for k in range(n):
        colour = rng.integers(0, 255, size=3)
        pixels = np.clip(colour + rng.normal(0, 40, size=(64, 32, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"c{k:04d}.png")
    return folder


def add_admin(data: Path) -> str:
    """An admin with an API key in the service folder ``data`` (for the ingestion job); returns the key."""
    from minterpr.serving.accounts import Principal
    from minterpr.serving.service import build_services
    from minterpr.serving.settings import ServeSettings

    services = build_services(ServeSettings(data_dir=data), jobs=False)
    try:
        user_id = services.accounts.create_user("bench-admin", PASSWORD, "admin")
        return services.accounts.create_api_key(Principal(user_id, "bench-admin", "admin", "api_key"), "ingest")[1]
    finally:
        services.close()


class Writers:
    """The CLI writer and the ingestion job, each in a thread, from :meth:`start` to :meth:`stop`."""

    def __init__(self, url: str, data: Path, run: Path, admin_key: str, every_s: float = 0.5) -> None:
        self.url, self.data, self.run, self.key, self.every_s = url, data, run, admin_key, every_s
        self.errors: list[str] = []
        self.cli_writes = 0
        self.job: dict[str, Any] = {}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._cli), threading.Thread(target=self._ingest)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        return {
            "cli_writes": self.cli_writes,
            "job": self.job,
            "errors": len(self.errors),
            "error_examples": self.errors[:3],
        }

    def _cli(self) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
        while not self._stop.is_set():
            name = "cli" + secrets.token_hex(4)
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "minterpr",
                    "users",
                    "add",
                    name,
                    "--role",
                    "viewer",
                    "--data",
                    str(self.data),
                    "--quiet",
                ],
                input=PASSWORD + "\n",
                text=True,
                capture_output=True,
                env=env,
                timeout=300,
            )
            if done.returncode != 0:
                self.errors.append(f"users add: exit {done.returncode}: {done.stderr.strip()[-200:]}")
            else:
                self.cli_writes += 1
            self._stop.wait(self.every_s)

    def _ingest(self) -> None:
        import httpx

        source = make_crops(self.data / "incoming" / "bench_crops")
        with httpx.Client(base_url=self.url, headers={"X-API-Key": self.key}, timeout=120) as http:
            started = time.perf_counter()
            r = http.post(
                "/api/ingest",
                json={
                    "gallery": "ingested",
                    "source": str(source),
                    "run": str(self.run),
                    "camera": "bench:door",
                    "start": "2026-12-01T08:00:00Z",
                },
            )
            if r.status_code != 202:
                self.errors.append(f"ingest: {r.status_code} {r.text[:200]}")
                return
            job = r.json()["id"]
            while True:
                state = http.get(f"/api/ingest/{job}").json()
                if state["status"] not in ("queued", "running"):
                    break
                time.sleep(0.5)
            self.job = {
                "status": state["status"],
                "seconds": round(time.perf_counter() - started, 1),
                "crops": state.get("progress", {}).get("crops"),
                "message": state.get("message", "")[:200],
            }
            if state["status"] != "done":
                self.errors.append(f"ingest job {state['status']}: {state.get('message', '')[:200]}")
