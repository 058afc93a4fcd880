""" "Follow this person" in a real browser (Playwright, Debian's chromium, a uvicorn server on loopback, a
gallery with appearance vectors and a calibrated tiny appearance model): after a confirmation the page
shows a lane per camera of crops that "may be the same person", each with its probability and its own
confirm and rule-out; confirming one needs the acknowledgement and marks it confirmed. Skipped, with
the reason, when Playwright or chromium is not installed."""

from __future__ import annotations

import re

import pytest

from minterpr.index.store.gallery_append import rewrite_metadata
from minterpr.index.store.gallery_store import open_gallery
from support.browser import BROWSER_TESTS, launched, page_errors, sync_api
from support.web import build_gallery, login, open_case_and_search, prepare_service, running, tiny_appearance

pytestmark = BROWSER_TESTS


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("web_follow")
    looks = tiny_appearance(folder)
    run, store, _ = build_gallery(folder, identities=6, views=3, calibrated=True, appearance=looks)
    # each view is its own track ("t<pid>_<view>"): link the three tracks of people 0-2, as ingestion would
    metadata = open_gallery(store).metadata
    rewrite_metadata(
        store, [{**m, **({"link": f"L{m['track'][1]}"} if m["track"][1] in "012" else {})} for m in metadata]
    )
    prepare_service(folder / "data", run, store)
    with running(folder / "data", appearance=looks) as server:
        yield server


def test_follow_lanes_after_a_confirmation_each_confirmed_or_ruled_out_on_its_own(site, tmp_path) -> None:
    expect = sync_api.expect
    with launched() as page:
        errors = page_errors(page)
        login(page, site.url)
        open_case_and_search(page, site.url)
        page.get_by_role("textbox", name="Describe the person you are looking for").fill("a man in a dark coat")
        page.get_by_role("button", name="Search").click()
        expect(page.locator("#results-title")).to_be_visible()
        assert page.locator("section.follow").count() == 0  # nothing to follow before a confirmation
        card = page.locator("section[aria-labelledby=results-title] li.result").first
        card.get_by_text("This is the person…").click()
        card.get_by_role("checkbox", name=re.compile("I compared this image")).check()
        card.get_by_role("button", name="Confirm match").click()
        panel = page.locator("section.follow")
        expect(panel.get_by_role("heading", name="Follow this person")).to_be_visible()
        expect(panel).to_contain_text("It is not an identification")
        lanes = panel.locator("section.lane")
        assert lanes.count() >= 1
        first = panel.locator("li.candidate").first
        expect(first.locator(".same")).to_have_text(re.compile(r"may be the same person: (\d{1,3}|< 1) %"))
        candidate = first.get_attribute("id")
        first.get_by_text("Same person…").click()
        first.get_by_role("button", name="Confirm this crop").click()  # not acknowledged: the browser refuses it
        assert "confirmed" not in (page.locator(f"#{candidate}").get_attribute("class") or "")
        page.locator(f"#{candidate}").get_by_role("checkbox").check()
        page.locator(f"#{candidate}").get_by_role("button", name="Confirm this crop").click()
        expect(page.locator(f"#{candidate}")).to_have_class(re.compile(r"\bconfirmed\b"))
        expect(page.locator(f"#{candidate}")).to_contain_text("confirmed by you")
        expect(page.locator("ul.confirmed-crops li")).to_have_count(2)
        others = [c.get_attribute("id") for c in panel.locator("li.candidate:not(.confirmed)").all()]
        if others:  # rule one out: it stays in its lane, marked
            page.locator(f"#{others[0]}").get_by_role("button", name="Rule out this crop").click()
            expect(page.locator(f"#{others[0]}")).to_contain_text("ruled out")
        panel.screenshot(path=tmp_path / "follow.png")
    assert not errors, f"JavaScript errors on the page: {errors}"


def test_ruling_out_a_linked_group_needs_the_analyst_to_ask(site) -> None:
    expect = sync_api.expect
    with launched() as page:
        login(page, site.url)
        open_case_and_search(page, site.url, title="Linked tracks")
        page.get_by_role("textbox", name="Describe the person you are looking for").fill("a man in a dark coat")
        page.get_by_role("button", name="Search").click()
        expect(page.locator("#results-title")).to_be_visible()
        linked = page.locator("li.result", has_text="linked to 2 other tracks")
        assert linked.count() >= 1
        card = linked.first
        card.get_by_text("Not this person…").click()
        box = card.get_by_role("checkbox", name=re.compile("Rule out its 2 linked tracks too"))
        expect(box).not_to_be_checked()  # never the default: the analyst asks for it
        box.check()
        card.get_by_label("Because… (how the person you seek differs)").fill("shorter hair")
        card.get_by_role("button", name=re.compile(r"^Rule out #")).click()
        expect(page.locator("ol.timeline > li")).to_have_count(4)  # the description and three rulings-out
        expect(page.locator("ol.timeline > li", has_text="Not this person. shorter hair")).to_have_count(3)
