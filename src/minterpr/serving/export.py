"""Export of a confirmed match: one zip with the crops, their cameras and times, the conversation
and a self-contained HTML report.

A match is exported only after the analyst confirmed it ("this is the person" on the page, a
``feedback`` turn the session reads as a match). The zip holds:

* ``README.txt``: what the export is, and the note that a match is a similarity judgement
  confirmed by a human, not an identification;
* ``report.html``: one self-contained page (images embedded as ``data:`` URIs, no scripts, no
  outside links) with the case, the confirmed image(s), the images the analyst ruled out and
  why, and the conversation turn by turn;
* ``match.json``: the same as data: case, session, who exported it and when, each image with
  its camera, time, similarity score, rank and SHA-256;
* ``conversation.json``: every turn (kind, the system's question, the analyst's words, the
  facts read from them, the image it was about);
* ``crops/``: the image files as stored in the gallery, byte for byte (their SHA-256 is in
  ``match.json``).

The gallery's person ids never enter the export: they are bookkeeping of the gallery, not a
finding. :func:`write_match_export` writes the zip atomically (complete or absent);
:func:`match_export_bytes` returns it for an HTTP response.
The documents' wording (report, README, notes) lives in :mod:`minterpr.serving.export_report`, the
export built from the service's stored record (what the page serves) in :mod:`minterpr.serving.export_record`.

Example:
    >>> import io, os, tempfile, zipfile
    >>> from PIL import Image
    >>> from minterpr.interaction.attribute_backend import AttributeBackend
    >>> from minterpr.interaction.session import Session
    >>> from minterpr.types import GalleryImage
    >>> root = tempfile.mkdtemp()
    >>> for i in range(3):
    ...     Image.new("RGB", (8, 16), (80 * i, 0, 0)).save(os.path.join(root, f"{i}.png"))
    >>> images = [GalleryImage(f"{i}.png", f"x:{i}", camera_id=f"cam{i}", attributes={"gender": (g,)})
    ...           for i, g in enumerate(["male", "female", "female"])]
    >>> backend = AttributeBackend()
    >>> session = Session(backend, backend.index_images(images, root=root))
    >>> _ = session.describe("a woman")
    >>> _ = session.feedback(1, "that's her")
    >>> export = build_match_export(session, case={"id": "c1", "purpose": "test"}, session_id="s1",
    ...                             exported_by="ana", metadata=[{"time": "2026-01-01T10:00:00"}] * 3)
    >>> [(im.role, im.camera, im.time) for im in export.images]
    [('confirmed', 'cam1', '2026-01-01T10:00:00')]
    >>> names = zipfile.ZipFile(io.BytesIO(match_export_bytes(export))).namelist()
    >>> sorted(names)[:4]
    ['README.txt', 'conversation.json', 'crops/01_confirmed_cam1.png', 'match.json']
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
import re
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, Callable, Mapping, Sequence

from PIL import Image, UnidentifiedImageError

from minterpr.data.paths import resolve_under
from minterpr.errors import ImageError, InputError
from minterpr.fileio import atomic_write
from minterpr.interaction.explain import describe_fact
from minterpr.interaction.history import describe_said
from minterpr.serving.export_report import (
    EXPORT_FORMAT,
    analyst_words,
    iso_time,
    match_summary,
    readme_text,
    render_report,
)
from minterpr.types import DescriptionTurn, ExampleTurn, QATurn, ReferenceTurn

__all__ = [
    "ExportImage",
    "ExportTurn",
    "MatchExport",
    "build_match_export",
    "match_export_bytes",
    "write_match_export",
]

_MIME = {
    "JPEG": ("image/jpeg", ".jpg"),
    "PNG": ("image/png", ".png"),
    "WEBP": ("image/webp", ".webp"),
    "GIF": ("image/gif", ".gif"),
    "BMP": ("image/bmp", ".bmp"),
}
_TURN_KINDS = {DescriptionTurn: "description", QATurn: "answer", ReferenceTurn: "feedback", ExampleTurn: "example"}


@dataclass(frozen=True)
class ExportImage:
    """One gallery image in an export."""

    gallery_index: int  # position in the gallery the session searched
    source_path: str  # its path in the gallery (relative to the gallery's image root)
    member: str  # its name inside the zip ("crops/01_confirmed_cam1.jpg")
    role: str  # "confirmed" (the analyst said it is the person), "ruled_out" (said it is not), "undecided",
    #   or "same_track" (another crop of the confirmed crop's track, exported with it)
    camera: str | None  # camera id, when the gallery knows it
    time: str | None  # when it was taken (the gallery's "time" metadata), when known
    similarity: float | None  # match probability in [0, 1] (``Step.match()``) on the page just before
    #   the analyst judged it, as the page showed it; None if unknown
    rank: int | None  # its 1-based rank at that point (None beyond a shortlist or unknown)
    reason: str  # the analyst's own words when judging it ("" when they wrote none)
    matched: tuple[str, ...]  # facts of the conversation it matches ("top colour: red")
    contradicted: tuple[str, ...]  # facts it contradicts
    sha256: str  # of the file bytes
    mime: str  # image/jpeg, image/png, ...
    data: bytes  # the file as stored in the gallery
    # confirmed from "follow this person": the confirmed crop (gallery index) it was offered for, and its
    # same-person probability with that crop when the analyst confirmed it (appearance only, never identity)
    follow_of: int | None = None
    same_person: float | None = None


@dataclass(frozen=True)
class ExportTurn:
    """One turn of the conversation."""

    number: int  # 1-based
    kind: str  # "description", "answer", "feedback" or "example"
    question: str | None  # the system's question this answers ("answer" turns)
    text: str  # what the analyst wrote
    image_member: str | None  # the zip member of the image the turn is about, if exported
    image_path: str | None  # that image's gallery path
    facts: tuple[str, ...]  # facts read from the turn (a model's marked "(read by the model)", as on the page)
    at: str | None  # when the turn was made (from the service's event log), when known
    user: str | None = None  # who made it, when known
    rank: int | None = None  # a judgement: the image's rank on the page when judged, when known
    similarity: float | None = None  # and its match probability then


@dataclass(frozen=True)
class MatchExport:
    """Everything one export holds (see the module doc for the zip's layout)."""

    case: Mapping[str, Any]  # the case the search belongs to (id, purpose, camera and time scope ...)
    session_id: str  # the search session
    gallery: str  # the gallery searched (name or path)
    gallery_size: int  # images in it
    exported_by: str  # the user who exported
    exported_at: str  # ISO time of the export (UTC)
    images: tuple[ExportImage, ...]  # confirmed images first, then those ruled out, in turn order
    turns: tuple[ExportTurn, ...]  # the conversation

    @property
    def confirmed(self) -> tuple[ExportImage, ...]:
        return tuple(im for im in self.images if im.role == "confirmed")


def utc_now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


def slug(text: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text or "").strip("-")[:40]


def _file_reader(index: Any) -> Callable[[int], bytes]:
    def read(i: int) -> bytes:
        path = resolve_under(index.root, index.images[i].path)
        try:
            return Path(path).read_bytes()
        except OSError as err:
            raise ImageError(path, f"cannot read the image for the export: {err.strerror or err}") from err

    return read


def image_type(data: bytes, where: str) -> tuple[str, str]:
    """(mime, extension) of image bytes; ImageError when they are not an image a browser shows."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
            kind = image.format
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise ImageError(where, f"not a readable image ({err})") from err
    if kind not in _MIME:
        raise ImageError(where, f"{kind} images cannot be exported (JPEG, PNG, WebP, GIF or BMP)")
    return _MIME[kind]


def _replayed_steps(session: Any) -> list[Any]:
    """The step after each turn, recomputed from the history with the session's own settings."""
    from minterpr.interaction.session import Session

    options = dict(
        question_policy=session.question_policy,
        reference_policy=session.reference_policy,
        reranking=session.reranking,
        seed=session.seed,
        schedule=session.schedule,
        num_references=session.num_references,
        history_k=session.history_k,
        max_text_chars=session.max_text_chars,
        allow_external_images=session.allow_external_images,
        shortlist=session.shortlist,
        match_temperature=session.match_temperature,
    )
    replay = Session(session.backend, session.index, **options)
    return [replay.add(entry.turn, facts=entry.facts, shown=entry.shown) for entry in session.history]


def build_match_export(
    session: Any,
    *,
    case: Mapping[str, Any],
    session_id: str,
    exported_by: str,
    gallery: str = "",
    metadata: Sequence[Mapping[str, Any]] | None = None,
    read_image: Callable[[int], bytes] | None = None,
    turn_times: Sequence[str | None] | None = None,
    exported_at: str | None = None,
) -> MatchExport:
    """Collect the export of ``session``'s confirmed match.

    ``metadata``: free metadata per gallery image (its ``time`` is exported), ``read_image``: the
    bytes of gallery image ``i`` (default: the file under the index root), ``turn_times``: when
    each turn was made. InputError when the session has no confirmed match; ImageError when an
    image cannot be read.
    """
    index = session.index
    judgements = session.judgements
    confirmed = [i for i, verdict in judgements.items() if verdict is True]
    if not confirmed:
        raise InputError(
            "nothing to export: no result has been confirmed as the person in this session (confirm one first)"
        )
    history = session.history
    if turn_times is not None and len(turn_times) != len(history):
        raise InputError(f"turn_times: {len(turn_times)} times for {len(history)} turns")
    read = read_image or _file_reader(index)
    steps = _replayed_steps(session)

    # the turn that last judged each image: its words, and the step the analyst saw before it
    judged_at: dict[int, int] = {}
    for k, entry in enumerate(history):
        if isinstance(entry.turn, ReferenceTurn):
            i = index.index_of(entry.turn.reference_path)
            if i is not None and i in judgements and judgements[i] is not None:
                judged_at[i] = k
    order = sorted(confirmed, key=lambda i: judged_at.get(i, 0))
    order += sorted((i for i, v in judgements.items() if v is False), key=lambda i: judged_at.get(i, 0))

    images, members = [], {}
    for n, i in enumerate(order, start=1):
        image = index.images[i]
        k = judged_at.get(i)
        before = steps[k - 1] if k else None
        similarity = rank = None
        if before is not None and before.rank_of(i) is not None:
            rank = before.rank_of(i) + 1
            similarity = round(float(before.match()[rank - 1]), 6)
        data = read(i)
        mime, ext = image_type(data, image.path)
        role = "confirmed" if judgements[i] else "ruled_out"
        member = f"crops/{n:02d}_{role}{'_' + slug(image.camera_id) if image.camera_id else ''}{ext}"
        members[i] = member
        explanation = steps[-1].explain_image(i) if steps else None
        time = field_of(metadata[i], "time") if metadata is not None and i < len(metadata) else None
        images.append(
            ExportImage(
                i,
                image.path,
                member,
                role,
                image.camera_id,
                iso_time(time),
                similarity,
                rank,
                analyst_words("confirm" if judgements[i] else "feedback", history[k].turn.feedback)
                if k is not None
                else "",
                tuple(describe_fact(f) for f in explanation.matched) if explanation else (),
                tuple(describe_fact(f) for f in explanation.contradicted) if explanation else (),
                hashlib.sha256(data).hexdigest(),
                mime,
                data,
            )
        )

    turns = []
    for k, entry in enumerate(history):
        turn = entry.turn
        path = (
            turn.reference_path
            if isinstance(turn, ReferenceTurn)
            else turn.image_path
            if isinstance(turn, ExampleTurn)
            else None
        )
        text = (
            turn.text
            if isinstance(turn, DescriptionTurn)
            else turn.answer
            if isinstance(turn, QATurn)
            else turn.feedback
            if isinstance(turn, ReferenceTurn)
            else ""
        )
        i = index.index_of(path) if path is not None else None
        kind = _TURN_KINDS[type(turn)]
        turns.append(
            ExportTurn(
                k + 1,
                kind,
                turn.question if isinstance(turn, QATurn) else None,
                analyst_words(kind, text),
                members.get(i) if i is not None else None,
                path,
                tuple(describe_said(f) for f in entry.facts),  # a model's fact marked
                turn_times[k] if turn_times is not None else None,
            )
        )
    return MatchExport(
        dict(case),
        str(session_id),
        gallery,
        len(index),
        str(exported_by),
        exported_at or utc_now_iso(),
        tuple(images),
        tuple(turns),
    )


def field_of(item: Any, name: str, default: Any = None) -> Any:
    return item.get(name, default) if isinstance(item, Mapping) else getattr(item, name, default)


def _write_zip(file: IO[bytes], export: MatchExport) -> None:
    stamp = dt.datetime.fromisoformat(export.exported_at.replace("Z", "+00:00")) if export.exported_at else None
    date_time = stamp.timetuple()[:6] if stamp and stamp.year >= 1980 else (1980, 1, 1, 0, 0, 0)

    def put(name: str, data: bytes | str, compress: int = zipfile.ZIP_DEFLATED) -> None:
        info = zipfile.ZipInfo(name, date_time=date_time)
        info.compress_type = compress
        archive.writestr(info, data.encode("utf-8") if isinstance(data, str) else data)

    with zipfile.ZipFile(file, "w") as archive:
        put("README.txt", readme_text(export))
        put("report.html", render_report(export))
        put("match.json", json.dumps(match_summary(export), indent=2, ensure_ascii=False) + "\n")
        put(
            "conversation.json",
            json.dumps(
                {
                    "format": EXPORT_FORMAT,
                    "session_id": export.session_id,
                    "turns": [dict(asdict(t), facts=list(t.facts)) for t in export.turns],
                },
                indent=2,
                ensure_ascii=False,
            )
            + "\n",
        )
        for image in export.images:
            put(image.member, image.data, zipfile.ZIP_STORED)  # already compressed


def match_export_bytes(export: MatchExport) -> bytes:
    """The zip as bytes (for an HTTP download)."""
    buffer = io.BytesIO()
    _write_zip(buffer, export)
    return buffer.getvalue()


def write_match_export(export: MatchExport, path: str | os.PathLike[str]) -> Path:
    """Write the zip to ``path`` atomically (the file is complete or absent); returns ``path``."""
    return atomic_write(path, lambda f: _write_zip(f, export))


def match_export_filename(export: MatchExport) -> str:
    """A download name: ``match_<case>_<session>_<date>.zip`` (only letters, digits and dashes)."""
    case = slug(str(export.case.get("id", ""))) or "case"
    return f"match_{case}_{slug(export.session_id) or 'session'}_{slug(export.exported_at[:10])}.zip"
