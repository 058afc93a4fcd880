"""The case pages: ``/cases`` (the list, open a case), ``/cases/{id}`` (its sessions, start a search)
and ``/cases/{id}/close``."""

from typing import Any
from urllib.parse import urlencode

from minterpr.serving.errors import ApiError
from minterpr.serving.pages.site import Pages, form_datetime, redirect


def register_cases(router: Any, pages: Pages) -> None:
    """Add the case routes to ``router``."""
    from fastapi import Depends, Request
    from fastapi import Path as PathParam

    from minterpr.serving.deps import current_user, optional_user

    CaseId = PathParam(ge=1, le=2**53 - 1)  # noqa: N806

    @router.get("/cases")
    def cases(request: Request, user: Any = Depends(optional_user)) -> Any:
        if user is None:
            return redirect("/login?" + urlencode({"next": "/cases"}))
        return _cases_page(request, user)

    def _cases_page(
        request: Any, user: Any, status: int = 200, error: str | None = None, form: dict[str, Any] | None = None
    ) -> Any:
        pages.need(user, "case:read")
        return pages.render(
            request,
            "cases.html",
            status,
            user=user,
            cases=pages.services.cases.list_cases(),
            cameras=pages.cameras(),
            can_open=pages.allowed(user, "case:open"),
            error=error,
            form=form or {"title": "", "purpose": "", "cameras": [], "start": "", "end": ""},
        )

    @router.post("/cases")
    async def open_case(request: Request, user: Any = Depends(current_user)) -> Any:
        data = await request.form()
        form = {
            "title": str(data.get("title", "")),
            "purpose": str(data.get("purpose", "")),
            "cameras": [str(c) for c in data.getlist("cameras")],
            "start": str(data.get("start", "")),
            "end": str(data.get("end", "")),
        }
        pages.need(user, "case:open")
        try:
            case = pages.services.cases.open_case(
                user,
                form["title"],
                form["purpose"],
                form["cameras"] or None,
                form_datetime(form["start"], "start"),
                form_datetime(form["end"], "end"),
            )
        except ApiError as err:
            return _cases_page(request, user, err.status, err.message, form)
        return redirect(f"/cases/{case.id}")

    def _case_page(request: Any, user: Any, case_id: int, status: int = 200, error: str | None = None) -> Any:
        pages.need(user, "case:read")
        case = pages.services.cases.get_case(case_id)
        sessions = pages.services.search.summaries(user, case_id) if pages.allowed(user, "session:read") else []
        return pages.render(
            request,
            "case.html",
            status,
            user=user,
            case=case,
            galleries=pages.galleries(),
            sessions=sessions,
            default_gallery=pages.settings.demo_gallery,
            cameras=pages.cameras(scope=case.cameras),
            can_search=pages.allowed(user, "session:search") and case.status == "open",
            can_close=case.status == "open"
            and pages.allowed(user, "case:open")
            and (case.created_by == user.username or user.role == "admin"),
            error=error,
        )

    @router.get("/cases/{case_id}")
    def case_page(request: Request, case_id: int = CaseId, user: Any = Depends(optional_user)) -> Any:
        if user is None:
            return redirect("/login?" + urlencode({"next": f"/cases/{case_id}"}))
        return _case_page(request, user, case_id)

    @router.post("/cases/{case_id}/sessions")
    async def start(request: Request, case_id: int = CaseId, user: Any = Depends(current_user)) -> Any:
        data = await request.form()
        try:
            view = pages.services.search.start(
                user,
                case_id,
                str(data.get("gallery", "")),
                cameras=[str(c) for c in data.getlist("cameras")] or None,
                start=form_datetime(str(data.get("start", "")), "start"),
                end=form_datetime(str(data.get("end", "")), "end"),
            )
        except ApiError as err:
            return _case_page(request, user, case_id, err.status, err.message)
        return redirect(f"/sessions/{view.session_id}")

    @router.post("/cases/{case_id}/close")  # the case service checks it is the case's opener or an admin
    def close_case(request: Request, case_id: int = CaseId, user: Any = Depends(current_user)) -> Any:
        pages.need(user, "case:open")
        pages.services.cases.close_case(user, case_id)
        return redirect(f"/cases/{case_id}")
