"""``minterpr serve`` on the command line: the shared options (--verbose/--quiet, --device) with
its own --log-level kept, one clear line when the port is taken (before anything is built), and
a running server that prints where to go and how to stop, and stops on Ctrl+C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from minterpr.cli.main import build_parser, main
from minterpr.cli.commands.serve import uvicorn_level

pytest.importorskip("uvicorn")
REPO = Path(__file__).resolve().parents[1]


def _listening_socket() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_takes_the_shared_options_and_keeps_log_level():
    parser = build_parser()
    args = parser.parse_args(["serve"])
    assert args.verbose is False and args.quiet is False and args.device == "cpu" and args.log_level is None
    assert getattr(args.handler, "_common_options", False)  # configures the minterpr logger first
    assert uvicorn_level(args) == "info"
    assert uvicorn_level(parser.parse_args(["serve", "-v"])) == "debug"
    assert uvicorn_level(parser.parse_args(["serve", "--quiet"])) == "warning"
    assert uvicorn_level(parser.parse_args(["serve", "-q", "--log-level", "debug"])) == "debug"  # explicit wins
    assert parser.parse_args(["serve", "--device", "cuda:1"]).device == "cuda:1"
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--verbose", "--quiet"])


def test_a_taken_port_is_one_line_naming_it_before_anything_is_built(tmp_path, capsys):
    taken = _listening_socket()
    port = taken.getsockname()[1]
    try:
        code = main(
            [
                "serve",
                "--demo",
                "--demo-out",
                str(tmp_path / "demo"),
                "--data",
                str(tmp_path / "state"),
                "--port",
                str(port),
            ]
        )
    finally:
        taken.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert f"port {port} on 127.0.0.1 is already in use" in err[0] and f"--port {port + 1}" in err[0]
    assert not (tmp_path / "demo").exists() and not (tmp_path / "state").exists()  # nothing trained or created


def test_the_server_says_where_to_go_and_stops_on_ctrl_c(tmp_path):
    port = _free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "minterpr", "serve", "--data", str(tmp_path / "state"), "--port", str(port), "--quiet"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "stop" in line and "Ctrl+C" in line:
                break
        text = "".join(lines)
        assert f"open      http://127.0.0.1:{port}/" in text, (text, process.stderr.read() if process.poll() else "")
        for _ in range(100):  # the socket listens before the banner; the app answers once uvicorn started
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
                    assert response.status == 200
                    break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("the server never answered")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
