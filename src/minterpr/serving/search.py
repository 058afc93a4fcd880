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
import uuid
from datetime import datetime
from typing import Any

from minterpr.errors import TurnError
from minterpr.language.dialogue_acts import verdict
from minterpr.interaction.shortlist import ShortlistConfig
from minterpr.serving import audit, events
from minterpr.serving.accounts import Principal
from minterpr.serving.cases import seconds
from minterpr.serving.db import SearchSession, now
from minterpr.serving.errors import ApiError
from minterpr.serving.schemas.search import TurnView
from minterpr.serving.search_reads import SessionReads
from minterpr.serving.search_turns import TurnTaking, turn_limit
from minterpr.serving.session_store import acted, need
from minterpr.serving.uploads import store_upload
from minterpr.serving.views import Live, Positions, scope_words, turn_view


class Search(TurnTaking, SessionReads):
    """The session service (see the module doc): starting a session and its moves here, the turn
    machinery in :class:`~minterpr.serving.search_turns.TurnTaking`, the reads in
    :class:`~minterpr.serving.search_reads.SessionReads`, the storage in
    :class:`~minterpr.serving.session_store.SessionStore`."""

    # ----- starting ------------------------------------------------------------------------------
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
            rows, limit, used = group_rows(live, gallery_index), turn_limit(live.session), len(live.session.history)
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
