"""Reading a search session: its view, the sessions of a case, its images and frames, the follow
candidates of a confirmed crop and the export record; every read of another's session or of a full image
is audited."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import select

from minterpr.data.paths import resolve_under
from minterpr.errors import ImageError, InputError
from minterpr.serving.accounts import Principal
from minterpr.serving.db import SearchSession, User
from minterpr.serving.errors import ApiError, public_message
from minterpr.serving.schemas.search import ExportRecord, FollowView, SessionSummary, TimelineEntry, TurnView
from minterpr.serving.session_store import SessionStore, acted, need
from minterpr.serving.uploads import thumbnail
from minterpr.serving.views import confirmed_all, export_images, timeline, turn_view


class SessionReads(SessionStore):
    """The reads of :class:`~minterpr.serving.search.Search`."""

    def view(self, principal: Principal, sid: str, top: int | None = None) -> TurnView:
        """The session as it stands (no new turn)."""
        need(principal, "session:read")
        with self._open(principal, sid, write=False) as live:
            shown = turn_view(live, self._top(top), live.gallery.name)
        if live.user_id != principal.user_id:  # the analyst's own reads are their results_shown entries
            self._audit_read(principal, "session_read", live.case_id, {"session": sid})
        return shown

    def summaries(self, principal: Principal, case_id: int | None = None) -> list[SessionSummary]:
        need(principal, "session:read")
        with self.db.transaction() as tx:
            query = select(SearchSession, User.username).join(User, User.id == SearchSession.user_id)
            if case_id is not None:
                query = query.where(SearchSession.case_id == case_id)
            rows = tx.execute(query.order_by(SearchSession.created)).all()
        names = {row.id: row.name for row in self.galleries.rows()}
        return [
            SessionSummary(
                session_id=s.id,
                case_id=s.case_id,
                gallery=names.get(s.gallery_id, "?"),
                user=name,
                created=s.created,
                updated=s.updated,
                turns=s.seq,
            )
            for s, name in rows
        ]

    def image(
        self, principal: Principal, sid: str, gallery_index: int, *, thumbnail_only: bool = True
    ) -> tuple[bytes, str]:
        """(JPEG bytes, media type) of an in-scope gallery image of the session."""
        need(principal, "session:read")
        with self._open(principal, sid, write=False) as live:
            self._local(live, gallery_index)
            gallery = live.gallery
            path = gallery.index.images[gallery_index].path
        if not thumbnail_only or live.user_id != principal.user_id:  # who looked at which person's image
            self._audit_read(
                principal,
                "image_read",
                live.case_id,
                {"session": sid, "gallery_index": gallery_index, "full": not thumbnail_only},
            )
        try:
            file = resolve_under(gallery.index.root, path)
            height = self.settings.thumbnail_height if thumbnail_only else 4096
            return thumbnail(file, height), "image/jpeg"
        except (ImageError, InputError) as err:
            raise ApiError(
                404, "image_unavailable", public_message(f"image {gallery_index} cannot be read: {err}")
            ) from None

    def frame(self, principal: Principal, sid: str, gallery_index: int) -> tuple[bytes, str]:
        """(JPEG bytes, media type) of the frame an in-scope crop was cut from, its box drawn. A frame
        shows other people too: the same permission as the crop, and every read is audited."""
        from minterpr.serving.looking import frame_with_box, has_frame

        need(principal, "session:read")
        with self._open(principal, sid, write=False) as live:
            self._local(live, gallery_index)
            gallery = live.gallery
            meta = dict(gallery.metadata[gallery_index])
        if not has_frame(meta):
            raise ApiError(
                404,
                "frame_unavailable",
                f"image {gallery_index}: its frame was not kept (a gallery of "
                "crops, or one ingested before frames were stored)",
            )
        self._audit_read(principal, "frame_read", live.case_id, {"session": sid, "gallery_index": gallery_index})
        try:
            return frame_with_box(
                resolve_under(gallery.index.root, meta["frame_image"]), meta["box"], meta["frame_size"]
            ), "image/jpeg"
        except (ImageError, InputError, OSError) as err:
            raise ApiError(
                404, "frame_unavailable", public_message(f"the frame of image {gallery_index} cannot be read: {err}")
            ) from None

    def image_info(self, principal: Principal, sid: str, gallery_index: int) -> dict[str, Any]:
        """Camera, time and free metadata (frame, box, track, ...) of an in-scope gallery image of the session."""
        need(principal, "session:read")
        with self._open(principal, sid, write=False) as live:
            self._local(live, gallery_index)
            _, camera, moment = live.image_info(gallery_index)
            return {"camera": camera, "time": moment, "metadata": dict(live.gallery.metadata[gallery_index])}

    def follow(self, principal: Principal, sid: str, gallery_index: int) -> FollowView:
        """The crops that may show the person of confirmed crop ``gallery_index``, per camera in time order
        (:mod:`minterpr.serving.follow`); who was shown which crops is audited (``follow_shown``)."""
        from minterpr.serving.follow import follow_view

        need(principal, "session:read")
        with self._open(principal, sid, write=False) as live:
            shown = follow_view(live, gallery_index)
        self._audit_read(
            principal,
            "follow_shown",
            live.case_id,
            {
                "session": sid,
                "gallery_index": gallery_index,
                **acted(principal),
                "candidates": [[c.gallery_index, c.same_person] for lane in shown.cameras for c in lane.candidates],
            },
        )
        return shown

    def export_record(self, principal: Principal, sid: str, *, files: bool = False) -> ExportRecord:
        """What an export holds (the confirmed crop, its track, times, cameras, the conversation); recorded
        as an ``export`` event and audited. 409 when nothing is confirmed. Image paths are the gallery's;
        ``files``: with each crop's ``absolute_path`` too (the zip built in this process reads them)."""
        need(principal, "session:export")
        with self._open(principal, sid, write=True) as live:
            every = confirmed_all(live)
            if not every:
                raise ApiError(409, "nothing_confirmed", "export needs a confirmed match: confirm one first")
            match = every[0]  # the headline is the first confirmation; the others follow it as confirmed crops
            images = export_images(live, match.gallery_index, files=files)
            images += [
                {
                    **export_images(live, c.gallery_index, files=files)[0],
                    "confirmed": True,
                    **({} if c.same_person is None else {"follow_of": c.follow_of, "same_person": c.same_person}),
                }
                for c in every[1:]
                if c.gallery_index not in {im["gallery_index"] for im in images}
            ]
            details = {"session": sid, "images": [image["path"] for image in images]}
            seq, t = self._commit(
                live, principal, "export", {"gallery_index": match.gallery_index}, [("export", details)]
            )
            live.exports.append(
                TimelineEntry(
                    seq=seq, kind="export", text="", gallery_index=match.gallery_index, user=principal.username, time=t
                )
            )
            case = self.cases.get_case(live.case_id)
            return ExportRecord(
                case=case,
                session_id=sid,
                gallery=live.gallery.name,
                confirmed=match,
                images=images,
                conversation=timeline(live),
                exported_by=principal.username,
                exported_at=datetime.now(timezone.utc),
                statement=match.statement,
            )
