"""The service layer in one container: what the JSON routes and the page routes call.

:func:`build_services` opens the database (creating the schema), and wires the accounts, the
gallery registry, the cases, the search sessions and the audit log together. Routes reach it as
``request.app.state.services`` (:func:`minterpr.serving.deps.get_services`).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> services = build_services(ServeSettings(data_dir=Path(tempfile.mkdtemp())))
    >>> services.accounts.create_user("root", "a long passphrase", "admin")
    1
    >>> services.audit.verify().ok, services.audit.head()[0]
    (True, 1)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from minterpr.serving import audit as audit_log
from minterpr.serving.accounts import Accounts, Principal
from minterpr.serving.cases import Cases
from minterpr.serving.db import Database
from minterpr.serving.galleries import Galleries
from minterpr.serving.search import Search
from minterpr.serving.settings import ServeSettings


class AuditService:
    """Append to, export and verify the audit chain."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, principal: Principal | None, action: str, case_id: int | None, details: dict[str, Any]) -> dict:
        """Append one entry in its own transaction (for moves the services do not record themselves)."""
        with self.db.write() as tx:
            return audit_log.append(tx, principal.username if principal else None, action, case_id, details)

    def append_as(self, user: str | None, action: str, details: dict[str, Any]) -> dict:
        """Append one entry made by someone who is no service account (``os:NAME`` on the command line)."""
        with self.db.write() as tx:
            return audit_log.append(tx, user, action, None, details)

    def export_lines(self, upto: int | None = None) -> Iterator[str]:
        return audit_log.export_lines(self.db, upto=upto)

    def entries(self, *, after: int = 0, limit: int = 100, case_id: int | None = None) -> list[dict[str, Any]]:
        return audit_log.entries(self.db, after=after, limit=limit, case_id=case_id)

    def verify(self) -> audit_log.VerifyReport:
        return audit_log.verify_database(self.db)

    def head(self) -> tuple[int, str]:
        with self.db.transaction() as tx:
            return audit_log.head(tx)


@dataclass
class Services:
    """Everything the routes need, built once per app."""

    settings: ServeSettings
    db: Database
    accounts: Accounts
    galleries: Galleries
    cases: Cases
    search: Search
    audit: AuditService
    jobs: Any = None  # minterpr.serving.jobs.Jobs (set by build_services)

    def close(self) -> None:
        if self.jobs is not None:
            self.jobs.shutdown()
        self.db.dispose()


def _owner_only(url: str) -> None:
    """A SQLite database file (password hashes, the audit log) made, or set back to, mode 0600
    before it is opened; SQLite gives its -wal and -shm files the database file's mode."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return
    path = Path(parsed.database)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if file.exists() and file.stat().st_mode & 0o077:
            os.chmod(file, 0o600)


def build_services(settings: ServeSettings, *, jobs: bool = True, upgrade: bool = False) -> Services:
    """Open (or create) the service's state under ``settings.data_dir``. ``jobs=False`` for a
    command that only changes state beside a running server (``minterpr users add``): the job
    queue marks the jobs a stopped server left running as interrupted, which would be wrong then.
    ``upgrade``: bring an older database's schema up to date (else it is refused, see
    :mod:`minterpr.serving.schema`)."""
    if jobs and settings.vlm is not None:  # a server checks its key variable at start, not at every describe
        settings.vlm.api_key()  # InputError naming the variable (never the key)
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    if settings.torch_threads is not None:
        from minterpr.models.device import set_torch_threads  # torch only when asked for

        set_torch_threads(settings.torch_threads)
    _owner_only(settings.resolved_database_url())
    db = Database(settings.resolved_database_url(), upgrade=upgrade)
    galleries = Galleries(
        db,
        device=settings.device,
        appearance=settings.appearance,
        caption_weight=settings.vlm_caption_weight if settings.vlm_captions else None,
    )
    cases = Cases(db, settings.max_text_chars)
    services = Services(
        settings, db, Accounts(db, settings), galleries, cases, Search(db, settings, galleries, cases), AuditService(db)
    )
    if jobs:
        from minterpr.serving.jobs import Jobs

        services.jobs = Jobs(services)
    return services
