"""The service on PostgreSQL (run when MINTERPR_TEST_POSTGRES_URL names an empty scratch database,
e.g. postgresql+psycopg://postgres@/minterpr_test?host=/tmp/pg&port=5432; skipped otherwise):
sessions replay after a restart, the audit chain stays one chain under concurrent writers from two
engines, and the database refuses to change audit entries."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from support.serving import PASSWORD, USERS, settings, shared_world

URL = os.environ.get("MINTERPR_TEST_POSTGRES_URL")
pytestmark = [
    pytest.mark.skipif(not URL, reason="MINTERPR_TEST_POSTGRES_URL is not set"),
    pytest.mark.usefixtures("one_torch_thread"),
]


@pytest.fixture()
def services(tmp_path_factory, tmp_path):
    from sqlalchemy import create_engine, text

    from minterpr.serving.db import Base
    from minterpr.serving.service import build_services

    engine = create_engine(URL)
    with engine.begin() as conn:  # a clean schema for each test
        Base.metadata.drop_all(conn)
        conn.execute(text("DROP FUNCTION IF EXISTS minterpr_audit_append_only() CASCADE"))
        conn.execute(text("DROP TABLE IF EXISTS alembic_version"))  # the schema's revision (minterpr.serving.schema)
    engine.dispose()
    run, store = shared_world(tmp_path_factory)
    built = build_services(settings(tmp_path / "state", database_url=URL))
    for name, role in USERS.items():
        built.accounts.create_user(name, PASSWORD, role)
    built.galleries.register("test", store, run)
    yield built
    built.close()


def test_sessions_replay_and_the_chain_holds_on_postgres(services):
    from sqlalchemy import text
    from sqlalchemy.exc import DatabaseError

    from minterpr.serving.db import Database
    from minterpr.serving.service import AuditService

    ana = services.accounts.login("ana", PASSWORD, client="test").principal
    case = services.cases.open_case(
        ana, "t", "report 12, authorised by the duty officer", ["cam:north", "cam:east"], None, None
    )
    sid = services.search.start(ana, case.id, "test").session_id
    services.search.describe(ana, sid, "a man in a red jacket")
    view = services.search.feedback(ana, sid, services.search.view(ana, sid).results[1].gallery_index, "not him")
    services.search.undo(ana, sid)
    view = (
        services.search.answer(ana, sid, "red")
        if view.action and view.action.kind == "question"
        else services.search.describe(ana, sid, "with jeans")
    )
    before = services.search._live[sid].session.step.ranking.copy()
    services.search.forget()
    again = services.search.view(ana, sid)
    assert [r.gallery_index for r in again.results] == [r.gallery_index for r in view.results]
    assert np.array_equal(services.search.reference(sid).step.ranking, before)
    other = AuditService(Database(URL))  # a second engine, as a second server process would have
    errors: list[Exception] = []

    def write(audit_service: AuditService, k: int) -> None:
        try:
            for j in range(10):
                audit_service.record(ana, "test", None, {"writer": k, "n": j})
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=write, args=(services.audit if k % 2 else other, k)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and services.audit.verify().ok
    assert sum(e["action"] == "test" for e in services.audit.entries(limit=1000)) == 40
    with pytest.raises(DatabaseError, match="append-only"):
        with services.db.write() as tx:
            tx.execute(text("DELETE FROM audit_log WHERE seq = 1"))
    other.db.dispose()


def test_request_ids_reach_the_audit_chain_on_postgres(services):
    """The column of schema 0003 on PostgreSQL: a request's id stored with its entries, hashed."""
    from fastapi.testclient import TestClient

    from minterpr.serving.app import create_app
    from support.serving import login, open_case

    with TestClient(create_app(services.settings, services)) as client:
        headers = login(client, "ana")
        case = open_case(client, {**headers, "X-Request-ID": "pg-case-1"})
        assert client.get(f"/api/cases/{case}", headers={"X-Request-ID": "pg-read-1"}).status_code == 200
    entries = services.audit.entries(limit=1000)
    assert [e["action"] for e in entries if e["request"] == "pg-case-1"] == ["case_open"]
    assert services.audit.verify().ok
