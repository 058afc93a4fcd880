"""Gallery manifests: attribute validation through the ontology, duplicates, round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minterpr.data.errors import DataError
from minterpr.data.formats import read_gallery, write_gallery
from minterpr.types import GalleryImage


def write_lines(path: Path, objs: list[object]) -> Path:
    path.write_text("".join(json.dumps(obj) + "\n" for obj in objs), encoding="utf-8")
    return path


def line(**fields):
    base = {"path": "grid/0069_1.jpeg", "person_id": "peta-grid:0069"}
    base.update(fields)
    return base


def test_optional_fields_default_to_none_and_attributes_are_normalised(tmp_path):
    path = write_lines(
        tmp_path / "g.jsonl",
        [
            line(),
            line(
                path="b.jpg",
                camera_id="peta-grid:cam2",
                view="back",
                attributes={"upper_colour": ["white", "black", "white"], "gender": ["male"]},
            ),
            line(path="c.jpg", attributes={}),
        ],
    )
    a, b, c = read_gallery(path)
    assert a == GalleryImage("grid/0069_1.jpeg", "peta-grid:0069")
    assert b.attributes == {"upper_colour": ("black", "white"), "gender": ("male",)}
    assert (b.camera_id, b.view) == ("peta-grid:cam2", "back")
    assert c.attributes == {}  # labelled, nothing known: distinct from None


@pytest.mark.parametrize(
    "obj, field, words",
    [
        (line(attributes={"shoe_size": ["42"]}), "attributes.shoe_size", "unknown slot 'shoe_size'"),
        (line(attributes={"upper_colour": ["teal"]}), "attributes.upper_colour", "unknown value 'teal'"),
        (line(attributes={"gender": ["male", "female"]}), "attributes.gender", "takes one value"),
        (line(attributes={"carried": ["nothing", "backpack"]}), "attributes.carried", "excludes"),
        (line(attributes={"gender": "male"}), "attributes.gender", "array of value names"),
        (line(attributes={"gender": []}), "attributes.gender", "empty value list"),
        (line(attributes=["gender"]), "attributes", "got array"),
        (line(person_id="0069"), "person_id", "not a namespaced person id"),
        (line(person_id=69), "person_id", "expected a string, got integer"),
        ({"person_id": "x:1"}, "path", "missing"),
        (line(path=" "), "path", "empty string"),
        (line(camera_id=3), "camera_id", "string or null"),
        (line(view=""), "view", "empty string"),
        (line(pose="walking"), "pose", "unknown field"),
        ("grid/0069_1.jpeg", "<record>", "expected a JSON object"),
    ],
)
def test_errors_name_field_slot_and_value(tmp_path, obj, field, words):
    path = write_lines(tmp_path / "g.jsonl", [line(path="ok.jpg"), obj])
    with pytest.raises(DataError) as info:
        read_gallery(path)
    assert (info.value.line, info.value.field) == (2, field)
    assert words in info.value.reason


def test_lenient_read_reports_bad_lines_and_duplicate_paths(tmp_path):
    path = write_lines(
        tmp_path / "g.jsonl", [line(path="a.jpg"), line(path="b.jpg", view=1), line(path="a.jpg"), line(path="c.jpg")]
    )
    images, report = read_gallery(path, strict=False)
    assert [im.path for im in images] == ["a.jpg", "a.jpg", "c.jpg"]
    assert [(e.line, e.field) for e in report.problems] == [(2, "view")]
    assert [(w.line, w.field) for w in report.warnings] == [(3, "path")]
    assert "already listed at line 1" in report.warnings[0].reason


def test_round_trip(tmp_path):
    images = [
        GalleryImage(
            "peta/GRID/0069_1.jpeg",
            "peta-grid:0069",
            "peta-grid:cam1",
            "front",
            {"gender": ("female",), "upper_colour": ("black", "white"), "carried": ("backpack", "handbag")},
        ),
        GalleryImage("vidéo/帧_001.jpg", "street:7", None, None, None),
        GalleryImage("x.jpg", "street:8", attributes={}),
    ]
    path = tmp_path / "gallery.jsonl"
    assert write_gallery(images, path) == 3
    assert read_gallery(path) == images
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert list(first) == ["path", "person_id", "camera_id", "view", "attributes"]
    assert first["attributes"]["upper_colour"] == ["black", "white"]


@pytest.mark.parametrize(
    "bad, words",
    [
        (GalleryImage("a.jpg", "no-namespace"), "person_id"),
        (GalleryImage("a.jpg", "x:1", attributes={"gender": ("alien",)}), "unknown value 'alien'"),
        (GalleryImage("a.jpg", "x:1", attributes={"upper_colour": ("white", "black")}), "normalised"),
    ],
)
def test_writer_refuses_invalid_images(tmp_path, bad, words):
    path = tmp_path / "g.jsonl"
    with pytest.raises(ValueError) as info:
        write_gallery([GalleryImage("ok.jpg", "x:0"), bad], path)
    assert words in str(info.value) and "image 2" in str(info.value)
    assert not path.exists()


def test_check_images(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"x")
    path = write_lines(tmp_path / "g.jsonl", [line(path="a.jpg"), line(path="gone.jpg")])
    images, report = read_gallery(path, strict=False, check_images=True)  # root: the manifest's directory
    assert [im.path for im in images] == ["a.jpg"]
    assert [(e.line, e.field) for e in report.problems] == [(2, "path")]


def test_check_images_confines_paths_to_the_root(tmp_path, capsys):
    """``../`` and absolute paths are problems of their line under --check-images, unless allowed."""
    from minterpr.cli.main import main

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jpg").write_bytes(b"x")
    (tmp_path / "secret.jpg").write_bytes(b"x")
    path = write_lines(
        tmp_path / "data" / "g.jsonl",
        [line(path="a.jpg"), line(path="../secret.jpg"), line(path=str(tmp_path / "secret.jpg"))],
    )
    images, report = read_gallery(path, strict=False, check_images=True)
    assert [image.path for image in images] == ["a.jpg"]
    assert [(p.line, p.field) for p in report.problems] == [(2, "path"), (3, "path")]
    assert all("leaves its root" in p.reason for p in report.problems)
    with pytest.raises(DataError, match=r"g.jsonl:2: path: image path '../secret.jpg' leaves its root"):
        read_gallery(path, check_images=True)
    assert len(read_gallery(path, check_images=True, allow_outside_root=True)) == 3
    # the command line: a problem per line (exit 1), and the opt-in
    assert main(["data", "validate", str(path), "--check-images"]) == 1
    assert f"{path}:2: path: image path '../secret.jpg' leaves its root" in capsys.readouterr().out
    assert main(["data", "validate", str(path), "--check-images", "--allow-outside-root"]) == 0
