"""Cases: every search belongs to one, opened with a purpose and a camera and time scope that
cannot change afterwards. A session may narrow the scope, never widen it.

Example:
    >>> case = Scope(cameras=("c1", "c2"), start=0.0, end=100.0)
    >>> case.narrowed(["c1"], 10.0, None)
    Scope(cameras=('c1',), start=10.0, end=100.0)
    >>> case.narrowed(["c3"], None, None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    minterpr.serving.errors.ApiError: camera 'c3' is outside the case's scope (c1, c2)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Sequence

from sqlalchemy import select

from minterpr.serving import audit
from minterpr.serving.accounts import Principal
from minterpr.serving.db import Case, Database, User, now
from minterpr.serving.errors import ApiError
from minterpr.serving.galleries import format_time, parse_time
from minterpr.serving.schemas.search import CaseView


@dataclass(frozen=True)
class Scope:
    """Cameras (None = every camera) and a time window in UNIX seconds (None = unbounded)."""

    cameras: tuple[str, ...] | None
    start: float | None
    end: float | None

    def narrowed(self, cameras: Sequence[str] | None, start: float | None, end: float | None) -> "Scope":
        """This scope cut to a session's filters; 403 ``out_of_scope`` for a filter reaching outside it."""
        if cameras is not None and self.cameras is not None:
            outside = [c for c in cameras if c not in self.cameras]
            if outside:
                raise ApiError(
                    403,
                    "out_of_scope",
                    f"camera {outside[0]!r} is outside the case's scope ({', '.join(self.cameras)})",
                    field="cameras",
                )
        if start is not None and self.start is not None and start < self.start:
            raise ApiError(
                403,
                "out_of_scope",
                f"start {format_time(start)} is before the case's scope ({format_time(self.start)})",
                field="start",
            )
        if end is not None and self.end is not None and end > self.end:
            raise ApiError(
                403,
                "out_of_scope",
                f"end {format_time(end)} is after the case's scope ({format_time(self.end)})",
                field="end",
            )
        new_start = start if start is not None else self.start
        new_end = end if end is not None else self.end
        if new_start is not None and new_end is not None and new_start > new_end:
            raise ApiError(422, "invalid", "start is after end", field="start")
        return Scope(tuple(cameras) if cameras is not None else self.cameras, new_start, new_end)


def seconds(value: datetime | None) -> float | None:
    """UNIX seconds of a request's datetime (naive = UTC)."""
    return None if value is None else parse_time(value)


def _datetime(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, timezone.utc)


class Cases:
    """Open, read and close cases (audited)."""

    def __init__(self, db: Database, max_text_chars: int) -> None:
        self.db = db
        self.max_text_chars = max_text_chars

    def open_case(
        self,
        principal: Principal,
        title: str,
        purpose: str,
        cameras: Sequence[str] | None,
        start: datetime | None,
        end: datetime | None,
    ) -> CaseView:
        title, purpose = title.strip(), purpose.strip()
        if not title:
            raise ApiError(422, "invalid", "a case needs a title", field="title")
        if len(purpose) < 10:
            raise ApiError(
                422,
                "invalid",
                "state the purpose of the search (at least 10 characters: what "
                "happened, a report number, who authorised it)",
                field="purpose",
            )
        if len(purpose) > self.max_text_chars or len(title) > self.max_text_chars:
            raise ApiError(422, "invalid", f"longer than {self.max_text_chars} characters", field="purpose")
        if cameras is not None:
            cameras = sorted({c.strip() for c in cameras if c.strip()})
            if not cameras:
                raise ApiError(422, "invalid", "name at least one camera, or null for every camera", field="cameras")
        t0, t1 = seconds(start), seconds(end)
        if t0 is not None and t1 is not None and t0 > t1:
            raise ApiError(422, "invalid", "the scope's start is after its end", field="start")
        with self.db.write() as tx:
            case = Case(
                title=title,
                purpose=purpose,
                cameras=cameras,
                start=t0,
                end=t1,
                created_by=principal.user_id,
                created=now(),
                status="open",
            )
            tx.add(case)
            tx.flush()
            audit.append(
                tx,
                principal.username,
                "case_open",
                case.id,
                {
                    "title": title,
                    "purpose": purpose,
                    "cameras": cameras,
                    "start": format_time(t0),
                    "end": format_time(t1),
                },
            )
            return self._view(case, principal.username)

    def _view(self, case: Case, creator: str) -> CaseView:
        return CaseView(
            id=case.id,
            title=case.title,
            purpose=case.purpose,
            cameras=case.cameras,
            start=_datetime(case.start),
            end=_datetime(case.end),
            created_by=creator,
            created=case.created,
            status=case.status,
        )  # type: ignore[arg-type]

    def list_cases(self) -> list[CaseView]:
        with self.db.transaction() as tx:
            rows = tx.execute(select(Case, User.username).join(User, User.id == Case.created_by).order_by(Case.id))
            return [self._view(case, name) for case, name in rows]

    def row(self, case_id: int) -> Case:
        with self.db.transaction() as tx:
            case = tx.get(Case, case_id)
        if case is None:
            raise ApiError(404, "not_found", f"no case {case_id}", field="case_id")
        return case

    def get_case(self, case_id: int) -> CaseView:
        case = self.row(case_id)
        with self.db.transaction() as tx:
            creator = tx.scalar(select(User.username).where(User.id == case.created_by)) or "?"
        return self._view(case, creator)

    def scope(self, case: Case) -> Scope:
        return Scope(None if case.cameras is None else tuple(case.cameras), case.start, case.end)

    def close_case(self, principal: Principal, case_id: int) -> CaseView:
        """Close a case (its creator or an admin): no new session or turn afterwards."""
        with self.db.write() as tx:
            case = tx.get(Case, case_id)
            if case is None:
                raise ApiError(404, "not_found", f"no case {case_id}", field="case_id")
            if case.created_by != principal.user_id and principal.role != "admin":
                raise ApiError(403, "forbidden", "only the analyst who opened a case or an admin may close it")
            case.status = "closed"
            audit.append(tx, principal.username, "case_close", case.id, {})
        return self.get_case(case_id)
