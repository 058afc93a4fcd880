"""The search service of ``bench_service.py``: a uvicorn server in a child process over a state folder,
one thread for torch, rate limits out of the way, on a free loopback port."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

LAUNCH = """
import sys, uvicorn
from pathlib import Path
from minterpr.serving.app import create_app
from minterpr.serving.settings import RateSpec, ServeSettings
settings = ServeSettings(data_dir=Path(sys.argv[1]), torch_threads=1, search_rate=RateSpec(1e6, 10**6),
                         max_live_sessions=1000, import_roots=tuple(Path(p) for p in sys.argv[3:]))
uvicorn.run(create_app(settings), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


class Server:
    def __init__(self, data: Path, port: int, log: Path, import_roots: tuple[Path, ...] = ()) -> None:
        self.data, self.port, self.log, self.import_roots = data, port, log, import_roots
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 300.0) -> float:
        import httpx

        started = time.perf_counter()
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", LAUNCH, str(self.data), str(self.port), *map(str, self.import_roots)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        while time.perf_counter() - started < timeout:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2).status_code == 200:
                    return time.perf_counter() - started
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("the server did not start")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
