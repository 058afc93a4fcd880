"""How a move becomes a turn: the permission and rate checks, the turn limit of the model, the move on
the live session, its event with the audit entries (every model call included) and its timeline entry."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from minterpr.errors import TurnError
from minterpr.serving import events
from minterpr.serving.accounts import Principal
from minterpr.serving.cases import Cases
from minterpr.serving.db import Database
from minterpr.serving.errors import ApiError, public_message
from minterpr.serving.galleries import Galleries
from minterpr.serving.ratelimit import RateLimiter
from minterpr.serving.schemas.search import TimelineEntry, TurnView
from minterpr.serving.session_store import SessionStore, need, turn_text
from minterpr.serving.settings import ServeSettings
from minterpr.serving.views import Live, confirmed, confirmed_all, seen, timeline, turn_view

_AUDIT_ACTION = {
    "describe": "query",
    "answer": "query",
    "example": "query",
    "feedback": "feedback",
    "confirm": "confirm",
}
VLM_AUDITED = (
    "purpose",
    "endpoint",
    "model",
    "outcome",
    "latency_s",
    "prompt_tokens",
    "completion_tokens",
    "attempts",
)  # attempts: HTTP requests, retries included


class TurnTaking(SessionStore):
    """The turn machinery of :class:`~minterpr.serving.search.Search`, with its rate limits."""

    def __init__(self, db: Database, settings: ServeSettings, galleries: Galleries, cases: Cases) -> None:
        super().__init__(db, settings, galleries, cases)
        self.limiter = RateLimiter(settings.search_rate)
        self.upload_limiter = RateLimiter(settings.upload_rate)
        self.timing = threading.local()  # .last: seconds of the calling thread's last turn, by part

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
            limit = turn_limit(live.session)
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
            audits += [("vlm_call", {"session": sid, **{k: c[k] for k in VLM_AUDITED}}) for c in calls]
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
                said = turn_text(live.session.history[-1].turn, events.Event(seq, kind, payload))
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


def turn_limit(session: Any) -> int | None:
    """The most turns the session's model reads (its position table), None when it says nothing."""
    config = getattr(getattr(session.backend, "model", None), "config", None)
    limit = getattr(config, "max_turns", None)
    return limit if isinstance(limit, int) else None
