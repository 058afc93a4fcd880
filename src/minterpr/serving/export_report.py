"""What an export says to people: the notes printed beside a match, the analyst's own words of a turn,
the case as rows, and the zip's documents (``report.html``, ``README.txt``, ``match.json``).

Kept apart from :mod:`minterpr.serving.export` (which builds the export and writes the zip) because the
search page prints the same wording; the functions take a ``MatchExport`` (typed ``Any`` here: this module
sits below the one that defines it).
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

from minterpr.interaction.explain import CONFIDENT, MIN_LABEL_AUC
from minterpr.interaction.match import percent

__all__ = ["EVIDENCE_NOTE", "EXPORT_FORMAT", "RULED_OUT_TEXT", "SIMILARITY_NOTE", "analyst_words", "render_report"]

EXPORT_FORMAT = "minterpr-match-export"
EXPORT_VERSION = 1
TEMPLATES = Path(__file__).resolve().parent / "templates"
SIMILARITY_NOTE = (
    "A match is a similarity judgement made by a person looking at images that a model ranked "
    "as similar to a description; it is not an identification. The match figure is the system's "
    "estimate, from appearance alone, that an image shows the person sought, among the images "
    "searched (they sum to 100 %); people who look alike share it. Nothing here establishes who "
    "the person is."
)
EVIDENCE_NOTE = (
    f"A \u2713 or \u2717 beside a fact means the model is at least {100 * CONFIDENT:.0f} % sure of it for "
    "that image, with probabilities calibrated on validation data; ? means it is not sure. Attributes "
    f"the model cannot recognise reliably (validation ROC AUC under {MIN_LABEL_AUC:.0f} %) are not shown "
    "as evidence."
)


RULED_OUT_TEXT = "Not this person."  # the verdict the page's "Not this person…" form puts before the reason


def analyst_words(kind: str, text: str) -> str:
    """What the analyst wrote in a turn, without the words the system recorded for them: a confirmation
    records :data:`~minterpr.serving.events.CONFIRM_TEXT` for the session to read (the analyst ticked a
    box, wrote nothing), a ruling-out on the page puts :data:`RULED_OUT_TEXT` before the reason.

    >>> analyst_words("feedback", "Not this person. no bag"), analyst_words("confirm", "Yes, this is the person.")
    ('no bag', '')
    """
    from minterpr.serving.events import CONFIRM_TEXT

    if kind == "confirm" and text == CONFIRM_TEXT:
        return ""
    if kind == "feedback" and text.startswith(RULED_OUT_TEXT):
        return text[len(RULED_OUT_TEXT) :].strip()
    return text


def case_rows(case: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The case as the report shows it: ISO-8601 times, "all cameras" / "any time" for an open scope."""
    rows = []
    for key, value in case.items():
        if key == "cameras":
            text = ", ".join(value) if value else "all cameras"
        elif key in ("start", "end"):
            text = iso_time(value) or "any time"
        elif key == "created":
            text = iso_time(value) or "unknown"
        elif isinstance(value, (list, tuple)):
            text = ", ".join(map(str, value))
        else:
            text = "" if value is None else str(value)
        rows.append((key.replace("_", " "), text))
    return rows


def iso_time(value: Any) -> str | None:
    """ISO 8601 text of a datetime, UNIX seconds (UTC) or a string (kept); None for None or ""."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return dt.datetime.fromtimestamp(value, dt.timezone.utc).replace(microsecond=0).isoformat()
    return str(value)


def _image_record(image: Any) -> dict[str, Any]:
    record = asdict(image)
    del record["data"]
    record["matched"], record["contradicted"] = list(image.matched), list(image.contradicted)
    return record


def match_summary(export: Any) -> dict[str, Any]:
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "note": SIMILARITY_NOTE,
        "case": dict(export.case),
        "session_id": export.session_id,
        "gallery": export.gallery,
        "gallery_size": export.gallery_size,
        "exported_by": export.exported_by,
        "exported_at": export.exported_at,
        "images": [_image_record(im) for im in export.images],
    }


def render_report(export: Any) -> str:
    """The self-contained HTML report (autoescaped Jinja2; images as data: URIs)."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True))
    uris = {im.member: f"data:{im.mime};base64,{base64.b64encode(im.data).decode('ascii')}" for im in export.images}
    env.filters["percent"] = percent
    return env.get_template("export_report.html").render(
        export=export,
        uris=uris,
        note=SIMILARITY_NOTE,
        case_rows=case_rows(export.case),
        format=EXPORT_FORMAT,
        version=EXPORT_VERSION,
        confirmed=export.confirmed,
        ruled_out=[im for im in export.images if im.role != "confirmed"],
    )


def readme_text(export: Any) -> str:
    lines = [
        "minterpr match export",
        "=" * 21,
        "",
        SIMILARITY_NOTE,
        "",
        f"Case: {export.case.get('id', '')}  Session: {export.session_id}",
        f"Exported by {export.exported_by} at {export.exported_at}",
        "",
        "report.html         the report (open in a browser; self-contained)",
        "match.json          case, images (camera, time, similarity, rank, SHA-256)",
        "conversation.json   the conversation, turn by turn",
        "crops/              the images as stored in the gallery",
        "",
    ]
    return "\n".join(lines)
