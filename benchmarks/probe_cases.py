"""The cases of ``probe_bad_inputs.py``: what is tried, how, and what a correct minterpr does.

A case is one declarative :class:`Case`. CLI cases run ``python -m minterpr ARGS`` (``{F}`` is
the fixture folder) with optional stdin; API cases name a probe of ``probe_api`` and its
argument. ``expect`` says what is right:

* ``error``    a documented refusal: exit code in ``codes`` (2 by default; 1 or 2 for
               ``data validate``), one short message, no traceback; API: a MinterprError.
* ``ok``       success (exit 0; API: returns, and the result passes the probe's checks).
* ``either``   success or a documented refusal are both right (e.g. a 9 MB line).
* ``report``   a lenient command: exit 0 while naming the skipped record is right too.
* ``chat``     ``minterpr chat`` reports the error on its line and goes on.
``check`` names a post-run test (``CHECKS`` in probe_bad_inputs) that detects a silently wrong
result of a command that exited 0 (a pickle payload that ran, a rerun that repaired nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Case:
    name: str  # unique, family/what
    family: str  # dataset, rundir, images, text, chat, indices, gallery, threads, build
    what: str  # one line for the reader
    expect: str  # error | ok | either | report | chat
    cli: tuple[str, ...] | None = None  # argv after `python -m minterpr`
    stdin: bytes | None = None
    codes: tuple[int, ...] = (2,)  # exit codes of a documented refusal
    check: str | None = None  # post-run check for silently wrong results (CLI)
    mentions: str | None = None  # regex a clear error's message must match (it says what is wrong)
    api: str | None = None  # probe function in probe_api
    arg: Any = field(default=None, compare=False)
    timeout: float = 90.0


CASES: list[Case] = []
OUTSIDE = r"outside\.png|leaves|outside|root"  # a refused path escape names the path or the root


def cli(family: str, name: str, what: str, expect: str, *argv: str, **kw: Any) -> None:
    CASES.append(Case(f"{family}/{name}", family, what, expect, cli=tuple(argv), **kw))


def api(family: str, name: str, what: str, expect: str, probe: str, arg: Any, **kw: Any) -> None:
    CASES.append(Case(f"{family}/{name}", family, what, expect, api=probe, arg=arg, **kw))


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

# ----------------------------------------------------------------------------- broken run directories
# name -> (path relative to F, expect)
RUNS = {
    "missing": ("runs/no_such_run", "error"),
    "empty_dir": ("runs/empty_dir", "error"),
    "zero_bytes": ("runs/zero_bytes", "error"),
    "truncated": ("runs/truncated", "error"),
    "random_bytes": ("runs/random_bytes", "error"),
    "text_file": ("runs/text_file", "error"),
    "not_minterpr": ("runs/not_minterpr", "error"),
    "missing_config": ("runs/missing_config", "error"),
    "missing_extra": ("runs/missing_extra", "either"),
    "wrong_version": ("runs/wrong_version", "error"),
    "unknown_encoder": ("runs/unknown_encoder", "error"),
    "shape_mismatch": ("runs/shape_mismatch", "error"),
    "missing_key": ("runs/missing_key", "error"),
    "extra_garbage": ("runs/extra_scoring_garbage", "either"),
    "pickle_payload": ("runs/pickle_payload", "error"),
    "model_pt_dir": ("runs/model_pt_dir", "error"),
    "last_pt": ("run/last.pt", "either"),
    "model_file": ("run/model.pt", "ok"),
}
_SOME_RUNS = ("missing", "empty_dir", "zero_bytes", "shape_mismatch", "last_pt", "model_file")
_EVAL_RUNS = (*_SOME_RUNS, "truncated", "random_bytes", "missing_config", "unknown_encoder", "pickle_payload")
for _name, (_rel, _expect) in RUNS.items():
    _check = "no_model_payload_ran" if _name == "pickle_payload" else None
    api(
        "rundir",
        f"load_pipeline_{_name}",
        f"load_pipeline on a run: {_name}",
        _expect,
        "load_run",
        (_rel + ("_api" if _name == "pickle_payload" else ""), _expect, "load_pipeline"),
    )
    _names = _rel.split("/")[-1].replace(".", r"\.")
    if _name not in _EVAL_RUNS:
        continue
    cli(
        "rundir",
        f"eval_{_name}",
        f"eval --run on a run: {_name}",
        _expect,
        "eval",
        "--run",
        f"{{F}}/{_rel}",
        "--data",
        "{F}/ds/test.jsonl",
        "--json",
        f"{{F}}/out/eval_{_name}.json",
        "--quiet",
        check=_check,
        mentions=_names,
    )
    if _name in _SOME_RUNS:
        cli(
            "rundir",
            f"simulate_{_name}",
            f"simulate --run on a run: {_name}",
            _expect,
            "simulate",
            "--run",
            f"{{F}}/{_rel}",
            "--data",
            "{F}/ds",
            "--limit",
            "2",
            "--rounds",
            "1",
            mentions=_names,
        )
        cli(
            "rundir",
            f"chat_{_name}",
            f"chat --run on a run: {_name}",
            _expect,
            "chat",
            "--run",
            f"{{F}}/{_rel}",
            "--images",
            "{F}/ds",
            stdin=b"a man in red\n:quit\n",
            mentions=_names,
        )
for _name in ("zero_bytes", "truncated", "random_bytes", "missing_config", "shape_mismatch", "pickle_payload"):
    _rel, _expect = RUNS[_name]
    api(
        "rundir",
        f"load_model_{_name}",
        f"models.io.load_model on model.pt: {_name}",
        _expect,
        "load_run",
        (_rel + ("_api" if _name == "pickle_payload" else ""), _expect, "load_model"),
    )
for _name in ("pickle_payload", "zero_bytes", "truncated", "random_bytes", "model_as_last", "missing_last"):
    # a finished run without last.pt may say there is nothing to resume and exit 0
    cli(
        "rundir",
        f"resume_{_name}",
        f"train --resume with last.pt: {_name}",
        "either" if _name == "missing_last" else "error",
        "train",
        "--out",
        f"{{F}}/resume/{_name}",
        "--resume",
        check="no_resume_payload_ran" if _name == "pickle_payload" else None,
        timeout=150,
    )

# ----------------------------------------------------------------------------- odd images
# file under F/img -> (readable, twin for the embedding check, minimum cosine with the twin)
IMAGES = {
    "grey16.png": (True, "grey8.png", 0.98),
    "exif_rotated.png": (True, "good.png", 0.98),
    "cmyk.jpg": (True, "good.png", 0.9),
    "palette_alpha.png": (True, "good.png", 0.9),
    "rgba.png": (True, "good.png", 0.98),
    "la.png": (True, "grey8.png", 0.98),
    "one_bit.png": (True, None, 0),
    "one_pixel.png": (True, None, 0),
    "animated.gif": (True, "good.png", 0.95),
    "good.jpg": (True, "good.png", 0.95),
    "missing.png": (False, None, 0),
    "zero.jpg": (False, None, 0),
    "random.jpg": (False, None, 0),
    "truncated.jpg": (False, None, 0),
    "text.jpg": (False, None, 0),
    "a_directory.jpg": (False, None, 0),
    "bomb.png": (False, None, 0),
}
for _name, (_readable, _twin, _min) in IMAGES.items():
    api(
        "images",
        f"index_{_name}",
        f"index_images([good.png, {_name}])",
        "ok" if _readable else "either",
        "index_image",
        (_name, _readable, _twin, _min),
    )
    if _name not in ("one_bit.png", "one_pixel.png", "good.jpg", "la.png", "rgba.png"):
        api(
            "images",
            f"example_{_name}",
            f"session.example({_name}) (under the gallery root)",
            "ok" if _readable else "error",
            "example_image",
            (_name, "ok" if _readable else "error"),
        )
for _name, _path, _expect in (
    ("gallery_path", "good.png", "ok"),
    ("dotdot", "../outside.png", "error"),
    ("absolute_outside", lambda ctx: str(ctx.F / "outside.png"), "error"),
    ("etc_passwd", "/etc/passwd", "error"),
    ("empty", "", "error"),
    ("none", None, "error"),
    ("int", 5, "error"),
):
    api("images", f"example_{_name}", f"session.example({_name})", _expect, "example_image", (_path, _expect))
cli(
    "images",
    "chat_one_unreadable",
    "chat --images DIR with one unreadable image among six",
    "ok",
    "chat",
    "--run",
    "{F}/run",
    "--images",
    "{F}/chatimgs_one_bad",
    stdin=b"a man in red\n:quit\n",
    check="chat_ran",
)
cli(
    "images",
    "chat_all_unreadable",
    "chat --images DIR where every image is unreadable",
    "error",
    "chat",
    "--run",
    "{F}/run",
    "--images",
    "{F}/chatimgs_all_bad",
    stdin=b"a man in red\n:quit\n",
)

# ----------------------------------------------------------------------------- odd text
TEXTS = {
    "empty": ("", "error"),
    "spaces": ("   \t ", "error"),
    "newlines": ("\n\r\n", "error"),
    "none": (None, "error"),
    "bytes": (b"a man in red", "error"),
    "int": (42, "error"),
    "list": (["a man"], "error"),
    "nul_only": ("\x00", "error"),
    "surrogate": ("a man \ud800 in red", "either"),
    "control": ("a man\x00 in\x07 red\x1b[0m", "either"),
    "huge_100k": ("a man in a red jacket " * 4700, "either"),
    "unicode": ("une femme en veste rouge, 日本, 😀", "ok"),
    "rtl_override": ("\u202ea man in red", "either"),
    "plain": ("a man in a red jacket", "ok"),
}
for _name, (_text, _expect) in TEXTS.items():
    api(
        "text",
        f"describe_first_{_name}",
        f"describe({_name}) as the first turn",
        _expect,
        "turn",
        ("describe", (_text,), _expect, {}, True),
    )
    api(
        "text",
        f"describe_{_name}",
        f"describe({_name}) after a description",
        _expect,
        "turn",
        ("describe", (_text,), _expect, {}, False),
    )
    api(
        "text",
        f"answer_{_name}",
        f"answer({_name}) to the pending question",
        _expect,
        "turn",
        ("answer", (_text,), _expect, {"schedule": "questions"}, False),
    )
    api(
        "text",
        f"feedback_{_name}",
        f"feedback(0, {_name})",
        _expect,
        "turn",
        ("feedback", (0, _text), _expect, {}, False),
    )

# ----------------------------------------------------------------------------- chat on stdin
# through the real command (stdin bytes are decoded by Python's stdin: invalid UTF-8 lands here)
_CHAT_CLI = {
    "example_missing": (b":example missing.jpg\n", "chat"),
    "example_no_argument": (b":example\n", "chat"),
    "example_outside_root": (b":example ../outside.png\n", "chat"),
    "invalid_utf8": (b"a man \xff\xfe in red\n", "either_chat"),
    "encoded_surrogate": (b"a man \xed\xa0\x80 in red\n", "either_chat"),
    "huge_line": (b"a man in a red jacket " * 4700 + b"\n", "either_chat"),
}
for _name, (_line, _expect) in _CHAT_CLI.items():
    cli(
        "chat",
        _name,
        f"chat stdin: {_line[:40].decode('utf-8', 'backslashreplace').strip()}",
        _expect,
        "chat",
        "--run",
        "{F}/run",
        "--images",
        "{F}/ds",
        stdin=b"a woman in a red top\n" + _line + b"she had white shoes\n:quit\n",
    )
cli(
    "chat",
    "no_trailing_newline",
    "chat stdin: EOF without a newline",
    "ok",
    "chat",
    "--run",
    "{F}/run",
    "--images",
    "{F}/ds",
    stdin=b"a woman in a red top",
    check="chat_ran",
)
# the same loop in-process (ChatLoop over the shared pipeline): cheaper, same handling of each line
_CHAT_LOOP = {
    "example_etc_passwd": (":example /etc/passwd", "chat"),
    "feedback_float": (":feedback 1.5 not her", "chat"),
    "feedback_negative": (":feedback -1 not her", "chat"),
    "yes_zero": (":yes 0", "chat"),
    "feedback_no_text": (":feedback 2", "chat"),
    "explain_no_argument": (":explain", "chat"),
    "unknown_command": (":dance", "chat"),
    "lone_surrogate": ("a man \ud800 in red", "either_chat"),
    "control_chars": ("a man\x07 in\x1b[31m red\x00", "either_chat"),
    "reference_out_of_range": (":yes r9", "chat"),
}
for _name, (_line, _expect) in _CHAT_LOOP.items():
    api(
        "chat",
        f"loop_{_name}",
        f"chat loop: {_line!r}",
        _expect,
        "chat_script",
        (f"a woman in a red top\n{_line}\nshe had white shoes\n:quit\n", _expect),
    )
api(
    "chat",
    "loop_undo_empty",
    "chat loop: :undo before anything",
    "chat",
    "chat_script",
    (":undo\na woman in a red top\n:quit\n", "chat"),
)
api("chat", "loop_empty_input", "chat loop: no input at all", "ok", "chat_script", ("", "ok"))
for _text in ("no", "No.", "nope"):
    api(
        "chat",
        f"no_with_references_{_text.strip('.').lower()}{'_dot' if _text.endswith('.') else ''}",
        f"chat: {_text!r} typed while references are shown",
        "ok",
        "chat_no_with_references",
        _text,
    )

# ----------------------------------------------------------------------------- odd indices
for _name, _index, _expect in (
    ("negative", -1, "error"),
    ("minus_len", -14, "error"),
    ("len", 14, "error"),
    ("huge", 10**30, "error"),
    ("float", 1.5, "error"),
    ("float_integral", 2.0, "either"),
    ("true", True, "error"),
    ("false", False, "error"),
    ("str", "1", "error"),
    ("none", None, "error"),
    ("nan", float("nan"), "error"),
    ("numpy_int64", np.int64(2), "ok"),
    ("numpy_int32", np.int32(0), "ok"),
    ("numpy_negative", np.int64(-1), "error"),
    ("numpy_uint8", np.uint8(3), "ok"),
    ("zero", 0, "ok"),
    ("last", 13, "ok"),
):
    api(
        "indices",
        f"feedback_{_name}",
        f"feedback({_index!r}, 'no, not her')",
        _expect,
        "turn",
        ("feedback", (_index, "no, not her, she had a backpack"), _expect, {}, False),
    )
api("indices", "undo_empty", "undo() on a fresh session", "error", "turn", ("undo", (), "error", {}, True))
api(
    "indices",
    "answer_without_question",
    "answer() when no question is pending",
    "error",
    "turn",
    ("answer", ("red",), "error", {"schedule": "references"}, False),
)
api(
    "indices",
    "feedback_shown_reference",
    "feedback on the last gallery row",
    "ok",
    "turn",
    ("feedback", (lambda ctx, s: (len(s.index) - 1, "not her")), "ok", {}, False),
)

# ----------------------------------------------------------------------------- galleries
api("gallery", "empty", "index_images([]) then describe()", "either", "empty_gallery", None)
api(
    "gallery",
    "duplicate_row0",
    "duplicate gallery paths: feedback on the first copy",
    "either",
    "feedback_duplicate",
    0,
)
api(
    "gallery",
    "duplicate_row1",
    "duplicate gallery paths: feedback on the second copy",
    "either",
    "feedback_duplicate",
    1,
)


def _paths(ctx, n=3):
    return ctx.gallery_paths[:n]


for _name, _build, _expect, _length in (
    ("person_ids_short", lambda c: {"paths": _paths(c), "person_ids": ["p:1"], "root": str(c.F / "ds")}, "error", None),
    (
        "person_ids_long",
        lambda c: {"paths": _paths(c), "person_ids": ["p"] * 5, "root": str(c.F / "ds")},
        "error",
        None,
    ),
    ("camera_ids_short", lambda c: {"paths": _paths(c), "camera_ids": ["c"], "root": str(c.F / "ds")}, "error", None),
    ("person_ids_str", lambda c: {"paths": _paths(c), "person_ids": "abc", "root": str(c.F / "ds")}, "error", None),
    ("paths_str", lambda c: {"paths": "abc", "root": str(c.F / "ds")}, "error", None),
    ("path_none", lambda c: {"paths": [*_paths(c, 2), None], "root": str(c.F / "ds")}, "error", None),
    ("path_int", lambda c: {"paths": [*_paths(c, 2), 7], "root": str(c.F / "ds")}, "error", None),
    ("path_empty", lambda c: {"paths": [*_paths(c, 2), ""], "root": str(c.F / "ds")}, "either", 2),
    ("root_missing", lambda c: {"paths": _paths(c), "root": str(c.F / "no_such_root")}, "either", 0),
    ("pathlib_paths", lambda c: {"paths": [c.F / "ds" / p for p in _paths(c)]}, "ok", 3),
    ("ok_with_ids", lambda c: {"paths": _paths(c), "person_ids": ["a", "b", "c"], "root": str(c.F / "ds")}, "ok", 3),
):
    api("gallery", f"index_{_name}", f"index_images: {_name}", _expect, "index_call", (_build, _expect, _length))

# ----------------------------------------------------------------------------- threads
for _cache, _threads, _texts in ((1, 2, 60), (2, 2, 60), (3, 4, 30), (4096, 2, 30)):
    api(
        "threads",
        f"encode_cache{_cache}_threads{_threads}",
        f"{_threads} threads share one NeuralBackend with a {_cache}-text cache",
        "ok",
        "threads_encode",
        (_cache, _threads, _texts),
        timeout=240,
    )
for _threads in (2, 4):
    api(
        "threads",
        f"sessions_{_threads}",
        f"{_threads} sessions on one pipeline in {_threads} threads",
        "ok",
        "threads_sessions",
        _threads,
        timeout=240,
    )

# ----------------------------------------------------------------------------- killed / truncated builds
_SYNTH = (
    "--train-identities",
    "8",
    "--val-identities",
    "4",
    "--test-identities",
    "4",
    "--height",
    "64",
    "--width",
    "32",
    "--workers",
    "1",
    "--quiet",
)
B = "{F}/build"
cli(
    "build",
    "killed_validate",
    "killed seed-1 build over seed 0: data validate --check-images",
    "error",
    "data",
    "validate",
    "--check-images",
    f"{B}/killed/test.jsonl",
    codes=(1, 2),
    check="killed_while_writing",
)
cli(
    "build",
    "killed_validate_gallery",
    "killed build: data validate --check-images gallery_test.jsonl",
    "error",
    "data",
    "validate",
    "--check-images",
    f"{B}/killed/gallery_test.jsonl",
    codes=(1, 2),
    check="killed_while_writing",
)
cli(
    "build",
    "killed_simulate_attribute",
    "killed build: simulate --backend attribute",
    "error",
    "simulate",
    "--backend",
    "attribute",
    "--data",
    f"{B}/killed",
    "--limit",
    "2",
    "--rounds",
    "1",
    check="killed_while_writing",
)
cli(
    "build",
    "killed_simulate_run",
    "killed build: simulate --run",
    "error",
    "simulate",
    "--run",
    "{F}/run",
    "--data",
    f"{B}/killed",
    "--limit",
    "2",
    "--rounds",
    "1",
    check="killed_while_writing",
)
cli(
    "build",
    "killed_eval",
    "killed build: eval",
    "error",
    "eval",
    "--run",
    "{F}/run",
    "--data",
    f"{B}/killed/test.jsonl",
    "--json",
    "{F}/out/eval_killed.json",
    "--quiet",
    check="killed_while_writing",
)
cli(
    "build",
    "killed_chat",
    "killed build: chat --backend attribute",
    "error",
    "chat",
    "--backend",
    "attribute",
    "--images",
    f"{B}/killed",
    stdin=b"a man\n:quit\n",
    check="killed_while_writing",
)
cli(
    "build",
    "killed_train",
    "killed build: train on it",
    "error",
    "train",
    "--config",
    "tiny",
    "--data",
    f"{B}/killed",
    "--out",
    "{F}/out/train_killed",
    "--set",
    "stages.2.epochs=1",
    timeout=150,
    check="killed_while_writing",
)
cli(
    "build",
    "trunc_split_validate",
    "a truncated test.jsonl: data validate",
    "error",
    "data",
    "validate",
    f"{B}/trunc_split/test.jsonl",
    codes=(1, 2),
)
cli(
    "build",
    "trunc_split_replay",
    "a truncated test.jsonl: simulate --simulator replay",
    "error",
    "simulate",
    "--backend",
    "attribute",
    "--simulator",
    "replay",
    "--data",
    f"{B}/trunc_split",
    "--limit",
    "2",
    "--rounds",
    "1",
)
cli(
    "build",
    "trunc_split_eval",
    "a truncated test.jsonl: eval",
    "error",
    "eval",
    "--run",
    "{F}/run",
    "--data",
    f"{B}/trunc_split/test.jsonl",
    "--json",
    "{F}/out/eval_trunc.json",
    "--quiet",
)
cli(
    "build",
    "trunc_gallery_simulate",
    "a truncated gallery_test.jsonl: simulate --backend attribute",
    "error",
    "simulate",
    "--backend",
    "attribute",
    "--data",
    f"{B}/trunc_gallery",
    "--limit",
    "2",
    "--rounds",
    "1",
)
cli(
    "build",
    "trunc_gallery_chat",
    "a truncated gallery_test.jsonl: chat",
    "error",
    "chat",
    "--backend",
    "attribute",
    "--images",
    f"{B}/trunc_gallery",
    stdin=b"a man\n:quit\n",
)
cli(
    "build",
    "missing_image_validate",
    "an image deleted after the build: data validate --check-images",
    "error",
    "data",
    "validate",
    "--check-images",
    f"{B}/missing_image/test.jsonl",
    codes=(1, 2),
)
cli(
    "build",
    "missing_image_simulate_run",
    "an image deleted after the build: simulate --run",
    "either",
    "simulate",
    "--run",
    "{F}/run",
    "--data",
    f"{B}/missing_image",
    "--limit",
    "2",
    "--rounds",
    "1",
)
cli(
    "build",
    "rerun_truncated",
    "synth rerun over a build with a truncated split repairs it",
    "ok",
    "data",
    "synth",
    "--out",
    f"{B}/rerun_trunc",
    *_SYNTH,
    check="rerun_trunc_repaired",
)
cli(
    "build",
    "rerun_temporaries",
    "synth rerun over a build with leftover .tmp files removes them",
    "ok",
    "data",
    "synth",
    "--out",
    f"{B}/rerun_tmp",
    *_SYNTH,
    check="rerun_tmp_clean",
)
cli(
    "build",
    "rerun_missing_image",
    "synth rerun over a build missing an image restores it",
    "ok",
    "data",
    "synth",
    "--out",
    f"{B}/rerun_missing_image",
    *_SYNTH,
    check="rerun_image_restored",
)
cli(
    "build",
    "rerun_killed",
    "synth seed 0 rerun over the killed seed-1 build restores seed 0",
    "ok",
    "data",
    "synth",
    "--out",
    f"{B}/killed_rerun",
    *_SYNTH,
    check="rerun_killed_restored",
)

FAMILIES = ("dataset", "rundir", "images", "text", "chat", "indices", "gallery", "threads", "build")
