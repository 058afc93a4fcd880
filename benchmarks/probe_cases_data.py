"""The cases of ``probe_bad_inputs.py`` (see ``probe_case.py``): broken dataset files."""

from __future__ import annotations


from probe_case import OUTSIDE, Cases

CASES = Cases()
cli, api = CASES.cli, CASES.api

# ----------------------------------------------------------------------------- broken dataset files
# file under F/bad -> what a reader must do with it (error: refuse the record; ok; either)
MINTERPEDES = {
    "truncated": "error",
    "invalid_utf8": "error",
    "invalid_json": "error",
    "nested_field": "either",
    "nested_value": "error",
    "nested_line": "error",
    "type_id_string": "error",
    "type_conversations_dict": "error",
    "type_value_number": "error",
    "type_turns_string": "error",
    "type_id_nan": "error",
    "missing_file_path": "error",
    "missing_conversations": "error",
    "not_an_object": "error",
    # a path leaving the root is refused where an image is read (below); reading the record is either
    "dotdot_path": "either",
    "absolute_path": "either",
    "dotdot_reference": "either",
    "huge_line": "either",
    "empty_file": "either",
    "random_bytes": "error",
    "bom": "either",
    "crlf": "ok",
    "lone_surrogate_escape": "either",
    "control_chars": "either",
    "empty_description": "either",
}
for _name, _expect in MINTERPEDES.items():
    _file = f"m_{_name}.jsonl"
    cli(
        "dataset",
        f"validate_{_name}",
        f"data validate on a MInterPEDES file: {_name}",
        "error" if _expect == "error" else _expect,
        "data",
        "validate",
        f"{{F}}/bad/{_file}",
        codes=(1, 2),
        timeout=60,
    )
    if _name not in ("dotdot_path", "absolute_path", "dotdot_reference"):
        cli(
            "dataset",
            f"stats_{_name}",
            f"data stats on a MInterPEDES file: {_name}",
            "report" if _expect == "error" else "either",
            "data",
            "stats",
            f"{{F}}/bad/{_file}",
            codes=(1, 2),
            timeout=60,
        )
    api(
        "dataset",
        f"read_{_name}",
        f"read_minterpedes(strict) on {_name}",
        _expect,
        "read_strict",
        ("minterpedes", _file, _expect, {}),
    )
    api(
        "dataset",
        f"read_lenient_{_name}",
        f"read_minterpedes(strict=False) on {_name}",
        _expect,
        "read_lenient",
        ("minterpedes", _file, _expect, {}),
    )
for _name in ("dotdot_path", "absolute_path", "dotdot_reference"):
    cli(
        "dataset",
        f"check_images_{_name}",
        f"data validate --check-images: image path {_name} (file exists outside)",
        "error",
        "data",
        "validate",
        "--check-images",
        f"{{F}}/bad/m_{_name}.jsonl",
        codes=(1, 2),
        mentions=OUTSIDE,
    )
    cli(
        "dataset",
        f"show_{_name}",
        f"data show of a record whose image path is {_name}",
        "error",
        "data",
        "show",
        f"{{F}}/bad/m_{_name}.jsonl",
        "--index",
        "0",
        "--out",
        f"{{F}}/out/show_{_name}.png",
        mentions=OUTSIDE,
    )
    api(
        "dataset",
        f"read_check_images_{_name}",
        f"read_minterpedes(check_images=True): {_name}",
        "error",
        "read_strict",
        ("minterpedes", f"m_{_name}.jsonl", "error", {"check_images": True}),
    )
for _name in ("nested_value", "truncated", "type_conversations_dict"):
    cli(
        "dataset",
        f"show_{_name}",
        f"data show --index 0 of {_name}",
        "error",
        "data",
        "show",
        f"{{F}}/bad/m_{_name}.jsonl",
        "--index",
        "0",
        "--out",
        f"{{F}}/out/show_{_name}.png",
    )
cli(
    "dataset",
    "show_index_too_large",
    "data show --index 10**6",
    "error",
    "data",
    "show",
    "{F}/ds/test.jsonl",
    "--index",
    "1000000",
    "--out",
    "{F}/out/show_big.png",
)
cli(
    "dataset",
    "show_index_negative",
    "data show --index -1",
    "either",
    "data",
    "show",
    "{F}/ds/test.jsonl",
    "--index",
    "-1",
    "--out",
    "{F}/out/show_neg.png",
)
cli(
    "dataset",
    "validate_directory",
    "data validate on a directory",
    "error",
    "data",
    "validate",
    "{F}/bad/a_directory.jsonl",
    codes=(1, 2),
)
cli(
    "dataset",
    "validate_missing",
    "data validate on a missing file",
    "error",
    "data",
    "validate",
    "{F}/bad/no_such_file.jsonl",
    codes=(1, 2),
)
cli("dataset", "stats_directory", "data stats on a directory", "error", "data", "stats", "{F}/bad/a_directory.jsonl")
cli(
    "dataset",
    "eval_dotdot_path",
    "eval --data with a target image outside the dataset root",
    "error",
    "eval",
    "--run",
    "{F}/run",
    "--data",
    "{F}/bad/m_dotdot_path.jsonl",
    "--json",
    "{F}/out/eval_dotdot.json",
    "--quiet",
    mentions=OUTSIDE,
)
cli(
    "dataset",
    "chat_gallery_dotdot_path",
    "chat --gallery whose manifest has an image outside --images",
    "either",
    "chat",
    "--run",
    "{F}/run",
    "--images",
    "{F}/bad",
    "--gallery",
    "{F}/bad/g_dotdot_path.jsonl",
    stdin=b"a woman in a red top\n:quit\n",
    check="outside_not_listed",
)
GALLERY = {
    "truncated": "error",
    "nested_attributes": "error",
    "invalid_utf8": "error",
    "type_attributes_list": "error",
    "missing_person_id": "error",
    "dotdot_path": "either",
    "absolute_path": "either",
    "duplicate_path": "either",
}
for _name, _expect in GALLERY.items():
    cli(
        "dataset",
        f"validate_gallery_{_name}",
        f"data validate on a gallery manifest: {_name}",
        _expect,
        "data",
        "validate",
        "--format",
        "gallery",
        f"{{F}}/bad/g_{_name}.jsonl",
        codes=(1, 2),
    )
    api(
        "dataset",
        f"read_gallery_{_name}",
        f"read_gallery(strict) on {_name}",
        _expect,
        "read_strict",
        ("gallery", f"g_{_name}.jsonl", _expect, {}),
    )
for _name, _expect in {
    "good": "ok",
    "nested": "error",
    "invalid_json": "error",
    "truncated": "error",
    "not_array": "error",
}.items():
    cli(
        "dataset",
        f"validate_chatpedes_{_name}",
        f"data validate --format chatpedes: {_name}",
        _expect,
        "data",
        "validate",
        "--format",
        "chatpedes",
        f"{{F}}/bad/c_{_name}.json",
        codes=(1, 2),
    )
    api(
        "dataset",
        f"read_chatpedes_{_name}",
        f"read_chatpedes on {_name}",
        _expect,
        "read_strict",
        ("chatpedes", f"c_{_name}.json", _expect, {}),
    )
for _name, _expect in {"good": "ok", "nested": "either", "captions_string": "error", "truncated": "error"}.items():
    cli(
        "dataset",
        f"validate_captions_{_name}",
        f"data validate --format captions: {_name}",
        _expect,
        "data",
        "validate",
        "--format",
        "captions",
        f"{{F}}/bad/cap_{_name}.json",
        codes=(1, 2),
    )
    api(
        "dataset",
        f"read_captions_{_name}",
        f"read_caption_dataset on {_name}",
        _expect,
        "read_strict",
        ("captions", f"cap_{_name}.json", _expect, {}),
    )
