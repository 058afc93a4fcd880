"""The search page in a real browser: Playwright drives Debian's chromium against a uvicorn server on
loopback, over a small synthetic gallery embedded by a tiny model.

Covered: a full search to a confirmed match (description, ruling a result out with a reason, the
confirmation step), the export of that match, undo, a server restart in the middle of a session and
continuing it, refused unauthenticated and cross-site requests, the viewer role, and keyboard use.
(The system's questions and their quick answers are checked in tests/test_web_routes.py: an untrained
tiny model leaves the system so sure of its top images that it shows images rather than ask.) Skipped, with the reason, when Playwright or chromium is not installed (`.ci/run` installs
chromium; Playwright comes with the `dev` extra).
"""

from __future__ import annotations

import io
import json
import re
import zipfile

import pytest

from support.browser import BROWSER_TESTS, browser, page, sync_api  # noqa: F401  (fixtures)
from support.web import PASSWORD, gallery_site, login, open_case_and_search

pytestmark = BROWSER_TESTS
DESCRIPTION = "a young woman with long dark hair, a red jacket and blue jeans"
MATCH = re.compile(r"match (\d{1,3}|< 1) %")  # how a result's match probability is shown


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The server over a fresh data folder (users ana/analyst and vic/viewer, gallery "demo")."""
    with gallery_site(tmp_path_factory.mktemp("web"), calibrated=True, frames=True) as server:
        yield server


def ranking(page) -> list[str]:
    """Gallery indices of the result cards, in the order shown."""
    return [
        card.get_attribute("id")
        for card in page.locator("#workspace section[aria-labelledby=results-title] li.result").all()
    ]


def timeline(page) -> list[str]:
    return [re.sub(r"\s+", " ", t).strip() for t in page.locator("ol.timeline > li").all_text_contents()]


def describe(page, text: str = DESCRIPTION) -> None:
    box = page.get_by_role("textbox", name="Describe the person you are looking for")
    expect = sync_api.expect
    expect(box).to_be_focused()  # the page puts the cursor in the description box
    page.keyboard.type(text)
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#results-title")).to_be_visible()


def rule_out(page, card_id: str, reason: str) -> None:
    """Keyboard only: focus the card's "Not this person…" disclosure, open it, type the reason, Enter."""
    card = page.locator(f"#{card_id}")
    card.get_by_text("Not this person…").focus()
    page.keyboard.press("Enter")
    field = card.get_by_label("Because… (how the person you seek differs)")
    sync_api.expect(field).to_be_visible()
    page.keyboard.press("Tab")
    sync_api.expect(field).to_be_focused()
    page.keyboard.type(reason)
    before = len(timeline(page))
    page.keyboard.press("Enter")
    sync_api.expect(page.locator("ol.timeline > li")).to_have_count(before + 1)


def test_full_search_to_a_confirmed_match_and_its_export(page, site, tmp_path) -> None:
    expect = sync_api.expect
    login(page, site.url)
    open_case_and_search(page, site.url)
    describe(page)
    cards = page.locator("section[aria-labelledby=results-title] li.result")
    expect(cards).to_have_count(10)
    first = cards.first
    expect(first.locator("img")).to_have_attribute("alt", re.compile(r"Result 1: camera (station|mall):\w+, 2026-03-0"))
    page.mouse.wheel(0, 5000)  # the thumbnails load lazily: scroll them all into view, then every one shows
    page.wait_for_function(
        "() => [...document.querySelectorAll('li.result img')].every(i => i.complete && i.naturalWidth > 0)"
    )
    page.mouse.wheel(0, -5000)
    expect(first.locator(".meta .match")).to_have_text(MATCH)  # a bounded match figure, not a raw score
    expect(first.locator("ul.facts li").first).to_be_attached()  # the facts it matches or contradicts
    assert timeline(page)[0].startswith("describe: " + DESCRIPTION)

    rejected = ranking(page)[0]
    rule_out(page, rejected, "no, she had no backpack and her hair was shorter")
    assert ranking(page)[0] != rejected  # re-ranked: the ruled-out image left the top
    assert "Not this person. no, she had no backpack" in timeline(page)[1]
    expect(page.locator("#status")).to_have_text(re.compile(r"^Turn 2: 10 results shown\."))  # announced

    chosen = ranking(page)[0]
    card = page.locator(f"#{chosen}")
    card.get_by_text("This is the person…").click()
    turns = len(timeline(page))
    card.get_by_role("button", name="Confirm match").click()  # not acknowledged: the browser refuses the form
    expect(card.get_by_role("checkbox")).to_be_visible()
    assert len(timeline(page)) == turns and page.locator("#confirmed-title").count() == 0
    card.get_by_role("checkbox").check()
    card.get_by_role("button", name="Confirm match").click()
    heading = page.get_by_role("heading", name="Match confirmed by you")
    expect(heading).to_be_focused()
    box = page.locator("section.confirmed-box")
    expect(box).to_contain_text("It is not an identification")
    expect(box.locator(".seen")).to_contain_text(MATCH)
    # nothing left to rule out once confirmed; only further crops of the same person may be confirmed
    summaries = {t.strip() for t in page.locator("details.act summary").all_text_contents()}
    assert summaries == {"This is the person too…"}

    with page.expect_download() as download:
        page.get_by_role("button", name="Export the confirmed match (zip)").click()
    target = tmp_path / download.value.suggested_filename
    download.value.save_as(target)
    expect(page.locator("#exports")).to_contain_text(
        re.compile(r"Export made by ana at 2\d{3}-\d\d-\d\d \d\d:\d\d:\d\d \(UTC\)")
    )
    assert re.fullmatch(r"match_1_[0-9a-f]{32}_\d{4}-\d\d-\d\d\.zip", target.name)
    archive = zipfile.ZipFile(io.BytesIO(target.read_bytes()))
    names = archive.namelist()
    assert {"README.txt", "report.html", "match.json", "conversation.json"} <= set(names)
    match = json.loads(archive.read("match.json"))
    confirmed = [im for im in match["images"] if im["role"] == "confirmed"]
    assert [im["gallery_index"] for im in confirmed] == [int(chosen.split("-")[1])]
    assert confirmed[0]["camera"] and confirmed[0]["time"].startswith("2026-03-02")
    assert any(
        im["role"] == "ruled_out" and im["gallery_index"] == int(rejected.split("-")[1]) for im in match["images"]
    )
    assert archive.read(confirmed[0]["member"])[:3] == b"\xff\xd8\xff"  # the crop, a JPEG
    kinds = [t["kind"] for t in json.loads(archive.read("conversation.json"))["turns"]]
    assert kinds[0] == "describe" and kinds[-1] == "confirm" and "feedback" in kinds
    report = archive.read("report.html").decode()
    assert "Similarity, not identity." in report and DESCRIPTION in report and "data:image/jpeg;base64," in report
    assert "Yes, this is the person." not in report and "“no, she had no backpack" in report  # only their words
    assert "Lost child at the station" in report and "Report 2026-0312" in report

    export_page = page.context.new_page()  # the self-contained report opens from the file alone
    (tmp_path / "report.html").write_bytes(archive.read("report.html"))
    export_page.goto((tmp_path / "report.html").as_uri())
    assert export_page.evaluate("() => [...document.images].every(i => i.naturalWidth > 0)")
    sync_api.expect(export_page.get_by_role("heading", name="Confirmed match")).to_be_visible()


def test_marks_are_confident_or_unsure_and_the_confirmation_keeps_the_figure_seen(page, site, tmp_path) -> None:
    """A ✓ / ✗ only for confident, calibrated facts (the rest "?"); "headwear: hat" (val AUC 55 % in the
    test run) on no card and named as not used; the confirmed match reports the rank and match the
    analyst saw on its card, and so does the export."""
    expect = sync_api.expect
    login(page, site.url)
    open_case_and_search(page, site.url, "Evidence case")
    describe(page, "a man wearing a hat, a red jacket and blue jeans, with a backpack")
    cards = page.locator("section[aria-labelledby=results-title] li.result")
    expect(cards).to_have_count(10)
    marks = page.locator("section[aria-labelledby=results-title] ul.facts li")
    kinds = {m.get_attribute("class") for m in marks.all()}
    assert kinds and kinds <= {"yes", "no", "unsure"}
    assert not any("headwear" in t for t in marks.all_text_contents())
    expect(page.locator("#unrecognised")).to_contain_text("headwear: hat")
    values = [float(m.get_attribute("value")) for m in page.locator("meter.match").all()]
    assert len(values) == 10 and all(0.0 <= v <= 1.0 for v in values) and values == sorted(values, reverse=True)
    assert sum(values) <= 1.0 + 1e-6  # shares of one distribution over the images searched

    card = cards.nth(2)  # the third: confirming pins it first, and its figure then changes
    chosen, shown = card.get_attribute("id"), card.locator(".meta .match").inner_text()
    value = float(card.locator("meter.match").get_attribute("value"))
    card.get_by_text("This is the person…").click()
    card.get_by_role("checkbox").check()
    card.get_by_role("button", name="Confirm match").click()
    box = page.locator("section.confirmed-box")
    expect(box.locator(".seen")).to_have_text(f"It was result #3, {shown}, when you confirmed it.")
    expect(box).to_contain_text(shown + " when it was confirmed")
    assert page.locator(f"#{chosen} .meta .match").inner_text() != shown  # what it shows now differs
    with page.expect_download() as download:
        page.get_by_role("button", name="Export the confirmed match (zip)").click()
    archive = zipfile.ZipFile(download.value.path())
    confirmed = [im for im in json.loads(archive.read("match.json"))["images"] if im["role"] == "confirmed"]
    assert confirmed[0]["gallery_index"] == int(chosen.split("-")[1])
    assert (confirmed[0]["rank"], confirmed[0]["similarity"]) == (3, value)


def test_undo_restores_the_previous_ranking(page, site) -> None:
    login(page, site.url)
    open_case_and_search(page, site.url, "Undo case")
    describe(page)
    after_description = ranking(page)
    rule_out(page, after_description[0], "the jacket was longer")
    assert ranking(page) != after_description
    page.get_by_role("button", name="Undo the last action").click()
    sync_api.expect(page.locator("ol.timeline > li")).to_have_count(1)
    assert ranking(page) == after_description
    page.get_by_role("button", name="Undo the last action").click()
    sync_api.expect(page.get_by_text("No turns yet.")).to_be_visible()
    sync_api.expect(page.get_by_role("textbox", name="Describe the person you are looking for")).to_be_visible()


def test_a_restart_in_the_middle_of_a_session_loses_nothing(page, site) -> None:
    login(page, site.url)
    url = open_case_and_search(page, site.url, "Restart case")
    describe(page)
    rule_out(page, ranking(page)[1], "she wore a skirt")
    before, said = ranking(page), timeline(page)
    site.restart()  # killed and started again: the session is rebuilt from its events
    page.goto(url)
    assert ranking(page) == before and timeline(page) == said
    page.get_by_role("textbox", name="Add to the description").fill("she carried a black handbag")
    page.get_by_role("button", name="Add", exact=True).click()
    sync_api.expect(page.locator("ol.timeline > li")).to_have_count(3)


def test_unauthenticated_and_cross_site_requests_are_refused(browser, page, site) -> None:
    login(page, site.url)
    url = open_case_and_search(page, site.url, "Access case")
    describe(page)
    sid = url.rsplit("/", 1)[1]
    thumb = page.locator("li.result img").first.get_attribute("src")
    stranger = browser.new_context()
    try:
        other = stranger.new_page()
        other.goto(url)
        assert other.url == f"{site.url}/login?next=%2Fsessions%2F{sid}"  # the page sends strangers to log in
        assert other.request.get(site.url + thumb).status == 401  # no image without a login
        refused = other.request.post(f"{site.url}/sessions/{sid}/describe", form={"text": "a man"})
        assert refused.status == 401 and "red jacket" not in refused.text()
    finally:
        stranger.close()
    # the logged-in browser without the CSRF token (what another site could make it send): 403, nothing added
    forged = page.request.post(f"{site.url}/sessions/{sid}/describe", form={"text": "a man in black"})
    assert forged.status == 403
    page.reload()
    assert len(timeline(page)) == 1
    # a viewer reads but cannot search
    page.context.clear_cookies()
    login(page, site.url, "vic", PASSWORD)
    page.goto(url)
    assert page.locator("details.act").count() == 0 and page.locator("#description").count() == 0


def test_looking_closely_more_results_the_strip_and_several_confirmed_crops(page, site) -> None:
    """The footage's time range and 24-hour UTC fields beside the filters, the per-camera strip, "show
    more" up to the whole (30-image) gallery, the look-closely page (full-resolution crop, the frame it
    came from with its box, where it came from, compared with the next result, then with a confirmed crop), "search with this image", and two
    crops confirmed as one person."""
    expect = sync_api.expect
    login(page, site.url)
    open_case_and_search(page, site.url, "Looking case")
    describe(page)
    cards = page.locator("section[aria-labelledby=results-title] li.result")
    expect(page.locator("#footage")).to_have_text(
        re.compile(r"runs from 2026-03-02 08:00:00 to 2026-03-02 \d\d:\d\d:\d\d \(UTC\)")
    )
    assert page.locator("#f-from").get_attribute("type") == "text"  # not the browser's locale-dependent picker
    expect(page.get_by_label("From (UTC, 24-hour)")).to_have_attribute("placeholder", "YYYY-MM-DD HH:MM")
    marks = page.locator("figure.strip a.mark")
    expect(marks).to_have_count(10)  # every result shown has a time: one mark each, on its camera's lane
    assert {m.get_attribute("href") for m in marks.all()} == {f"#{c}" for c in ranking(page)}
    page.get_by_role("link", name="Show more results (up to 20)").click()
    expect(cards).to_have_count(20)
    page.get_by_role("link", name="Show more results (up to 30)").click()
    expect(cards).to_have_count(30)
    expect(page.get_by_role("link", name=re.compile("Show more results"))).to_have_count(0)  # all 30 shown

    order = ranking(page)
    first = page.locator(f"#{order[0]}")
    first.get_by_role("link").first.focus()  # keyboard: the thumbnail is a link
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Look closely")).to_be_visible()
    expect(page.get_by_role("heading", name="Compared with result #2")).to_be_visible()
    big = page.locator("figure[aria-labelledby=this-image] > a > img")
    expect(big).to_have_attribute("src", re.compile(rf"/image/{order[0].split('-')[1]}$"))
    page.wait_for_function(
        "() => [...document.querySelectorAll('.look img')].every(i => i.complete && i.naturalWidth > 0)"
    )
    expect(page.locator("figure[aria-labelledby=this-image] dl")).to_contain_text("Track")
    # the frame it came from, its box drawn (served through the same checks, and audited)
    shown_frame = page.locator("figure[aria-labelledby=this-image] figure.frame img")
    expect(shown_frame).to_have_attribute("src", re.compile(rf"/frame/{order[0].split('-')[1]}$"))
    expect(shown_frame).to_have_attribute("alt", re.compile(r"the frame it was cut from, its box drawn"))
    assert page.evaluate("() => document.querySelector('figure.frame img').naturalWidth") == 4 * 96  # the whole frame
    expect(page.locator("figure[aria-labelledby=this-image] figure.frame figcaption")).to_contain_text("UTC")
    expect(page.locator("figure[aria-labelledby=this-image] dl")).to_contain_text("Box in the frame")
    page.get_by_role("button", name="Search with this image").click()
    page.wait_for_url(re.compile(r"/sessions/[0-9a-f]{32}\?moved=1"))
    assert timeline(page)[-1].startswith(f"example: gallery image {order[0].split('-')[1]}")

    a, b = ranking(page)[:2]
    for card_id in (a, b):  # two crops of one person: the second after the first is confirmed
        card = page.locator(f"#{card_id}")
        card.locator("summary", has_text=re.compile("This is the person")).click()
        card.get_by_role("checkbox").check()
        card.get_by_role("button", name="Confirm match").click()
        expect(page.locator(f"#{card_id}.confirmed")).to_be_visible()
    expect(page.locator("ul.confirmed-crops img")).to_have_count(2)
    page.goto(f"{page.url.split('?')[0]}/look/{b.split('-')[1]}")
    expect(page.get_by_role("heading", name="Compared with your confirmed crop")).to_be_visible()


def test_understood_facts_are_chips_that_can_be_removed(page, site) -> None:
    """Each turn shows the facts read from it; removing one (keyboard) re-ranks without it and the turn
    stays; a turn that understood nothing says so."""
    expect = sync_api.expect
    login(page, site.url)
    open_case_and_search(page, site.url, "Chips case")
    describe(page, "a man in a red jacket with a backpack")
    chips = page.locator("ol.timeline > li").first.locator("ul.said li.chip")
    said = [c.strip() for c in chips.locator("span").all_text_contents()]
    assert "top colour: red" in said and "gender: male" in said
    remove = page.get_by_role("button", name="Remove “top colour: red” (turn 1): re-rank as if it was never said")
    remove.focus()
    page.keyboard.press("Enter")
    expect(chips).to_have_count(len(said) - 1)
    assert "top colour: red" not in chips.locator("span").all_text_contents()
    expect(page.locator("ol.timeline > li")).to_have_count(1)  # the turn itself stays: the words were said
    page.get_by_role("textbox", name="Add to the description").fill("hmm, I am not sure about anything else")
    page.get_by_role("button", name="Add", exact=True).click()
    expect(page.locator("ol.timeline > li")).to_have_count(2)
    expect(page.locator("ol.timeline > li").nth(1).locator("p.nothing")).to_have_text(
        "Nothing understood in this turn: it changes no attribute evidence; say it another way."
    )
