"""ChatPedes JSON: the released round shape, other accepted shapes, errors with real lines, round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minterpr.data.errors import DataError
from minterpr.data.formats import read_chatpedes, write_chatpedes
from minterpr.data.formats.chatpedes import DEFAULT_OPENING, OPENING_KEY
from minterpr.types import Dialogue, QATurn, ReferenceTurn, RetrievalSample


def gpt(text):
    return {"from": "gpt", "value": text}


def user(text):
    return {"from": "user", "value": text}


RELEASED = [
    [gpt("Please describe the person you saw."), user("A woman with long black hair.")],
    [gpt("What is she wearing on top?"), user("A white T-shirt.")],
    [gpt("Anything in her hands?"), user("A red umbrella.")],
]


def write_json(path: Path, value: object, indent: int | None = None) -> Path:
    path.write_text(json.dumps(value, indent=indent, ensure_ascii=False), encoding="utf-8")
    return path


def test_released_round_shape(tmp_path):
    path = write_json(tmp_path / "test_reid.json", [{"id": 11003, "file_path": "CUHK03/1_3.jpg", "chats": RELEASED}])
    [s] = read_chatpedes(path)
    assert (s.person_id, s.target_path) == ("chatpedes:11003", "CUHK03/1_3.jpg")
    assert s.dialogue == Dialogue(
        "A woman with long black hair.",
        (
            QATurn("What is she wearing on top?", "A white T-shirt."),
            QATurn("Anything in her hands?", "A red umbrella."),
        ),
    )
    assert s.extra == {}  # the default opening question is not kept


def test_several_dialogues_and_flat_shapes(tmp_path):
    second = [[gpt("Describe him, please."), user("A man in a suit.")], [gpt("Shoes?"), user("Black leather shoes.")]]
    flat_user_first = [user("A child in a yellow coat."), gpt("Hat?"), user("No hat.")]
    flat_gpt_first = [gpt(DEFAULT_OPENING), user("An old man."), gpt("Beard?"), user("A white beard.")]
    path = write_json(
        tmp_path / "c.json",
        [
            {"id": 1, "file_path": "a.jpg", "chats": [RELEASED, second]},
            {"id": 2, "file_path": "b.jpg", "chats": flat_user_first},
            {"id": 3, "file_path": "c.jpg", "chats": flat_gpt_first},
            {"id": 4, "file_path": "d.jpg", "chats": [[user("Just a description.")]]},
        ],
    )
    samples = read_chatpedes(path, namespace="cuhk-pedes")
    assert [s.person_id for s in samples] == [
        "cuhk-pedes:1",
        "cuhk-pedes:1",
        "cuhk-pedes:2",
        "cuhk-pedes:3",
        "cuhk-pedes:4",
    ]
    assert samples[1].extra == {OPENING_KEY: "Describe him, please."}
    assert samples[1].dialogue.qa_turns == (QATurn("Shoes?", "Black leather shoes."),)
    assert samples[2].dialogue == Dialogue("A child in a yellow coat.", (QATurn("Hat?", "No hat."),))
    assert samples[3].dialogue.description == "An old man." and samples[3].extra == {}
    assert samples[4].dialogue == Dialogue("Just a description.")


@pytest.mark.parametrize(
    "chats, field, words",
    [
        ([[gpt("q"), user("d")], [user("a"), gpt("q")]], "chats[1][0].from", "expected 'gpt'"),
        ([[gpt("q"), user("d")], [gpt("q2")]], "chats[1][0]", "answer is missing"),
        ([[gpt("q"), user("d")], [gpt("q2"), user("a"), user("more")]], "chats[1][2]", "unexpected message"),
        ([[gpt("q"), {"from": "human", "value": "d"}]], "chats[0][1].from", "expected 'gpt' or 'user'"),
        ([[gpt("q"), user("  ")]], "chats[0][1].value", "empty string"),
        ([[gpt("q"), {"from": "user", "value": 3}]], "chats[0][1].value", "expected a string"),
        ([[gpt("q"), {"from": "user"}]], "chats[0][1].value", "missing"),
        ([[gpt("q"), dict(user("d"), extra=1)]], "chats[0][1]", "unexpected key"),
        ([[gpt("q"), user("d")], "oops"], "chats[1]", "expected a round"),
        ([[[gpt("q"), user("d")]], [[user("d"), gpt("q")]]], "chats[1][0][0].from", "expected 'gpt'"),
        ([], "chats", "non-empty"),
        ([user("d"), gpt("q")], "chats[1]", "answer is missing"),
        ([user("d"), 5], "chats[1]", "expected a message object"),
    ],
)
def test_dialogue_errors_name_the_json_path(tmp_path, chats, field, words):
    path = write_json(tmp_path / "bad.json", [{"id": 1, "file_path": "a.jpg", "chats": chats}])
    with pytest.raises(DataError) as info:
        read_chatpedes(path)
    assert info.value.field == field
    assert words in info.value.reason and "(record 1)" in info.value.reason


@pytest.mark.parametrize(
    "rec, field",
    [
        ({"file_path": "a.jpg", "chats": RELEASED}, "id"),
        ({"id": True, "file_path": "a.jpg", "chats": RELEASED}, "id"),
        ({"id": "1", "file_path": "a.jpg", "chats": RELEASED}, "id"),
        ({"id": 1, "file_path": "", "chats": RELEASED}, "file_path"),
        ({"id": 1, "file_path": "a.jpg", "chats": RELEASED, OPENING_KEY: "x"}, OPENING_KEY),
        ("not an object", "<record>"),
    ],
)
def test_record_errors(tmp_path, rec, field):
    path = write_json(tmp_path / "bad.json", [rec])
    with pytest.raises(DataError) as info:
        read_chatpedes(path)
    assert info.value.field == field


def test_lenient_read_reports_real_line_numbers(tmp_path):
    records = [{"id": k, "file_path": f"{k}.jpg", "chats": RELEASED} for k in range(4)]
    records[1]["chats"] = [[gpt("q"), user("")]]
    records[3]["id"] = None
    path = write_json(tmp_path / "pretty.json", records, indent=2)
    lines = path.read_text().splitlines()
    starts = [n for n, text in enumerate(lines, start=1) if text == "  {"]  # each record's opening brace
    samples, report = read_chatpedes(path, strict=False)
    assert [s.person_id for s in samples] == ["chatpedes:0", "chatpedes:2"]
    assert [(e.line, e.field) for e in report.problems] == [(starts[1], "chats[0][1].value"), (starts[3], "id")]
    assert "(record 4)" in report.problems[1].reason
    assert report.records_read == 2


@pytest.mark.parametrize(
    "text, line, words",
    [
        ('[\n{"id": 1, "file_path": "a.jpg",\n "chats": [[{"from": "gpt" "value": "q"}]]}\n]', 3, "invalid JSON"),
        ('[\n{"id": 1, "file_path": "a.jpg", "chats": []},\n', 3, "truncated"),
        ('[\n{"id": 1, "file_path": "a.jpg", "chats": []}\n]\n]', 4, "extra data"),
        ('{"id": 1, "file_path": "a.jpg", "chats": []}\n', 1, "JSON Lines?"),
        ("   \n", 2, "empty file"),
    ],
)
def test_document_level_errors(tmp_path, text, line, words):
    path = tmp_path / "doc.json"
    path.write_text(text)
    samples, report = read_chatpedes(path, strict=False)
    assert samples == [] or words == "extra data"
    problem = report.problems[-1]
    assert problem.line == line and words in problem.reason


def test_invalid_json_keeps_the_records_before_it(tmp_path):
    good = json.dumps({"id": 1, "file_path": "a.jpg", "chats": RELEASED})
    path = tmp_path / "cut.json"
    path.write_text(f'[\n{good},\n{good},\n{{"id": 3, "file_path": ')
    samples, report = read_chatpedes(path, strict=False)
    assert len(samples) == 2 and [e.line for e in report.problems] == [4]


def test_non_utf8_bytes_name_the_line(tmp_path):
    path = tmp_path / "latin1.json"
    path.write_bytes(b'[\n{"id": 1, "file_path": "a.jpg",\n "chats": [[{"from": "user", "value": "caf\xe9"}]]}\n]\n')
    with pytest.raises(DataError) as info:
        read_chatpedes(path)
    assert info.value.line == 3 and "invalid UTF-8" in info.value.reason


def test_round_trip_groups_dialogues_of_one_target(tmp_path):
    samples = [
        RetrievalSample("a.jpg", "chatpedes:1", Dialogue("Ein Mann — 穿黑色夹克", (QATurn("Bag?", 'A "black" one'),))),
        RetrievalSample("a.jpg", "chatpedes:1", Dialogue("Second dialogue", ()), {OPENING_KEY: "Who did you see?"}),
        RetrievalSample("b.jpg", "chatpedes:2", Dialogue("A woman"), {"split": "test"}),
        RetrievalSample("a.jpg", "chatpedes:1", Dialogue("Same target, not adjacent")),
    ]
    path = tmp_path / "rt.json"
    assert write_chatpedes(samples, path) == 4
    assert read_chatpedes(path) == samples
    records = json.loads(path.read_text(encoding="utf-8"))
    assert len(records) == 3  # the first two share a record
    assert records[0]["chats"][1][0][0] == gpt("Who did you see?")  # dialogue 1, round 0, message 0
    assert records[1]["chats"][0] == [gpt(DEFAULT_OPENING), user("A woman")]  # single-dialogue shape
    assert records[1]["split"] == "test"


@pytest.mark.parametrize(
    "bad, words",
    [
        (
            RetrievalSample("a.jpg", "chatpedes:1", Dialogue("d", (), (ReferenceTurn("r.jpg", "f"),))),
            "no reference-image",
        ),
        (RetrievalSample("a.jpg", "chatpedes:x", Dialogue("d")), "must be an integer"),
        (RetrievalSample("a.jpg", "chatpedes:1", Dialogue("d", (QATurn("", "a"),))), "chats[1][0].value"),
        (RetrievalSample("a.jpg", "chatpedes:1", Dialogue("d"), {"chats": 1}), "overwrite"),
    ],
)
def test_writer_refuses_invalid_samples(tmp_path, bad, words):
    path = tmp_path / "w.json"
    with pytest.raises(ValueError) as info:
        write_chatpedes([bad], path)
    assert words in str(info.value)
    assert not path.exists() and list(tmp_path.iterdir()) == []
