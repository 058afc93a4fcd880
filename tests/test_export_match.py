"""The export of a confirmed match: a zip with crops, times, cameras, the conversation and an HTML report."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import io
import json
import re
import zipfile
from pathlib import Path

import pytest
from PIL import Image

from minterpr.errors import ImageError, InputError
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.session import Session
from minterpr.serving.export import build_match_export, match_export_filename, match_export_bytes, write_match_export
from minterpr.serving.export_record import match_export_from_record
from minterpr.serving.export_report import SIMILARITY_NOTE
from minterpr.types import GalleryImage

COLOURS = ["red", "blue", "green", "black", "white", "red"]


@pytest.fixture()
def gallery(tmp_path: Path) -> tuple[Session, list[dict]]:
    """Six crops (PNG and JPEG), cameras and times, a session over them with the oracle attribute backend."""
    root = tmp_path / "crops"
    root.mkdir()
    images = []
    for i, colour in enumerate(COLOURS):
        name = f"c{i}.{'png' if i % 2 else 'jpg'}"
        Image.new("RGB", (16, 32), (40 * i, 100, 200 - 30 * i)).save(root / name)
        images.append(
            GalleryImage(
                name,
                f"secret:{i}",
                camera_id=f"site:cam{i % 3}",
                attributes={"gender": ("female",), "upper_colour": (colour,)},
            )
        )
    backend = AttributeBackend()
    session = Session(backend, backend.index_images(images, root=str(root)), schedule="questions")
    metadata = [{"time": f"2026-03-0{i + 1}T10:0{i}:00+00:00"} for i in range(len(images))]
    return session, metadata


def _converse(session: Session) -> None:
    session.describe("a woman in a red <b>jacket</b>")
    session.feedback(0, "not her: she carried no bag & wore jeans")
    session.feedback(5, "yes, that's her")


def _zip(data: bytes) -> zipfile.ZipFile:
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert archive.testzip() is None
    return archive


def test_export_holds_crops_times_cameras_conversation_and_report(gallery, tmp_path) -> None:
    session, metadata = gallery
    _converse(session)
    export = build_match_export(
        session,
        case={"id": 7, "title": "Lost child", "purpose": "report 12/3", "cameras": ["site:cam0", "site:cam2"]},
        session_id="s-1",
        exported_by="ana",
        gallery="demo",
        metadata=metadata,
        turn_times=["t1", "t2", "t3"],
        exported_at="2026-03-09T12:00:00+00:00",
    )
    path = write_match_export(export, tmp_path / "out" / match_export_filename(export))
    assert path.name == "match_7_s-1_2026-03-09.zip"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left beside it
    archive = _zip(path.read_bytes())
    names = set(archive.namelist())
    assert {"README.txt", "report.html", "match.json", "conversation.json"} <= names
    crops = sorted(n for n in names if n.startswith("crops/"))
    assert crops == ["crops/01_confirmed_site-cam2.png", "crops/02_ruled_out_site-cam0.jpg"]

    root = Path(session.index.root)
    assert archive.read(crops[0]) == (root / "c5.png").read_bytes()  # byte for byte
    match = json.loads(archive.read("match.json"))
    assert match["note"] == SIMILARITY_NOTE and "not an identification" in match["note"]
    first, second = match["images"]
    assert (first["role"], first["camera"], first["time"], first["gallery_index"]) == (
        "confirmed",
        "site:cam2",
        "2026-03-06T10:05:00+00:00",
        5,
    )
    assert first["sha256"] == hashlib.sha256(archive.read(crops[0])).hexdigest()
    assert first["rank"] >= 1 and isinstance(first["similarity"], float)
    assert "top colour: red" in first["matched"]
    assert (second["role"], second["reason"]) == ("ruled_out", "not her: she carried no bag & wore jeans")
    assert match["case"]["purpose"] == "report 12/3" and match["exported_by"] == "ana"

    turns = json.loads(archive.read("conversation.json"))["turns"]
    assert [(t["kind"], t["at"]) for t in turns] == [("description", "t1"), ("feedback", "t2"), ("feedback", "t3")]
    assert turns[2]["image_member"] == crops[0] and turns[1]["image_member"] == crops[1]
    assert "top colour: red" in turns[0]["facts"]

    report = archive.read("report.html").decode("utf-8")
    assert "Similarity, not identity." in report and "not an identification" in report
    assert "a woman in a red &lt;b&gt;jacket&lt;/b&gt;" in report and "<b>jacket" not in report  # escaped
    assert "no bag &amp; wore jeans" in report and "site:cam0, site:cam2" in report
    assert "report 12/3" in report and "2026-03-06T10:05:00+00:00" in report
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", report) and "<script" not in report
    embedded = re.findall(r'src="data:(image/\w+);base64,([A-Za-z0-9+/=]+)"', report)
    assert [m for m, _ in embedded] == ["image/png", "image/jpeg"]
    assert base64.b64decode(embedded[0][1]) == archive.read(crops[0])
    for blob in (archive.read("README.txt"), archive.read("match.json"), report.encode()):
        assert b"secret:" not in blob  # the gallery's person ids never leave


def test_nothing_to_export_without_a_confirmation(gallery, tmp_path) -> None:
    session, _ = gallery
    session.describe("a woman in red")
    session.feedback(1, "not her")
    with pytest.raises(InputError, match="no result has been confirmed"):
        build_match_export(session, case={}, session_id="s", exported_by="ana")
    session.feedback(5, "that's her")
    session.undo()  # the confirmation undone: nothing confirmed again
    with pytest.raises(InputError, match="no result has been confirmed"):
        build_match_export(session, case={}, session_id="s", exported_by="ana")


def test_a_failed_write_leaves_the_old_file(gallery, tmp_path, monkeypatch) -> None:
    session, _ = gallery
    _converse(session)
    with pytest.raises(ImageError, match="c5.png: not a readable image"):
        build_match_export(
            session, case={"id": 1}, session_id="s", exported_by="ana", read_image=lambda i: b"not an image"
        )
    target = tmp_path / "out" / "match.zip"
    target.parent.mkdir()
    target.write_bytes(b"old")
    export = build_match_export(session, case={"id": 1}, session_id="s", exported_by="ana")
    import minterpr.serving.export as module

    def fail(_export):  # the zip already holds README.txt when the report fails
        raise OSError("disk full")

    monkeypatch.setattr(module, "render_report", fail)
    with pytest.raises(OSError, match="disk full"):
        write_match_export(export, target)
    assert target.read_bytes() == b"old" and [p.name for p in target.parent.iterdir()] == ["match.zip"]
    monkeypatch.undo()
    write_match_export(export, target)
    assert "report.html" in _zip(target.read_bytes()).namelist()


def test_export_from_the_services_record(gallery, tmp_path) -> None:
    """The zip the page serves: built from the service's ExportRecord (pydantic) and its result views."""
    schemas = pytest.importorskip("minterpr.serving.schemas.search")
    session, _ = gallery
    root = Path(session.index.root)
    case = schemas.CaseView(
        id=3,
        title="Case <3>",
        purpose="a stolen bike, report 88",
        cameras=None,
        start=dt.datetime(2026, 3, 1),
        end=None,
        created_by="lead",
        created=0.0,
        status="open",
    )
    confirmed = schemas.ConfirmedView(
        gallery_index=5,
        path="c5.png",
        camera="site:cam2",
        time="2026-03-06T10:05:00",
        similarity=0.8123,
        rank=2,
        statement="similarity, not identity",
    )
    conversation = [
        schemas.TimelineEntry(seq=1, kind="describe", text="a woman in red", user="ana", time=1.7e9),
        schemas.TimelineEntry(
            seq=2,
            kind="feedback",
            text="Not this person. no bag",
            gallery_index=0,
            user="ana",
            time=1.7e9 + 60,
            rank=4,
            similarity=0.31,
        ),
        schemas.TimelineEntry(
            seq=3,
            kind="confirm",
            text="Yes, this is the person.",
            gallery_index=5,
            user="ana",
            time=1.7e9 + 120,
            rank=2,
            similarity=0.8123,
        ),
    ]
    record = schemas.ExportRecord(
        case=case,
        session_id="abc",
        gallery="demo",
        confirmed=confirmed,
        images=[
            {
                "path": "c5.png",
                "absolute_path": str(root / "c5.png"),
                "camera": "site:cam2",
                "time": "2026-03-06T10:05:00",
                "metadata": {},
            }
        ],
        conversation=conversation,
        exported_by="ana",
        exported_at=dt.datetime(2026, 3, 9, 12, 0),
        statement="x",
    )
    results = [
        schemas.ResultView(
            rank=7,
            gallery_index=0,
            path="c0.jpg",
            camera="site:cam0",
            time=None,
            similarity=0.2,
            matches=["gender: female"],
            contradicts=["top colour: blue"],
            judgement=False,
        )
    ]
    read = {0: (root / "c0.jpg").read_bytes()}
    export = match_export_from_record(record, read_image=read.__getitem__, results=results, gallery_size=6)
    archive = _zip(match_export_bytes(export))
    assert sorted(n for n in archive.namelist() if n.startswith("crops/")) == [
        "crops/01_confirmed_site-cam2.png",
        "crops/02_ruled_out_site-cam0.jpg",
    ]
    match = json.loads(archive.read("match.json"))
    # rank and match as the page showed them when each was judged (not as the results stand now: 0.2, 7)
    assert [(im["role"], im["similarity"], im["rank"]) for im in match["images"]] == [
        ("confirmed", 0.8123, 2),
        ("ruled_out", 0.31, 4),
    ]
    assert match["images"][1]["contradicted"] == ["top colour: blue"]
    assert match["case"]["title"] == "Case <3>" and match["exported_at"] == "2026-03-09T12:00:00"
    turns = json.loads(archive.read("conversation.json"))["turns"]
    assert [t["kind"] for t in turns] == ["describe", "feedback", "confirm"]
    assert turns[1]["image_member"] == "crops/02_ruled_out_site-cam0.jpg"
    assert turns[0]["at"] == "2023-11-14T22:13:20+00:00" and turns[0]["user"] == "ana"
    report = archive.read("report.html").decode()
    assert "Case &lt;3&gt;" in report and "a stolen bike, report 88" in report and "(6 images)" in report
    assert "match 81 %" in report and "match 31 %" in report and "“no bag”" in report
    # only the analyst's words: nothing the system recorded for them, no identification language
    assert "Not this person." not in report and "Yes, this is the person." not in report
    assert [t["text"] for t in turns] == ["a woman in red", "no bag", ""] and match["images"][0]["reason"] == ""
    # ISO-8601 times, an open scope in words
    assert "all cameras" in report and "any time" in report and "2026-03-01T00:00:00" in report
    assert match["case"]["created"] == "1970-01-01T00:00:00+00:00" and "—" not in report
    missing = record.model_copy(update={"images": [{"path": "c5.png", "absolute_path": str(root / "gone.png")}]})
    with pytest.raises(ImageError, match="cannot read the crop"):
        match_export_from_record(missing)
