"""Typed requests and responses (pydantic): what the JSON API reads and writes, and what the
service layer returns to the page routes.

Every text field has a length bound, every number a range, and unknown fields are refused
(``extra="forbid"``), so a malformed request is a 422 before any work is done.

Example:
    >>> DescribeRequest(text="a woman in a red jacket").text
    'a woman in a red jacket'
    >>> FeedbackRequest(gallery_index=-1, text="not her")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for FeedbackRequest
    ...
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from minterpr.serving.paths import server_path

TEXT_MAX = 1000  # longest free text a request may carry (ServeSettings.max_text_chars may lower it)
NAME_MAX = 64
ID_MAX = 2**53 - 1  # the largest integer every JSON parser reads exactly (an id beyond it is refused)


def _json_number(value: object) -> object:
    """What JSON Schema calls an integer: a number (3 or 3.0), never true/false nor a string ("3")."""
    if isinstance(value, (bool, str, bytes)):
        raise ValueError("must be a JSON number, not " + ("a boolean" if isinstance(value, bool) else "a string"))
    return value


def _json_time(value: object) -> object:
    """A time is an ISO 8601 string (or null), not a number of seconds."""
    if value is not None and not isinstance(value, (str, datetime)):
        raise ValueError("must be an ISO 8601 date-time string, e.g. 2026-03-02T08:00:00Z")
    return value


# a JSON integer only (lax parsing took true for 1 and "7" for 7: a sloppy client's move on an image it never named)
Index = Annotated[int, BeforeValidator(_json_number)]
Position = Field(ge=0, le=2**40, description="a position in the gallery (0-based)")
Time = Annotated[datetime, BeforeValidator(_json_time)]


def _plain_text(value: str) -> str:
    """Refuse what no database column should hold: lone surrogates (not Unicode) and NUL characters."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("not valid Unicode text (a lone surrogate)") from None
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    return value


# every request string goes through this; the spec says "no NUL" (a lone surrogate it cannot say)
NO_NUL = r"^[^\x00]*$"
NONBLANK = r"^[^\x00]*[^\s\x00][^\x00]*$"  # and at least one character that is not a space


def text(pattern: str = NO_NUL) -> Any:
    """A request string matching ``pattern`` (a field's own ``Field(pattern=...)`` would not replace the
    type's: the type's constraint wins), with what no pattern can say checked too (lone surrogates).

    >>> from pydantic import TypeAdapter
    >>> TypeAdapter(text(NONBLANK)).json_schema()["pattern"] == NONBLANK
    True
    """
    return Annotated[str, Field(pattern=pattern), AfterValidator(_plain_text)]


Text = text()
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"  # gallery names: they name folders
Name = text(NAME)
Camera = Annotated[text(NONBLANK), Field(min_length=1, max_length=200)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(Strict):
    code: str  # stable, for programs: invalid, out_of_scope, rate_limited, csrf_failed, ...
    message: str  # for people
    field: str | None  # the request field at fault, when one is


class ErrorBody(Strict):
    """Every 4xx/5xx answer."""

    error: ErrorDetail


# ----- auth ------------------------------------------------------------------------------------
class LoginRequest(Strict):
    username: Text = Field(min_length=1, max_length=NAME_MAX)
    password: Text = Field(min_length=1, max_length=256)


class UserView(Strict):
    id: int
    username: str
    role: str
    via: str | None = None  # how this request authenticated (cookie, api_key)
    permissions: list[str] = []


class LoginResponse(Strict):
    user: UserView
    csrf_token: str  # send it back as X-CSRF-Token with every state-changing request
    expires: float  # UNIX seconds


class CreateUserRequest(Strict):
    username: Text = Field(min_length=2, max_length=NAME_MAX)
    password: Text = Field(min_length=10, max_length=256)
    role: Literal["viewer", "analyst", "admin", "auditor"]


class CreateKeyRequest(Strict):
    name: Text = Field(min_length=1, max_length=100)


class KeyCreated(Strict):
    id: int
    key: str  # shown once; only its hash is stored


class KeyView(Strict):
    id: int
    name: str
    prefix: str
    created: float
    revoked: bool


# ----- galleries and cases ---------------------------------------------------------------------
class GalleryView(Strict):
    name: str
    images: int
    cameras: list[str]
    time_start: datetime | None  # earliest image time, None when the images carry none
    time_end: datetime | None
    model_fingerprint: str | None
    version: int


class RegisterGalleryRequest(Strict):
    name: Name = Field(min_length=1, max_length=NAME_MAX)
    directory: Text = server_path("store", min_length=1, max_length=4096)  # a gallery store on the server
    run_dir: Text = server_path("run", min_length=1, max_length=4096)  # the run that built it


class OpenCaseRequest(Strict):
    title: text(NONBLANK) = Field(min_length=1, max_length=200)
    # at least 10 characters from the first to the last that is not a space (what the case service keeps)
    purpose: text(r"^[^\x00]*[^\s\x00][^\x00]{8,}[^\s\x00][^\x00]*$") = Field(
        min_length=10, max_length=TEXT_MAX, description="why this search is made (a report number, an authorisation)"
    )
    # the scope is stated explicitly: null means every camera / no time bound, and must be sent as null
    cameras: list[Camera] | None = Field(
        min_length=1, max_length=1000, description="camera ids the case may search; null = all"
    )
    start: Time | None = Field(description="earliest image time the case may search; null = unbounded")
    end: Time | None = Field(description="latest image time the case may search; null = unbounded")


class CaseView(Strict):
    id: int
    title: str
    purpose: str
    cameras: list[str] | None
    start: datetime | None
    end: datetime | None
    created_by: str
    created: float
    status: Literal["open", "closed"]


# ----- sessions --------------------------------------------------------------------------------
class StartSessionRequest(Strict):
    case_id: Index = Field(ge=1, le=ID_MAX)
    gallery: Text = Field(min_length=1, max_length=NAME_MAX)
    cameras: list[Camera] | None = Field(
        default=None, min_length=1, max_length=1000, description="within the case's cameras"
    )
    start: Time | None = None  # within the case's time scope
    end: Time | None = None


class DescribeRequest(Strict):
    text: Text = Field(min_length=1, max_length=TEXT_MAX)


class AnswerRequest(Strict):
    text: Text = Field(min_length=1, max_length=TEXT_MAX)


class FeedbackRequest(Strict):
    gallery_index: Index = Position
    text: Text = Field(min_length=1, max_length=TEXT_MAX, description='"not her: no backpack", "maybe"')
    # the analyst asks to judge the tracks ingestion linked to this crop's track the same way (one crop each)
    group: bool = Field(default=False, strict=True)


class ExampleRequest(Strict):
    gallery_index: Index = Position  # search by a gallery image (uploads: POST .../example/upload)


class ConfirmRequest(Strict):
    gallery_index: Index = Position
    # a "follow this person" candidate: the confirmed crop it was offered for (its same-person probability
    # with that crop is recorded with the confirmation and goes into the export)
    follow_of: Index | None = Field(default=None, ge=0, le=2**40)
    # the analyst asks to confirm the tracks ingestion linked to this crop's track too (one crop each, each recorded)
    group: bool = Field(default=False, strict=True)
    # the spec says true only; false is answered by the service (acknowledge_required, saying why)
    acknowledge: bool = Field(
        strict=True,
        json_schema_extra={"const": True},
        description="must be true: I confirm this result looks like the person I am "
        "searching for; this records similarity, not identity",
    )


class ResultView(Strict):
    rank: int  # 1-based
    gallery_index: int
    path: str
    camera: str | None
    time: str | None
    similarity: (
        float  # match probability in [0, 1] (softmax of the final scores over the ranked images): how alike, never who
    )
    matches: list[str]  # facts it confidently matches (calibrated, recognisable labels)
    contradicts: list[str]  # facts it confidently contradicts
    unsure: list[str] = []  # facts the model is not confident about for this image
    judgement: bool | None = None  # the user's verdict on this image, if any (True = confirmed)
    # a crop of the same track (video source and tracker id) as a crop the analyst confirmed: the tracker's
    # evidence that it shows the same person, which the match figure (appearance only) does not carry
    same_track_as: int | None = None
    linked_tracks: int = (
        0  # other tracks ingestion linked to its track (appearance, time, place): a hint, never a verdict
    )


class ActionView(Strict):
    kind: Literal["question", "references"]
    text: str
    slot: str | None = None
    choices: list[str] = []  # quick answers for a question
    gallery_indices: list[int] = []  # the images shown for references


class ConfirmedView(Strict):
    gallery_index: int
    path: str
    camera: str | None
    time: str | None
    similarity: float | None
    rank: int | None
    statement: str  # similarity, never identity
    follow_of: int | None = None  # confirmed from "follow this person": the confirmed crop it was offered for
    same_person: float | None = None  # and its same-person probability with that crop then


class TimelineEntry(Strict):
    seq: int  # the event that made this turn
    kind: str  # describe answer feedback example confirm
    text: str
    gallery_index: int | None = None
    user: str
    time: float
    understood: bool = True  # False: the system took nothing from this turn (no fact, no yes/no); the page says so
    rank: int | None = None  # a judgement's image: its rank on the page when judged
    similarity: float | None = None  # and its match probability then
    facts: list[str] = []  # the facts the system understood from this turn (as it now holds them)
    fact_sources: list[Literal["rule", "vlm"]] = []  # per fact: the rule reader's, or the vision-language model's
    # per fact: [turn, fact] (0-based) of the later fact that replaced it ("red, not pink" after "pink"), or None
    # when it holds; a replaced fact is no evidence, and withdrawing the one that replaced it restores it
    replaced_by: list[list[int] | None] = []
    judgement: bool | None = None  # a feedback turn: False = ruled out, None = unsure ("could be, I can't tell")
    follow_of: int | None = None  # a judgement made on a "follow this person" candidate: of which confirmed crop
    same_person: float | None = None  # its same-person probability with that crop when judged


class FollowCandidateView(Strict):
    gallery_index: int
    path: str
    camera: str | None
    time: str | None
    same_person: float  # same-person probability with the confirmed crop (appearance only): "may be the same person"
    linked: bool = False  # in the confirmed crop's tracklet link group (ingestion's links: a hint, not a verdict)
    judgement: bool | None = None  # the analyst's verdict on it so far (True confirmed, False ruled out)


class FollowLane(Strict):
    camera: str | None
    candidates: list[FollowCandidateView]  # in time order


class FollowView(Strict):
    session_id: str
    gallery_index: int  # the confirmed crop followed
    cameras: list[FollowLane]  # the cameras in the order the person may have passed them
    base_rate: float  # the prior the probabilities assume (the calibration's fit split's, unless configured)
    statement: str  # what the figures mean: similarity, never identity


class TurnView(Strict):
    session_id: str
    case_id: int
    gallery: str
    seq: int  # events committed
    turns: int  # turns in the conversation now
    gallery_size: int
    in_scope: int  # images the case's scope lets this session search
    results: list[ResultView]
    action: ActionView | None
    confirmed: ConfirmedView | None
    timeline: list[TimelineEntry]
    unrecognised: list[str] = []  # facts said that the model cannot recognise (not shown as evidence)
    exports: list[TimelineEntry] = []  # the exports made of this session (who, when)
    # P(the person is in the images searched): the run's fitted presence model, else the rulings-out alone
    # (None before any); probably_absent: the page says "probably not in this footage" (under the threshold)
    presence: float | None = None
    probably_absent: bool = False
    scope: str = ""  # the images this session searches, in words: cameras and time window (UTC)
    confirmed_all: list[ConfirmedView] = []  # every crop confirmed as the person, in order (confirmed is the last)
    model_notice: str = ""  # the vision-language model failed or is skipped this turn, in words ("" otherwise)


class SessionSummary(Strict):
    session_id: str
    case_id: int
    gallery: str
    user: str
    created: float
    updated: float
    turns: int


class ExportRecord(Strict):
    case: CaseView
    session_id: str
    gallery: str
    confirmed: ConfirmedView
    images: list[dict]  # gallery_index, path (in the gallery), camera, time, metadata of each exported crop
    conversation: list[TimelineEntry]
    exported_by: str
    exported_at: datetime
    statement: str


# ----- audit and administration ----------------------------------------------------------------
class VerifyResponse(Strict):
    ok: bool
    entries: int
    head: str
    problems: list[str]


class RetentionRequest(Strict):
    days: Index = Field(ge=1, le=36500)


class RetentionReport(Strict):
    days: int
    sessions: int
    events: int
    uploads: int
    videos: int  # videos uploaded for ingestion, removed
    images: int
    galleries: list[str]


class Health(Strict):
    status: Literal["ok"]
    galleries: int
