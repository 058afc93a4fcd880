"""Backup and restore of everything that is the service's state: the database, and the files in
its state folder (uploads, the galleries the service built, incoming sources, the demo
credentials) — with a manifest naming the schema revision and the audit chain's head.

SQLite is copied with SQLite's online backup (a consistent snapshot while the server runs);
the files are copied after it (uploads are named by their content, so a later one is only
extra). A PostgreSQL database is backed up with its own tools (``pg_dump``): :func:`backup` then
copies the files and records the head, and says so. Gallery stores registered from outside the
state folder are the operator's files; the manifest lists them.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from minterpr.serving.service import build_services
    >>> from minterpr.serving.settings import ServeSettings
    >>> state, out = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp()) / "b"
    >>> build_services(ServeSettings(data_dir=state)).close()
    >>> backup(ServeSettings(data_dir=state), out)["database"]
    'minterpr.db'
"""
from __future__ import annotations

import datetime as dt
import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from minterpr.errors import InputError
from minterpr.serving.settings import ServeSettings

MANIFEST = "manifest.json"
_DATABASE = "minterpr.db"


def _sqlite_path(settings: ServeSettings) -> Path | None:
    url = settings.resolved_database_url()
    return Path(url[len("sqlite:///"):]) if url.startswith("sqlite:///") else None


def backup(settings: ServeSettings, out: Path) -> dict[str, Any]:
    """Copy the state to the new folder ``out``; returns the manifest (also written to out/manifest.json)."""
    from minterpr.serving import schema
    from minterpr.serving.db import Database, GalleryRow, select
    from minterpr.serving.service import AuditService

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out}: the backup folder must be new or empty")
    out.mkdir(parents=True, exist_ok=True)
    db = Database(settings.resolved_database_url())
    try:
        seq, head = AuditService(db).head()
        revision = schema.revision(db.engine)
        with db.transaction() as tx:
            outside = [row.directory for row in tx.scalars(select(GalleryRow))
                       if not settings.is_state(row.directory)]
    finally:
        db.dispose()
    source = _sqlite_path(settings)
    if source is not None:
        with closing(sqlite3.connect(source)) as live, closing(sqlite3.connect(out / _DATABASE)) as copy:
            live.backup(copy)
    data = Path(settings.data_dir)
    skip = {source.name, source.name + "-wal", source.name + "-shm"} if source is not None else set()
    files = out / "files"
    shutil.copytree(data, files, ignore=lambda folder, names: [n for n in names if Path(folder) == data and n in skip])
    uploads = Path(settings.uploads_dir)
    if uploads.exists() and not uploads.resolve().is_relative_to(data.resolve()):
        shutil.copytree(uploads, out / "uploads")
    manifest = {"made": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "database": _DATABASE if source is not None else None,
                "database_note": None if source is not None else "not SQLite: back it up with pg_dump",
                "schema": revision, "audit_seq": seq, "audit_head": head,
                "galleries_outside_state": outside}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def restore(settings: ServeSettings, source: Path) -> dict[str, Any]:
    """Restore a :func:`backup` into ``settings``' (new or empty) state folder and SQLite database;
    checks that the audit chain verifies and ends at the head the manifest recorded."""
    from minterpr.serving.db import Database
    from minterpr.serving.service import AuditService

    source = Path(source)
    try:
        manifest = json.loads((source / MANIFEST).read_text())
    except (OSError, ValueError) as err:
        raise InputError(f"{source / MANIFEST}: not a minterpr backup ({err})") from None
    data = Path(settings.data_dir)
    if data.exists() and any(data.iterdir()):
        raise InputError(f"{data}: restore into a new or empty state folder")
    target = _sqlite_path(settings)
    if manifest["database"] is not None and target is None:
        raise InputError("the backup holds an SQLite database; restore it with an SQLite --database-url (or none)")
    if target is not None and target.exists():
        raise InputError(f"{target}: a database is there already; restore into a new one")
    shutil.copytree(source / "files", data, dirs_exist_ok=True)
    if (source / "uploads").exists():
        shutil.copytree(source / "uploads", settings.uploads_dir, dirs_exist_ok=True)
    if manifest["database"] is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(source / manifest["database"])) as saved, closing(sqlite3.connect(target)) as live:
            saved.backup(live)
    db = Database(settings.resolved_database_url())
    try:
        audit = AuditService(db)
        report, (seq, head) = audit.verify(), audit.head()
    finally:
        db.dispose()
    if not report.ok or (seq, head) != (manifest["audit_seq"], manifest["audit_head"]):
        raise InputError(f"restored database: the audit chain does not end at the backup's head "
                         f"({seq}, {head} != {manifest['audit_seq']}, {manifest['audit_head']})")
    return manifest
