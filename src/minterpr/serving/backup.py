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
import os
import shutil
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

from minterpr.errors import InputError
from minterpr.serving.settings import ServeSettings

MANIFEST = "manifest.json"
_DATABASE = "minterpr.db"


def _sqlite_path(settings: ServeSettings) -> Path | None:
    url = settings.resolved_database_url()
    return Path(url[len("sqlite:///") :]) if url.startswith("sqlite:///") else None


def backup(settings: ServeSettings, out: Path) -> dict[str, Any]:
    """Copy the state to the new folder ``out``; returns the manifest (also written to out/manifest.json)."""
    from minterpr.serving import schema
    from minterpr.serving.db import Database, GalleryRow, select
    from minterpr.serving.service import AuditService

    out = Path(out)
    for inside in (Path(settings.data_dir), Path(settings.uploads_dir)):  # it would copy itself, level after level
        if _within(out, inside):
            raise InputError(f"{out}: the backup folder is inside {inside}, which it copies; put it elsewhere")
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out}: the backup folder must be new or empty")
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)  # password hashes and the audit log: the owner's alone, from the start
    db = Database(settings.resolved_database_url())
    try:
        seq, head = AuditService(db).head()
        revision = schema.revision(db.engine)
        with db.transaction() as tx:
            outside = [row.directory for row in tx.scalars(select(GalleryRow)) if not settings.is_state(row.directory)]
    finally:
        db.dispose()
    source = _sqlite_path(settings)
    if source is not None:
        _private_file(out / _DATABASE)
        with closing(sqlite3.connect(source)) as live, closing(sqlite3.connect(out / _DATABASE)) as copy:
            live.backup(copy)
    data = Path(settings.data_dir)
    skip = {source.name, source.name + "-wal", source.name + "-shm"} if source is not None else set()
    files = out / "files"
    shutil.copytree(data, files, ignore=lambda folder, names: [n for n in names if Path(folder) == data and n in skip])
    uploads = Path(settings.uploads_dir)
    if uploads.exists() and not uploads.resolve().is_relative_to(data.resolve()):
        shutil.copytree(uploads, out / "uploads")
    manifest = {
        "made": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "database": _DATABASE if source is not None else None,
        "database_note": None if source is not None else "not SQLite: back it up with pg_dump",
        "schema": revision,
        "audit_seq": seq,
        "audit_head": head,
        "galleries_outside_state": outside,
    }
    _private_file(out / MANIFEST)
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def _within(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies inside it (links resolved)."""
    path, folder = Path(path).expanduser().resolve(), Path(folder).expanduser().resolve()
    return path == folder or folder in path.parents


def _private_file(path: Path) -> None:
    """Create ``path`` empty, readable by its owner only (SQLite keeps a file's mode, and gives it to its journals)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _read_manifest(source: Path) -> dict[str, Any]:
    """The backup's manifest, checked: the database it names is a file of the backup itself."""
    try:
        manifest = json.loads((source / MANIFEST).read_text())
    except (OSError, ValueError) as err:
        raise InputError(f"{source / MANIFEST}: not a minterpr backup ({err})") from None
    if not isinstance(manifest, dict) or not {"database", "audit_seq", "audit_head"} <= set(manifest):
        raise InputError(f"{source / MANIFEST}: not a minterpr backup (database, audit_seq, audit_head missing)")
    name = manifest["database"]
    if name is not None and (
        not isinstance(name, str)
        or Path(name).name != name
        or name in ("", ".", "..")
        or not _within(source / name, source)
        or not (source / name).is_file()
    ):
        raise InputError(
            f"{source / MANIFEST}: database {name!r} is not a file of the backup folder; nothing was restored"
        )
    for folder in ("files", "uploads"):
        if (source / folder).exists() and not _within(source / folder, source):
            raise InputError(f"{source / folder} links outside the backup folder; nothing was restored")
    return manifest


def restore(settings: ServeSettings, source: Path) -> dict[str, Any]:
    """Restore a :func:`backup` into ``settings``' (new or empty) state folder and SQLite database;
    checks that the audit chain verifies and ends at the head the manifest recorded, before the
    restored folder (private: 0700, the database 0600) is moved in place."""
    source = Path(source)
    manifest = _read_manifest(source)
    data = Path(settings.data_dir)
    if data.exists() and any(data.iterdir()):
        raise InputError(f"{data}: restore into a new or empty state folder")
    target = _sqlite_path(settings)
    if manifest["database"] is not None and target is None:
        raise InputError("the backup holds an SQLite database; restore it with an SQLite --database-url (or none)")
    if target is not None and target.exists():
        raise InputError(f"{target}: a database is there already; restore into a new one")
    uploads = Path(settings.uploads_dir)
    uploads_apart = (source / "uploads").exists() and not _within(uploads, data)
    if uploads_apart and uploads.exists() and any(uploads.iterdir()):
        raise InputError(f"{uploads}: restore into a new or empty uploads folder")
    # everything is written into temporary folders beside the targets, checked, then moved in place: a
    # restore that fails leaves no half-restored state folder
    data.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{data.name}.restoring-", dir=data.parent))  # mode 0700
    staged_uploads = (
        Path(tempfile.mkdtemp(prefix=".uploads.restoring-", dir=_parent(uploads))) if uploads_apart else None
    )
    in_data = target is not None and _within(target.parent, data)
    staged_db = (
        None
        if target is None
        else (
            staged / target.resolve().relative_to(data.resolve())
            if in_data
            else target.with_name(f".{target.name}.restoring")
        )
    )
    try:
        if (source / "files").exists():
            shutil.copytree(source / "files", staged, dirs_exist_ok=True, symlinks=True)
            staged.chmod(0o700)  # copytree gave it the backup's folder mode
        if staged_uploads is not None:
            shutil.copytree(source / "uploads", staged_uploads, dirs_exist_ok=True, symlinks=True)
            staged_uploads.chmod(0o700)
        if manifest["database"] is not None:
            staged_db.parent.mkdir(parents=True, exist_ok=True)
            staged_db.unlink(missing_ok=True)
            _private_file(staged_db)
            with (
                closing(sqlite3.connect(source / manifest["database"])) as saved,
                closing(sqlite3.connect(staged_db)) as live,
            ):
                saved.backup(live)
        url = f"sqlite:///{staged_db.absolute()}" if staged_db is not None else settings.resolved_database_url()
        _verify(url, manifest)
        if data.exists():
            data.rmdir()  # new or empty (checked above)
        os.replace(staged, data)
        if staged_uploads is not None:
            if uploads.exists():
                uploads.rmdir()
            os.replace(staged_uploads, uploads)
        if staged_db is not None and not in_data:
            os.replace(staged_db, target)
    except BaseException:
        for folder in (staged, staged_uploads):
            if folder is not None and folder.exists():
                shutil.rmtree(folder, ignore_errors=True)
        if staged_db is not None and not in_data:
            staged_db.unlink(missing_ok=True)
        raise
    return manifest


def _parent(folder: Path) -> Path:
    parent = Path(folder).absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    return parent


def _verify(url: str, manifest: dict[str, Any]) -> None:
    """InputError unless the database at ``url`` holds an audit chain that verifies and ends at the manifest's head."""
    from minterpr.serving.db import Database
    from minterpr.serving.service import AuditService

    db = Database(url)
    try:
        audit = AuditService(db)
        report, (seq, head) = audit.verify(), audit.head()
    finally:
        db.dispose()
    if not report.ok or (seq, head) != (manifest["audit_seq"], manifest["audit_head"]):
        raise InputError(
            f"restored database: the audit chain does not end at the backup's head "
            f"({seq}, {head} != {manifest['audit_seq']}, {manifest['audit_head']}); nothing was restored"
        )
