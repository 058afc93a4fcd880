"""The database's schema version (Alembic revisions in :mod:`minterpr.serving.migrations`).

A new, empty database is brought to :data:`HEAD` when it is opened. An existing one is used only
at ``HEAD``: an older one makes :class:`SchemaError` (one line: run ``minterpr db upgrade``),
unless the caller asks to upgrade (``minterpr db upgrade``, ``minterpr serve --upgrade-db``). A
database made before revisions existed has the tables and no version: it counts as ``0001``.
Upgrades run in one transaction holding the write lock (SQLite ``BEGIN IMMEDIATE``, a PostgreSQL
advisory lock), so two processes opening one new database do not both create it.

Example:
    >>> from sqlalchemy import create_engine
    >>> from sqlalchemy.pool import StaticPool
    >>> engine = create_engine("sqlite://", poolclass=StaticPool)
    >>> revision(engine) is None
    True
    >>> upgrade(engine)
    (None, '0003')
    >>> revision(engine) == HEAD
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

from minterpr.errors import MinterprError

HEAD = "0003"  # the revision this code reads and writes (the last module in migrations/versions)
BASELINE = "0001"  # what a database made before revisions existed is
_LOCK = 72150611  # the PostgreSQL advisory lock the service's writers take (minterpr.serving.db)


class SchemaError(MinterprError):
    """The database's schema is not the one this code needs."""


def revision(engine: Engine) -> str | None:
    """The database's revision: None for an empty database, BASELINE for one without a version."""
    with engine.connect() as conn:
        return _revision(conn)


def check(engine: Engine, where: str) -> None:
    """SchemaError unless the database is empty or at HEAD (``where`` names it in the message)."""
    found = revision(engine)
    if found not in (None, HEAD):
        raise SchemaError(
            f"the database {where} has schema {found}, this minterpr needs {HEAD}: back it up, then run "
            f"`minterpr db upgrade` with the same --data/--database-url (or serve with --upgrade-db)"
        )


def upgrade(engine: Engine, target: str = HEAD) -> tuple[str | None, str]:
    """Bring the database to ``target``; returns (revision before, revision after)."""
    from alembic import command

    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text(f"SELECT pg_advisory_xact_lock({_LOCK})"))
        before = _revision(conn)
        known = _known()
        if before is not None and before not in known:  # written by a newer minterpr: no downgrade path here
            raise SchemaError(
                f"the database has schema {before}, which this minterpr does not know (it knows "
                f"{', '.join(sorted(known))}): a newer minterpr wrote it; use that one"
            )
        if before != target:
            config = _config(conn)
            if before == BASELINE and not _versioned(conn):
                command.stamp(config, BASELINE)
            command.upgrade(config, target)
        return before, target


def _known() -> set[str]:
    """The revisions this code has migrations for (the ``NNNN_*.py`` files of migrations/versions)."""
    return {
        path.name.split("_", 1)[0] for path in (Path(__file__).with_name("migrations") / "versions").glob("[0-9]*_*.py")
    }


def _config(conn: Connection) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
    config.attributes["connection"] = conn
    return config


def _versioned(conn: Connection) -> bool:
    return inspect(conn).has_table("alembic_version")


def _revision(conn: Connection) -> str | None:
    if _versioned(conn):
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return BASELINE if inspect(conn).has_table("users") else None
