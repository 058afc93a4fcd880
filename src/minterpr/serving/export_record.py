"""The export the web page serves: a :class:`~minterpr.serving.export.MatchExport` built from the
service's stored ``ExportRecord`` and its result views, rather than from a live session."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from minterpr.errors import ImageError
from minterpr.serving.export import ExportImage, ExportTurn, MatchExport, _field, _image_type, _now, _slug
from minterpr.serving.export_report import _iso, analyst_words

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
