"""The cases of ``probe_bad_inputs.py`` (see ``probe_case.py``): broken run directories, odd images, odd
text, chat on stdin."""

from __future__ import annotations


from probe_case import Cases

CASES = Cases()
cli, api = CASES.cli, CASES.api

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
