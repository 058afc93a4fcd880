"""MTG captions stored at ingestion are searched by every path (simulate, eval, chat, serve) behind one
switch (minterpr.vlm.caption.use_captions); without it, or with a store that holds none, nothing changes."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest

from support.serving import PASSWORD, prepare, shared_world
from minterpr.cli.main import main
from minterpr.data.formats.gallery import write_gallery
from minterpr.data.formats.minterpedes import write_minterpedes
from minterpr.errors import InputError
from minterpr.index.gallery_index import GalleryIndex
from minterpr.index.store.gallery_store import CAPTIONS, load_gallery
from minterpr.types import Dialogue, GalleryImage, RetrievalSample
from minterpr.vlm.caption import crop_record, use_captions

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SAID = "a woman in a red top"
TARGET = "p3_1.png"  # the crop the captions say matches SAID (every other crop: a man in blue)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(run, a copy of the shared store holding captions, a copy holding none, the store's images)."""
    run, store = shared_world(tmp_path_factory)
    folder = tmp_path_factory.mktemp("captions")
    captioned, plain = folder / "captioned", folder / "plain"
    shutil.copytree(store, captioned)
    shutil.copytree(store, plain)
    images = load_gallery(store).images
    lines = [
        json.dumps(
            crop_record(
                image.path,
                {"gender": ("female",), "upper_colour": ("red",)}
                if image.path == TARGET
                else {"gender": ("male",), "upper_colour": ("blue",)},
            )
        )
        for image in images
    ]
    (captioned / CAPTIONS).write_text("\n".join(lines) + "\n")
    return run, captioned, plain, images


def test_the_switch_off_or_nothing_stored_leaves_the_index_as_it_is(world, tmp_path):
    _, captioned, plain, _ = world
    index = load_gallery(plain)
    assert use_captions(index, None) == (index, {})
    assert use_captions(index, plain)[0] is index  # a store without captions: searched as before
    other = GalleryIndex([GalleryImage("elsewhere.png", "x:1")], np.eye(1, dtype=np.float32))
    same, record = use_captions(other, captioned)  # no record names its crops
    assert same is other and record["vlm_captioned"] == 0
    blended, record = use_captions(index, captioned, 1.0)
    assert record["vlm_captioned"] == len(index) and blended.fused is None
    with pytest.raises(InputError, match="no such captions file"):
        use_captions(index, tmp_path / "missing.jsonl")
    with pytest.raises(InputError, match="0..1"):
        use_captions(index, captioned, 1.5)


def _eval(run, data, gallery, root, out, extra=()):
    code = main(
        [
            "eval",
            "--run",
            str(run),
            "--data",
            str(data),
            "--gallery",
            str(gallery),
            "--image-root",
            str(root),
            "--attribute-weight",
            "1",
            "-q",
            "--json",
            str(out),
            *extra,
        ]
    )
    assert code == 0
    return json.loads(out.read_text())


def test_eval_searches_with_the_captions_and_without_them_as_before(world, tmp_path):
    run, captioned, plain, images = world
    data = tmp_path / "test.jsonl"
    write_minterpedes([RetrievalSample(TARGET, "minterpedes:3", Dialogue(SAID))], data)
    gallery = tmp_path / "gallery.jsonl"
    write_gallery(images, gallery)
    root = load_gallery(plain).root
    before = _eval(run, data, gallery, root, tmp_path / "a.json")
    absent = _eval(run, data, gallery, root, tmp_path / "b.json", ["--vlm-captions", str(plain)])
    unweighted = _eval(
        run,
        data,
        gallery,
        root,
        tmp_path / "c.json",
        ["--vlm-captions", str(captioned / CAPTIONS), "--vlm-caption-weight", "0"],
    )
    used = _eval(run, data, gallery, root, tmp_path / "d.json", ["--vlm-captions", str(captioned)])
    assert absent["rounds"] == before["rounds"] and "vlm_captions" not in absent["protocol"]
    assert unweighted["rounds"] == before["rounds"]  # weight 0: the image model's evidence alone
    assert used["rounds"][0]["r1"] == 100.0 and before["rounds"][0]["r1"] < 100.0
    assert used["protocol"]["vlm_captioned"] == len(images) and used["protocol"]["vlm_caption_weight"] == 0.5


def _chat(run, store, monkeypatch, capsys, extra=()):
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{SAID}\n:quit\n"))
    code = main(["chat", "--run", str(run), "--index", str(store), "--top", "3", *extra])
    assert code == 0
    return capsys.readouterr().out


def test_chat_searches_a_store_with_its_captions_behind_the_switch(world, monkeypatch, capsys):
    run, captioned, plain, images = world
    before = _chat(run, plain, monkeypatch, capsys)
    switched_off = _chat(run, captioned, monkeypatch, capsys)  # captions stored, switch off: as before
    used = _chat(run, captioned, monkeypatch, capsys, ["--vlm-captions", str(captioned), "--vlm-caption-weight", "1"])
    absent = _chat(run, plain, monkeypatch, capsys, ["--vlm-captions", str(plain)])
    assert switched_off == before and "MTG captions" not in before
    assert f"MTG captions: {len(images)} of {len(images)} images" in used
    top = [line for line in used.splitlines() if line.startswith("  1. ")][0]
    assert TARGET in top
    said = f"MTG captions: 0 of {len(images)} images ({plain} holds none)\n"
    assert said in absent and absent.replace(said, "") == before


def _served(tmp_path, run, store, **settings):
    services = prepare(tmp_path, run, store, **settings)
    ana = services.accounts.login("ana", PASSWORD, client="cli").principal
    case = services.cases.open_case(ana, "lost child", "report 17, duty officer", None, None, None)
    view = services.search.start(ana, case.id, "test")
    view = services.search.describe(ana, view.session_id, SAID)
    return services, [(r.gallery_index, round(r.similarity, 6)) for r in view.results]


def test_serve_searches_each_gallery_with_the_captions_its_store_holds(world, tmp_path):
    run, captioned, plain, images = world
    _, before = _served(tmp_path / "a", run, plain)
    _, switched_off = _served(tmp_path / "b", run, captioned)
    _, absent = _served(tmp_path / "c", run, plain, vlm_captions=True)
    services, used = _served(tmp_path / "d", run, captioned, vlm_captions=True, vlm_caption_weight=1.0)
    assert switched_off == before and absent == before
    target = [i for i, image in enumerate(images) if image.path == TARGET][0]
    assert used[0][0] == target and used != before
    entries = [e for e in services.audit.entries(limit=1000) if e["action"] == "session_start"]
    assert entries[-1]["details"]["vlm_captioned"] == len(images)


def test_serve_takes_the_switch_from_its_command_line(tmp_path):
    from minterpr.cli.main import build_parser
    from minterpr.cli.shared.service_state import settings_from

    args = build_parser().parse_args(
        ["serve", "--data", str(tmp_path), "--vlm-captions", "--vlm-caption-weight", "0.3"]
    )
    settings = settings_from(args)
    assert settings.vlm_captions is True and settings.vlm_caption_weight == 0.3
    assert settings_from(build_parser().parse_args(["serve", "--data", str(tmp_path)])).vlm_captions is False


def test_vlm_caption_writes_a_stores_captions_into_the_store(world, tmp_path, capsys):
    from minterpr.index.store.gallery_store import check_store_folder
    from minterpr.vlm.caption import read_captions
    from minterpr.vlm.testing import ScriptedServer, valid_answer

    _, _, plain, images = world
    store = tmp_path / "store"
    shutil.copytree(plain, store)
    with ScriptedServer([valid_answer], repeat=True) as server:
        code = main(
            ["vlm", "caption", "--index", str(store), "--limit", "2", "--vlm-url", server.url, "--vlm-model", "m"]
        )
    assert code == 0 and f"-> {store / CAPTIONS}" in capsys.readouterr().out
    assert sorted(read_captions(store / CAPTIONS)) == sorted(image.path for image in images[:2])
    check_store_folder(store)  # still a store: a save into it keeps the captions
    # nothing seen (the dry-run server): recorded, so a resumed run does not ask again, but no evidence
    assert use_captions(load_gallery(store), store)[1]["vlm_captioned"] == 0
