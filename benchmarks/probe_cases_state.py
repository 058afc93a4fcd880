"""The cases of ``probe_bad_inputs.py`` (see ``probe_case.py``): odd gallery indices, galleries, threads,
killed and truncated builds."""

from __future__ import annotations

import numpy as np

from probe_case import Cases

CASES = Cases()
cli, api = CASES.cli, CASES.api

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
