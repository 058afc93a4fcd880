"""The chat's single lines, read and written without a session: whether a reply judges the shown
images (:func:`reply_verdict`), a listed result (:func:`result_line`), what a turn was read as
(:func:`understood_line`) and a raw input line as text (:func:`decode_line`). The loop that uses
them: :mod:`minterpr.cli.shared.chat_loop`.
"""

from __future__ import annotations

import re
from typing import Any

from minterpr.language.dialogue_acts import verdict

# A reply that judges shown images (the value is then read by dialogue_acts.verdict); anything
# else said while images are shown is a remark about the person.
_VERDICT = re.compile(
    r"^\s*(yes|yeah|yep|yup|correct|exactly|no|nope|nah|not|none|neither|wrong|maybe|perhaps|possibly)\b"
    r"|\b(not sure|can't tell|cannot tell|no idea|could be|might be|this one|that one|none of)\b"
    r"|\b(that's|that is|this is|it's|it is|isn't|is not)\s+(definitely\s+)?"
    r"(her|him|them|the (one|person|man|woman|guy|lady))\b"
    r"|\bnot (her|him|them)\b"
)


def reply_verdict(text: str) -> tuple[bool, bool | None]:
    """(whether ``text`` judges a shown image, and its verdict: True yes, False no, None unsure).

    >>> reply_verdict("Not her, no backpack."), reply_verdict("yes!"), reply_verdict("she wore a red scarf")
    ((True, False), (True, True), (False, None))
    """
    first_clause = re.split(r"[.;!?]", text.lower().replace("\u2019", "'"), maxsplit=1)[0]
    if _VERDICT.search(first_clause) is None:
        return False, None
    return True, verdict(text)


def result_line(k: int, image: Any, time: str | None, match: float, summary: str) -> str:
    """One listed result: rank, path, camera and time when known, the match probability (as the page
    shows it) and which facts it matches or contradicts.

    >>> from minterpr.types import GalleryImage
    >>> result_line(0, GalleryImage("c/1.png", "p", "lobby:cam1"), "2026-12-01T10:00:00", 0.42, "matches: red")
    '  1. c/1.png  lobby:cam1  2026-12-01T10:00:00  match 42 %  matches: red'
    """
    from minterpr.interaction.match import percent

    where = "  ".join(part for part in (image.camera_id, time) if part)
    return f"{k + 1:>3}. {image.path}{'  ' + where if where else ''}  match {percent(match)}  {summary}".rstrip()


def understood_line(entry: Any) -> str:
    """The chat's line of what a turn was read as: its facts (a model's marked), or that nothing was.

    >>> from minterpr.interaction.history import HistoryEntry, ModelFact
    >>> from minterpr.language.phrasing import Fact
    >>> from minterpr.types import DescriptionTurn
    >>> understood_line(HistoryEntry(DescriptionTurn("a man, red top"),
    ...                              (Fact("gender", ("male",)), ModelFact("upper_colour", ("red",))), ()))
    'understood: gender: male; top colour: red (read by the model)'
    >>> understood_line(HistoryEntry(DescriptionTurn("qwerty"), (), ()))
    'understood: nothing in this turn (say it another way)'
    """
    from minterpr.interaction.history import describe_said

    if not entry.facts:
        return "understood: " + (
            "nothing in this turn (say it another way)" if not entry.understood else "no attribute, only the verdict"
        )
    return "understood: " + "; ".join(describe_said(f) for f in entry.facts)


def decode_line(raw: str | bytes) -> str | None:
    """A line as text; None when it is not valid UTF-8 (or holds undecodable-byte escapes)."""
    try:
        if isinstance(raw, bytes):
            return raw.decode("utf-8")
        raw.encode("utf-8")  # lone surrogates: a text stream decoded with errors="surrogateescape"
        return raw
    except UnicodeError:
        return None
