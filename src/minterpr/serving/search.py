"""Search sessions as a service: every move of the Python API, stored as an append-only event log.

A move is computed on the session held in memory (the fast path), then committed — one
transaction adds the event, advances the session's ``seq`` and appends the audit entries — and
only then answered. A move that fails changes nothing (the library's sessions are atomic); a
commit that fails drops the in-memory session, which is then rebuilt from its events. A session
not in memory (after a restart, evicted, or moved on by another process: its stored ``seq`` is
ahead) is rebuilt by :func:`~minterpr.serving.events.replay` from the log; a gallery rewritten
since (retention) is reopened first, and its sessions replay by image path.

One lock per session orders its moves; different sessions run in parallel over one shared model
and gallery index. Access: moving a session needs ``session:search`` and being its analyst;
reading one needs ``session:read``; every session lies in an open case and searches only the
images of the case's scope.

Example (``services`` from :func:`~minterpr.serving.service.build_services`, a gallery registered):
    >>> ana = services.accounts.login("ana", PASSWORD, client="cli").principal  # doctest: +SKIP
    >>> case = services.cases.open_case(ana, "lost child", "report 17, duty officer", None, None, None)  # doctest: +SKIP
    >>> view = services.search.start(ana, case.id, "demo")  # doctest: +SKIP
    >>> view = services.search.describe(ana, view.session_id, "a girl in a yellow raincoat")  # doctest: +SKIP
    >>> view.results[0].similarity, view.action.kind  # doctest: +SKIP
    (0.61, 'question')
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections import OrderedDict
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

from sqlalchemy import select

from minterpr.data.paths import resolve_under
from minterpr.errors import ImageError, InputError, TurnError
from minterpr.language.dialogue_acts import verdict
from minterpr.interaction.shortlist import ShortlistConfig
from minterpr.serving import audit, events
from minterpr.serving.accounts import Principal
from minterpr.serving.cases import Cases, Scope, seconds
from minterpr.serving.db import Case, Database, GalleryRow, SearchSession, SessionEvent, User, now
from minterpr.serving.errors import ApiError, public_message
from minterpr.serving.galleries import Galleries, LoadedGallery
from minterpr.serving.ratelimit import RateLimiter
from minterpr.serving.schemas.search import ExportRecord, FollowView, SessionSummary, TimelineEntry, TurnView
from minterpr.serving.security import allowed
from minterpr.serving.settings import ServeSettings
from minterpr.serving.uploads import store_upload, thumbnail
from minterpr.serving.views import (
    Live,
    Positions,
    confirmed,
    confirmed_all,
    export_images,
    seen,
    timeline,
    scope_words,
    turn_view,
)
from minterpr.vlm.assist import VLMAssistant

_AUDIT_ACTION = {
    "describe": "query",
    "answer": "query",
    "example": "query",
    "feedback": "feedback",
    "confirm": "confirm",
}
_VLM_AUDIT = (
    "purpose",
    "endpoint",
    "model",
    "outcome",
    "latency_s",
    "prompt_tokens",
    "completion_tokens",
    "attempts",
)  # attempts: HTTP requests, retries included


def acted(principal: Principal) -> dict[str, Any]:
    """How the user acted, for the audit entry: by login cookie, or by which API key."""
    return {"via": principal.via, **({"key": principal.key_id} if principal.key_id is not None else {})}


def need(principal: Principal, permission: str) -> None:
    if not allowed(principal.role, permission):
        raise ApiError(403, "forbidden", f"the {principal.role} role may not do this ({permission})")


class Search:
    """The session service (see the module doc)."""

    def __init__(self, db: Database, settings: ServeSettings, galleries: Galleries, cases: Cases) -> None:
        self.db, self.settings, self.galleries, self.cases = db, settings, galleries, cases
        self.limiter = RateLimiter(settings.search_rate)
        self.upload_limiter = RateLimiter(settings.upload_rate)
        self._live: OrderedDict[str, Live] = OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.timing = threading.local()  # .last: seconds of the calling thread's last turn, by part

    # ----- starting and reading ------------------------------------------------------------------
    def start(
        self,
        principal: Principal,
        case_id: int,
        gallery: str,
        cameras: list[str] | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> TurnView:
        """A new session in an open case over the gallery's images inside the case's scope (narrowed by the filters)."""
        need(principal, "session:search")
        case = self.cases.row(case_id)
        if case.status != "open":
            raise ApiError(409, "case_closed", f"case {case_id} is closed", field="case_id")
        scope = self.cases.scope(case).narrowed(cameras, seconds(start), seconds(end))
        loaded = self.galleries.get(gallery)
        rows, index = loaded.scoped(scope.cameras, scope.start, scope.end)
        if index is None:
            raise ApiError(422, "empty_scope", f"no image of gallery {gallery!r} lies in this scope", field="gallery")
        sid = uuid.uuid4().hex
        options = {
            "seed": secrets.randbelow(2**31),
            "max_text_chars": self.settings.max_text_chars,
            "shortlist": ShortlistConfig().to_dict(),
        }  # recorded: a later default must not change a replay
        session = self._with_model(
            events.replay(
                [],
                loaded.backend,
                index,
                options,
                loaded.pipeline.rerank_config(),
                None,
                loaded.pipeline.evidence_policy(),
                loaded.pipeline.extras.match_temperature(),
            )
        )
        filters = {
            "cameras": None if scope.cameras is None else list(scope.cameras),
            "start": scope.start,
            "end": scope.end,
        }
        positions = Positions(rows, len(loaded.index))
        with self.db.write() as tx:
            t = now()
            tx.add(
                SearchSession(
                    id=sid,
                    case_id=case_id,
                    gallery_id=loaded.id,
                    user_id=principal.user_id,
                    created=t,
                    updated=t,
                    filters=filters,
                    options=options,
                    seq=0,
                )
            )
            audit.append(
                tx,
                principal.username,
                "session_start",
                case_id,
                {
                    "session": sid,
                    "gallery": loaded.name,
                    "scope": filters,
                    "images": positions.in_scope,
                    **({"vlm_captioned": loaded.captions["vlm_captioned"]} if loaded.captions else {}),
                    **acted(principal),
                },
            )
        live = Live(
            sid,
            case_id,
            principal.user_id,
            loaded,
            positions,
            session,
            options,
            0,
            scope=scope_words(scope.cameras, scope.start, scope.end),
        )
        self._remember(live)
        return turn_view(live, self.settings.results_per_turn, loaded.name)

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

    # ----- moves ---------------------------------------------------------------------------------
    def describe(self, principal: Principal, sid: str, text: str, top: int | None = None) -> TurnView:
        return self._turn(principal, sid, "describe", lambda live: live.session.describe(text), {}, text, None, top)

    def answer(self, principal: Principal, sid: str, text: str, top: int | None = None) -> TurnView:
        return self._turn(principal, sid, "answer", lambda live: live.session.answer(text), {}, text, None, top)

    def feedback(
        self, principal: Principal, sid: str, gallery_index: int, text: str, top: int | None = None, group: bool = False
    ) -> TurnView:
        """Judge any in-scope image ("not her: no backpack", "maybe"); saying it *is* the person is refused
        here: that needs the explicit confirmation step (:meth:`confirm`). ``group``: the tracks linked to
        its track are judged the same way too (:meth:`_group`)."""
        if isinstance(text, str) and verdict(text) is True:
            raise ApiError(
                422,
                "confirmation_required",
                "to say this is the person, use the confirmation step "
                "(POST /api/sessions/{id}/confirm with acknowledge: true)",
                field="text",
            )
        others = self._group(principal, sid, gallery_index) if group else []
        view = self._turn(
            principal,
            sid,
            "feedback",
            lambda live: live.session.feedback(self._local(live, gallery_index), text),
            {"gallery_index": gallery_index},
            text,
            gallery_index,
            top,
        )
        for i in others:
            view = self._turn(
                principal,
                sid,
                "feedback",
                lambda live, i=i: live.session.feedback(self._local(live, i), text),
                {"gallery_index": i, "group_of": gallery_index},
                text,
                i,
                top,
            )
        return view

    def _group(self, principal: Principal, sid: str, gallery_index: int) -> list[int]:
        """The crops a judgement of ``gallery_index`` with ``group`` also judges (one per linked track,
        :func:`~minterpr.serving.follow.group_rows`), each its own turn; 409 when they would pass the turn limit."""
        from minterpr.serving.follow import group_rows

        with self._open(principal, sid, write=False) as live:
            self._local(live, gallery_index)
            rows, limit, used = group_rows(live, gallery_index), _max_turns(live.session), len(live.session.history)
        if limit is not None and used + 1 + len(rows) > limit:
            raise ApiError(
                409,
                "turn_limit",
                f"judging its linked group takes {1 + len(rows)} turns and this "
                f"conversation has {limit - used} of its {limit} left: judge the crops one at a time",
                field="group",
            )
        return rows

    def confirm(
        self,
        principal: Principal,
        sid: str,
        gallery_index: int,
        acknowledge: bool,
        top: int | None = None,
        follow_of: int | None = None,
        group: bool = False,
    ) -> TurnView:
        """The explicit step: the analyst states that this image looks like the person (similarity, not identity).
        ``follow_of``: a candidate of "follow this person" (:meth:`follow`): its same-person probability with
        that confirmed crop is recorded with the confirmation (and exported with it). ``group``: the tracks
        ingestion linked to its track are confirmed too, one crop each (only when the analyst asks)."""
        need(principal, "session:confirm")
        if acknowledge is not True:
            raise ApiError(
                422,
                "acknowledge_required",
                "a confirmation needs acknowledge: true (the analyst "
                "confirms a visual similarity; it does not identify anyone)",
                field="acknowledge",
            )
        extra: dict[str, Any] = {"gallery_index": gallery_index}
        others = self._group(principal, sid, gallery_index) if group else []
        if follow_of is not None:
            from minterpr.serving.follow import same_person_of

            with self._open(principal, sid, write=False) as live:
                self._local(live, gallery_index)
                extra.update(follow_of=follow_of, same_person=same_person_of(live, follow_of, gallery_index))
        view = self._turn(
            principal,
            sid,
            "confirm",
            lambda live: live.session.feedback(self._local(live, gallery_index), events.CONFIRM_TEXT),
            extra,
            events.CONFIRM_TEXT,
            gallery_index,
            top,
        )
        for i in others:  # asked for: the linked tracks, one crop each, each its own recorded confirmation
            view = self._turn(
                principal,
                sid,
                "confirm",
                lambda live, i=i: live.session.feedback(self._local(live, i), events.CONFIRM_TEXT),
                {"gallery_index": i, "group_of": gallery_index},
                events.CONFIRM_TEXT,
                i,
                top,
            )
        return view

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

    def example_gallery(self, principal: Principal, sid: str, gallery_index: int, top: int | None = None) -> TurnView:
        def move(live: Live) -> Any:
            self._local(live, gallery_index)
            return live.session.example(live.gallery.index.images[gallery_index].path)

        return self._turn(
            principal,
            sid,
            "example",
            move,
            {"gallery_index": gallery_index},
            f"example: gallery image {gallery_index}",
            gallery_index,
            top,
        )

    def example_upload(
        self, principal: Principal, sid: str, data: bytes, content_type: str | None, top: int | None = None
    ) -> TurnView:
        """Search by an uploaded image. It is written only once the session, its owner, its open case
        and both rate limits (turns, uploads) have let the move through: inside the move itself."""
        extra: dict[str, Any] = {}  # filled by the move: the stored file's name, recorded with the event

        def move(live: Live) -> Any:
            wait = self.upload_limiter.take(f"user:{principal.user_id}")
            if wait > 0:
                raise ApiError(
                    429,
                    "rate_limited",
                    f"too many uploads; try again in {wait:.1f} s",
                    headers={"Retry-After": str(max(1, round(wait)))},
                )
            folder = self.settings.uploads_dir / sid
            extra["upload"] = store_upload(
                data,
                content_type,
                folder,
                max_bytes=self.settings.max_upload_bytes,
                max_pixels=self.settings.max_image_pixels,
            )
            return live.session.example(str(folder / extra["upload"]))

        return self._turn(principal, sid, "example", move, extra, "example: uploaded image", None, top)

    def withdraw_fact(self, principal: Principal, sid: str, turn: int, fact: int, top: int | None = None) -> TurnView:
        """Withdraw fact number ``fact`` of turn ``turn`` (both 0-based, as the view lists them): the session
        re-ranks as if that turn had never recorded it (:meth:`Session.withdraw_fact`); stored as a ``withdraw`` event."""
        need(principal, "session:search")
        with self._open(principal, sid, write=True) as live:
            history = live.session.history
            if not 0 <= turn < len(history) or not 0 <= fact < len(history[turn].facts):
                raise ApiError(
                    422,
                    "invalid",
                    f"turn {turn} has no fact {fact} (the conversation has {len(history)} turns)",
                    field="fact",
                )
            chosen = history[turn].facts[fact]
            try:
                live.session.withdraw_fact(turn, chosen)
            except TurnError as err:
                raise ApiError(422, "invalid_turn", str(err)) from None
            payload = events.withdraw_payload(turn, chosen)
            self._commit(
                live, principal, "withdraw", payload, [("query", {"session": sid, "kind": "withdraw", **payload})]
            )
            return turn_view(live, self._top(top), live.gallery.name)

    def undo(self, principal: Principal, sid: str, top: int | None = None) -> TurnView:
        """Take back exactly the last action: a turn, or a fact's removal (the fact is restored and the
        session rebuilt from its log, as a restart would)."""
        if self._last_action(sid) != "withdraw":
            return self._turn(principal, sid, "undo", lambda live: live.session.undo(), {}, "", None, top)
        self._may_take_a_turn(principal)
        with self._open(principal, sid, write=True) as live:
            self._commit(
                live,
                principal,
                "undo",
                {"action": "withdraw"},
                [("undo", {"session": sid, "turns": len(live.session.history), "action": "withdraw"})],
            )
            self._drop(sid)  # rebuilt from the log on the next read: the withdrawal undone
        with self._open(principal, sid, write=False) as live:
            return turn_view(live, self._top(top), live.gallery.name)

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

    def reference(self, sid: str) -> Any:
        """The plain reference: a fresh Session replayed from the stored events (what a restart builds)."""
        with self.db.transaction() as tx:
            row = tx.get(SearchSession, sid)
        if row is None:
            raise ApiError(404, "not_found", f"no session {sid}")
        return self._build(row, self.galleries.get(gallery_id=row.gallery_id)).session

    def forget(self) -> None:
        """Drop every in-memory session (they are rebuilt from their events when next used)."""
        with self._guard:
            self._live.clear()

    # ----- internals -----------------------------------------------------------------------------
    def _last_action(self, sid: str) -> str | None:
        with self.db.transaction() as tx:
            stored = tx.execute(
                select(SessionEvent.seq, SessionEvent.kind, SessionEvent.payload)
                .where(SessionEvent.session_id == sid)
                .order_by(SessionEvent.seq)
            ).all()
        return events.last_action(events.Event(seq, kind, payload or {}) for seq, kind, payload in stored)

    def _audit_read(self, principal: Principal, action: str, case_id: int, details: dict[str, Any]) -> None:
        with self.db.write() as tx:
            audit.append(tx, principal.username, action, case_id, details)

    def _top(self, top: int | None) -> int:
        return self.settings.results_per_turn if top is None else max(1, min(int(top), self.settings.max_results))

    def _local(self, live: Live, gallery_index: int) -> int:
        local = live.positions.to_local(gallery_index)
        if local is None:
            raise ApiError(
                422,
                "out_of_scope",
                f"gallery_index {gallery_index} is not an image this session may "
                f"search (0..{live.positions.gallery_size - 1}, inside the case's scope)",
                field="gallery_index",
            )
        return local

    def _may_take_a_turn(self, principal: Principal) -> None:
        """The principal may search and is within the turn rate (429 with Retry-After otherwise)."""
        need(principal, "session:search")
        wait = self.limiter.take(f"user:{principal.user_id}")
        if wait > 0:
            raise ApiError(
                429,
                "rate_limited",
                f"too many turns; try again in {wait:.1f} s",
                headers={"Retry-After": str(max(1, round(wait)))},
            )

    def _turn(
        self,
        principal: Principal,
        sid: str,
        kind: str,
        move: Callable[[Live], Any],
        extra: dict[str, Any],
        text: str,
        gallery_index: int | None,
        top: int | None,
    ) -> TurnView:
        self._may_take_a_turn(principal)
        with self._open(principal, sid, write=True) as live:
            limit = _max_turns(live.session)
            if kind != "undo" and limit is not None and len(live.session.history) >= limit:
                raise ApiError(
                    409,
                    "turn_limit",
                    f"this conversation has the {limit} turns the model reads; undo a "
                    "turn, or start a new session in the same case",
                )
            if kind in ("feedback", "confirm") and gallery_index is not None:  # what the analyst saw of it
                extra = {**extra, **seen(live, gallery_index)}
            started = time.perf_counter()
            try:
                move(live)
            except TurnError as err:
                raise ApiError(422, "invalid_turn", public_message(str(err))) from None
            computed = time.perf_counter()
            # every call the model made for this turn, audited with the case (endpoint, model, purpose; no key)
            calls = live.session.vlm.turn_usage()["records"] if live.session.vlm is not None else []
            judged = live.session.model_scores[-1] if live.session.history else ()
            shown = turn_view(live, self._top(top), live.gallery.name)
            if kind == "undo":
                payload: dict[str, Any] = {}
                audits = [("undo", {"session": sid, "turns": len(live.session.history)})]
            else:
                payload = events.turn_payload(
                    live.session.history[-1], **extra, **({"model_scores": [list(j) for j in judged]} if judged else {})
                )
                details = {"session": sid, "kind": kind, "text": text, **extra}
                audits = [
                    (_AUDIT_ACTION[kind], details),
                    (
                        "results_shown",
                        {
                            "session": sid,
                            "results": [
                                [r.gallery_index, r.path, r.similarity]
                                for r in shown.results[: self.settings.results_per_turn]
                            ],
                        },
                    ),
                ]
            audits += [("vlm_call", {"session": sid, **{k: c[k] for k in _VLM_AUDIT}}) for c in calls]
            viewed = time.perf_counter()
            seq, t = self._commit(live, principal, kind, payload, audits)
            self.timing.last = {
                "session": computed - started,
                "view": viewed - computed,
                "commit": time.perf_counter() - viewed,
            }
            if kind == "undo":
                live.timeline.pop()
            else:
                said = _text(live.session.history[-1].turn, events.Event(seq, kind, payload))
                live.timeline.append(
                    TimelineEntry(
                        seq=seq,
                        kind=kind,
                        text=said,
                        gallery_index=gallery_index,
                        user=principal.username,
                        time=t,
                        rank=extra.get("seen_rank"),
                        similarity=extra.get("seen_similarity"),
                        understood=live.session.history[-1].understood,
                        follow_of=extra.get("follow_of"),
                        same_person=extra.get("same_person"),
                    )
                )
            # the confirmation reports the rank and match recorded with it (now in the timeline)
            return shown.model_copy(
                update={
                    "seq": seq,
                    "timeline": timeline(live),
                    "confirmed": confirmed(live),
                    "confirmed_all": confirmed_all(live),
                }
            )

    def _commit(
        self,
        live: Live,
        principal: Principal,
        kind: str,
        payload: dict[str, Any],
        audits: list[tuple[str, dict[str, Any]]],
    ) -> tuple[int, float]:
        """Append the event and its audit entries in one transaction; on failure the in-memory
        session (ahead of the log) is dropped and the error raised."""
        try:
            with self.db.write() as tx:
                row = tx.get(SearchSession, live.session_id)
                if row is None or row.seq != live.seq:
                    raise ApiError(
                        409,
                        "conflict",
                        "the session changed meanwhile (another request or server); reload it and repeat the move",
                    )
                t = now()
                tx.add(
                    SessionEvent(
                        session_id=live.session_id,
                        seq=live.seq + 1,
                        time=t,
                        user_id=principal.user_id,
                        kind=kind,
                        payload=payload,
                    )
                )
                row.seq, row.updated = live.seq + 1, t
                for action, details in audits:
                    audit.append(tx, principal.username, action, live.case_id, {**details, **acted(principal)})
        except BaseException:
            self._drop(live.session_id)
            raise
        live.seq += 1
        return live.seq, t

    @contextmanager
    def _open(self, principal: Principal, sid: str, *, write: bool) -> Iterator[Live]:
        """The session's Live under its lock, rebuilt from the log when it is not current."""
        with self._guard:
            lock = self._locks.setdefault(sid, threading.Lock())
        with lock:
            with self.db.transaction() as tx:  # one read: the session, its case's status, its gallery's version
                found = (
                    tx.execute(
                        select(SearchSession, Case.status, GalleryRow.version)
                        .join(Case, Case.id == SearchSession.case_id)
                        .join(GalleryRow, GalleryRow.id == SearchSession.gallery_id)
                        .where(SearchSession.id == sid)
                    ).first()
                    if len(sid) <= 32
                    else None
                )
            if found is None:
                raise ApiError(404, "not_found", f"no session {sid!r}", field="session_id")
            row, status, version = found
            if write and row.user_id != principal.user_id:
                raise ApiError(403, "forbidden", "only the analyst who started a session may continue it")
            if write and status != "open":
                raise ApiError(409, "case_closed", f"case {row.case_id} is closed")
            loaded = self.galleries.current(row.gallery_id, version) or self.galleries.get(gallery_id=row.gallery_id)
            with self._guard:
                live = self._live.get(sid)
                if live is not None:
                    self._live.move_to_end(sid)
            if live is None or live.seq != row.seq or live.gallery is not loaded:
                live = self._build(row, loaded)
                self._remember(live)
            yield live

    def _build(self, row: SearchSession, loaded: LoadedGallery) -> Live:
        filters = row.filters or {}
        scope = Scope(
            None if filters.get("cameras") is None else tuple(filters["cameras"]),
            filters.get("start"),
            filters.get("end"),
        )
        rows, index = loaded.scoped(scope.cameras, scope.start, scope.end)
        if index is None:
            raise ApiError(410, "gone", f"session {row.id}: no image of its scope is left in the gallery")
        with self.db.transaction() as tx:
            stored = tx.execute(
                select(SessionEvent, User.username)
                .join(User, User.id == SessionEvent.user_id)
                .where(SessionEvent.session_id == row.id)
                .order_by(SessionEvent.seq)
            ).all()
        log = [events.Event(e.seq, e.kind, e.payload, name, e.time) for e, name in stored]
        uploads = self.settings.uploads_dir / row.id
        try:
            session = events.replay(
                log,
                loaded.backend,
                index,
                row.options or {},
                loaded.pipeline.rerank_config(),
                uploads,
                loaded.pipeline.evidence_policy(),
                loaded.pipeline.extras.match_temperature(),
            )
            turns = events.fold(log, uploads)
        except (TurnError, InputError) as err:
            raise ApiError(
                410,
                "gone",
                f"session {row.id} cannot be rebuilt from its events (an image may "
                f"have been removed by retention): {public_message(str(err))}",
            ) from None
        timeline = [
            TimelineEntry(
                seq=e.seq,
                kind=e.kind,
                text=_text(entry.turn, e),
                user=e.user,
                time=e.time,
                gallery_index=e.payload.get("gallery_index"),
                rank=e.payload.get("seen_rank"),
                similarity=e.payload.get("seen_similarity"),
                understood=entry.understood,
                follow_of=e.payload.get("follow_of"),
                same_person=e.payload.get("same_person"),
            )
            for entry, e in turns
        ]
        session = self._with_model(session)  # after the replay: recorded turns keep their recorded facts
        exports = [
            TimelineEntry(
                seq=e.seq, kind=e.kind, text="", gallery_index=e.payload.get("gallery_index"), user=e.user, time=e.time
            )
            for e in log
            if e.kind == "export"
        ]
        return Live(
            row.id,
            row.case_id,
            row.user_id,
            loaded,
            Positions(rows, len(loaded.index)),
            session,
            dict(row.options or {}),
            len(log),
            timeline,
            exports,
            scope_words(scope.cameras, scope.start, scope.end),
        )

    def _with_model(self, session: Any) -> Any:
        """``session`` with the service's vision-language model (`serve --vlm-url`), if one is configured."""
        if self.settings.vlm is not None:
            session.vlm = VLMAssistant(self.settings.vlm)
        return session

    def _remember(self, live: Live) -> None:
        with self._guard:
            self._live[live.session_id] = live
            self._live.move_to_end(live.session_id)
            while len(self._live) > self.settings.max_live_sessions:
                self._live.popitem(last=False)

    def _drop(self, sid: str) -> None:
        with self._guard:
            self._live.pop(sid, None)


def _max_turns(session: Any) -> int | None:
    """The most turns the session's model reads (its position table), None when it says nothing."""
    config = getattr(getattr(session.backend, "model", None), "config", None)
    limit = getattr(config, "max_turns", None)
    return limit if isinstance(limit, int) else None


def _text(turn: Any, event: events.Event) -> str:
    """The timeline text of a replayed turn (what the user said, or which image)."""
    for name in ("text", "answer", "feedback"):
        if isinstance(getattr(turn, name, None), str):
            return getattr(turn, name)
    if "upload" in event.payload:
        return "example: uploaded image"
    return f"example: gallery image {event.payload.get('gallery_index')}"
