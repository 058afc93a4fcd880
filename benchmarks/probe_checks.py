"""The post-run checks of ``probe_bad_inputs.py``: a command that exited 0 may still have done the wrong
thing (a pickle payload that ran, a rerun that repaired nothing); a case's ``check`` names one of
:data:`CHECKS`, which returns (outcome, detail) when it finds that, else None."""

from __future__ import annotations

import re
from pathlib import Path


# ----------------------------------------------------------------------------- post-run checks
def _same(a: Path, b: Path) -> bool:
    return a.is_file() and b.is_file() and a.read_bytes() == b.read_bytes()


def _fixture_state(F: Path) -> tuple[str, str] | None:
    state = (
        (F / "build" / "killed" / ".probe_state").read_text()
        if (F / "build" / "killed" / ".probe_state").is_file()
        else "?"
    )
    return None if state == "killed while writing" else ("probe failed", f"fixture: the killed build was {state}")


def _rerun_killed(F: Path) -> tuple[str, str] | None:
    d, ds = F / "build" / "killed_rerun", F / "ds"
    for rel in ("test.jsonl", "gallery_test.jsonl", "train.jsonl"):
        if not _same(d / rel, ds / rel):
            return "silently wrong", f"after the rerun {rel} differs from a clean seed-0 build"
    for image in (ds / "images").rglob("*.*"):
        if not _same(d / image.relative_to(ds), image):
            return "silently wrong", f"after the rerun {image.relative_to(ds)} is not the seed-0 image"
    return None


def _tmp_left(F: Path) -> tuple[str, str] | None:
    left = [p for p in (F / "build" / "rerun_tmp").rglob(".*.tmp")]
    return ("silently wrong", f"{len(left)} temporaries left, e.g. {left[0].name}") if left else None


def _chat_ran(F: Path, out: str) -> tuple[str, str] | None:
    if "bye" not in out or "  1. " not in out:
        return "silently wrong", "chat listed no results or did not end normally"
    return None


CHECKS = {
    "no_model_payload_ran": lambda F, out: (
        ("silently wrong", "unsafe: the pickle payload in model.pt ran")
        if (F / "marker" / "cli_model_pt_ran").exists()
        else None
    ),
    "no_resume_payload_ran": lambda F, out: (
        ("silently wrong", "unsafe: the pickle payload in last.pt ran")
        if (F / "marker" / "last_pt_ran").exists()
        else None
    ),
    "killed_while_writing": lambda F, out: _fixture_state(F),
    "rerun_trunc_repaired": lambda F, out: (
        None
        if _same(F / "build/rerun_trunc/test.jsonl", F / "ds/test.jsonl")
        else ("silently wrong", "the rerun left test.jsonl truncated")
    ),
    "rerun_tmp_clean": lambda F, out: _tmp_left(F),
    "rerun_image_restored": lambda F, out: (
        None
        if (F / "build/rerun_missing_image")
        .joinpath(sorted((F / "ds/images/test").iterdir())[0].relative_to(F / "ds"))
        .is_file()
        else ("silently wrong", "the rerun did not restore the deleted image")
    ),
    "rerun_killed_restored": lambda F, out: _fixture_state(F) or _rerun_killed(F),
    "chat_ran": _chat_ran,
    # a ranked result line ("  1. PATH  score ...") naming the image outside --images; the one-line
    # summary of images left out may name it
    "outside_not_listed": lambda F, out: (
        ("silently wrong", "an image outside --images was indexed and listed")
        if any(re.match(r"\s*\d+\. .*outside\.png", line) for line in out.splitlines())
        else None
    ),
}
