"""The web page: server-rendered (Jinja2) search pages over the service, htmx for in-place updates.

``create_app`` calls :func:`register`, which mounts ``static/`` (htmx 2 vendored, one CSS file)
at ``/static`` and adds the page routes; the JSON API under ``/api`` is the service's. Every page
works without JavaScript: a form posts, the server answers 303 back to the page (post, redirect,
get). With htmx, the same forms post in the background and only ``#workspace`` is swapped
(``hx-select``), so one code path serves both. Errors of a move come back as the page with the
message (``role=alert``) and a 4xx status, which htmx is configured to swap as well.

Routes: ``/login``, ``/logout``, ``/cases`` (list, open), ``/cases/{id}`` (start a search), ``/cases/{id}/close``,
``/sessions/{sid}`` (the search page; ``?camera=&from=&until=`` narrow the results shown),
``/sessions/{sid}/describe|answer|feedback|confirm|undo`` (the moves), ``/sessions/{sid}/thumb/{i}``
(a thumbnail, access-checked by the service) and ``/sessions/{sid}/export`` (the zip of a confirmed
match, :mod:`minterpr.serving.export`). Forms carry the CSRF token as a field, htmx requests as the
``X-CSRF-Token`` header (``hx-headers`` on ``<body>``).

This module holds the search page's routes and moves; what the page shows is
:mod:`~minterpr.serving.pages.session_view`, the login and case routes are :mod:`~minterpr.serving.pages.login`
and :mod:`~minterpr.serving.pages.cases`, what every page shares :mod:`~minterpr.serving.pages.site`.

Example:
    >>> from minterpr.serving.pages.search import when
    >>> when("2026-12-01T10:02:03+00:00"), when(None)
    ('2026-12-01 10:02:03', '')
"""

from typing import Any, Callable
from urllib.parse import urlencode

from minterpr.language.dialogue_acts import verdict
from minterpr.serving.errors import ApiError
from minterpr.serving.export import match_export_bytes, match_export_filename
from minterpr.serving.export_record import match_export_from_record
from minterpr.serving.export_report import RULED_OUT_TEXT
from minterpr.serving.looking import look_context
from minterpr.serving.pages.cases import register_cases
from minterpr.serving.pages.login import register_login
from minterpr.serving.pages.session_view import hidden_inputs, page_filters, session_context
from minterpr.serving.pages.site import STATIC, Pages, redirect
from minterpr.serving.times import when  # noqa: F401  (named here by the module doc's example)


def _number(data: Any, field: str) -> int:
    try:
        return int(str(data.get(field, "")))
    except ValueError:
        raise ApiError(422, "invalid", f"{field}: not a whole number", field=field) from None


def _index(data: Any) -> int:
    return _number(data, "gallery_index")


def _because(data: Any) -> str:
    """The feedback of "Not this person…": the verdict first, then the analyst's reason."""
    reason = str(data.get("text", "")).strip()
    if reason and verdict(reason) is None:  # "could be, I can't tell": unsure, never a ruling-out
        return reason
    return f"{RULED_OUT_TEXT} {reason}" if reason else RULED_OUT_TEXT


MOVES: dict[str, Callable[[Any, Any, str, Any], Any]] = {  # form post -> service call (search, user, sid, form)
    "describe": lambda search, user, sid, d: search.describe(user, sid, str(d.get("text", ""))),
    "answer": lambda search, user, sid, d: search.answer(user, sid, str(d.get("text", ""))),
    "feedback": lambda search, user, sid, d: search.feedback(
        user, sid, _index(d), _because(d), group=d.get("group") == "yes"
    ),
    "confirm": lambda search, user, sid, d: search.confirm(
        user,
        sid,
        _index(d),
        acknowledge=d.get("acknowledge") == "yes",
        follow_of=_number(d, "follow_of") if d.get("follow_of") else None,
        group=d.get("group") == "yes",
    ),
    "example": lambda search, user, sid, d: search.example_gallery(user, sid, _index(d)),
    "undo": lambda search, user, sid, d: search.undo(user, sid),
    "withdraw": lambda search, user, sid, d: search.withdraw_fact(user, sid, _number(d, "turn"), _number(d, "fact")),
}


def register(app: Any) -> None:
    """Mount ``/static`` and add the page routes to ``app`` (called by ``create_app``): login, cases,
    the search page and its moves, then the ingestion page."""
    from fastapi import APIRouter
    from fastapi.staticfiles import StaticFiles

    pages = Pages(app)
    app.state.html_error_renderer = pages.error_page
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    router = APIRouter(include_in_schema=False)
    register_login(router, pages)
    register_cases(router, pages)
    _register_sessions(router, pages)
    app.include_router(router)
    from minterpr.serving.pages.ingest import register_ingest

    register_ingest(app, pages)


def _register_sessions(router: Any, pages: Pages) -> None:
    """Add the search page's routes to ``router``: the page, its images, the export and the moves."""
    from fastapi import Depends, Query, Request
    from fastapi import Path as PathParam
    from fastapi.responses import Response
    from starlette.concurrency import run_in_threadpool

    from minterpr.serving.deps import csrf_token, current_user, optional_user

    SessionId = PathParam(pattern=r"^[0-9a-f]{32}$")  # noqa: N806  (as the API's session ids)

    def _session_page(
        request: Any,
        user: Any,
        sid: str,
        filters: dict[str, str],
        *,
        status: int = 200,
        error: str | None = None,
        moved: bool = False,
    ) -> Any:
        csrf = csrf_token(request) or ""
        return pages.render(
            request,
            "session.html",
            status,
            user=user,
            error=error,
            csrf=csrf,
            hidden=hidden_inputs(csrf, filters),
            **session_context(pages, user, sid, filters, moved),
        )

    @router.get("/sessions/{sid}")
    def session_page(
        request: Request,
        sid: str = SessionId,
        camera: str = Query("", max_length=200),
        start: str = Query("", alias="from", max_length=40),
        until: str = Query("", max_length=40),
        moved: int = Query(0, ge=0, le=1),
        n: int | None = Query(None, ge=1, le=1000),
        user: Any = Depends(optional_user),
    ) -> Any:
        if user is None:
            return redirect("/login?" + urlencode({"next": f"/sessions/{sid}"}))
        # a reversed time window is answered with the page (200) and its message at the fields: a GET that
        # failed would leave the browser's console an error for what is the user's typing
        return _session_page(request, user, sid, page_filters(camera, start, until, n), moved=bool(moved))

    @router.get("/sessions/{sid}/thumb/{gallery_index}")
    def thumbnail(
        sid: str = SessionId, gallery_index: int = PathParam(ge=0, le=2**40), user: Any = Depends(current_user)
    ) -> Any:
        data, media_type = pages.services.search.image(user, sid, gallery_index, thumbnail_only=True)
        return Response(data, media_type=media_type, headers={"Cache-Control": "private, max-age=3600"})

    @router.get("/sessions/{sid}/image/{gallery_index}")
    def full_image(
        sid: str = SessionId, gallery_index: int = PathParam(ge=0, le=2**40), user: Any = Depends(current_user)
    ) -> Any:
        """The crop at full resolution (the look-closely page)."""
        data, media_type = pages.services.search.image(user, sid, gallery_index, thumbnail_only=False)
        return Response(data, media_type=media_type, headers={"Cache-Control": "private, max-age=3600"})

    @router.get("/sessions/{sid}/frame/{gallery_index}")
    def frame_image(
        sid: str = SessionId, gallery_index: int = PathParam(ge=0, le=2**40), user: Any = Depends(current_user)
    ) -> Any:
        """The frame the crop was cut from, its box drawn (permission-checked and audited as a full crop)."""
        data, media_type = pages.services.search.frame(user, sid, gallery_index)
        return Response(data, media_type=media_type, headers={"Cache-Control": "private, max-age=3600"})

    @router.get("/sessions/{sid}/look/{gallery_index}")
    def look(
        request: Request,
        sid: str = SessionId,
        gallery_index: int = PathParam(ge=0, le=2**40),
        compare: int | None = Query(None, alias="with", ge=0, le=2**40),
        user: Any = Depends(optional_user),
    ) -> Any:
        """One image looked at closely, beside the confirmed crop or the top result (or ``?with=``)."""
        if user is None:
            return redirect("/login?" + urlencode({"next": f"/sessions/{sid}/look/{gallery_index}"}))
        return pages.render(request, "look.html", user=user, **look_context(pages, user, sid, gallery_index, compare))

    @router.post("/sessions/{sid}/export")  # a post: it records an export event (CSRF-checked)
    def export(sid: str = SessionId, user: Any = Depends(current_user)) -> Any:
        search = pages.services.search
        record = search.export_record(user, sid, files=True)  # refused without a confirmed match; audited
        view = search.view(user, sid, top=pages.settings.max_results)
        built = match_export_from_record(
            record,
            results=view.results,
            gallery_size=view.gallery_size,
            read_image=lambda i: search.image(user, sid, i, thumbnail_only=False)[0],
            image_info=lambda i: search.image_info(user, sid, i),
        )
        return Response(
            match_export_bytes(built),
            media_type="application/zip",
            headers={
                "Content-Disposition": f'attachment; filename="{match_export_filename(built)}"',
                "Cache-Control": "no-store",
            },
        )

    @router.post("/sessions/{sid}/{move}")
    async def make_move(
        request: Request,
        move: str = PathParam(pattern="^(" + "|".join(MOVES) + ")$"),
        sid: str = SessionId,
        user: Any = Depends(current_user),
    ) -> Any:
        """One move from a form; 303 back to the page (with its filters), or the page with the error."""
        data = await request.form()
        filters = page_filters(*(str(data.get(k, "")) for k in ("camera", "from", "until", "n")))
        try:
            await run_in_threadpool(MOVES[move], pages.services.search, user, sid, data)
        except ApiError as err:  # bound here: the name is unbound once the except block ends
            status, message = err.status, err.message
            return await run_in_threadpool(
                lambda: _session_page(request, user, sid, filters, status=status, error=message)
            )
        query = {**{k: v for k, v in filters.items() if v}, "moved": "1"}
        return redirect(f"/sessions/{sid}?{urlencode(query)}")
