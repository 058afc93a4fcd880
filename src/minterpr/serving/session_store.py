"""Where the search service keeps its sessions: the live sessions in memory (a bounded LRU, one lock
each), rebuilt from their event log by :func:`~minterpr.serving.events.replay` when not current, and
each move's event committed with its audit entries in one transaction (see :mod:`minterpr.serving.search`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Iterator

from sqlalchemy import select

from minterpr.errors import InputError, TurnError
from minterpr.serving import audit, events
from minterpr.serving.accounts import Principal
from minterpr.serving.cases import Cases, Scope
from minterpr.serving.db import Case, Database, GalleryRow, SearchSession, SessionEvent, User, now
from minterpr.serving.errors import ApiError, public_message
from minterpr.serving.galleries import Galleries, LoadedGallery
from minterpr.serving.schemas.search import TimelineEntry
from minterpr.serving.security import allowed
from minterpr.serving.settings import ServeSettings
from minterpr.serving.views import Live, Positions, scope_words
from minterpr.vlm.assist import VLMAssistant


def acted(principal: Principal) -> dict[str, Any]:
    """How the user acted, for the audit entry: by login cookie, or by which API key."""
    return {"via": principal.via, **({"key": principal.key_id} if principal.key_id is not None else {})}


def need(principal: Principal, permission: str) -> None:
    if not allowed(principal.role, permission):
        raise ApiError(403, "forbidden", f"the {principal.role} role may not do this ({permission})")


class SessionStore:
    """The sessions of the service, in memory and in the database (the base of :class:`~minterpr.serving.search.Search`)."""

    def __init__(self, db: Database, settings: ServeSettings, galleries: Galleries, cases: Cases) -> None:
        self.db, self.settings, self.galleries, self.cases = db, settings, galleries, cases
        self._live: OrderedDict[str, Live] = OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

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
                text=turn_text(entry.turn, e),
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


def turn_text(turn: Any, event: events.Event) -> str:
    """The timeline text of a replayed turn (what the user said, or which image)."""
    for name in ("text", "answer", "feedback"):
        if isinstance(getattr(turn, name, None), str):
            return getattr(turn, name)
    if "upload" in event.payload:
        return "example: uploaded image"
    return f"example: gallery image {event.payload.get('gallery_index')}"
