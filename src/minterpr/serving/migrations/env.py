"""Alembic's environment: runs the revisions on the connection :mod:`minterpr.serving.schema` hands
over (``config.attributes["connection"]``, inside its transaction and write lock), so the
engine's own settings apply; alembic's command line is not used."""

from __future__ import annotations

from typing import Any

from alembic import context

from minterpr.serving.db import Base


def run(connection: Any) -> None:
    context.configure(
        connection=connection, target_metadata=Base.metadata, render_as_batch=connection.dialect.name == "sqlite"
    )  # SQLite alters tables by copying them
    with context.begin_transaction():
        context.run_migrations()


config = getattr(context, "config", None)  # None when imported outside alembic (e.g. by the doctest collector)
if config is not None:
    run(config.attributes["connection"])
