"""``minterpr data validate`` / ``stats``: every bad record flagged at its line, exit codes, formats."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from minterpr.cli.main import main
from minterpr.data.formats import write_chatpedes, write_gallery, write_minterpedes
from minterpr.types import Dialogue, GalleryImage, QATurn, ReferenceTurn, RetrievalSample


def good(target: str, pid: int) -> dict:
    return {
        "file_path": target,
        "id": pid,
        "t_conversation_length": 1,
        "i_conversation_length": 1,
        "conversations": [
            {"from": "human", "value": "a man in a grey coat"},
            {"from": "gpt", "value": "Bag?"},
            {"from": "human", "value": "a backpack"},
            {"from": "gpt", "value": "<image>"},
            {"from": "human", "value": "his coat is longer"},
        ],
        "image": ["ref/1.jpg"],
    }


def bad(**changes) -> bytes:
    obj = good("t/bad.jpg", 9)
    obj.update(changes)
    return (json.dumps(obj) + "\n").encode()


def line(obj: dict) -> bytes:
    return (json.dumps(obj) + "\n").encode()


swapped = good("t/x.jpg", 1)["conversations"]
swapped[1], swapped[2] = swapped[2], swapped[1]
image_first = good("t/x.jpg", 1)["conversations"]
image_first[1]["value"], image_first[3]["value"] = "<image>", "Bag?"

# (bytes of the line, field flagged or None for a good/blank line); the file's line numbers follow.
CORRUPTED = [
    (line(good("t/a.jpg", 1)), None),
    (line(good("t/a.jpg", 1)), None),
    (b'{"file_path": "t/b.jpg", "id": 2,, }\n', "<record>"),  # invalid JSON
    (bad(id="2"), "id"),  # wrong type
    (bad(t_conversation_length=True), "t_conversation_length"),  # bool is not int
    (b"\n", None),  # blank line: skipped
    (bad(t_conversation_length=2), "conversations"),  # wrong length
    (bad(image=[]), "image"),  # image count != i
    (bad(conversations=swapped), "conversations[1].from"),  # role order
    (bad(conversations=image_first), "conversations[1].value"),  # <image> in a text turn
    (b'{"file_path": "caf\xe9.jpg"}\n', "<record>"),  # not UTF-8
    (bad(file_path=""), "file_path"),  # empty value
    (b"[1, 2]\n", "<record>"),  # not an object
    (b'"a string"\n', "<record>"),  # not an object
    (bad(conversations=None), "conversations"),
    (line({k: v for k, v in good("t/c.jpg", 3).items() if k != "id"}), "id"),  # missing field
    (line(good("t/d.jpg", 4)), None),
    (line(good("t/d.jpg", 4)), None),
    (b'{"file_path": "t/e.jpg", "id": 5, "t_conv', "<record>"),  # truncated last line
]
EXPECTED = [(n, field) for n, (_, field) in enumerate(CORRUPTED, start=1) if field is not None]


@pytest.fixture
def corrupted(tmp_path: Path) -> Path:
    path = tmp_path / "corrupt.jsonl"
    path.write_bytes(b"".join(data for data, _ in CORRUPTED))
    return path


def flagged(out: str, path: Path) -> list[tuple[int, str]]:
    found = []
    for text in out.splitlines():
        if text.startswith(f"{path}:") and ": warning: " not in text:
            _, number, rest = text.split(":", 2)
            found.append((int(number), rest.strip().split(":", 1)[0]))
    return found


def test_validate_flags_each_bad_record_at_its_line(corrupted, capsys):
    assert main(["data", "validate", str(corrupted)]) == 1
    out = capsys.readouterr().out
    assert flagged(out, corrupted) == EXPECTED
    assert f"{corrupted}:11: <record>: invalid UTF-8" in out
    [last] = [text for text in out.splitlines() if text.startswith(f"{corrupted}:19:")]
    assert "invalid JSON" in last and "truncated" in last
    assert f"{corrupted}: OK" not in out


def test_validate_through_python_dash_m(corrupted):
    proc = subprocess.run(
        [sys.executable, "-m", "minterpr", "data", "validate", str(corrupted)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert flagged(proc.stdout, corrupted) == EXPECTED
    assert "bad record(s)" in proc.stderr


def sample(k: int, target: str) -> RetrievalSample:
    return RetrievalSample(
        target,
        f"minterpedes:{k}",
        Dialogue("une femme en manteau rouge", (QATurn("Shoes?", "white"),), (ReferenceTurn("r.jpg", "shorter hair"),)),
    )


def test_writer_output_is_valid_and_pair_warnings_keep_exit_zero(tmp_path, capsys):
    pairs = tmp_path / "pairs.jsonl"
    write_minterpedes([sample(1, "a.jpg"), sample(2, "a.jpg"), sample(3, "b.jpg"), sample(4, "b.jpg")], pairs)
    lonely = tmp_path / "lonely.jsonl"
    write_minterpedes([sample(1, "a.jpg"), sample(2, "b.jpg"), sample(3, "b.jpg")], lonely)
    assert main(["data", "validate", str(pairs), str(lonely)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{pairs}: OK (minterpedes, 4 dialogues)",
        f"{lonely}:1: file_path: warning: target image 'a.jpg' occurs 1 time (line 1); "
        "MInterPEDES has exactly 2 dialogues per target image",
        f"{lonely}: OK (minterpedes, 3 dialogues, 1 warning)",
    ]


def test_one_bad_file_among_good_ones_exits_one(tmp_path, corrupted, capsys):
    ok = tmp_path / "ok.jsonl"
    write_minterpedes([sample(1, "a.jpg"), sample(2, "a.jpg")], ok)
    assert main(["data", "validate", str(ok), str(corrupted)]) == 1
    out = capsys.readouterr().out
    assert f"{ok}: OK" in out and flagged(out, corrupted) == EXPECTED


def test_format_detection_for_each_format(tmp_path, capsys):
    chat = tmp_path / "test_reid.json"
    write_chatpedes([RetrievalSample("a.jpg", "chatpedes:1", Dialogue("a man", (QATurn("Hat?", "no"),)))], chat)
    gallery = tmp_path / "gallery.jsonl"
    write_gallery([GalleryImage("a.jpg", "g:1", attributes={"gender": ("male",)})], gallery)
    dialogues = tmp_path / "dialogues.txt"  # no telling suffix: content decides
    write_minterpedes([sample(1, "a.jpg"), sample(2, "a.jpg")], dialogues)
    assert main(["data", "validate", str(chat), str(gallery), str(dialogues)]) == 0
    out = capsys.readouterr().out
    assert "(chatpedes, 1 dialogues)" in out and "(gallery, 1 images)" in out and "(minterpedes, 2 dialogues)" in out


def test_chatpedes_problems_and_explicit_format(tmp_path, capsys):
    path = tmp_path / "chat.json"
    path.write_text(
        '[\n{"id": 1, "file_path": "a.jpg", "chats": [[{"from": "gpt", "value": "q"}, '
        '{"from": "user", "value": "d"}]]},\n{"id": 2, "file_path": "b.jpg", "chats": '
        '[[{"from": "user", "value": "d"}], [{"from": "user", "value": "x"}]]}\n]\n'
    )
    assert main(["data", "validate", "--format", "chatpedes", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:3: chats[1][0].from: expected 'gpt'" in out


def test_json_array_given_as_minterpedes(tmp_path, capsys):
    path = tmp_path / "array.json"
    path.write_text(json.dumps([good("a.jpg", 1)]))
    assert main(["data", "validate", "--format", "minterpedes", str(path)]) == 1
    assert "JSON array, not JSON Lines" in capsys.readouterr().out


def test_usage_errors_exit_two(tmp_path, capsys):
    missing = tmp_path / "nope.jsonl"
    assert main(["data", "validate", str(missing)]) == 2
    assert f"{missing}: no such file" in capsys.readouterr().err
    unknown = tmp_path / "mystery.jsonl"
    unknown.write_text('{"foo": 1}\n')
    assert main(["data", "validate", str(unknown)]) == 2
    assert "cannot detect the format" in capsys.readouterr().err
    assert main(["data", "validate", "--image-root", str(missing), str(unknown)]) == 2
    with pytest.raises(SystemExit) as info:
        main(["data", "validate", "--format", "yaml", str(unknown)])
    assert info.value.code == 2


def test_check_images_flag(tmp_path, capsys):
    (tmp_path / "imgs").mkdir()
    for name in ("a.jpg", "r.jpg"):
        (tmp_path / "imgs" / name).write_bytes(b"x")
    path = tmp_path / "d.jsonl"
    write_minterpedes([sample(1, "a.jpg"), sample(2, "a.jpg"), sample(3, "gone.jpg")], path)
    assert main(["data", "validate", str(path)]) == 0
    assert main(["data", "validate", str(path), "--check-images", "--image-root", str(tmp_path / "imgs")]) == 1
    out = capsys.readouterr().out
    assert f"{path}:3: file_path: image not found" in out


def test_stats_dialogues_and_json(tmp_path, corrupted, capsys):
    out_json = tmp_path / "stats.json"
    assert main(["data", "stats", str(corrupted), "--json", str(out_json)]) == 0
    captured = capsys.readouterr()
    assert f"{len(EXPECTED)} bad record(s) skipped" in captured.err
    stats = json.loads(out_json.read_text())
    assert stats["dialogues"] == 4 and stats["identities"] == 2 and stats["target_images"] == 2
    assert stats["text_turns"] == {"1": 4} and stats["rounds"] == {"3": 4}
    assert stats["description_words"] == {"min": 6, "mean": 6.0, "median": 6, "max": 6}  # "a man in a grey coat"
    assert stats["answer_words_mean"] == 2.0 and stats["feedback_words_mean"] == 4.0
    assert stats["skipped_records"] == len(EXPECTED) == 14
    assert "rounds_per_dialogue  min 3  mean 3  median 3  max 3" in captured.out
    assert "text_turns           1: 4" in captured.out


def test_stats_gallery(tmp_path, capsys):
    path = tmp_path / "g.jsonl"
    write_gallery(
        [
            GalleryImage("a.jpg", "g:1", "g:cam1", "front", {"gender": ("male",)}),
            GalleryImage("b.jpg", "g:1", "g:cam2", None, {"gender": ("male",), "age": ("young",)}),
            GalleryImage("c.jpg", "g:2"),
        ],
        path,
    )
    out_json = tmp_path / "g.json"
    assert main(["data", "stats", str(path), "--json", str(out_json)]) == 0
    stats = json.loads(out_json.read_text())
    assert (stats["images"], stats["identities"], stats["cameras"], stats["images_without_camera"]) == (3, 2, 2, 1)
    assert stats["images_per_identity"] == {"min": 1, "mean": 1.5, "median": 1.5, "max": 2}
    assert stats["views"] == {"front": 1, "unknown": 2}
    assert stats["attribute_coverage"]["gender"] == pytest.approx(2 / 3, abs=1e-4)
    assert stats["attribute_coverage"]["age"] == pytest.approx(1 / 3, abs=1e-4)
    assert stats["attribute_coverage"]["carried"] == 0.0
    assert "gallery" in capsys.readouterr().out
