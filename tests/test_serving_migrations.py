"""The versioned schema: a database made by the release before revisions (its schema dumped in
tests/data) is refused with a one-line hint, upgraded by ``minterpr db upgrade`` with its rows
kept, and then served; a new database is made at the head revision, which matches the models.
On SQLite always, on PostgreSQL too when MINTERPR_TEST_POSTGRES_URL names a scratch database."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minterpr.cli.main import main

pytest.importorskip("alembic")
LEGACY_SQLITE = Path(__file__).parent / "data" / "serving_schema_2026-12-01.sqlite.sql"
POSTGRES = os.environ.get("MINTERPR_TEST_POSTGRES_URL")
PASSWORD = "correct horse battery staple"


def _clean_postgres(url: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param(
            "postgresql", marks=pytest.mark.skipif(not POSTGRES, reason="MINTERPR_TEST_POSTGRES_URL is not set")
        ),
    ]
)
def legacy(request, tmp_path):
    """(url, state folder) of a database with the pre-revision schema and a user, a case and audit rows."""
    from sqlalchemy import create_engine, text

    from minterpr.serving import schema

    if request.param == "sqlite":
        import sqlite3

        url = f"sqlite:///{tmp_path / 'state' / 'minterpr.db'}"
        (tmp_path / "state").mkdir()
        with sqlite3.connect(tmp_path / "state" / "minterpr.db") as conn:
            conn.executescript(LEGACY_SQLITE.read_text())
    else:
        url = POSTGRES
        _clean_postgres(url)
        engine = create_engine(url)
        schema.upgrade(engine, schema.BASELINE)  # the baseline revision is the pre-revision schema ...
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE alembic_version"))  # ... less the version, as that release left it
        engine.dispose()
    yield url, tmp_path / "state"
    if request.param == "postgresql":
        _clean_postgres(url)


def _fill_through_old_code(url: str) -> None:
    """A user and a case as the old release made them (its rows written with the schema check bypassed)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.orm import Session

    from minterpr.serving import audit
    from minterpr.serving.security import hash_password

    engine = create_engine(url)
    with Session(engine) as tx, tx.begin():
        tx.execute(
            text(
                "INSERT INTO users (id, username, password_hash, role, created, disabled) VALUES "
                "(1, 'root', :h, 'admin', 0.0, false)"
            ),
            {"h": hash_password(PASSWORD)},
        )
        # the old release's entry: no request field (neither in the table nor in what it hashed)
        entry = {
            "seq": 1,
            "time": "2026-12-01T00:00:00.000000+00:00",
            "user": "root",
            "action": "user_create",
            "case": None,
            "details": {"username": "root", "role": "admin"},
            "prev": audit.GENESIS,
        }
        tx.execute(
            text(
                'INSERT INTO audit_log (seq, time, "user", action, case_id, details, prev_hash, hash) VALUES '
                "(1, :time, 'root', 'user_create', NULL, :details, :prev, :hash)"
            ),
            {
                "time": entry["time"],
                "details": audit.canonical(entry["details"]),
                "prev": audit.GENESIS,
                "hash": audit.entry_hash(entry),
            },
        )
        tx.execute(
            text(
                "INSERT INTO cases (id, title, purpose, cameras, created_by, created, status) VALUES "
                "(1, 't', 'report 1', NULL, 1, 0.0, 'open')"
            )
        )
    engine.dispose()


def test_an_old_database_is_refused_then_upgraded_and_served(legacy, capsys):
    from minterpr.serving import schema
    from minterpr.serving.service import build_services
    from minterpr.serving.settings import ServeSettings

    url, state = legacy
    _fill_through_old_code(url)
    options = ["--data", str(state), "--database-url", url]
    assert main(["db", "current", *options]) == 0
    assert capsys.readouterr().out.strip() == f"0001 (this minterpr needs {schema.HEAD}: needs `minterpr db upgrade`)"
    assert main(["users", "list", *options]) == 2  # refused, one line with the hint
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has schema 0001, this minterpr needs" in err[0] and "minterpr db upgrade" in err[0]
    assert main(["serve", "--no-serve", *options]) == 2
    assert "minterpr db upgrade" in capsys.readouterr().err
    assert main(["db", "upgrade", *options]) == 0
    assert capsys.readouterr().out.strip() == f"schema 0001 -> {schema.HEAD}"
    assert main(["db", "upgrade", *options]) == 0
    assert capsys.readouterr().out.strip() == f"schema {schema.HEAD}: already current"
    services = build_services(ServeSettings(data_dir=state, database_url=url))
    try:
        assert [u["username"] for u in services.accounts.users()] == ["root"]
        assert services.cases.row(1).title == "t"
        assert services.accounts.login("root", PASSWORD, client="test").principal.role == "admin"
        assert services.audit.verify().ok and services.audit.head()[0] == 2  # the old entry and the login
        old, login = services.audit.entries()
        assert old["request"] is None and login["action"] == "login"
        with pytest.raises(Exception, match="append-only"):  # the trigger came along
            with services.db.write() as tx:
                from sqlalchemy import text

                tx.execute(text("DELETE FROM audit_log"))
    finally:
        services.close()


def test_serve_upgrades_when_asked(legacy, capsys):
    url, state = legacy
    _fill_through_old_code(url)
    assert main(["serve", "--no-serve", "--upgrade-db", "--data", str(state), "--database-url", url]) == 0
    assert main(["db", "current", "--data", str(state), "--database-url", url]) == 0
    assert "current" in capsys.readouterr().out


def test_a_new_database_is_made_at_head_matching_the_models(tmp_path):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from minterpr.serving import schema
    from minterpr.serving.db import Base, Database

    db = Database(f"sqlite:///{tmp_path / 'new.db'}")
    assert schema.revision(db.engine) == schema.HEAD
    with db.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
    db.dispose()


def test_the_baseline_revision_is_the_schema_before_revisions(tmp_path):
    import sqlite3

    from sqlalchemy import create_engine

    from minterpr.serving import schema

    engine = create_engine(f"sqlite:///{tmp_path / 'baseline.db'}")
    schema.upgrade(engine, schema.BASELINE)
    engine.dispose()
    made = sqlite3.connect(tmp_path / "baseline.db")
    old = sqlite3.connect(":memory:")
    old.executescript(LEGACY_SQLITE.read_text())

    def shape(conn):
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'alembic_version' ORDER BY name"
            )
        ]
        return {t: conn.execute(f"PRAGMA table_info({t})").fetchall() for t in tables}, sorted(
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('index', 'trigger') AND tbl_name != 'alembic_version'"
            )
        )

    assert shape(made) == shape(old)
