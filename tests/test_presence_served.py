"""'Probably not in this footage' as served: a run's fitted presence model (extra ``"presence_model"``)
decides it, and the API (``presence``, ``probably_absent``, ``scope``) and the page say the same thing,
naming the session's own scope (the case's, narrowed by the session's filters)."""

from __future__ import annotations

import pytest

from support.serving import login, open_case
from support.web import CAMERAS, build_gallery, prepare_service

pytest.importorskip("fastapi", reason="the service is not installed")
from fastapi.testclient import TestClient  # noqa: E402

from minterpr.interaction.presence import FEATURE_NAMES, PresenceModel  # noqa: E402
from minterpr.serving.app import create_app  # noqa: E402
from minterpr.serving.settings import RateSpec, ServeSettings  # noqa: E402
from minterpr.training.post_training import store_presence_model  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """A gallery whose model holds a presence model sure the person is absent whatever is said
    (bias -20): the decision is the stored model's, not a default."""
    folder = tmp_path_factory.mktemp("presence")
    run, store, _ = build_gallery(folder, identities=6, views=2)
    store_presence_model(
        run, PresenceModel("val", dict.fromkeys(FEATURE_NAMES, 0.0), -20.0, 0.3, 10, 40, 90.0, 5.0, {})
    )
    prepare_service(folder / "data", run, store)
    settings = ServeSettings(data_dir=folder / "data", demo_gallery="demo", login_rate=RateSpec(100.0, 100))
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        yield client


def test_the_api_and_the_page_flag_the_same_search_with_its_scope_until_a_confirmation(client) -> None:
    headers = login(client, "ana")
    case = open_case(client, headers)
    started = client.post(
        "/api/sessions", json={"case_id": case, "gallery": "demo", "cameras": list(CAMERAS[:2])}, headers=headers
    )
    assert started.status_code == 201, started.text
    sid = started.json()["session_id"]
    assert started.json()["scope"] == f"{CAMERAS[0]}, {CAMERAS[1]}, any time"
    assert started.json()["presence"] is None and started.json()["probably_absent"] is False  # nothing said yet
    turn = client.post(f"/api/sessions/{sid}/describe", json={"text": "a man in a red top"}, headers=headers).json()
    assert turn["presence"] < 1e-6 and turn["probably_absent"] is True  # after the description already
    page = " ".join(client.get(f"/sessions/{sid}", headers={"Accept": "text/html"}).text.split())
    assert "Probably not in this footage" in page and f"({CAMERAS[0]}, {CAMERAS[1]}, any time)" in page
    assert f"among the {turn['in_scope']} images searched" in page
    first = turn["results"][0]["gallery_index"]
    done = client.post(
        f"/api/sessions/{sid}/confirm", json={"gallery_index": first, "acknowledge": True}, headers=headers
    )
    assert done.status_code == 200, done.text
    assert done.json()["probably_absent"] is False  # never said once the analyst confirmed an image
    assert "Probably not in this footage" not in client.get(f"/sessions/{sid}", headers={"Accept": "text/html"}).text
