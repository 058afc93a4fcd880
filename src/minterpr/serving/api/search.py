"""The JSON API's routes for people searching: login, keys, galleries, cases, sessions.

Each route only parses (the pydantic models of :mod:`~minterpr.serving.schemas.search`), checks the
caller's permission (:func:`~minterpr.serving.deps.require`) and calls the service layer.

Example:
    >>> sorted({route.path for route in router.routes if "/sessions/{session_id}/" in route.path})[:3]
    ['/api/sessions/{session_id}/answer', '/api/sessions/{session_id}/confirm', '/api/sessions/{session_id}/describe']
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, File, Path, Query, Request, Response, UploadFile

from minterpr.serving.accounts import Principal
from minterpr.serving.deps import (
    client_address,
    clear_login_cookies,
    current_user,
    get_services,
    refuse_cross_site,
    require,
    set_login_cookies,
)
from minterpr.serving.paths import check_request_paths
from minterpr.serving.schemas.search import (
    ID_MAX,
    AnswerRequest,
    CaseView,
    ConfirmRequest,
    CreateKeyRequest,
    DescribeRequest,
    ErrorBody,
    ExampleRequest,
    ExportRecord,
    FeedbackRequest,
    FollowView,
    GalleryView,
    KeyCreated,
    KeyView,
    LoginRequest,
    LoginResponse,
    OpenCaseRequest,
    RegisterGalleryRequest,
    SessionSummary,
    StartSessionRequest,
    TurnView,
    UserView,
)
from minterpr.serving.security import PERMISSIONS

router = APIRouter(prefix="/api")
# Annotated, not shared defaults: FastAPI copies an Annotated parameter's FieldInfo for each route and
# parameter, but writes the parameter's name into a shared default object (the last route's name wins).
SessionId = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$", description="a session id (32 hex characters)")]
Id = Annotated[int, Path(ge=1, le=ID_MAX)]  # ids beyond 2^53 are not read exactly by every JSON client
Top = Annotated[int | None, Query(ge=1, le=1000, description="results to return (at most the server's max_results)")]
ERRORS: dict[int | str, dict] = {
    code: {"model": ErrorBody, "description": "refused: the one error shape"}
    for code in (400, 401, 403, 404, 409, 410, 413, 415, 422, 429)
}


def _timed(request: Request, response: Response, view: TurnView) -> TurnView:
    """``view``, with a Server-Timing header saying where the turn's time went (session, view, commit)."""
    last = getattr(get_services(request).search.timing, "last", None)
    if last:
        response.headers["Server-Timing"] = ", ".join(
            f"{name};dur={seconds * 1e3:.1f}" for name, seconds in last.items()
        )
    return view


def _user(principal: Principal) -> UserView:
    return UserView(
        id=principal.user_id,
        username=principal.username,
        role=principal.role,
        via=principal.via,
        permissions=sorted(PERMISSIONS.get(principal.role, ())),
    )


# ----- auth --------------------------------------------------------------------------------------
@router.post("/auth/login", response_model=LoginResponse, tags=["auth"], responses=ERRORS)
def login(body: LoginRequest, request: Request, response: Response) -> LoginResponse:
    refuse_cross_site(request)
    services = get_services(request)
    grant = services.accounts.login(body.username, body.password, client=client_address(request))
    set_login_cookies(response, grant, services.settings)
    return LoginResponse(user=_user(grant.principal), csrf_token=grant.csrf_token, expires=grant.expires)


@router.post("/auth/logout", status_code=204, tags=["auth"], responses=ERRORS)
def logout(request: Request, principal: Principal = Depends(current_user)) -> Response:
    get_services(request).accounts.logout(principal)
    response = Response(status_code=204)
    clear_login_cookies(response)
    return response


@router.get("/auth/me", response_model=UserView, tags=["auth"], responses=ERRORS)
def me(principal: Principal = Depends(current_user)) -> UserView:
    return _user(principal)


@router.post("/keys", response_model=KeyCreated, status_code=201, tags=["auth"], responses=ERRORS)
def create_key(body: CreateKeyRequest, request: Request, principal: Principal = Depends(current_user)) -> KeyCreated:
    key_id, key = get_services(request).accounts.create_api_key(principal, body.name)
    return KeyCreated(id=key_id, key=key)


@router.get("/keys", response_model=list[KeyView], tags=["auth"], responses=ERRORS)
def list_keys(request: Request, principal: Principal = Depends(current_user)) -> list[KeyView]:
    return [KeyView(**key) for key in get_services(request).accounts.api_keys(principal)]


@router.delete("/keys/{key_id}", status_code=204, tags=["auth"], responses=ERRORS)
def revoke_key(request: Request, key_id: Id, principal: Principal = Depends(current_user)) -> Response:
    get_services(request).accounts.revoke_api_key(principal, key_id)
    return Response(status_code=204)


# ----- galleries and cases -----------------------------------------------------------------------
@router.get("/galleries", response_model=list[GalleryView], tags=["galleries"], responses=ERRORS)
def galleries(request: Request, _: Principal = Depends(require("gallery:read"))) -> list[GalleryView]:
    return get_services(request).galleries.list()


@router.post("/galleries", response_model=GalleryView, status_code=201, tags=["galleries"], responses=ERRORS)
def register_gallery(
    body: RegisterGalleryRequest, request: Request, principal: Principal = Depends(require("gallery:manage"))
) -> GalleryView:
    """Register a gallery store (``minterpr index build``) and the run that built it; both must lie in
    the service's data folder or one of its ``import_roots``."""
    services = get_services(request)
    check_request_paths(services.settings, body)  # every path the request names (serving.paths)
    return services.galleries.register(body.name, body.directory, body.run_dir, by=principal.username).view()


@router.post("/cases", response_model=CaseView, status_code=201, tags=["cases"], responses=ERRORS)
def open_case(
    body: OpenCaseRequest, request: Request, principal: Principal = Depends(require("case:open"))
) -> CaseView:
    return get_services(request).cases.open_case(
        principal, body.title, body.purpose, body.cameras, body.start, body.end
    )


@router.get("/cases", response_model=list[CaseView], tags=["cases"], responses=ERRORS)
def list_cases(request: Request, _: Principal = Depends(require("case:read"))) -> list[CaseView]:
    return get_services(request).cases.list_cases()


@router.get("/cases/{case_id}", response_model=CaseView, tags=["cases"], responses=ERRORS)
def get_case(request: Request, case_id: Id, _: Principal = Depends(require("case:read"))) -> CaseView:
    return get_services(request).cases.get_case(case_id)


@router.post("/cases/{case_id}/close", response_model=CaseView, tags=["cases"], responses=ERRORS)
def close_case(request: Request, case_id: Id, principal: Principal = Depends(require("case:open"))) -> CaseView:
    return get_services(request).cases.close_case(principal, case_id)


@router.get("/cases/{case_id}/sessions", response_model=list[SessionSummary], tags=["cases"], responses=ERRORS)
def case_sessions(
    request: Request, case_id: Id, principal: Principal = Depends(require("session:read"))
) -> list[SessionSummary]:
    services = get_services(request)
    services.cases.row(case_id)  # 404 for an unknown case
    return services.search.summaries(principal, case_id)


# ----- sessions ----------------------------------------------------------------------------------
@router.post("/sessions", response_model=TurnView, status_code=201, tags=["sessions"], responses=ERRORS)
def start_session(
    body: StartSessionRequest, request: Request, principal: Principal = Depends(require("session:search"))
) -> TurnView:
    return get_services(request).search.start(principal, body.case_id, body.gallery, body.cameras, body.start, body.end)


@router.get("/sessions/{session_id}", response_model=TurnView, tags=["sessions"], responses=ERRORS)
def get_session(
    request: Request, session_id: SessionId, top: Top = None, principal: Principal = Depends(require("session:read"))
) -> TurnView:
    return get_services(request).search.view(principal, session_id, top)


@router.post("/sessions/{session_id}/describe", response_model=TurnView, tags=["sessions"], responses=ERRORS)
def describe(
    body: DescribeRequest,
    request: Request,
    response: Response,
    session_id: SessionId,
    top: Top = None,
    principal: Principal = Depends(require("session:search")),
) -> TurnView:
    return _timed(request, response, get_services(request).search.describe(principal, session_id, body.text, top))


@router.post("/sessions/{session_id}/answer", response_model=TurnView, tags=["sessions"], responses=ERRORS)
def answer(
    body: AnswerRequest,
    request: Request,
    response: Response,
    session_id: SessionId,
    top: Top = None,
    principal: Principal = Depends(require("session:search")),
) -> TurnView:
    return _timed(request, response, get_services(request).search.answer(principal, session_id, body.text, top))


@router.post("/sessions/{session_id}/feedback", response_model=TurnView, tags=["sessions"], responses=ERRORS)
def feedback(
    body: FeedbackRequest,
    request: Request,
    response: Response,
    session_id: SessionId,
    top: Top = None,
    principal: Principal = Depends(require("session:search")),
) -> TurnView:
    search = get_services(request).search
    return _timed(
        request, response, search.feedback(principal, session_id, body.gallery_index, body.text, top, group=body.group)
    )


@router.post("/sessions/{session_id}/example", response_model=TurnView, tags=["sessions"], responses=ERRORS)
def example(
    body: ExampleRequest,
    request: Request,
    response: Response,
    session_id: SessionId,
    top: Top = None,
    principal: Principal = Depends(require("session:search")),
) -> TurnView:
    search = get_services(request).search
    return _timed(request, response, search.example_gallery(principal, session_id, body.gallery_index, top))


@router.post("/sessions/{session_id}/example/upload", response_model=TurnView, tags=["sessions"], responses=ERRORS)
def example_upload(
    request: Request,
    response: Response,
    session_id: SessionId,
    file: UploadFile = File(description="an image: JPEG, PNG, WebP or BMP"),
    top: Top = None,
    principal: Principal = Depends(require("session:search")),
) -> TurnView:
    services = get_services(request)
    data = file.file.read(services.settings.max_upload_bytes + 1)
    return _timed(
        request, response, services.search.example_upload(principal, session_id, data, file.content_type, top)
    )


@router.post("/sessions/{session_id}/undo", response_model=TurnView, tags=["sessions"], responses=ERRORS)
def undo(
    request: Request,
    response: Response,
    session_id: SessionId,
    top: Top = None,
    principal: Principal = Depends(require("session:search")),
) -> TurnView:
    return _timed(request, response, get_services(request).search.undo(principal, session_id, top))


@router.post("/sessions/{session_id}/confirm", response_model=TurnView, tags=["sessions"], responses=ERRORS)
def confirm(
    body: ConfirmRequest,
    request: Request,
    response: Response,
    session_id: SessionId,
    top: Top = None,
    principal: Principal = Depends(require("session:confirm")),
) -> TurnView:
    search = get_services(request).search
    return _timed(
        request,
        response,
        search.confirm(
            principal, session_id, body.gallery_index, body.acknowledge, top, follow_of=body.follow_of, group=body.group
        ),
    )


@router.get(
    "/sessions/{session_id}/follow/{gallery_index}", response_model=FollowView, tags=["sessions"], responses=ERRORS
)
def follow(
    request: Request,
    session_id: SessionId,
    gallery_index: int = Path(ge=0, le=2**40),
    principal: Principal = Depends(require("session:read")),
) -> FollowView:
    """Follow this person: the crops that may show the person of a confirmed crop, per camera in time order,
    each with its same-person probability (appearance only; confirm each with ``follow_of``)."""
    return get_services(request).search.follow(principal, session_id, gallery_index)


@router.post("/sessions/{session_id}/export", response_model=ExportRecord, tags=["sessions"], responses=ERRORS)
def export(
    request: Request, session_id: SessionId, principal: Principal = Depends(require("session:export"))
) -> ExportRecord:
    return get_services(request).search.export_record(principal, session_id)


@router.get(
    "/sessions/{session_id}/images/{gallery_index}", tags=["sessions"], responses=ERRORS, response_class=Response
)
def image(
    request: Request,
    session_id: SessionId,
    gallery_index: int = Path(ge=0, le=2**40),
    full: bool = Query(default=False, description="the whole image rather than a thumbnail"),
    principal: Principal = Depends(require("session:read")),
) -> Response:
    data, media_type = get_services(request).search.image(principal, session_id, gallery_index, thumbnail_only=not full)
    return Response(data, media_type=media_type, headers={"Cache-Control": "private, max-age=3600"})


@router.get(
    "/sessions/{session_id}/images/{gallery_index}/frame", tags=["sessions"], responses=ERRORS, response_class=Response
)
def frame(
    request: Request,
    session_id: SessionId,
    gallery_index: int = Path(ge=0, le=2**40),
    principal: Principal = Depends(require("session:read")),
) -> Response:
    """The video frame the crop was cut from, with its box drawn (audited: a frame shows other people)."""
    data, media_type = get_services(request).search.frame(principal, session_id, gallery_index)
    return Response(data, media_type=media_type, headers={"Cache-Control": "private, max-age=3600"})
