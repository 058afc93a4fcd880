"""`minterpr models fetch`: a catalogue model into the model cache, offline, from an HTTP server
this test starts on loopback (Range support toggled), serving a file the test makes: a whole
download, a resumed one, a server that ignores the range, a hash mismatch (one line naming both
hashes and --sha256, nothing kept), --sha256 accepting it, --from FILE, and the detector default."""

from __future__ import annotations

import hashlib
import http.server
import threading

import pytest

from minterpr.cli.main import main
from minterpr.errors import InputError
from minterpr.ingest import detector_zoo
from minterpr.ingest.detector_zoo import CatalogueEntry, resolve_detector
from minterpr.ingest.fetch import fetch_model

PAYLOAD = bytes(range(256)) * 2000  # 512 kB, the file the server serves
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    ranges = True  # whether the server honours Range
    served: list[str] = []  # the Range headers seen

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        header = self.headers.get("Range")
        type(self).served.append(header or "")
        start = int(header.split("=")[1].split("-")[0]) if header and self.ranges else 0
        if start >= len(PAYLOAD):
            self.send_response(416)
            self.end_headers()
            return
        body = PAYLOAD[start:]
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(body)))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(PAYLOAD) - 1}/{len(PAYLOAD)}")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture()
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Handler.served, _Handler.ranges = [], True
    yield f"http://127.0.0.1:{httpd.server_address[1]}/tiny.onnx"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture()
def catalogue(monkeypatch, server, tmp_path):
    """A catalogue entry pinned to the test's file, served on loopback; the cache in tmp_path."""
    entry = CatalogueEntry("tiny-det", "tiny.onnx", server, DIGEST, "yolox")
    monkeypatch.setitem(detector_zoo.CATALOGUE, "tiny-det", entry)
    monkeypatch.setenv("MINTERPR_MODEL_CACHE", str(tmp_path / "cache"))
    return entry


def test_fetch_downloads_checks_and_keeps(catalogue, tmp_path, capsys):
    path = fetch_model("tiny-det", progress=True)
    err = capsys.readouterr().err
    assert "fetch tiny-det" in err and "100%" in err  # the progress bar, on stderr
    path.unlink()
    path = fetch_model("tiny-det", progress=False)
    assert path == tmp_path / "cache" / "tiny.onnx" and path.read_bytes() == PAYLOAD
    assert not (tmp_path / "cache" / "tiny.onnx.part").exists()
    assert fetch_model("tiny-det", progress=False) == path and _Handler.served == ["", ""]  # cached: no request


def test_models_lists_the_catalogue_and_what_is_fetched(catalogue, tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    assert main(["models", str(tmp_path / "runs"), "--no-fingerprints"]) == 0
    out = capsys.readouterr().out
    assert "detector  tiny-det" in out and "not fetched (`minterpr models fetch tiny-det`)" in out
    fetch_model("tiny-det", progress=False)
    assert main(["models", str(tmp_path / "runs"), "--no-fingerprints"]) == 0
    assert f"in the cache: {tmp_path / 'cache' / 'tiny.onnx'}" in capsys.readouterr().out


def test_fetch_resumes_a_partial_download(catalogue, tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "tiny.onnx.part").write_bytes(PAYLOAD[:100_000])
    assert fetch_model("tiny-det", progress=False).read_bytes() == PAYLOAD
    assert _Handler.served == ["bytes=100000-"]


def test_fetch_starts_over_when_the_server_ignores_the_range(catalogue, tmp_path):
    _Handler.ranges = False
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "tiny.onnx.part").write_bytes(b"x" * 5000)  # junk that must not stay in front
    assert fetch_model("tiny-det", progress=False).read_bytes() == PAYLOAD


def test_a_hash_mismatch_is_one_line_with_both_hashes_and_keeps_nothing(monkeypatch, catalogue, tmp_path, capsys):
    pinned = "0" * 64
    monkeypatch.setitem(
        detector_zoo.CATALOGUE, "tiny-det", CatalogueEntry("tiny-det", "tiny.onnx", catalogue.url, pinned, "yolox")
    )
    assert main(["models", "fetch", "tiny-det"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and DIGEST in errors[0] and pinned in errors[0] and f"--sha256 {DIGEST}" in errors[0]
    assert not any((tmp_path / "cache").iterdir())
    assert main(["models", "fetch", "tiny-det", "--sha256", DIGEST]) == 0  # a file the user has checked
    assert (tmp_path / "cache" / "tiny.onnx").read_bytes() == PAYLOAD


def test_fetch_from_a_file_or_a_url_and_bad_sources(catalogue, tmp_path, capsys):
    copy = tmp_path / "mine.onnx"
    copy.write_bytes(PAYLOAD)
    assert main(["models", "fetch", "tiny-det", "--from", str(copy)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "cache" / "tiny.onnx")
    (tmp_path / "cache" / "tiny.onnx").unlink()
    assert main(["models", "fetch", "tiny-det", "--from", catalogue.url]) == 0
    for bad, says in ((str(tmp_path / "absent.onnx"), "no such file"), ("ftp://host/x", "only http")):
        (tmp_path / "cache" / "tiny.onnx").unlink(missing_ok=True)
        assert main(["models", "fetch", "tiny-det", "--from", bad]) == 2
        assert says in capsys.readouterr().err
    assert main(["models", "fetch", "nothing"]) == 2
    assert "no model 'nothing' in the detector catalogue" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # --sha256 is fetch's: `models list` refuses it
        main(["models", "--sha256", DIGEST])
    with pytest.raises(InputError, match="64 hex digits"):
        fetch_model("tiny-det", sha256="abc")


def test_a_dead_server_is_one_line_naming_from_file(catalogue, capsys):
    assert main(["models", "fetch", "tiny-det", "--from", "http://127.0.0.1:9/x.onnx"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "--from FILE" in errors[0]


def test_auto_detector_is_yolox_nano_when_fetched_else_hog_with_one_line(tmp_path):
    name, options, note = resolve_detector("auto", {}, cache=tmp_path)
    assert (name, options) == ("hog", {}) and "minterpr models fetch yolox-nano" in note and "\n" not in note
    (tmp_path / "yolox_nano.onnx").write_bytes(b"")
    assert resolve_detector("auto", {}, cache=tmp_path) == ("yolox-nano", {}, None)
    assert resolve_detector("onnx:det.onnx", {"decoder": "yolov8"}) == (
        "onnx",
        {"model": "det.onnx", "decoder": "yolov8"},
        None,
    )
    with pytest.raises(InputError, match="onnx:PATH"):
        resolve_detector("onnx:", {})
    with pytest.raises(InputError, match=r"detector options \(upscale\) need a named detector"):
        resolve_detector("auto", {"upscale": 1.5}, cache=tmp_path)  # HOG's option, meant for YOLOX-nano here
