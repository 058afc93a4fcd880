"""``minterpr data show``: one record drawn as a PNG, and clear errors for what can go wrong."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from minterpr.cli.main import main
from minterpr.data.formats import write_gallery, write_minterpedes
from minterpr.data.render_record import (
    REFERENCE_COLOUR,
    TARGET_COLOUR,
    RenderConfig,
    gallery_identities,
    load_font,
    read_record,
    render_record,
    wrap_text,
)
from minterpr.types import Dialogue, GalleryImage, QATurn, ReferenceTurn, RetrievalSample

TARGET_FILL = (0, 200, 200)  # colours no frame, text or background uses, to find each image in the output
REFERENCE_FILL = (200, 200, 0)


def _sample(target: str, pid: int, references: list[str]) -> RetrievalSample:
    dialogue = Dialogue(
        "a woman in a long grey coat carrying a black handbag",
        (QATurn("What colour were her shoes?", "White."), QATurn("Was she wearing a hat?", "No.")),
        tuple(ReferenceTurn(ref, f"Not her: the coat was longer ({k}).") for k, ref in enumerate(references)),
    )
    return RetrievalSample(target, f"minterpedes:{pid}", dialogue)


@pytest.fixture()
def dataset(tmp_path: Path) -> Path:
    """DIR/test.jsonl with two records (1 and 3 references) and DIR/gallery_test.jsonl."""
    (tmp_path / "images").mkdir()
    Image.new("RGB", (40, 80), TARGET_FILL).save(tmp_path / "images" / "t.png")
    for k in range(3):
        Image.new("RGB", (40, 80), REFERENCE_FILL).save(tmp_path / "images" / f"r{k}.png")
    write_minterpedes(
        [
            _sample("images/t.png", 7, ["images/r0.png"]),
            _sample("images/t.png", 7, ["images/r0.png", "images/r1.png", "images/r2.png"]),
        ],
        tmp_path / "test.jsonl",
    )
    write_gallery(
        [GalleryImage("images/t.png", "synth:7")]
        + [GalleryImage(f"images/r{k}.png", f"synth:{10 + k}") for k in range(3)],
        tmp_path / "gallery_test.jsonl",
    )
    return tmp_path


def _pixels(path: Path, colour: tuple[int, int, int]) -> int:
    array = np.asarray(Image.open(path).convert("RGB"))
    return int(np.all(array == np.array(colour, dtype=np.uint8), axis=-1).sum())


def test_show_draws_target_references_and_frames(dataset: Path, capsys) -> None:
    one, three = dataset / "one.png", dataset / "three.png"
    assert main(["data", "show", str(dataset / "test.jsonl"), "--index", "0", "--out", str(one)]) == 0
    assert main(["data", "show", str(dataset / "test.jsonl"), "--index", "1", "--out", str(three)]) == 0
    assert "record 1 of 2" in capsys.readouterr().out
    with Image.open(one) as a, Image.open(three) as b:
        assert a.width == b.width == RenderConfig().width
        assert b.height > a.height  # one row per reference turn
    # The target is scaled to 256 px high (128 wide): its pixels are all there, in a green frame.
    assert _pixels(one, TARGET_FILL) == 128 * 256 == _pixels(three, TARGET_FILL)
    assert _pixels(one, TARGET_COLOUR) > 0
    ref_area = 96 * 192  # each reference at 192 px high
    assert _pixels(one, REFERENCE_FILL) == ref_area and _pixels(three, REFERENCE_FILL) == 3 * ref_area
    assert 0 < _pixels(one, REFERENCE_COLOUR) < _pixels(three, REFERENCE_COLOUR)


def test_show_index_out_of_range_says_how_many(dataset: Path, capsys) -> None:
    out = dataset / "x.png"
    assert main(["data", "show", str(dataset / "test.jsonl"), "--index", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "has 2 records" in err and "0..1" in err
    assert main(["data", "show", str(dataset / "test.jsonl"), "--index", "-1", "--out", str(out)]) == 2
    assert not out.exists()


def test_show_missing_file_and_missing_image(dataset: Path, capsys) -> None:
    out = dataset / "x.png"
    assert main(["data", "show", str(dataset / "nope.jsonl"), "--out", str(out)]) == 2
    assert "nope.jsonl: no such file" in capsys.readouterr().err
    (dataset / "images" / "r2.png").unlink()
    assert main(["data", "show", str(dataset / "test.jsonl"), "--index", "0", "--out", str(out)]) == 0
    assert main(["data", "show", str(dataset / "test.jsonl"), "--index", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "reference image 'images/r2.png' not found" in err


def test_show_image_root(dataset: Path, tmp_path_factory, capsys) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (dataset / "test.jsonl").rename(elsewhere / "test.jsonl")
    out = elsewhere / "x.png"
    assert main(["data", "show", str(elsewhere / "test.jsonl"), "--out", str(out)]) == 2
    assert "target image 'images/t.png' not found" in capsys.readouterr().err
    assert main(["data", "show", str(elsewhere / "test.jsonl"), "--out", str(out), "--image-root", str(dataset)]) == 0
    assert out.is_file()


def test_show_malformed_record_points_to_validate(dataset: Path, capsys) -> None:
    bad = dataset / "bad.jsonl"
    bad.write_text('{"file_path": "images/t.png", "id": 1}\n', encoding="utf-8")
    assert main(["data", "show", str(bad), "--out", str(dataset / "x.png")]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:1:" in err and "minterpr data validate" in err


def test_read_record_and_identities(dataset: Path) -> None:
    sample, count = read_record(dataset / "test.jsonl", 1)
    assert count == 2 and len(sample.dialogue.reference_turns) == 3
    assert gallery_identities(dataset / "test.jsonl")["images/r1.png"] == "synth:11"
    assert gallery_identities(dataset / "images" / "t.png") == {}  # no gallery_t.jsonl beside it
    with pytest.raises(IndexError, match="has 2 records"):
        read_record(dataset / "test.jsonl", 5)


def test_render_record_without_references_or_identities(dataset: Path) -> None:
    sample = RetrievalSample("images/t.png", "minterpedes:7", Dialogue("a man"))
    out = render_record(sample, dataset, dataset / "sub" / "plain.png", RenderConfig(width=500, target_height=100))
    assert out.is_file() and Image.open(out).width == 500
    assert _pixels(out, REFERENCE_COLOUR) == 0 and _pixels(out, TARGET_FILL) == 50 * 100


def test_wrap_text_fits_and_keeps_every_word() -> None:
    font = load_font(15)
    text = "The top should be mustard rather than orange " * 4 + "images/" + "x" * 80 + ".jpg"
    lines = wrap_text(text, font, 200)
    assert len(lines) > 3 and all(font.getlength(line) <= 200 for line in lines)
    assert "".join("".join(lines).split()) == "".join(text.split())


def test_show_confines_paths_to_the_image_root(tmp_path: Path, capsys) -> None:
    """A record naming ``../x.png`` is refused (exit 2, file and record named) unless the user opts in."""
    (tmp_path / "data").mkdir()
    Image.new("RGB", (40, 80), TARGET_FILL).save(tmp_path / "outside.png")
    Image.new("RGB", (40, 80), REFERENCE_FILL).save(tmp_path / "data" / "r.png")
    records = tmp_path / "data" / "test.jsonl"
    write_minterpedes([_sample("../outside.png", 1, ["r.png"])], records)
    out = tmp_path / "x.png"
    assert main(["data", "show", str(records), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "record 0: target image: image path '../outside.png' leaves its root" in err and not out.exists()
    assert main(["data", "show", str(records), "--out", str(out), "--allow-outside-root"]) == 0
    assert _pixels(out, TARGET_FILL) == 128 * 256


def test_show_names_an_unreadable_image(dataset: Path, capsys) -> None:
    (dataset / "images" / "r0.png").write_bytes(b"not a png")
    assert main(["data", "show", str(dataset / "test.jsonl"), "--out", str(dataset / "x.png")]) == 2
    assert "r0.png: not an image" in capsys.readouterr().err
