"""The page routes without a browser (FastAPI's TestClient, in process): CSRF tokens in every form,
errors shown in place, the camera and time filters, the question's quick answers, no outside
resources, and the checks on what the forms send."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from support.web import CAMERAS, PASSWORD, build_gallery, prepare_service

pytest.importorskip("fastapi", reason="the service is not installed")
from fastapi.testclient import TestClient  # noqa: E402

from minterpr.serving.app import create_app  # noqa: E402
from minterpr.serving.pages.search import when  # noqa: E402
from minterpr.serving.pages.session_view import filter_results  # noqa: E402
from minterpr.serving.pages.site import Pages, safe_next  # noqa: E402
from minterpr.serving.schemas.search import ActionView, ResultView, TimelineEntry, TurnView  # noqa: E402
from minterpr.serving.settings import RateSpec, ServeSettings  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")
HTML = {"Accept": "text/html"}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    folder = tmp_path_factory.mktemp("routes")
    run, store, _ = build_gallery(folder, identities=6, views=2)
    prepare_service(folder / "data", run, store)
    # every test logs in again: the login limit (tested in test_serving_access) would refuse the later ones
    settings = ServeSettings(data_dir=folder / "data", demo_gallery="demo", login_rate=RateSpec(100.0, 100))
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        yield client


def _login(client: TestClient, user: str = "ana") -> str:
    client.cookies.clear()
    response = client.post(
        "/login", data={"username": user, "password": PASSWORD, "next": "/cases"}, follow_redirects=False
    )
    assert response.status_code == 303 and response.headers["location"] == "/cases"
    return client.cookies["minterpr_csrf"]


def _session(client: TestClient, csrf: str) -> str:
    response = client.post(
        "/cases",
        data={"csrf_token": csrf, "title": "Route case", "purpose": "report 17: a wallet stolen on the platform"},
    )
    case_url = str(response.url)
    assert re.search(r"/cases/\d+$", case_url), response.text[:300]
    response = client.post(case_url + "/sessions", data={"csrf_token": csrf, "gallery": "demo"})
    assert re.search(r"/sessions/[0-9a-f]{32}$", str(response.url))
    return str(response.url).rsplit("/", 1)[1]


def test_every_form_carries_the_csrf_token_and_nothing_comes_from_outside(client) -> None:
    csrf = _login(client)
    sid = _session(client, csrf)
    page = client.post(f"/sessions/{sid}/describe", data={"csrf_token": csrf, "text": "a man in a black coat"}).text
    forms = re.findall(r"<form [^>]*method=\"post\"[^>]*>(.*?)</form>", page, flags=re.S)
    assert len(forms) >= 10  # description, undo, logout, and two per result card
    for form in forms:
        assert f'<input type="hidden" name="csrf_token" value="{csrf}">' in form
    assert f'"X-CSRF-Token": "{csrf}"' in re.search(r"<body[^>]*>", page).group(0)  # htmx sends it as a header
    assert not re.search(r"""(src|href|action)=["'](https?:)?//""", page)  # no CDN, nothing from outside
    script = client.get("/static/htmx.min.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert script.text.startswith("var htmx=function()") and client.get("/static/htmx.LICENSE").status_code == 200


def test_a_turn_that_understood_nothing_says_so(client) -> None:
    csrf = _login(client)
    sid = _session(client, csrf)
    flag = "Nothing understood in this turn"
    page = client.post(f"/sessions/{sid}/describe", data={"csrf_token": csrf, "text": "qwerty uiop"}).text
    assert page.count(flag) == 1
    page = client.post(f"/sessions/{sid}/describe", data={"csrf_token": csrf, "text": "a man in a black coat"}).text
    assert page.count(flag) == 1  # only the first turn
    assert client.get(f"/sessions/{sid}").text.count(flag) == 1  # and so after a reload


def test_a_refused_move_shows_its_message_in_place(client) -> None:
    csrf = _login(client)
    sid = _session(client, csrf)
    headers = {**HTML, "HX-Request": "true", "X-CSRF-Token": csrf}
    refused = client.post(f"/sessions/{sid}/describe", data={"text": "   "}, headers=headers)
    assert refused.status_code == 422
    workspace = refused.text[refused.text.index('<div id="workspace"') :]
    assert re.search(r'class="error" role="alert"[^>]*>[^<]*(empty|text)', workspace)
    too_long = client.post(f"/sessions/{sid}/describe", data={"text": "x" * 5000}, headers=headers)
    assert too_long.status_code == 422 and 'role="alert"' in too_long.text
    bad_index = client.post(f"/sessions/{sid}/feedback", data={"gallery_index": "seven", "text": "no"}, headers=headers)
    assert bad_index.status_code == 422 and "gallery_index: not a whole number" in bad_index.text
    unconfirmed = client.post(f"/sessions/{sid}/confirm", data={"gallery_index": "0"}, headers=headers)
    assert unconfirmed.status_code == 422 and "acknowledge" in unconfirmed.text
    nothing = client.post(f"/sessions/{sid}/export", data={"csrf_token": csrf}, headers=HTML)
    assert nothing.status_code == 409 and "confirm one first" in nothing.text
    forged = client.post(f"/sessions/{sid}/describe", data={"text": "a man"}, headers={**HTML, "HX-Request": "true"})
    assert forged.status_code == 403 and 'id="workspace"' in forged.text  # no token: refused, shown in place
    assert client.get(f"/sessions/{'0' * 32}", headers=HTML).status_code == 404
    assert client.get(f"/sessions/{sid}", headers=HTML).text.count('class="kind"') == 0  # nothing was added


def test_the_camera_and_time_filters_narrow_the_results(client) -> None:
    csrf = _login(client)
    sid = _session(client, csrf)
    client.post(f"/sessions/{sid}/describe", data={"csrf_token": csrf, "text": "a woman with a red bag"})
    every = client.get(f"/sessions/{sid}").text
    assert len(set(re.findall(r"<span>((?:station|mall):\w+)</span>", every))) >= 2
    one = client.get(f"/sessions/{sid}", params={"camera": CAMERAS[0]}).text
    grid = one[one.index('id="results-title"') :]  # (the images the system asks about are shown whatever the filter)
    shown = re.findall(r"<span>((?:station|mall):\w+)</span>", grid)
    assert shown and set(shown) == {CAMERAS[0]} and "filtered: camera station:north" in one
    early = client.get(f"/sessions/{sid}", params={"from": "2026-03-02T08:00", "until": "2026-03-02T08:30"}).text
    times = re.findall(r"<span>(2026-03-02 \d\d:\d\d:\d\d)</span>", early[early.index('id="results-title"') :])
    assert times and all("08:00:00" <= t[11:] <= "08:30:00" for t in times)
    # the filters ride along in the forms, so a move keeps them
    assert f'<input type="hidden" name="camera" value="{CAMERAS[0]}">' in one


def test_login_refuses_wrong_passwords_and_outside_redirects(client) -> None:
    client.cookies.clear()
    wrong = client.post("/login", data={"username": "ana", "password": "wrong", "next": "/cases"})
    assert wrong.status_code in (401, 429) and 'role="alert"' in wrong.text
    assert safe_next("//evil.example/x") == "/cases" and safe_next("https://evil.example") == "/cases"
    assert safe_next("/sessions/ab") == "/sessions/ab"
    assert client.get("/cases", follow_redirects=False).headers["location"] == "/login?next=%2Fcases"


def _view(**changes) -> TurnView:
    result = ResultView(
        rank=1,
        gallery_index=4,
        path="a.jpg",
        camera="cam <1>",
        time="2026-03-02T08:05:00+00:00",
        similarity=0.4321,
        matches=["top colour: red"],
        contradicts=["carried items: backpack"],
    )
    fields = dict(
        session_id="a" * 32,
        case_id=1,
        gallery="demo",
        seq=2,
        turns=1,
        gallery_size=9,
        in_scope=9,
        results=[result],
        action=None,
        confirmed=None,
        timeline=[TimelineEntry(seq=1, kind="describe", text="a <b>red</b> top", user="ana", time=0.0)],
    )
    return TurnView(**{**fields, **changes})


def test_the_question_with_its_quick_answers(client) -> None:
    """The system's question: a quick-answer button per choice (each its own submit), a labelled box."""
    pages = Pages(client.app)
    question = ActionView(
        kind="question", text="What colour was her top?", slot="upper_colour", choices=["red", "dark blue"]
    )

    class Case:
        id, title, cameras, start, end = 1, "T", None, None, None

    html = pages.env.get_template("session.html").render(
        view=_view(action=question),
        case=Case,
        results=_view().results,
        shown=set(),
        references_outside=[],
        filters={"camera": "", "from": "", "until": ""},
        top=10,
        cameras=[],
        focus="answer",
        status_text="",
        filtered="",
        note="n",
        scope="s",
        max_chars=1000,
        can_search=True,
        can_confirm=True,
        can_export=True,
        hidden='<input type="hidden" name="csrf_token" value="tok">',
        csrf="tok",
        user=None,
    )
    chips = re.search(r'role="group" aria-label="Quick answers">(.*?)</div>', html, flags=re.S).group(1)
    assert re.findall(r'<button class="secondary" type="submit" name="text" value="([^"]+)">', chips) == [
        "red",
        "dark blue",
    ]
    assert re.search(
        r'<label for="answer">Your answer</label>\s*<input id="answer" name="text" type="text" '
        r'required maxlength="1000" autofocus>',
        html,
    )
    assert html.count('action="/sessions/' + "a" * 32 + '/answer"') == 2
    assert "a &lt;b&gt;red&lt;/b&gt; top" in html and "cam &lt;1&gt;" in html  # every text escaped
    assert "match 43 %" in html and "2026-03-02 08:05:00" in html  # a match probability, never a raw score


def test_times_and_result_filters() -> None:
    assert when("2026-03-02T09:05:00+01:00") == "2026-03-02 08:05:00"  # shown in UTC
    assert when(0) == "1970-01-01 00:00:00" and when(dt.datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02 03:04:05"
    results = [
        ResultView(rank=k + 1, gallery_index=k, path="p", camera=c, time=t, similarity=0.0, matches=[], contradicts=[])
        for k, (c, t) in enumerate(
            [("a", "2026-03-02T08:00:00+00:00"), ("b", "2026-03-02T09:00:00+00:00"), ("a", None)]
        )
    ]
    keep = lambda **f: [r.gallery_index for r in filter_results(results, {"camera": "", "from": "", "until": "", **f})]  # noqa: E731
    assert keep() == [0, 1, 2] and keep(camera="a") == [0, 2]
    assert keep(**{"from": "2026-03-02T08:30"}) == [1] and keep(until="2026-03-02T08:30") == [0]


def test_a_case_is_closed_from_its_page(client) -> None:
    csrf = _login(client)
    sid = _session(client, csrf)
    case_id = client.get(f"/api/sessions/{sid}").json()["case_id"]
    page = client.get(f"/cases/{case_id}").text
    assert f'action="/cases/{case_id}/close"' in page and "Close case" in page
    closed = client.post(f"/cases/{case_id}/close", data={"csrf_token": csrf}, follow_redirects=False)
    assert closed.status_code == 303 and closed.headers["location"] == f"/cases/{case_id}"
    page = client.get(f"/cases/{case_id}").text
    assert "closed" in page and f'action="/cases/{case_id}/close"' not in page
    refused = client.post(f"/cases/{case_id}/sessions", data={"csrf_token": csrf, "gallery": "demo"}, headers=HTML)
    assert refused.status_code == 409 and "is closed" in refused.text
    assert client.post(f"/cases/{case_id}/close", data={}, headers=HTML).status_code == 403  # no CSRF token
    viewer_csrf = _login(client, "vic")
    assert f'action="/cases/{case_id}/close"' not in client.get(f"/cases/{case_id}").text
    assert client.post(f"/cases/{case_id}/close", data={"csrf_token": viewer_csrf}, headers=HTML).status_code == 403


def test_probably_not_in_this_footage_names_the_scope(client) -> None:
    """Under the threshold the page says so, with the scope searched; above it, nothing is said."""
    from minterpr.interaction.presence import presence_probability

    pages = Pages(client.app)

    class Case:
        id, title, cameras, start, end = 1, "T", None, None, None

    ruled = [
        TimelineEntry(
            seq=k + 2,
            kind="feedback",
            text="Not this person.",
            gallery_index=k,
            user="ana",
            time=0.0,
            rank=1,
            similarity=0.8,
        )
        for k in range(3)
    ]
    low = presence_probability([0.8, 0.8, 0.8])
    assert low < 0.2

    def render(presence, absent):
        view = _view(presence=presence, timeline=_view().timeline + ruled)
        return pages.env.get_template("session.html").render(
            view=view,
            case=Case,
            results=view.results,
            shown=set(),
            references_outside=[],
            absent=absent,
            filters={"camera": "", "from": "", "until": ""},
            top=10,
            cameras=[],
            focus=None,
            status_text="",
            filtered="",
            note="n",
            scope="every camera, any time",
            max_chars=1000,
            can_search=True,
            can_confirm=True,
            can_export=True,
            hidden="",
            csrf="tok",
            user=None,
        )

    html = " ".join(render(low, True).split())
    assert "Probably not in this footage" in html and "(every camera, any time)" in html
    assert (
        f"only a {round(100 * low)} % chance" in html
        and "From what was said in 1 turn and the 3 images you ruled out" in html
    )
    assert "Probably not in this footage" not in render(0.6, False)
