"""The JSON API's routes for auditors and administrators: the audit log, users, retention, health.

Example:
    >>> sorted(route.path for route in router.routes if route.path.startswith("/api/audit"))
    ['/api/audit/entries', '/api/audit/export', '/api/audit/verify']
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from minterpr.serving.accounts import Principal
from minterpr.serving.api.search import ERRORS
from minterpr.serving.deps import get_services, require
from minterpr.serving.retention import purge
from minterpr.serving.schemas.search import (
    ID_MAX,
    CreateUserRequest,
    Health,
    RetentionReport,
    RetentionRequest,
    UserView,
    VerifyResponse,
)

router = APIRouter()


@router.get("/healthz", response_model=Health, tags=["admin"])
def health(request: Request) -> Health:
    return Health(status="ok", galleries=len(get_services(request).galleries.rows()))


@router.get("/api/audit/entries", tags=["audit"], responses=ERRORS)
def audit_entries(
    request: Request,
    after: int = Query(default=0, ge=0, le=ID_MAX),
    limit: int = Query(default=100, ge=1, le=1000),
    case_id: int | None = Query(default=None, ge=1, le=ID_MAX),
    _: Principal = Depends(require("audit:read")),
) -> list[dict[str, Any]]:
    return get_services(request).audit.entries(after=after, limit=limit, case_id=case_id)


@router.get("/api/audit/export", tags=["audit"], responses=ERRORS, response_class=StreamingResponse)
def audit_export(request: Request, principal: Principal = Depends(require("audit:read"))) -> StreamingResponse:
    """The whole log as JSON lines (verify it with ``minterpr audit verify FILE --head HASH``)."""
    services = get_services(request)
    services.audit.record(principal, "audit_export", None, {})
    seq, head = services.audit.head()

    return StreamingResponse(
        services.audit.export_lines(upto=seq),
        media_type="application/x-ndjson",
        headers={
            "Content-Disposition": "attachment; filename=audit.jsonl",
            "X-Audit-Head": head,
            "X-Audit-Seq": str(seq),
        },
    )


@router.get("/api/audit/verify", response_model=VerifyResponse, tags=["audit"], responses=ERRORS)
def audit_verify(request: Request, _: Principal = Depends(require("audit:read"))) -> VerifyResponse:
    report = get_services(request).audit.verify()
    return VerifyResponse(ok=report.ok, entries=report.entries, head=report.head, problems=report.problems)


@router.get("/api/admin/users", response_model=list[UserView], tags=["admin"], responses=ERRORS)
def users(request: Request, _: Principal = Depends(require("user:manage"))) -> list[UserView]:
    return [
        UserView(id=u["id"], username=u["username"], role=u["role"]) for u in get_services(request).accounts.users()
    ]


@router.post("/api/admin/users", response_model=UserView, status_code=201, tags=["admin"], responses=ERRORS)
def create_user(
    body: CreateUserRequest, request: Request, principal: Principal = Depends(require("user:manage"))
) -> UserView:
    user_id = get_services(request).accounts.create_user(body.username, body.password, body.role, by=principal.username)
    return UserView(id=user_id, username=body.username, role=body.role)


@router.post("/api/admin/retention", response_model=RetentionReport, tags=["admin"], responses=ERRORS)
def retention(
    body: RetentionRequest, request: Request, principal: Principal = Depends(require("retention:run"))
) -> RetentionReport:
    return purge(get_services(request), body.days, by=principal.username)
