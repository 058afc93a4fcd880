"""The export the web page serves: a :class:`~minterpr.serving.export.MatchExport` built from the
service's stored ``ExportRecord`` and its result views, rather than from a live session."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from minterpr.errors import ImageError
from minterpr.serving.export import ExportImage, ExportTurn, MatchExport, field_of, image_type, slug, utc_now_iso
from minterpr.serving.export_report import analyst_words, iso_time

__all__ = ["match_export_from_record"]


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
    facts = {field_of(r, "gallery_index"): r for r in results}
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
        mime, ext = image_type(data, path)
        member = f"crops/{len(images) + 1:02d}_{role}{'_' + slug(camera) if camera else ''}{ext}"
        seen = facts.get(i)
        images.append(
            ExportImage(
                -1 if i is None else int(i),
                path,
                member,
                role,
                camera,
                iso_time(time),
                similarity,
                rank,
                reason,
                tuple(field_of(seen, "matches", ()) or ()),
                tuple(field_of(seen, "contradicts", ()) or ()),
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
        path = str(field_of(item, "path", ""))
        source = field_of(item, "absolute_path")
        try:
            data = Path(source).read_bytes()
        except (OSError, TypeError) as err:
            raise ImageError(str(source), f"cannot read the crop for the export: {err}") from err
        mine = path == confirmed.path
        i = confirmed.gallery_index if mine else field_of(item, "gallery_index")
        said = next((t for t in reversed(conversation) if t.gallery_index == i and t.kind == "confirm"), None)
        reason = analyst_words(said.kind, said.text) if said is not None else ""
        also = bool(field_of(item, "confirmed", False)) and said is not None  # a further crop confirmed as the person
        add(
            i,
            path,
            data,
            "confirmed" if mine or also else "same_track",
            field_of(item, "camera"),
            field_of(item, "time"),
            confirmed.similarity if mine else said.similarity if also else None,
            confirmed.rank if mine else said.rank if also else None,
            reason,
            *((field_of(item, "follow_of"), field_of(item, "same_person")) if also else (None, None)),
        )
    if read_image is not None:
        for t in conversation:
            i = t.gallery_index
            if t.kind == "feedback" and i is not None and i not in members:
                seen = facts.get(i)
                judged = next(u for u in reversed(conversation) if u.kind == "feedback" and u.gallery_index == i)
                # "could be, I can't tell" left it undecided, wherever it ranks now
                now = field_of(seen, "judgement") if seen is not None else field_of(judged, "judgement", False)
                role = "ruled_out" if now is False else "undecided"
                # an image that left the results keeps its camera and time (ruled out, it ranks low)
                where = image_info(i) if seen is None and image_info is not None else seen
                add(
                    i,
                    str(field_of(seen, "path", f"gallery image {i}")),
                    read_image(i),
                    role,
                    field_of(where, "camera"),
                    field_of(where, "time"),
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
            tuple(field_of(t, "facts", ()) or ()),  # what the system read from the turn
            iso_time(t.time),
            t.user,
            t.rank,
            t.similarity,
        )
        for k, t in enumerate(conversation, start=1)
    )
    case = _plain(record.case)
    if "created" in case:
        case["created"] = iso_time(case["created"])
    return MatchExport(
        case,
        str(record.session_id),
        str(record.gallery),
        int(gallery_size),
        str(record.exported_by),
        iso_time(record.exported_at) or utc_now_iso(),
        tuple(images),
        turns,
    )
