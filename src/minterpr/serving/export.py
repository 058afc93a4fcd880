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

import base64
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
from minterpr.interaction.explain import CONFIDENT, MIN_LABEL_AUC, describe_fact
from minterpr.interaction.history import describe_said
from minterpr.interaction.match import percent
from minterpr.types import DescriptionTurn, ExampleTurn, QATurn, ReferenceTurn

__all__ = [
    "EVIDENCE_NOTE",
    "EXPORT_FORMAT",
    "SIMILARITY_NOTE",
    "ExportImage",
    "ExportTurn",
    "MatchExport",
    "build_match_export",
    "match_export_bytes",
    "match_export_from_record",
    "write_match_export",
]

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
            text = _iso(value) or "any time"
        elif key == "created":
            text = _iso(value) or "unknown"
        elif isinstance(value, (list, tuple)):
            text = ", ".join(map(str, value))
        else:
            text = "" if value is None else str(value)
        rows.append((key.replace("_", " "), text))
    return rows


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


def _slug(text: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text or "").strip("-")[:40]


def _file_reader(index: Any) -> Callable[[int], bytes]:
    def read(i: int) -> bytes:
        path = resolve_under(index.root, index.images[i].path)
        try:
            return Path(path).read_bytes()
        except OSError as err:
            raise ImageError(path, f"cannot read the image for the export: {err.strerror or err}") from err

    return read


def _image_type(data: bytes, where: str) -> tuple[str, str]:
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
        mime, ext = _image_type(data, image.path)
        role = "confirmed" if judgements[i] else "ruled_out"
        member = f"crops/{n:02d}_{role}{'_' + _slug(image.camera_id) if image.camera_id else ''}{ext}"
        members[i] = member
        explanation = steps[-1].explain_image(i) if steps else None
        time = _field(metadata[i], "time") if metadata is not None and i < len(metadata) else None
        images.append(
            ExportImage(
                i,
                image.path,
                member,
                role,
                image.camera_id,
                _iso(time),
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
        exported_at or _now(),
        tuple(images),
        tuple(turns),
    )


def _iso(value: Any) -> str | None:
    """ISO 8601 text of a datetime, UNIX seconds (UTC) or a string (kept); None for None or ""."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return dt.datetime.fromtimestamp(value, dt.timezone.utc).replace(microsecond=0).isoformat()
    return str(value)


def _field(item: Any, name: str, default: Any = None) -> Any:
    return item.get(name, default) if isinstance(item, Mapping) else getattr(item, name, default)


def _plain(value: Any) -> dict[str, Any]:
    if hasattr(value, "model_dump"):  # a pydantic model (the service's CaseView)
        return value.model_dump(mode="json")
    return dict(value)


def match_export_from_record(
    record: Any,
    *,
    read_image: Callable[[int], bytes] | None = None,
    results: Sequence[Any] = (),
    gallery_size: int = 0,
    image_info: Callable[[int], Mapping[str, Any]] | None = None,
) -> MatchExport:
    """The export of the service's ``ExportRecord`` (:mod:`minterpr.serving.schemas.search`).

    The record's crops are read from their ``absolute_path``; ``read_image`` (gallery index ->
    bytes, access-checked by the caller) adds the images the analyst ruled out in the conversation;
    ``results`` (the session's ``ResultView`` list) gives each image the facts it matches and
    contradicts, ``gallery_size`` the images searched, ``image_info`` (gallery index -> its ``camera`` and
    ``time``) the camera and time of a judged image that is no longer among ``results``. The rank and match of a judged image are the
    ones recorded with its judgement (the page's, at that moment; unknown for a log written before
    they were recorded). ImageError when a crop cannot be read.
    """
    confirmed = record.confirmed
    facts = {_field(r, "gallery_index"): r for r in results}
    images: list[ExportImage] = []
    members: dict[int, str] = {}

    def add(
        i: int | None,
        path: str,
        data: bytes,
        role: str,
        camera: Any,
        time: Any,
        similarity: Any,
        rank: Any,
        reason: str,
        follow_of: Any = None,
        same_person: Any = None,
    ) -> None:
        mime, ext = _image_type(data, path)
        member = f"crops/{len(images) + 1:02d}_{role}{'_' + _slug(camera) if camera else ''}{ext}"
        seen = facts.get(i)
        images.append(
            ExportImage(
                -1 if i is None else int(i),
                path,
                member,
                role,
                camera,
                _iso(time),
                similarity,
                rank,
                reason,
                tuple(_field(seen, "matches", ()) or ()),
                tuple(_field(seen, "contradicts", ()) or ()),
                hashlib.sha256(data).hexdigest(),
                mime,
                data,
                follow_of,
                same_person,
            )
        )
        if i is not None:
            members[int(i)] = member

    conversation = list(record.conversation)
    for item in record.images:
        path = str(_field(item, "path", ""))
        source = _field(item, "absolute_path")
        try:
            data = Path(source).read_bytes()
        except (OSError, TypeError) as err:
            raise ImageError(str(source), f"cannot read the crop for the export: {err}") from err
        mine = path == confirmed.path
        i = confirmed.gallery_index if mine else _field(item, "gallery_index")
        said = next((t for t in reversed(conversation) if t.gallery_index == i and t.kind == "confirm"), None)
        reason = analyst_words(said.kind, said.text) if said is not None else ""
        also = bool(_field(item, "confirmed", False)) and said is not None  # a further crop confirmed as the person
        add(
            i,
            path,
            data,
            "confirmed" if mine or also else "same_track",
            _field(item, "camera"),
            _field(item, "time"),
            confirmed.similarity if mine else said.similarity if also else None,
            confirmed.rank if mine else said.rank if also else None,
            reason,
            *((_field(item, "follow_of"), _field(item, "same_person")) if also else (None, None)),
        )
    if read_image is not None:
        for t in conversation:
            i = t.gallery_index
            if t.kind == "feedback" and i is not None and i not in members:
                seen = facts.get(i)
                judged = next(u for u in reversed(conversation) if u.kind == "feedback" and u.gallery_index == i)
                # "could be, I can't tell" left it undecided, wherever it ranks now
                now = _field(seen, "judgement") if seen is not None else _field(judged, "judgement", False)
                role = "ruled_out" if now is False else "undecided"
                # an image that left the results keeps its camera and time (ruled out, it ranks low)
                where = image_info(i) if seen is None and image_info is not None else seen
                add(
                    i,
                    str(_field(seen, "path", f"gallery image {i}")),
                    read_image(i),
                    role,
                    _field(where, "camera"),
                    _field(where, "time"),
                    judged.similarity,
                    judged.rank,
                    analyst_words(judged.kind, judged.text),
                )
    turns = tuple(
        ExportTurn(
            k,
            t.kind,
            None,
            analyst_words(t.kind, t.text),
            members.get(t.gallery_index) if t.gallery_index is not None else None,
            None,
            tuple(_field(t, "facts", ()) or ()),  # what the system read from the turn
            _iso(t.time),
            t.user,
            t.rank,
            t.similarity,
        )
        for k, t in enumerate(conversation, start=1)
    )
    case = _plain(record.case)
    if "created" in case:
        case["created"] = _iso(case["created"])
    return MatchExport(
        case,
        str(record.session_id),
        str(record.gallery),
        int(gallery_size),
        str(record.exported_by),
        _iso(record.exported_at) or _now(),
        tuple(images),
        turns,
    )


def _image_record(image: ExportImage) -> dict[str, Any]:
    record = asdict(image)
    del record["data"]
    record["matched"], record["contradicted"] = list(image.matched), list(image.contradicted)
    return record


def _summary(export: MatchExport) -> dict[str, Any]:
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


def render_report(export: MatchExport) -> str:
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


def _readme(export: MatchExport) -> str:
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


def _write_zip(file: IO[bytes], export: MatchExport) -> None:
    stamp = dt.datetime.fromisoformat(export.exported_at.replace("Z", "+00:00")) if export.exported_at else None
    date_time = stamp.timetuple()[:6] if stamp and stamp.year >= 1980 else (1980, 1, 1, 0, 0, 0)

    def put(name: str, data: bytes | str, compress: int = zipfile.ZIP_DEFLATED) -> None:
        info = zipfile.ZipInfo(name, date_time=date_time)
        info.compress_type = compress
        archive.writestr(info, data.encode("utf-8") if isinstance(data, str) else data)

    with zipfile.ZipFile(file, "w") as archive:
        put("README.txt", _readme(export))
        put("report.html", render_report(export))
        put("match.json", json.dumps(_summary(export), indent=2, ensure_ascii=False) + "\n")
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
    case = _slug(str(export.case.get("id", ""))) or "case"
    return f"match_{case}_{_slug(export.session_id) or 'session'}_{_slug(export.exported_at[:10])}.zip"
