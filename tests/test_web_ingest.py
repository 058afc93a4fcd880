"""The ingestion page in a real browser: an admin picks the detector, a refused start shows its
message at the field, and a job's progress updates on the page until it is done (no reload); with a
vision-language model configured, the admin captions a gallery from the page and watches that job too.
Skipped, with the reason, without Playwright or chromium (as tests/test_web_page.py)."""

from __future__ import annotations

import re
import shutil

import pytest

from support.browser import BROWSER_TESTS, TIMEOUT_MS, launched, page_errors, sync_api
from support.web import ADMIN, PASSWORD, add_admin, admin_site, build_gallery, login, prepare_service, running

pytestmark = BROWSER_TESTS


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with admin_site(tmp_path_factory.mktemp("web_ingest")) as served:
        yield served


def test_an_admin_ingests_from_the_page_and_watches_it_finish(site):
    server, run, incoming = site
    expect = sync_api.expect
    with launched() as page:
        errors = page_errors(page)
        login(page, server.url, ADMIN)
        page.get_by_role("link", name="Ingest").click()
        page.wait_for_url(server.url + "/ingest")
        expect(page.get_by_text("No ingestion jobs yet.")).to_be_visible()
        page.get_by_label("Gallery", exact=False).first.fill("lobby")
        page.get_by_label("Source on the server").fill(str(incoming))
        from minterpr.models.zoo import DEFAULT_REAL_MODEL

        model = page.get_by_role(
            "combobox", name=re.compile("^Model")
        )  # chosen from a list, the shipped real-footage model preselected
        expect(model.locator("option:checked")).to_have_text(re.compile(f"^shipped: {DEFAULT_REAL_MODEL}"))
        model.select_option(str(run))
        expect(page.get_by_label("automatic (YOLOX-nano when fetched, else HOG)")).to_be_checked()
        expect(page.get_by_label("YOLOX-nano", exact=False).first).to_be_visible()
        page.get_by_label("Crops kept per track").fill("2")
        page.get_by_label("Camera").fill("lobby:cam1")
        page.get_by_label("an ONNX detection model").check()
        page.get_by_role("button", name="Start ingestion").click()
        alert = page.get_by_role("alert")
        expect(alert).to_contain_text("detector_model")
        expect(page.get_by_label("ONNX model file")).to_have_attribute("aria-invalid", "true")
        expect(page.get_by_label("Source on the server")).to_have_value(str(incoming))  # kept
        page.get_by_label("HOG (built in)").check()
        page.get_by_role("button", name="Start ingestion").click()
        page.wait_for_url(server.url + "/ingest")
        row = page.locator("#ingest-jobs tr[data-job]")
        expect(row).to_have_count(1)
        expect(row).to_have_attribute("data-status", "done", timeout=TIMEOUT_MS)  # the list polls itself
        expect(row.locator("progress")).to_have_attribute("value", "1")
        expect(row).to_contain_text("30 images added to lobby")  # 10 people x 3 views
        # readable at 1366 px: the jobs table spans the page, nothing in it overflows
        table = page.locator("#ingest-jobs table").bounding_box()
        assert table["width"] > 1000, table
        assert page.evaluate(
            "() => { const s = document.querySelector('#ingest-jobs'); "
            "return s.scrollWidth <= s.clientWidth && document.body.scrollWidth <= window.innerWidth }"
        )
    assert not errors, f"JavaScript errors on the page: {errors}"


def test_an_admin_captions_a_gallery_from_the_page(tmp_path):
    """The "Caption a gallery" form: the settings' model named, the gallery chosen, the job's crops counted
    on the page until it is done; the captions land in the gallery's store."""
    import json

    from minterpr.vlm.caption import CAPTIONS_FILE, question_groups, read_captions
    from minterpr.vlm.testing import ScriptedServer, reply

    def seen(body):
        slots = body["response_format"]["json_schema"]["schema"]["properties"]
        return reply(json.dumps({"upper_colour": ["red"]} if "upper_colour" in slots else {}))

    run, store, _ = build_gallery(tmp_path)
    prepare_service(tmp_path / "data", run, store)
    add_admin(tmp_path / "data")
    expect = sync_api.expect
    with ScriptedServer([seen], repeat=True) as endpoint:
        with running(tmp_path / "data", settings={"vlm": {"url": endpoint.url, "model": "scripted-vlm"}}) as server:
            with launched() as page:
                errors = page_errors(page)
                login(page, server.url, ADMIN)
                page.goto(server.url + "/ingest")
                section = page.get_by_role("region", name="Caption a gallery")
                expect(section).to_contain_text("scripted-vlm")
                page.get_by_label("Gallery to caption").select_option("demo")
                page.get_by_role("button", name="Start captioning").click()
                page.wait_for_url(server.url + "/ingest")
                row = page.locator('#ingest-jobs tr[data-kind="caption"]')
                expect(row).to_have_count(1)
                expect(row).to_have_attribute("data-status", "done", timeout=TIMEOUT_MS)  # the list polls itself
                expect(row).to_contain_text("30/30 crops")
                expect(row).to_contain_text("30 crops of demo captioned")
    assert not errors, f"JavaScript errors on the page: {errors}"
    assert len(endpoint.requests) == 30 * len(question_groups())
    assert all(r["attributes"] == {"upper_colour": ["red"]} for r in read_captions(store / CAPTIONS_FILE).values())


def test_an_admin_resumes_a_stopped_job_from_the_page(tmp_path):
    """A job the server was stopped during reads "interrupted" with a Resume button; the button starts it
    again with its recorded request, and that job runs to the end."""
    import uuid

    from minterpr.serving.db import IngestJob, now
    from minterpr.serving.service import build_services
    from minterpr.serving.settings import ServeSettings

    run, store, _ = build_gallery(tmp_path)
    prepare_service(tmp_path / "data", run, store)
    services = build_services(ServeSettings(data_dir=tmp_path / "data"))
    try:
        services.accounts.create_user(ADMIN, PASSWORD, "admin")
        incoming = services.settings.incoming_dir / "lobby"
        shutil.copytree(tmp_path / "crops", incoming)
        request = {"gallery": "lobby", "source": str(incoming), "run": str(run), "camera": "lobby:cam1"}
        with services.db.write() as tx:  # as a server stopped mid-job leaves it
            tx.add(
                IngestJob(
                    id=uuid.uuid4().hex,
                    gallery="lobby",
                    source=str(incoming),
                    options={**request, "kind": "ingest"},
                    user_id=1,
                    status="interrupted",
                    progress={"stage": "embed", "fraction": 0.4},
                    message="the server stopped; start it again to resume",
                    created=now(),
                    updated=now(),
                )
            )
    finally:
        services.close()
    expect = sync_api.expect
    with running(tmp_path / "data") as server:
        with launched() as page:
            errors = page_errors(page)
            login(page, server.url, ADMIN)
            page.goto(server.url + "/ingest")
            stopped = page.locator('#ingest-jobs tr[data-status="interrupted"]')
            expect(stopped).to_contain_text("the server stopped")
            stopped.get_by_role("button", name="Resume the ingestion job of lobby").click()
            page.wait_for_url(server.url + "/ingest")
            rows = page.locator("#ingest-jobs tr[data-job]")
            expect(rows).to_have_count(2)
            expect(rows.first).to_have_attribute("data-status", "done", timeout=TIMEOUT_MS)  # the newest first
            expect(rows.first).to_contain_text("30 images added to lobby")
    assert not errors, f"JavaScript errors on the page: {errors}"


def test_an_admin_uploads_a_video_from_the_browser(site, tmp_path):
    """The upload form: a file that is not a video is refused at its field with nothing kept; a video is
    streamed to the server, checked, and named as the job's source."""
    cv2 = pytest.importorskip("cv2")
    import numpy as np

    server, run, incoming = site
    video = tmp_path / "lobby.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (128, 96))
    for k in range(10):
        writer.write(np.full((96, 128, 3), 25 * k, np.uint8))
    writer.release()
    fake = tmp_path / "fake.mp4"
    fake.write_bytes(b"this is not a video")
    expect = sync_api.expect
    with launched() as page:
        errors = page_errors(page)
        login(page, server.url, ADMIN)
        page.goto(server.url + "/ingest")
        page.get_by_label("Upload a video").set_input_files(str(fake))
        page.get_by_role("button", name="Upload", exact=True).click()
        expect(page.locator("#upload-error")).to_contain_text("not a video that can be read")
        expect(page.get_by_label("Upload a video")).to_have_attribute("aria-invalid", "true")
        page.get_by_label("Upload a video").set_input_files(str(video))
        page.get_by_role("button", name="Upload", exact=True).click()
        expect(page.locator("#upload-done")).to_contain_text("Uploaded and checked")
        source = page.get_by_label("Source on the server").input_value()
        assert source.startswith(str(incoming.parent / "uploads")) and source.endswith(".avi")
    assert not errors, f"JavaScript errors on the page: {errors}"
