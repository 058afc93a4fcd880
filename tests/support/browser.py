"""Playwright on Debian's chromium for the browser tests (``tests/test_web_*.py``). Importing this module
skips the importing test module, with the reason, when Playwright or the service is not installed (so
it stays apart from ``support.web``, which tests without a browser import too); ``BROWSER_TESTS``, a
module's ``pytestmark``, marks its tests slow and skips them when chromium is absent."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from support.web import chromium_path

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install playwright)")
pytest.importorskip("fastapi", reason="the service is not installed")
CHROMIUM = chromium_path()
BROWSER_TESTS = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"),
]
TIMEOUT_MS = 60_000  # generous: the CI machine may be busy (every wait ends as soon as the page is ready)
sync_api.expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="module")
def browser():
    """One chromium for a test module's pages (each in its own context: no shared cookies)."""
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM)
        yield chromium
        chromium.close()


@pytest.fixture()
def page(browser):
    """A fresh page whose JavaScript errors fail the test."""
    with checked_page(browser) as page:
        yield page


@contextmanager
def checked_page(browser, *, console: bool = False) -> Iterator:
    """A page in a new context of ``browser`` (1366 x 768, downloads accepted) whose JavaScript errors,
    and with ``console`` its console errors too (a CSP refusal is one), fail the test when it closes."""
    context = browser.new_context(viewport={"width": 1366, "height": 768}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors = page_errors(page)
    if console:
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    yield page
    context.close()
    assert not errors, (
        f"errors in the browser console: {errors}" if console else f"JavaScript errors on the page: {errors}"
    )


@contextmanager
def launched(height: int = 900) -> Iterator:
    """A page of a chromium of its own (1366 x ``height``), for a test that drives one browser itself."""
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM)
        page = chromium.new_page(viewport={"width": 1366, "height": height})
        page.set_default_timeout(TIMEOUT_MS)
        yield page
        chromium.close()


def page_errors(page) -> list[str]:
    """The JavaScript errors of ``page`` from now on, collected as they happen."""
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    return errors
