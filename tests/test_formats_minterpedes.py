"""MInterPEDES JSON Lines: validation of each invariant, lenient/strict reading, round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minterpr.data.errors import DataError
from minterpr.data.formats import iter_minterpedes, read_minterpedes, write_minterpedes
from minterpr.types import Dialogue, QATurn, ReferenceTurn, RetrievalSample


def record(file_path="imgs/cam_a/0001.jpg", pid=12, t=1, i=1, **overrides):
    """A valid raw record with t text turns and i image turns."""
    conversations = [{"from": "human", "value": "a young man in a blue shirt and grey trousers"}]
    for k in range(t):
        conversations += [{"from": "gpt", "value": f"question {k}?"}, {"from": "human", "value": f"answer {k}"}]
    for k in range(i):
        conversations += [{"from": "gpt", "value": "<image>"}, {"from": "human", "value": f"feedback {k}"}]
    obj = {
        "file_path": file_path,
        "id": pid,
        "t_conversation_length": t,
        "i_conversation_length": i,
        "conversations": conversations,
        "image": [f"imgs/ref_{k}.jpg" for k in range(i)],
    }
    obj.update(overrides)
    return obj


def write_lines(path: Path, lines: list[object]) -> Path:
    path.write_bytes(
        b"".join(line if isinstance(line, bytes) else (json.dumps(line) + "\n").encode() for line in lines)
    )
    return path


def first_error(tmp_path: Path, obj: object) -> DataError:
    path = write_lines(tmp_path / "one.jsonl", [record(), obj])  # the bad record on line 2
    with pytest.raises(DataError) as info:
        read_minterpedes(path)
    return info.value


def test_valid_record_maps_to_sample(tmp_path):
    path = write_lines(tmp_path / "a.jsonl", [record(t=2, i=1, split="test")])
    [sample] = read_minterpedes(path, namespace="mip")
    assert sample.target_path == "imgs/cam_a/0001.jpg"
    assert sample.person_id == "mip:12"
    assert sample.dialogue.description.startswith("a young man")
    assert sample.dialogue.qa_turns == (QATurn("question 0?", "answer 0"), QATurn("question 1?", "answer 1"))
    assert sample.dialogue.reference_turns == (ReferenceTurn("imgs/ref_0.jpg", "feedback 0"),)
    assert sample.extra == {"split": "test"}  # unknown fields are kept, not rejected
    assert sample.dialogue.num_rounds == 4


@pytest.mark.parametrize(
    "obj, field, words",
    [
        (record(id="12"), "id", "expected an integer, got string"),
        (record(id=True), "id", "expected an integer, got boolean"),
        (record(file_path=3), "file_path", "expected a string"),
        (record(file_path="  "), "file_path", "empty string"),
        (record(t_conversation_length=-1), "t_conversation_length", ">= 0"),
        (record(i_conversation_length=1.0), "i_conversation_length", "got number"),
        (record(conversations="hi"), "conversations", "got string"),
        (record(image=None), "image", "got null"),
        ({k: v for k, v in record().items() if k != "image"}, "image", "missing"),
        (record(t_conversation_length=2), "conversations", "expected 1 + 2*t + 2*i = 7 messages"),
        (record(image=["a.jpg", "b.jpg"]), "image", "expected i_conversation_length=1 reference images, got 2"),
        (record(image=[""]), "image[0]", "empty string"),
        (record(t=0, i=0, conversations=[{"from": "gpt", "value": "x"}]), "conversations[0].from", "expected 'human'"),
        (
            record(
                t=1,
                i=0,
                conversations=[
                    {"from": "human", "value": "d"},
                    {"from": "human", "value": "q"},
                    {"from": "gpt", "value": "a"},
                ],
            ),
            "conversations[1].from",
            "expected 'gpt'",
        ),
        (
            record(
                t=1,
                i=0,
                conversations=[
                    {"from": "human", "value": "d"},
                    {"from": "gpt", "value": "q"},
                    {"from": "human", "value": " "},
                ],
            ),
            "conversations[2].value",
            "empty string",
        ),
        (
            record(
                t=1,
                i=0,
                conversations=[
                    {"from": "human", "value": "d"},
                    {"from": "gpt", "value": "<image>"},
                    {"from": "human", "value": "a"},
                ],
            ),
            "conversations[1].value",
            "text turn 1",
        ),
        (
            record(
                t=0,
                i=1,
                conversations=[
                    {"from": "human", "value": "d"},
                    {"from": "gpt", "value": "<image> "},
                    {"from": "human", "value": "a"},
                ],
            ),
            "conversations[1].value",
            "exactly '<image>'",
        ),
        (record(t=0, i=0, conversations=[{"from": "human"}]), "conversations[0].value", "missing"),
        (
            record(t=0, i=0, conversations=[{"from": "human", "value": "d", "lang": "en"}]),
            "conversations[0]",
            "unexpected",
        ),
        (record(t=0, i=0, conversations=["d"]), "conversations[0]", "got string"),
        ([record()], "<record>", "expected a JSON object, got array"),
        ("just text", "<record>", "expected a JSON object, got string"),
    ],
)
def test_each_invariant_names_its_field(tmp_path, obj, field, words):
    error = first_error(tmp_path, obj)
    assert (error.line, error.field) == (2, field)
    assert words in error.reason
    assert str(error).startswith(f"{tmp_path / 'one.jsonl'}:2: {field}: ")


def test_image_turns_must_be_the_last_pairs(tmp_path):
    # t=1, i=1 but the "<image>" pair comes first: the text turn holds "<image>".
    obj = record(
        t=1,
        i=1,
        conversations=[
            {"from": "human", "value": "d"},
            {"from": "gpt", "value": "<image>"},
            {"from": "human", "value": "f"},
            {"from": "gpt", "value": "q?"},
            {"from": "human", "value": "a"},
        ],
    )
    error = first_error(tmp_path, obj)
    assert error.field == "conversations[1].value"


def test_lenient_read_keeps_good_records_and_reports_each_bad_one(tmp_path):
    path = write_lines(
        tmp_path / "mixed.jsonl",
        [
            record(pid=1),
            b"\n",
            record(pid="x"),
            b'{"file_path": \n',
            b"\xff\xfe not utf-8\n",
            record(pid=2),
            b"   \n",
            record(pid=3, t_conversation_length=5),
            record(pid=4, file_path="b.jpg"),
            b'{"file_path": "b.jpg", "id"',
        ],
    )
    samples, report = read_minterpedes(path, strict=False)
    assert [s.person_id for s in samples] == ["minterpedes:1", "minterpedes:2", "minterpedes:4"]
    assert [(e.line, e.field) for e in report.problems] == [
        (3, "id"),
        (4, "<record>"),
        (5, "<record>"),
        (8, "conversations"),
        (10, "<record>"),
    ]
    assert "invalid UTF-8" in report.problems[2].reason
    assert "truncated" in report.problems[4].reason and "truncated" not in report.problems[1].reason
    assert report.records_read == 3 and not report.ok
    # Pair counting looks at every object line, valid or not; the truncated line never parsed.
    warned = {(w.line, w.field): w.reason for w in report.warnings}
    assert "occurs 4 times (lines 1, 3, 6, 8)" in warned[(1, "file_path")]
    assert "occurs 1 time (line 9)" in warned[(9, "file_path")]
    # Strict mode raises the first problem.
    with pytest.raises(DataError) as info:
        read_minterpedes(path)
    assert (info.value.line, info.value.field) == (3, "id")


def test_exactly_two_dialogues_per_target_gives_no_warning(tmp_path):
    path = write_lines(
        tmp_path / "pairs.jsonl", [record("a.jpg", 1), record("b.jpg", 2), record("a.jpg", 1), record("b.jpg", 2)]
    )
    samples, report = read_minterpedes(path, strict=False)
    assert len(samples) == 4 and report.ok and not report.warnings


def test_json_array_file_is_one_clear_error(tmp_path):
    path = tmp_path / "array.json"
    path.write_text(json.dumps([record(), record()], indent=2))
    samples, report = read_minterpedes(path, strict=False)
    assert samples == [] and len(report.problems) == 1
    assert report.problems[0].line == 1 and "JSON array, not JSON Lines" in report.problems[0].reason


def test_streaming_reads_lazily(tmp_path):
    # The bad line is far away: the first sample comes out before it is ever read.
    path = write_lines(tmp_path / "lazy.jsonl", [record(pid=1)] + [record(pid=k) for k in range(2, 50)] + [b"{oops\n"])
    stream = iter_minterpedes(path)
    assert next(stream).person_id == "minterpedes:1"
    with pytest.raises(DataError):
        list(stream)


def test_bom_and_crlf_are_accepted(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + json.dumps(record()).encode() + b"\r\n" + json.dumps(record()).encode() + b"\r\n"
    )
    assert len(read_minterpedes(path)) == 2


def test_check_images(tmp_path):
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "t.jpg").write_bytes(b"x")
    (tmp_path / "imgs" / "r.jpg").write_bytes(b"x")
    good = record("t.jpg", image=["r.jpg"])
    path = write_lines(tmp_path / "d.jsonl", [good, record("missing.jpg"), record("t.jpg", image=["nope.jpg"])])
    samples, report = read_minterpedes(path, strict=False, image_root=tmp_path / "imgs", check_images=True)
    assert len(samples) == 1
    assert [(e.line, e.field) for e in report.problems] == [(2, "file_path"), (3, "image[0]")]
    assert "missing.jpg" in report.problems[0].reason
    # Without check_images nothing is looked up.
    assert len(read_minterpedes(path)) == 3


def sample(k: int, **extra) -> RetrievalSample:
    return RetrievalSample(
        f"CUHK01/{k:04d}.png",
        f"minterpedes:{k}",
        Dialogue(
            '一位穿红色外套的女士 — she wears a "red" coat\twith ünïcödé',
            tuple(QATurn(f"q{j}: what about the shoes?", "white sneakers 👟") for j in range(k % 3)),
            tuple(ReferenceTurn(f"ref/{k}_{j}.jpg", "her coat is longer") for j in range(k % 2)),
        ),
        extra=extra,
    )


def test_round_trip_with_unicode_and_extras(tmp_path):
    samples = [sample(k) for k in range(6)] + [sample(7, split="train", meta={"llm": "gpt-4", "score": [1, 2.5]})]
    path = tmp_path / "out" / "rt.jsonl"
    path.parent.mkdir()
    assert write_minterpedes(samples, path) == 7
    assert read_minterpedes(path) == samples
    text = path.read_text(encoding="utf-8")
    assert "一位" in text and "\\u" not in text  # ensure_ascii=False
    first = json.loads(text.splitlines()[0])
    assert list(first) == [
        "file_path",
        "id",
        "t_conversation_length",
        "i_conversation_length",
        "conversations",
        "image",
    ]
    last = json.loads(text.splitlines()[-1])
    assert list(last)[-2:] == ["split", "meta"]  # extras after the canonical fields
    assert [p.name for p in path.parent.iterdir()] == ["rt.jsonl"]  # no temp file left


@pytest.mark.parametrize(
    "bad, words",
    [
        (RetrievalSample("a.jpg", "other:1", Dialogue("d")), "not in namespace"),
        (RetrievalSample("a.jpg", "minterpedes:abc", Dialogue("d")), "must be an integer"),
        (RetrievalSample("a.jpg", "minterpedes:007", Dialogue("d")), "not a canonical integer"),
        (RetrievalSample("a.jpg", "minterpedes:1", Dialogue(" ")), "conversations[0].value"),
        (RetrievalSample("a.jpg", "minterpedes:1", Dialogue("d", (QATurn("<image>", "a"),))), "text turn 1"),
        (RetrievalSample("a.jpg", "minterpedes:1", Dialogue("d"), extra={"image": []}), "overwrite"),
        (RetrievalSample("a.jpg", "minterpedes:1", Dialogue("d"), extra={"x": object()}), "cannot be written as JSON"),
    ],
)
def test_writer_refuses_what_the_reader_would_reject(tmp_path, bad, words):
    path = tmp_path / "w.jsonl"
    path.write_text("old content\n")
    with pytest.raises(ValueError, match="sample 2") as info:
        write_minterpedes([sample(1), bad], path)
    assert words in str(info.value)
    # Atomic: the old file is untouched and no temporary file is left behind.
    assert path.read_text() == "old content\n"
    assert [p.name for p in tmp_path.iterdir()] == ["w.jsonl"]


def test_other_namespace_round_trip(tmp_path):
    s = RetrievalSample("a.jpg", "cuhk-pedes:5", Dialogue("a man"))
    write_minterpedes([s], tmp_path / "n.jsonl", namespace="cuhk-pedes")
    assert read_minterpedes(tmp_path / "n.jsonl", namespace="cuhk-pedes") == [s]
