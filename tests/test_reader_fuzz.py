"""Generated bad inputs for every dataset reader: only DataError (strict) or a ReadReport problem
(lenient) ever comes out, never another exception, and what is read can be written back.

Inputs: random bytes; random JSON values (deep nesting, huge numbers, NaN, wrong types, unicode
with lone surrogates escaped in JSON); valid records with one value anywhere inside replaced by
such a value. Every reader is run strict and lenient on the same file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minterpr.cli.main import main
from minterpr.data.errors import DataError
from minterpr.data.formats import read_caption_dataset, read_chatpedes, read_gallery, read_minterpedes
from minterpr.data.formats.chatpedes import write_chatpedes
from minterpr.data.formats.gallery import write_gallery
from minterpr.data.formats.jsonl import iter_json_lines
from minterpr.data.formats.minterpedes import write_minterpedes
from minterpr.data.formats.safejson import MAX_JSON_DEPTH
from minterpr.data.stats import dialogue_stats, format_stats, gallery_stats
from minterpr.evaluation.report import EvaluationReport

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# ----------------------------------------------------------------------------- JSON text
@dataclass(frozen=True)
class Raw:
    """A token written verbatim: not-quite-JSON numbers Python's json would accept or choke on."""

    text: str


@dataclass(frozen=True)
class Deep:
    """``value`` inside ``depth`` arrays (or objects): written without recursion, any depth."""

    depth: int
    value: Any
    objects: bool


def dump(value: Any) -> str:
    """JSON text of ``value``; strings ASCII-escaped so lone surrogates become ``\\udXXX``."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Deep):
        if value.objects:
            return '{"a": ' * value.depth + dump(value.value) + "}" * value.depth
        return "[" * value.depth + dump(value.value) + "]" * value.depth
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(dump(v) for v in value) + "]"
    return json.dumps(value)


surrogates = st.integers(0xD800, 0xDFFF).map(chr)
texts = st.one_of(
    st.text(max_size=12), st.builds(lambda a, s, b: a + s + b, st.text(max_size=4), surrogates, st.text(max_size=4))
)
raw_numbers = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e400", "1" * 5000, "1e-99999"]).map(Raw)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
    raw_numbers,
)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4), max_leaves=16
)
deep = st.builds(Deep, st.integers(MAX_JSON_DEPTH - 2, 3000), values, st.booleans())
anything = st.one_of(values, deep)


# ----------------------------------------------------------------------------- valid records to break
def minterpedes_record() -> dict:
    return {
        "file_path": "t/a.jpg",
        "id": 1,
        "t_conversation_length": 1,
        "i_conversation_length": 1,
        "conversations": [
            {"from": "human", "value": "a man in red"},
            {"from": "gpt", "value": "Bag?"},
            {"from": "human", "value": "no"},
            {"from": "gpt", "value": "<image>"},
            {"from": "human", "value": "taller"},
        ],
        "image": ["t/b.jpg"],
        "note": {"x": [1]},
    }


def chatpedes_record() -> dict:
    return {
        "id": 3,
        "file_path": "c/1.jpg",
        "chats": [
            [{"from": "gpt", "value": "Describe him."}, {"from": "user", "value": "a man"}],
            [{"from": "gpt", "value": "Hat?"}, {"from": "user", "value": "no"}],
        ],
    }


def gallery_record() -> dict:
    return {
        "path": "g/1.jpg",
        "person_id": "x:1",
        "camera_id": "x:c1",
        "view": "front",
        "attributes": {"gender": ["male"], "upper_colour": ["red", "black"]},
    }


def caption_record() -> dict:
    return {
        "file_path": "p/1.jpg",
        "id": 7,
        "split": "test",
        "captions": ["a woman", "in a coat"],
        "processed_tokens": [["a", "woman"], ["in", "a", "coat"]],
    }


def slots(value: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) of a JSON value: places where a value can be replaced."""
    out, stack = [], [value]
    while stack:
        item = stack.pop()
        keys = list(item) if isinstance(item, dict) else range(len(item)) if isinstance(item, list) else []
        for key in keys:
            out.append((item, key))
            stack.append(item[key])
    return out


@st.composite
def broken(draw: st.DrawFn, make: Callable[[], dict]) -> dict:
    record = make()
    container, key = draw(st.sampled_from(slots(record)))
    container[key] = draw(anything)
    return record


# ----------------------------------------------------------------------------- readers
def read_all(path: Path, reader: Callable[..., Any], **options: Any) -> list:
    """Read strict and lenient; check that only the documented outcomes happen. Returns the
    records of the lenient read."""
    try:
        strict = reader(path, **options)
    except DataError as exc:
        assert exc.file == str(path) and exc.reason and exc.field
        strict = None
    records, report = reader(path, strict=False, **options)
    assert all(isinstance(p, DataError) for p in report.problems + report.warnings)
    if strict is not None:
        assert records == strict and report.ok
    else:
        assert not report.ok  # the strict error is a lenient problem
    return records


def check_dialogue_file(path: Path, tmp: Path) -> None:
    samples = read_all(path, read_minterpedes)
    write_minterpedes(samples, tmp / "back.jsonl")  # what was read writes back (no surrogate, no NaN)
    assert read_minterpedes(tmp / "back.jsonl") == samples
    format_stats(dialogue_stats(samples))


def check_chatpedes_file(path: Path, tmp: Path) -> None:
    samples = read_all(path, read_chatpedes)
    write_chatpedes(samples, tmp / "back.json")
    assert read_chatpedes(tmp / "back.json") == samples


def check_gallery_file(path: Path, tmp: Path) -> None:
    images = read_all(path, read_gallery)
    write_gallery(images, tmp / "back.jsonl")
    format_stats(gallery_stats(images))


def check_caption_file(path: Path, tmp: Path) -> None:
    for fmt in ("auto", "rstpreid", "tbps"):
        read_all(path, read_caption_dataset, format=fmt, split="test" if fmt == "tbps" else None)


def check_report_file(path: Path, tmp: Path) -> None:
    try:
        EvaluationReport.load(path)
    except DataError as exc:
        assert exc.file == str(path) and exc.reason


LINE_READERS = [check_dialogue_file, check_gallery_file]
DOCUMENT_READERS = [check_chatpedes_file, check_caption_file, check_report_file]


@FUZZ
@given(data=st.binary(max_size=400))
def test_random_bytes(tmp_path: Path, data: bytes):
    path = tmp_path / "fuzz.json"
    path.write_bytes(data)
    for check in LINE_READERS + DOCUMENT_READERS:
        check(path, tmp_path)


@FUZZ
@given(lines=st.lists(anything, min_size=1, max_size=4))
def test_random_json_values(tmp_path: Path, lines: list):
    path = tmp_path / "fuzz.json"
    path.write_text("\n".join(dump(v) for v in lines) + "\n", encoding="utf-8")
    for check in LINE_READERS:
        check(path, tmp_path)
    path.write_text(dump(lines if len(lines) > 1 else lines[0]), encoding="utf-8")
    for check in DOCUMENT_READERS:
        check(path, tmp_path)


@FUZZ
@given(data=st.data())
def test_valid_records_with_one_value_replaced(tmp_path: Path, data: st.DataObject):
    """Wrong types at any level: a good record with a random value put anywhere inside it."""
    path = tmp_path / "fuzz.json"
    for make, check, lines in (
        (minterpedes_record, check_dialogue_file, True),
        (gallery_record, check_gallery_file, True),
        (chatpedes_record, check_chatpedes_file, False),
        (caption_record, check_caption_file, False),
    ):
        records = [make(), data.draw(broken(make)), make()]
        text = "\n".join(dump(r) for r in records) + "\n" if lines else dump(records)
        path.write_text(text, encoding="utf-8")
        check(path, tmp_path)


# ----------------------------------------------------------------------------- limits, one by one
def test_each_limit_is_one_problem_naming_line_and_field(tmp_path: Path):
    good = json.dumps(minterpedes_record())
    bad_lines = [
        '{"file_path": ' + "[" * 1000 + "]" * 1000 + "}",  # the reproduced crash: 2 KB, 1,000 levels
        good.replace('"id": 1', '"id": NaN'),
        good.replace('"id": 1', '"id": 1e999'),
        good.replace('"id": 1', '"id": ' + "9" * 5000),
        good.replace("a man in red", "a man \\udc80 in red"),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([good] + bad_lines + [good]) + "\n", encoding="utf-8")
    samples, report = read_minterpedes(path, strict=False)
    assert len(samples) == 2
    assert [(p.line, p.field) for p in report.problems] == [
        (2, "<record>"),
        (3, "<record>"),
        (4, "<record>"),
        (5, "<record>"),
        (6, "conversations[0].value"),
    ]
    reasons = [p.reason for p in report.problems]
    assert "nested deeper than 100" in reasons[0] and "NaN" in reasons[1] and "too large" in reasons[2]
    assert "too many digits" in reasons[3] and "lone surrogate" in reasons[4]


def test_long_lines_are_skipped_unread(tmp_path: Path):
    path = tmp_path / "long.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": "' + b"x" * 5000 + b'"}\n{"c": 3}\n' + b"y" * 3000)
    report = ReadReportFor(path)
    values = list(iter_json_lines(path, report, max_line_bytes=1000))
    assert values == [(1, {"a": 1}), (3, {"c": 3})]
    assert [(p.line, p.reason) for p in report.problems] == [
        (2, "line longer than 1,000 bytes, the limit for one record"),
        (4, "line longer than 1,000 bytes, the limit for one record"),
    ]


def ReadReportFor(path: Path):  # noqa: N802 - reads like the class it builds
    from minterpr.data.errors import ReadReport

    return ReadReport(str(path))


def test_a_refused_array_element_does_not_stop_the_rest(tmp_path: Path):
    good = chatpedes_record()
    path = tmp_path / "c.json"
    too_deep = [dump({"id": 1, "file_path": "x.jpg", "chats": Deep(depth, [], False)}) for depth in (3000, 500)]
    path.write_text(
        "[" + ",\n".join([dump(good), *too_deep, dump({**good, "note": "\udc80"}), dump(good)]) + "]", encoding="utf-8"
    )
    samples, report = read_chatpedes(path, strict=False)
    assert len(samples) == 2
    # 3,000 levels overflow the parser itself (the whole record is named); 500 are parsed, then refused
    assert [(p.line, p.field) for p in report.problems] == [(2, "<record>"), (3, "chats"), (4, "note")]
    assert all("(record" in p.reason for p in report.problems)


@pytest.mark.parametrize("command", ["validate", "stats"])
@pytest.mark.parametrize(
    "name, text",
    [
        ("deep.jsonl", '{"conversations": ' + "[" * 1000 + "]" * 1000 + "}\n"),
        ("deep.json", '[{"chats": ' + "[" * 1000 + "]" * 1000 + "}]"),
        ("deep_captions.json", '[{"captions": ' + '{"a": ' * 1000 + "1" + "}" * 1000 + "}]"),
    ],
)
def test_data_commands_report_deep_nesting(tmp_path: Path, capsys, command, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    fmt = {"deep.jsonl": "minterpedes", "deep.json": "chatpedes", "deep_captions.json": "captions"}[name]
    code = main(["data", command, str(path), "--format", fmt])
    out, err = capsys.readouterr()
    assert code == (1 if command == "validate" else 0)
    assert "nested deeper than 100" in out if command == "validate" else "1 bad record(s) skipped" in err
    assert "Traceback" not in out + err
