"""``minterpr serve --demo``'s set-up: the demo gallery stored once (with capture times) and
registered, a first user whose password goes to a private file and never to the screen."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from support.serving import shared_world

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _fake_demo(tmp_path_factory, tmp_path, monkeypatch):
    """The demo's world and run stood in by the shared test world: (run, the calls made)."""
    import minterpr.cli.shared.demo_world as demo
    from minterpr.data.formats.gallery import write_gallery
    from minterpr.index.store.gallery_store import open_gallery

    run, store = shared_world(tmp_path_factory)
    world = open_gallery(store)
    data = tmp_path / "demo" / "data"  # the demo's world, as build_data leaves it: images + gallery_test.jsonl
    data.mkdir(parents=True)
    (data / "crops").symlink_to(world.index.root, target_is_directory=True)
    write_gallery(
        [image.__class__(f"crops/{image.path}", image.person_id, image.camera_id) for image in world.index.images],
        data / "gallery_test.jsonl",
    )
    calls = []
    monkeypatch.setattr(demo, "build_data", lambda out, seed, progress: calls.append("data") or data)
    monkeypatch.setattr(demo, "train_model", lambda out, data_dir, seed, progress: calls.append("train") or run)
    return run, calls


def test_the_demo_set_up(tmp_path_factory, tmp_path, monkeypatch, capsys):
    from minterpr.cli.main import build_parser
    from minterpr.cli.commands.serve import cmd_serve
    from minterpr.serving.service import build_services
    from support.serving import settings

    run, calls = _fake_demo(tmp_path_factory, tmp_path, monkeypatch)
    state = tmp_path / "state"
    argv = ["serve", "--demo", "--demo-out", str(tmp_path / "demo"), "--data", str(state), "--no-serve"]
    assert cmd_serve(build_parser().parse_args(argv)) == 0
    credentials = state / "demo_credentials.txt"
    password = credentials.read_text().split("password: ")[1].strip()
    out = capsys.readouterr()
    assert password not in out.out + out.err and str(credentials) in out.out
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert cmd_serve(build_parser().parse_args(argv)) == 0  # again: nothing rebuilt, no second user
    assert calls == ["data", "train", "data", "train"]
    services = build_services(settings(state))
    try:
        assert [u["username"] for u in services.accounts.users()] == ["demo"]
        assert services.accounts.login("demo", password, client="test").principal.role == "admin"
        gallery = services.galleries.list()[0]
        assert gallery.name == "demo" and gallery.images == 24 and gallery.time_start is not None
        assert (gallery.time_end - gallery.time_start).total_seconds() > 80000  # spread over a day
        assert [e["action"] for e in services.audit.entries(limit=100)].count("gallery_register") == 1
    finally:
        services.close()


STREET_VIDEOS = [
    Path(__file__).resolve().parents[2] / "shared" / "data" / "video" / "vtest.avi",
    Path("/usr/share/doc/opencv-doc/examples/data/vtest.avi"),
]


def _street_clip(folder: Path, frames: int = 45) -> Path:
    """The first ``frames`` frames of vtest.avi as a short video (skip without the video or PyAV)."""
    av = pytest.importorskip("av")
    pytest.importorskip("cv2")
    source = next((p for p in STREET_VIDEOS if p.is_file()), None)
    if source is None:
        pytest.skip("vtest.avi not found (../shared/data/video or Debian's opencv-doc)")
    clip = folder / "street.avi"
    with av.open(str(source)) as src, av.open(str(clip), "w") as out:
        stream = out.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 768, 576, "yuv420p"
        for k, frame in enumerate(src.decode(video=0)):
            if k >= frames:
                break
            out.mux(stream.encode(av.VideoFrame.from_ndarray(frame.to_ndarray(format="rgb24"), format="rgb24")))
        out.mux(stream.encode())
    return clip


def test_the_street_demo_ingests_once_beside_the_synthetic_one(tmp_path_factory, tmp_path, monkeypatch, capsys):
    from minterpr.cli.main import build_parser
    from minterpr.cli.commands.serve import cmd_serve
    from minterpr.serving.service import build_services
    from support.serving import settings

    run, calls = _fake_demo(tmp_path_factory, tmp_path, monkeypatch)
    clip = _street_clip(tmp_path)
    state = tmp_path / "state"
    argv = [
        "serve",
        "--demo",
        "street",
        "--video",
        str(clip),
        "--run",
        str(run),
        "--demo-out",
        str(tmp_path / "demo"),
        "--data",
        str(state),
        "--no-serve",
    ]
    assert cmd_serve(build_parser().parse_args(argv)) == 0
    services = build_services(settings(state))
    try:
        galleries = {g.name: g for g in services.galleries.list()}
        assert set(galleries) == {"demo", "street"} and galleries["street"].images > 0
        assert galleries["street"].time_start is not None  # capture times from STREET_START
        store = services.galleries.rows()
    finally:
        services.close()
    first = {row.name: row.directory for row in store}
    assert cmd_serve(build_parser().parse_args(argv)) == 0  # again: the ingested gallery is reused
    services = build_services(settings(state))
    try:
        assert {row.name: row.directory for row in services.galleries.rows()} == first
        registered = [e["action"] for e in services.audit.entries(limit=100)].count("gallery_register")
        assert registered == 2  # demo + street, once each
    finally:
        services.close()


def test_the_street_demo_without_a_model_or_video_is_one_line(tmp_path, monkeypatch):
    import minterpr.cli.shared.serve_street as street
    import minterpr.models.zoo as zoo
    from minterpr.cli.main import build_parser
    from minterpr.cli.commands.serve import cmd_serve
    from minterpr.cli.shared.common import CLIError
    from minterpr.errors import RunError

    monkeypatch.setenv(zoo.MODELS_ENV, str(tmp_path / "models"))  # a checkout without the shipped models
    with pytest.raises(RunError, match="no shipped model 'peta-pa100k-lite2'"):
        zoo.default_real_model_dir()
    video = tmp_path / "v.avi"
    video.write_bytes(b"x")
    state = ["--data", str(tmp_path / "state"), "--no-serve"]
    with pytest.raises(RunError, match="--run RUN"):
        cmd_serve(build_parser().parse_args(["serve", "--demo", "street", "--video", str(video), *state]))
    with pytest.raises(CLIError, match="--video .*: no such file"):
        cmd_serve(build_parser().parse_args(["serve", "--demo", "street", "--video", str(tmp_path / "no.avi"), *state]))
    monkeypatch.setattr(street, "STREET_VIDEOS", (tmp_path / "none.avi",))
    with pytest.raises(CLIError, match="no street video found"):
        cmd_serve(build_parser().parse_args(["serve", "--demo", "street", "--run", "r", *state]))
    with pytest.raises(CLIError, match="go with --demo street"):
        cmd_serve(build_parser().parse_args(["serve", "--demo", "--video", str(video), *state]))


def test_the_street_demo_uses_yolox_nano_when_it_is_fetched(tmp_path_factory, tmp_path, monkeypatch):
    import json
    import shutil

    from minterpr.cli.main import build_parser
    from minterpr.cli.commands.serve import cmd_serve
    from minterpr.serving.service import build_services
    from support.helpers import shared_weights_dir
    from support.serving import settings

    weights = shared_weights_dir() / "yolox_nano.onnx"
    if not weights.is_file():
        pytest.skip(f"{weights} is absent (../shared/weights, research-only: not in the repository)")
    pytest.importorskip("onnxruntime")
    cache = tmp_path / "model_cache"
    cache.mkdir()
    shutil.copy(weights, cache / "yolox_nano.onnx")  # as `minterpr models fetch yolox-nano --from` leaves it
    monkeypatch.setenv("MINTERPR_MODEL_CACHE", str(cache))
    run, _ = _fake_demo(tmp_path_factory, tmp_path, monkeypatch)
    clip = _street_clip(tmp_path)
    state = tmp_path / "state"
    argv = [
        "serve",
        "--demo",
        "street",
        "--video",
        str(clip),
        "--run",
        str(run),
        "--demo-out",
        str(tmp_path / "demo"),
        "--data",
        str(state),
        "--no-serve",
    ]
    assert cmd_serve(build_parser().parse_args(argv)) == 0
    services = build_services(settings(state))
    try:
        street = next(row for row in services.galleries.rows() if row.name == "street")
        assert next(g for g in services.galleries.list() if g.name == "street").images > 0
    finally:
        services.close()
    jobs = list(Path(street.directory).glob("ingest/*/job.json"))
    assert len(jobs) == 1 and json.loads(jobs[0].read_text())["options"]["detector"]["detector"] == "yolox-nano"


def test_the_demo_admin_is_decided_before_the_build_and_said_in_one_line(
    tmp_path_factory, tmp_path, monkeypatch, capsys
):
    import minterpr.cli.shared.demo_world as demo
    from minterpr.cli.main import build_parser
    from minterpr.cli.commands.serve import cmd_serve
    from minterpr.serving.service import build_services
    from support.serving import PASSWORD, settings

    run, calls = _fake_demo(tmp_path_factory, tmp_path, monkeypatch)
    state = tmp_path / "state"
    train = demo.train_model

    def train_while_a_user_is_added(out, data_dir, seed, progress):  # an operator adds a user during the build
        side = build_services(settings(state), jobs=False)
        try:
            if not side.accounts.users() or [u["username"] for u in side.accounts.users()] == ["demo"]:
                side.accounts.create_user("ops", PASSWORD, "admin")
        finally:
            side.close()
        return train(out, data_dir, seed, progress)

    monkeypatch.setattr(demo, "train_model", train_while_a_user_is_added)
    argv = ["serve", "--demo", "--demo-out", str(tmp_path / "demo"), "--data", str(state), "--no-serve"]
    assert cmd_serve(build_parser().parse_args(argv)) == 0
    assert "created user 'demo' (admin)" in capsys.readouterr().out
    services = build_services(settings(state), jobs=False)
    try:
        assert sorted(u["username"] for u in services.accounts.users()) == ["demo", "ops"]
    finally:
        services.close()
    other = tmp_path / "other"  # a service with users before the demo: no demo admin, and it says so
    side = build_services(settings(other), jobs=False)
    side.accounts.create_user("ops", PASSWORD, "admin")
    side.close()
    argv = ["serve", "--demo", "--demo-out", str(tmp_path / "demo"), "--data", str(other), "--no-serve"]
    assert cmd_serve(build_parser().parse_args(argv)) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "'demo' admin" in line]
    assert said == [
        "[serve] no 'demo' admin created: the service has 1 user already; log in as one of them (`minterpr users list`)"
    ]


def test_the_silent_minutes_after_the_match_temperature_are_announced(monkeypatch, caplog, tmp_path):
    import logging
    from types import SimpleNamespace

    import minterpr.evaluation.presence_calibration as presence
    import minterpr.runtime.pipeline as pipeline_module
    import minterpr.data.dataset as dataset_module
    from minterpr.cli.shared.demo_world import calibrate_demo_presence

    extras = SimpleNamespace(presence=None, match_temperature=lambda: 1.0)
    fake = SimpleNamespace(extras=extras, index_images=lambda *a, **k: None, rerank_config=lambda: None, backend=None)
    monkeypatch.setattr(pipeline_module, "load_pipeline", lambda *a, **k: fake)
    monkeypatch.setattr(
        dataset_module.BuiltDataset, "split", lambda *a, **k: SimpleNamespace(gallery=[], image_root=tmp_path)
    )
    said_before = []

    def calibrate(*args, **kwargs):
        said_before.append(caplog.text)
        raise RuntimeError("stop here")

    monkeypatch.setattr(presence, "calibrate_presence", calibrate)
    with caplog.at_level(logging.INFO, logger="minterpr"), pytest.raises(RuntimeError, match="stop here"):
        calibrate_demo_presence(tmp_path, tmp_path)
    assert "fitting the presence model on val" in said_before[0]
