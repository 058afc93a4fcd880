"""No console errors on any page (issue 38): every page of the service, opened in chromium as its
users reach it, logs no error to the console — a script error, a failed load, or anything the
pages' own Content-Security-Policy blocks (an inline style or script says so on the console, not
as a page error) — including after the page's own requests (htmx swaps, the jobs list polling).
Skipped, with the reason, without Playwright or chromium (as tests/test_web_page.py)."""

from __future__ import annotations

import re

import pytest

from support.browser import BROWSER_TESTS, TIMEOUT_MS, launched, sync_api
from support.web import ADMIN, admin_site, login, open_case_and_search

pytestmark = BROWSER_TESTS


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with admin_site(tmp_path_factory.mktemp("web_console"), calibrated=True, frames=True) as served:
        yield served


class Console:
    """The console errors, page errors and CSP violations of one page, by the page they happened on;
    ``refused``: paths the test asks for knowing the server answers 4xx (the browser logs that load)."""

    def __init__(self, page, refused: tuple[str, ...] = ()) -> None:
        self.errors: list[str] = []

        def seen(message) -> None:
            expected = message.text.startswith(
                "Failed to load resource: the server responded with a status of 4"
            ) and any(page.url.endswith(path) for path in refused)
            if message.type == "error" and not expected:
                self.errors.append(f"{page.url}: {message.text}")

        page.on("console", seen)
        page.on("pageerror", lambda err: self.errors.append(f"{page.url}: {err}"))


def _settle(page) -> None:
    page.wait_for_load_state("networkidle")


def test_no_console_errors_on_any_page(site):
    server, run, incoming = site
    expect = sync_api.expect
    visited = []
    with launched(height=768) as page:
        console = Console(page, refused=("/login", "/cases/no-such-case"))  # a wrong password: 401; no such case: 422
        page.goto(server.url + "/login")  # the login page, and a refused login's message
        page.get_by_label("User name").fill("ana")
        page.get_by_label("Password").fill("not the password")
        page.get_by_label("Password").press("Enter")
        expect(page.get_by_role("alert")).to_be_visible()
        visited.append("/login")
        login(page, server.url)  # the analyst: cases, a case, a search and its workspace
        visited.append("/cases")
        url = open_case_and_search(page, server.url)
        visited += ["/cases/{id}", "/sessions/{id}"]
        box = page.get_by_role("textbox", name="Describe the person you are looking for")
        box.fill("a woman with long dark hair and a red jacket")
        page.get_by_role("button", name="Search").click()
        expect(page.locator("#results-title")).to_be_visible()
        page.mouse.wheel(0, 5000)  # every lazy thumbnail loads
        _settle(page)
        page.locator("li.result a.thumb").first.click()  # the look page of the first result
        page.wait_for_url(server.url + "/sessions/*/look/*")
        _settle(page)
        visited.append("/sessions/{id}/look/{i}")
        page.goto(url)
        _settle(page)
        page.goto(server.url + "/cases/no-such-case")  # an error page
        _settle(page)
        visited.append("error page")
        page.goto(server.url + "/api/docs")  # the API's docs (Swagger UI, its own policy)
        expect(page.locator("#swagger-ui .swagger-ui")).to_be_attached()  # Swagger UI started
        # and rendered the OpenAPI 3.1 document: its operations are listed (Swagger UI 4 could not read 3.1)
        expect(page.locator("#swagger-ui .opblock").first).to_be_visible()
        _settle(page)
        visited.append("/api/docs")
        browser = page.context.browser
        page = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()  # the admin, logged in apart
        page.set_default_timeout(TIMEOUT_MS)
        admin = Console(page)
        login(page, server.url, ADMIN)  # the admin's ingestion page, a job started, its list polling
        page.goto(server.url + "/ingest")
        page.get_by_label("Gallery", exact=False).first.fill("lobby")
        page.get_by_label("Source on the server").fill(str(incoming))
        page.get_by_role("combobox", name=re.compile("^Model")).select_option(str(run))
        page.get_by_label("HOG (built in)").check()
        page.get_by_role("button", name="Start ingestion").click()
        page.wait_for_url(server.url + "/ingest")
        expect(page.locator("#ingest-jobs tr[data-job]")).to_have_attribute("data-status", "done", timeout=TIMEOUT_MS)
        _settle(page)
        visited.append("/ingest")
        probe = Console(page)  # the check itself: an inline style the policy blocks is caught as an error
        page.evaluate("document.body.insertAdjacentHTML('beforeend', '<p style=\"color: red\">inline</p>')")
        page.wait_for_timeout(500)
    assert any("style" in e for e in probe.errors), probe.errors
    assert len(visited) == 8
    errors = (
        console.errors + admin.errors[: len(admin.errors) - len(probe.errors)]
    )  # the admin's page, less the probe's
    assert not errors, "console errors:\n" + "\n".join(errors)
