"""The broken dataset files of ``probe_bad_inputs.py``'s fixture folder (``F/bad``): MInterPEDES,
gallery, ChatPEDES and caption files, each with one record broken a different way."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

# ----------------------------------------------------------------------------- broken dataset files
NEST = "[" * 1000 + "]" * 1000  # a 2 KB value 1,000 levels deep


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _with_first(lines: list[str], change) -> str:
    """The file with its first record changed by ``change(dict) -> dict | str``."""
    first = change(json.loads(lines[0]))
    first = first if isinstance(first, str) else json.dumps(first)
    return "\n".join([first, *lines[1:]]) + "\n"


def bad_minterpedes(F: Path) -> dict[str, bytes | str]:
    """name -> content of a broken MInterPEDES file (record 1 is the broken one where it can be)."""
    lines = _lines(F / "ds" / "test.jsonl")
    good = "\n".join(lines) + "\n"
    outside = str((F / "outside.png").resolve())

    def convo(value):
        def change(rec):
            rec["conversations"][0]["value"] = value
            return rec

        return change

    def set_field(key, value):
        def change(rec):
            rec[key] = value
            return rec

        return change

    def drop(key):
        def change(rec):
            rec.pop(key)
            return rec

        return change

    return {
        "truncated": good[: len(good) - len(lines[-1]) // 2 - 1],
        "invalid_utf8": good.encode().replace(b"looking for", b"looking \xff\xfe for", 1),
        "invalid_json": "{not json at all\n" + good,
        "nested_field": _with_first(
            lines, lambda rec: json.dumps(rec).replace('"conversations": [', f'"deep": {NEST}, "conversations": [', 1)
        ),
        "nested_value": _with_first(
            lines, lambda rec: json.dumps(rec).replace('"value": "I', f'"value": {NEST}, "x": "I', 1)
        ),
        "nested_line": '{"a": ' * 1000 + "1" + "}" * 1000 + "\n" + good,
        "type_id_string": _with_first(lines, set_field("id", "abc")),
        "type_conversations_dict": _with_first(lines, set_field("conversations", {"from": "human"})),
        "type_value_number": _with_first(lines, convo(12345)),
        "type_turns_string": _with_first(lines, set_field("t_conversation_length", "two")),
        "type_id_nan": _with_first(lines, lambda rec: json.dumps(rec).replace('"id": ', '"id": NaN, "_": ', 1)),
        "missing_file_path": _with_first(lines, drop("file_path")),
        "missing_conversations": _with_first(lines, drop("conversations")),
        "not_an_object": "[1, 2, 3]\n" + good,
        "dotdot_path": _with_first(lines, set_field("file_path", "../outside.png")),
        "absolute_path": _with_first(lines, set_field("file_path", outside)),
        "dotdot_reference": _with_first(lines, lambda rec: {**rec, "image": ["../outside.png"] + rec["image"][1:]}),
        "huge_line": _with_first(lines, convo("a man in a red jacket " * 400_000)),  # ~8.8 MB
        "empty_file": "",
        "random_bytes": random.Random(0).randbytes(4096),
        "bom": "\ufeff" + good,
        "crlf": good.replace("\n", "\r\n"),
        "lone_surrogate_escape": _with_first(
            lines, lambda rec: json.dumps(rec).replace("looking for", "looking \\ud800 for", 1)
        ),
        "control_chars": _with_first(lines, convo("a man\u0000 in\u0007 red\u001b[31m")),
        "empty_description": _with_first(lines, convo("")),
    }


def bad_gallery(F: Path) -> dict[str, bytes | str]:
    lines = _lines(F / "ds" / "gallery_test.jsonl")
    good = "\n".join(lines) + "\n"

    def set_field(key, value):
        def change(rec):
            rec[key] = value
            return rec

        return change

    return {
        "truncated": good[: len(good) - len(lines[-1]) // 2 - 1],
        "nested_attributes": _with_first(
            lines, lambda rec: json.dumps(rec).replace('"attributes": {', f'"attributes": {{"deep": {NEST}, ', 1)
        ),
        "invalid_utf8": good.encode().replace(b"synth:", b"sy\xffnth:", 1),
        "type_attributes_list": _with_first(lines, set_field("attributes", ["red"])),
        "missing_person_id": _with_first(lines, lambda rec: {k: v for k, v in rec.items() if k != "person_id"}),
        "dotdot_path": _with_first(lines, set_field("path", "../outside.png")),
        "absolute_path": _with_first(lines, set_field("path", str((F / "outside.png").resolve()))),
        "duplicate_path": "\n".join([lines[0], lines[0], *lines[1:]]) + "\n",
    }


def bad_chatpedes(F: Path) -> dict[str, str]:
    rec = {
        "id": 1,
        "file_path": "images/test/x.jpg",
        "chats": [
            [
                {"from": "gpt", "value": "Please describe the person you saw."},
                {"from": "user", "value": "a woman in a red top"},
            ],
            [{"from": "gpt", "value": "Shoes?"}, {"from": "user", "value": "white sneakers"}],
        ],
    }
    good = json.dumps(rec)
    return {
        "good": f"[{good},\n{good.replace('1,', '2,', 1)}]\n",
        "nested": f"[{good},\n{good.replace('white sneakers', 'x', 1).replace('[[', '[' + NEST + ', [', 1)}]\n",
        "invalid_json": f"[{good},\n{{broken]\n",
        "truncated": f"[{good},\n{good[: len(good) // 2]}",
        "not_array": json.dumps(rec) + "\n",
    }


def bad_captions(F: Path) -> dict[str, str]:
    rec = {"file_path": "images/test/x.jpg", "id": 7, "split": "test", "captions": ["A man in a red coat."]}
    return {
        "good": json.dumps([rec]),
        "nested": json.dumps([{**rec, "captions": ["ok"], "deep": 1}]).replace("1}", NEST + "}"),
        "captions_string": json.dumps([{**rec, "captions": "A man in a red coat."}]),
        "truncated": json.dumps([rec, rec])[:-30],
    }


def build_bad_files(F: Path) -> None:
    bad = F / "bad"
    if (bad / "done").is_file():
        return
    bad.mkdir(parents=True, exist_ok=True)
    if not (bad / "images").exists():
        shutil.copytree(F / "ds" / "images", bad / "images")
    for prefix, files, suffix in (
        ("m_", bad_minterpedes(F), ".jsonl"),
        ("g_", bad_gallery(F), ".jsonl"),
        ("c_", bad_chatpedes(F), ".json"),
        ("cap_", bad_captions(F), ".json"),
    ):
        for name, content in files.items():
            path = bad / f"{prefix}{name}{suffix}"
            path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    (bad / "a_directory.jsonl").mkdir(exist_ok=True)
    (bad / "done").write_text("ok")
