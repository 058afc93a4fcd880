"""``/api/docs`` renders the service's own OpenAPI document (issue 38): FastAPI writes OpenAPI 3.1, which
Swagger UI 4 cannot read ("Unable to render this definition", no operation listed, no console error);
the vendored Swagger UI (``serving/static/swagger-ui``) must list the operations, under the page's
Content-Security-Policy, without an error on the console. Skipped, with the reason, without
Playwright or chromium (as tests/test_web_page.py)."""

from __future__ import annotations

from support.browser import BROWSER_TESTS, launched, sync_api
from support.web import running

pytestmark = BROWSER_TESTS

SEARCH = "/api/sessions/{session_id}/describe"  # a search turn: one operation the page must show


def test_api_docs_render_the_openapi_31_document(tmp_path):
    expect = sync_api.expect
    with running(tmp_path / "data") as server, launched() as page:
        errors: list[str] = []  # console errors (a CSP refusal is one) and script errors
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.goto(server.url + "/api/docs")
        expect(page.locator("#swagger-ui .swagger-ui")).to_be_attached()  # Swagger UI started
        operation = page.locator(f'#swagger-ui .opblock-summary-path[data-path="{SEARCH}"]')
        expect(operation).to_be_visible()  # and read the document: the search operation is listed
        expect(page.locator("#swagger-ui .information-container .title")).to_contain_text("minterpr")
        expect(page.get_by_text("Unable to render this definition")).to_have_count(0)
        page.wait_for_load_state("networkidle")
        operation.click()  # an operation opens (its parameters and responses render from the 3.1 schemas)
        expect(page.locator("#swagger-ui .opblock.is-open .responses-wrapper")).to_be_visible()
        page.wait_for_load_state("networkidle")
    assert not errors, f"errors in the browser console on /api/docs: {errors}"
