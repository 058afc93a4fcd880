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

Example:
    >>> from minterpr.serving.pages.search import when
    >>> when("2026-12-01T10:02:03+00:00"), when(None)
    ('2026-12-01 10:02:03', '')
"""

import datetime as dt
import hashlib
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlencode

from markupsafe import Markup, escape

from minterpr.serving.times import as_datetime, when  # noqa: F401  (when: the templates' filter)

from minterpr.interaction.match import percent
from minterpr.language.dialogue_acts import verdict
from minterpr.serving.errors import ApiError
from minterpr.serving.looking import footage_range, look_context, timeline_strip
from minterpr.serving.export import match_export_filename, match_export_bytes
from minterpr.serving.export_record import match_export_from_record
from minterpr.serving.export_report import EVIDENCE_NOTE, RULED_OUT_TEXT, SIMILARITY_NOTE

HERE = Path(__file__).resolve().parent.parent  # serving/: its static/ and templates/
STATIC, TEMPLATES = HERE / "static", HERE / "templates"
# pages use their own script, style and images only: an injected script or style, a form posting
# elsewhere or a frame around the page is refused by the browser
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'"
)
_TITLES = {
    400: "Bad request",
    401: "Please log in",
    403: "Not allowed",
    404: "Not found",
    409: "Conflict",
    413: "Too large",
    422: "Cannot do that",
    429: "Too many requests",
    500: "Something went wrong",
}


TIME_PATTERN = r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?"  # the time fields: 24-hour UTC, "2026-03-02 08:30"


def _static_version(name: str) -> str:
    return hashlib.sha256((STATIC / name).read_bytes()).hexdigest()[:10]


def _environment() -> Any:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    versions = {name: _static_version(name) for name in ("minterpr.css", "htmx.min.js", "minterpr.js")}
    env.globals["static"] = lambda name: f"/static/{name}?v={versions.get(name, '0')}"
    env.filters["when"] = when
    env.filters["percent"] = percent
    env.globals["time_pattern"] = TIME_PATTERN
    return env


class Pages:
    """The page routes' shared state: the template environment and the service container."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.env = _environment()

    # ----- helpers -----------------------------------------------------------------------------
    @property
    def services(self) -> Any:
        return self.app.state.services

    @property
    def settings(self) -> Any:
        return self.services.settings

    def render(self, request: Any, template: str, status: int = 200, **context: Any) -> Any:
        from fastapi.responses import HTMLResponse

        from minterpr.serving.deps import csrf_token

        context.setdefault("user", None)
        context.setdefault("csrf", csrf_token(request) or "")
        html = self.env.get_template(template).render(**context)
        return HTMLResponse(
            html,
            status_code=status,
            headers={"Cache-Control": "no-store", "Content-Security-Policy": CONTENT_SECURITY_POLICY},
        )

    def allowed(self, user: Any, permission: str) -> bool:
        from minterpr.serving.security import allowed

        return user is not None and allowed(user.role, permission)

    def need(self, user: Any, permission: str) -> None:
        """403 unless ``user``'s role has ``permission`` (the case service leaves the check to its routes)."""
        if not self.allowed(user, permission):
            raise ApiError(403, "forbidden", f"the {user.role} role may not do this ({permission})")

    def error_page(self, request: Any, status: int, code: str, message: str) -> Any:
        """The app's HTML error renderer: a page whose ``#workspace`` holds the message (htmx swaps it
        in place); an htmx request that lost its login is sent to the login page."""
        from fastapi.responses import Response

        if status == 401 and request.headers.get("hx-request"):
            return Response(status_code=204, headers={"HX-Redirect": "/login"})
        user = (
            self.services.accounts.from_login_token(request.cookies.get("minterpr_session", ""))
            if request.cookies.get("minterpr_session")
            else None
        )
        return self.render(
            request,
            "error.html",
            status,
            user=user,
            http_status=status,
            title=_TITLES.get(status, "Error"),
            message=message,
            code=code,
        )

    def galleries(self) -> list[Any]:
        return list(self.services.galleries.list())

    def cameras(self, gallery: str | None = None, scope: Any = None) -> list[str]:
        """Cameras of one gallery (or all), narrowed to a case's camera scope when it has one."""
        names: set[str] = set()
        for g in self.galleries():
            if gallery is None or g.name == gallery:
                names.update(c for c in (g.cameras or ()) if c)
        if scope:
            names &= set(scope)
        return sorted(names)


def _form_datetime(value: str | None, field: str) -> dt.datetime | None:
    if not value:
        return None
    moment = as_datetime(value)
    if moment is None:
        raise ApiError(422, "invalid", f"{field}: not a date and time: {value!r}", field=field)
    return moment


def _redirect(url: str) -> Any:
    from fastapi.responses import RedirectResponse

    return RedirectResponse(url, status_code=303)


def _safe_next(value: str | None) -> str:
    """Only a local path: ``/cases/3``, never ``//evil.example`` or ``https://...``."""
    if value and value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/cases"


def _filters(
    camera: str | None, start: str | None, until: str | None, shown: str | int | None = None
) -> dict[str, str]:
    """The page's query: camera / time filters and ``n``, how many results to show ("" = one turn's)."""
    return {"camera": camera or "", "from": start or "", "until": until or "", "n": str(shown or "")}


def _shown(filters: dict[str, str], per_turn: int, most: int) -> int:
    """How many results the page shows: ``n`` (rounded to whole pages of ``per_turn``) within 1..most."""
    try:
        wanted = int(filters.get("n") or per_turn)
    except ValueError:
        wanted = per_turn
    return max(per_turn, min(most, wanted))


def _reversed(filters: dict[str, str]) -> str | None:
    """The message for a time window whose start is after its end (None when it is not reversed)."""
    low, high = as_datetime(filters.get("from")), as_datetime(filters.get("until"))
    if low is None or high is None or low <= high:
        return None
    return (
        f"From {filters['from']} is after Until {filters['until']}: the time window is reversed, so no result "
        "could pass it; swap the two times or correct one (24-hour UTC). The results below are not time-filtered."
    )


def _keep(results: list[Any], filters: dict[str, str]) -> list[Any]:
    """Results passing the page's camera / time filters (an unknown time passes no time filter)."""
    low, high = as_datetime(filters.get("from")), as_datetime(filters.get("until"))
    kept = []
    for r in results:
        if filters["camera"] and r.camera != filters["camera"]:
            continue
        if low is not None or high is not None:
            moment = as_datetime(r.time)
            if moment is None or (low is not None and moment < low) or (high is not None and moment > high):
                continue
        kept.append(r)
    return kept


def _hidden(csrf: str, filters: dict[str, str]) -> Markup:
    fields = [("csrf_token", csrf)] + [(k, v) for k, v in filters.items() if v]
    return Markup("".join(f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">' for k, v in fields))


class _StandIn:
    """A reference image the system asks about that is not among the results shown."""

    def __init__(
        self, gallery_index: int, camera: str | None = None, time: str | None = None, judgement: bool | None = None
    ) -> None:
        self.gallery_index, self.rank, self.similarity = gallery_index, None, None
        self.camera, self.time, self.judgement = camera, time, judgement
        self.matches, self.contradicts, self.unsure = [], [], []
        self.same_track_as, self.linked_tracks = None, 0


def _ruled_out(search: Any, user: Any, sid: str, gallery_index: int) -> _StandIn:
    """An image the analyst ruled out that ranks below the results shown: its camera and time, no rank."""
    info = search.image_info(user, sid, gallery_index)
    return _StandIn(gallery_index, info["camera"], info["time"], judgement=False)


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


def session_context(pages: Pages, user: Any, sid: str, filters: dict[str, str], moved: bool) -> dict[str, Any]:
    """What the search page shows: the session's view, the results passing the page's filters, the
    references asked about that are not among them, where the focus goes and what is announced."""
    search, settings = pages.services.search, pages.settings
    count = _shown(filters, settings.results_per_turn, settings.max_results)
    filtered = any(filters[k] for k in ("camera", "from", "until"))
    top = settings.max_results if filtered else count
    asked = settings.max_results if filtered else min(count + 1, settings.max_results)  # one more: is there more?
    view = search.view(user, sid, top=asked)
    shown = set(view.action.gallery_indices) if view.action and view.action.kind == "references" else set()
    if shown - {r.gallery_index for r in view.results} and top < settings.max_results:
        view = search.view(user, sid, top=settings.max_results)
    by_index = {r.gallery_index: r for r in view.results}
    window_error = _reversed(filters)
    kept = {**filters, "from": "", "until": ""} if window_error else filters  # the fields keep what was typed
    results = _keep(list(view.results), kept)[:count]
    # the images ruled out leave the top: every one of them shown last, struck through, under its own heading
    results = [r for r in results if r.judgement is not False]
    ruled = dict.fromkeys(
        t.gallery_index
        for t in view.timeline
        if t.kind == "feedback" and t.judgement is False and t.gallery_index is not None
    )
    ruled_out = _keep([by_index.get(i) or _ruled_out(search, user, sid, i) for i in ruled], kept)
    outside = [by_index.get(i) or _StandIn(i) for i in sorted(shown - {r.gallery_index for r in results + ruled_out})]
    case = pages.services.cases.get_case(view.case_id)
    focus = (
        "describe"
        if view.turns == 0
        else "confirmed"
        if view.confirmed
        else None
        if not moved
        else "results"
        if view.action is None
        else "answer"
        if view.action.kind == "question"
        else "references"
    )
    status_text = f"Turn {view.turns}: {len(results)} results shown."
    if ruled_out:
        status_text += f" {len(ruled_out)} ruled out, shown last."
    more = (
        min(count + settings.results_per_turn, settings.max_results)
        if len(view.results) > count and not filtered and count < settings.max_results
        else None
    )
    if view.action is not None:
        status_text += f" The system asks: {view.action.text}"
    scope = view.scope  # the session's own scope (the case's, narrowed by the filters it was started with)
    follow, follow_error = _follow(search, user, sid, view)
    return dict(
        view=view,
        case=case,
        results=results,
        ruled_out=ruled_out,
        window_error=window_error,
        shown=shown,
        references_outside=outside,
        filters=filters,
        top=top,
        cameras=pages.cameras(view.gallery, case.cameras),
        focus=focus,
        status_text=status_text,
        filtered=", ".join(f"{k} {v if k == 'camera' else when(v)}" for k, v in filters.items() if v and k != "n"),
        more=more,
        absent=view.probably_absent,
        strip=timeline_strip(results + [r for r in ruled_out if r.rank]),
        footage=footage_range(pages.galleries(), view.gallery),
        note=SIMILARITY_NOTE,
        evidence_note=EVIDENCE_NOTE,
        scope=scope,
        max_chars=settings.max_text_chars,
        can_search=pages.allowed(user, "session:search"),
        can_confirm=pages.allowed(user, "session:confirm"),
        can_export=pages.allowed(user, "session:export"),
        follow=follow,
        follow_error=follow_error,
    )


def _follow(search: Any, user: Any, sid: str, view: Any) -> tuple[Any, str | None]:
    """(the "Follow this person" candidates of the first confirmed crop, None) after a confirmation; (None,
    why not) when the gallery or the service cannot follow (no appearance vectors, no calibration)."""
    if not view.confirmed_all:
        return None, None
    try:
        return search.follow(user, sid, view.confirmed_all[0].gallery_index), None
    except ApiError as err:
        if err.code in ("no_appearance", "no_same_person"):
            return None, err.message
        raise


def register(app: Any) -> None:
    """Mount ``/static`` and add the page routes to ``app`` (called by ``create_app``)."""
    from fastapi import APIRouter, Depends, Form, Query, Request
    from fastapi import Path as PathParam
    from fastapi.responses import Response
    from fastapi.staticfiles import StaticFiles
    from starlette.concurrency import run_in_threadpool

    from minterpr.serving.deps import (
        client_address,
        clear_login_cookies,
        csrf_token,
        current_user,
        optional_user,
        refuse_cross_site,
        set_login_cookies,
    )

    SessionId = PathParam(pattern=r"^[0-9a-f]{32}$")  # noqa: N806  (as the API's session ids)
    CaseId = PathParam(ge=1, le=2**53 - 1)  # noqa: N806
    pages = Pages(app)
    app.state.html_error_renderer = pages.error_page
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    router = APIRouter(include_in_schema=False)

    @router.get("/")
    def home(user: Any = Depends(optional_user)) -> Any:
        return _redirect("/cases" if user is not None else "/login")

    @router.get("/login")
    def login_page(
        request: Request, next: str = Query("/cases", max_length=500), user: Any = Depends(optional_user)
    ) -> Any:
        if user is not None:
            return _redirect(_safe_next(next))
        return pages.render(request, "login.html", next=_safe_next(next), username="", error=None)

    @router.post("/login")
    def login(
        request: Request,
        username: str = Form("", max_length=64),
        password: str = Form("", max_length=256),
        next: str = Form("/cases", max_length=500),
    ) -> Any:
        refuse_cross_site(request)
        try:
            grant = pages.services.accounts.login(username, password, client=client_address(request))
        except ApiError as err:
            return pages.render(
                request, "login.html", err.status, next=_safe_next(next), username=username, error=err.message
            )
        response = _redirect(_safe_next(next))
        set_login_cookies(response, grant, pages.settings)
        return response

    @router.post("/logout")
    def logout(user: Any = Depends(current_user)) -> Any:
        pages.services.accounts.logout(user)
        response = _redirect("/login")
        clear_login_cookies(response)
        return response

    @router.get("/cases")
    def cases(request: Request, user: Any = Depends(optional_user)) -> Any:
        if user is None:
            return _redirect("/login?" + urlencode({"next": "/cases"}))
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
                _form_datetime(form["start"], "start"),
                _form_datetime(form["end"], "end"),
            )
        except ApiError as err:
            return _cases_page(request, user, err.status, err.message, form)
        return _redirect(f"/cases/{case.id}")

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
            return _redirect("/login?" + urlencode({"next": f"/cases/{case_id}"}))
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
                start=_form_datetime(str(data.get("start", "")), "start"),
                end=_form_datetime(str(data.get("end", "")), "end"),
            )
        except ApiError as err:
            return _case_page(request, user, case_id, err.status, err.message)
        return _redirect(f"/sessions/{view.session_id}")

    @router.post("/cases/{case_id}/close")  # the case service checks it is the case's opener or an admin
    def close_case(request: Request, case_id: int = CaseId, user: Any = Depends(current_user)) -> Any:
        pages.need(user, "case:open")
        pages.services.cases.close_case(user, case_id)
        return _redirect(f"/cases/{case_id}")

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
            hidden=_hidden(csrf, filters),
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
            return _redirect("/login?" + urlencode({"next": f"/sessions/{sid}"}))
        # a reversed time window is answered with the page (200) and its message at the fields: a GET that
        # failed would leave the browser's console an error for what is the user's typing
        return _session_page(request, user, sid, _filters(camera, start, until, n), moved=bool(moved))

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
            return _redirect("/login?" + urlencode({"next": f"/sessions/{sid}/look/{gallery_index}"}))
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
        filters = _filters(*(str(data.get(k, "")) for k in ("camera", "from", "until", "n")))
        try:
            await run_in_threadpool(MOVES[move], pages.services.search, user, sid, data)
        except ApiError as err:
            return await run_in_threadpool(
                lambda: _session_page(request, user, sid, filters, status=err.status, error=err.message)
            )
        query = {**{k: v for k, v in filters.items() if v}, "moved": "1"}
        return _redirect(f"/sessions/{sid}?{urlencode(query)}")

    app.include_router(router)
    from minterpr.serving.pages.ingest import register_ingest

    register_ingest(app, pages)
