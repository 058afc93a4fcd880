"""``minterpr db``: the service database: its schema revision, upgrades, backups.

    minterpr db current --data /srv/minterpr          # the revision the database is at, and the one needed
    minterpr db upgrade --data /srv/minterpr          # bring it to that revision (back it up first)
    minterpr db backup /backups/2026-12-02 --data /srv/minterpr    # database + uploads + galleries + manifest
    minterpr db restore /backups/2026-12-02 --data /srv/new        # into a new state folder; checks the audit head

Same --config / --data / --database-url as ``minterpr serve``. ``minterpr serve`` refuses a
database at an older revision (one line pointing here) unless given ``--upgrade-db``. See
docs/service.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from minterpr.cli.shared.common import add_common_options
from minterpr.cli.shared.service_state import add_state_arguments, database_errors, require_serve, settings_from


def _engines(args: argparse.Namespace) -> tuple[Any, Any]:
    """(reads, writes) engines of the database the options name (minterpr.serving.db.engines)."""
    require_serve()
    from minterpr.serving.db import engines

    settings = settings_from(args)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return engines(settings.resolved_database_url())


def cmd_current(args: argparse.Namespace) -> int:
    from minterpr.serving import schema

    read, write = _engines(args)
    try:
        found = schema.revision(read)
    finally:
        read.dispose()
        write.dispose()
    state = "empty" if found is None else "current" if found == schema.HEAD else "needs `minterpr db upgrade`"
    print(f"{found or '-'} (this minterpr needs {schema.HEAD}: {state})")
    return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    from minterpr.serving import schema

    read, write = _engines(args)
    try:
        before, after = schema.upgrade(write)
    finally:
        read.dispose()
        write.dispose()
    print(f"schema {before or '-'} -> {after}" if before != after else f"schema {after}: already current")
    return 0


def cmd_backup(args: argparse.Namespace) -> int:
    require_serve()
    from minterpr.serving.backup import backup

    manifest = backup(settings_from(args), Path(args.folder))
    note = f"; {manifest['database_note']}" if manifest["database_note"] else ""
    print(
        f"backup in {args.folder}: schema {manifest['schema']}, audit head {manifest['audit_seq']} "
        f"{manifest['audit_head']}{note}"
    )
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    require_serve()
    from minterpr.serving.backup import restore

    manifest = restore(settings_from(args), Path(args.folder))
    print(f"restored {args.folder}: audit head {manifest['audit_seq']} {manifest['audit_head']} verified")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser(
        "db",
        help="the service database: schema revision, upgrade, backup and restore",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = group.add_subparsers(dest="db_command", metavar="DB_COMMAND")
    group.set_defaults(group_parser=group)
    for name, handler, text, folder in (
        ("current", cmd_current, "the revision the database is at", False),
        ("upgrade", cmd_upgrade, "bring the database to the revision this minterpr needs", False),
        ("backup", cmd_backup, "copy the database and state folder into a new FOLDER", True),
        ("restore", cmd_restore, "restore a backup FOLDER into a new state folder", True),
    ):
        parser = commands.add_parser(name, help=text, description=text)
        if folder:
            parser.add_argument("folder", metavar="FOLDER")
        add_state_arguments(parser)
        parser.set_defaults(handler=database_errors(handler))
        add_common_options(parser)
