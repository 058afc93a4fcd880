"""``minterpr serve --demo``'s set-up: the demo gallery stored once (with capture times) and
registered, a first user whose password goes to a private file and never to the screen."""
from __future__ import annotations

import stat

import pytest

from support.serving import shared_world

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_demo_set_up(tmp_path_factory, tmp_path, monkeypatch, capsys):
    import minterpr.cli.demo_world as demo
    from minterpr.cli.main import build_parser
    from minterpr.cli.serve import cmd_serve
    from minterpr.data.formats.gallery import write_gallery
    from minterpr.index.store.gallery_store import open_gallery
    from minterpr.serving.service import build_services
    from support.serving import settings

    run, store = shared_world(tmp_path_factory)
    world = open_gallery(store)
    data = tmp_path / "demo" / "data"  # the demo's world, as build_data leaves it: images + gallery_test.jsonl
    data.mkdir(parents=True)
    (data / "crops").symlink_to(world.index.root, target_is_directory=True)
    write_gallery([image.__class__(f"crops/{image.path}", image.person_id, image.camera_id)
                   for image in world.index.images], data / "gallery_test.jsonl")
    calls = []
    monkeypatch.setattr(demo, "build_data", lambda out, seed, progress: calls.append("data") or data)
    monkeypatch.setattr(demo, "train_model", lambda out, data_dir, seed, progress: calls.append("train") or run)
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
