"""``minterpr users``: accounts of the search service (add, list, set a password).

    minterpr users add ana --role analyst --data /srv/minterpr     # password from the terminal / stdin
    minterpr users list --data /srv/minterpr                       # --json -: the list as JSON on stdout
    minterpr users passwd ana --data /srv/minterpr

Passwords are read, never printed or logged; only their Argon2id hashes are stored.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from minterpr.cli.shared.common import add_common_options, write_json
from minterpr.cli.shared.service_state import (
    add_state_arguments,
    cli_actor,
    database_errors,
    read_password,
    services_from,
)


def cmd_add(args: argparse.Namespace, out: TextIO | None = None) -> int:
    services = services_from(args)
    try:
        services.accounts.create_user(
            args.username, read_password(f"password for {args.username}"), args.role, by=cli_actor()
        )
    finally:
        services.close()
    print(f"user {args.username!r} ({args.role}) created", file=out or sys.stdout)
    return 0


def cmd_list(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """One tab-separated line per user (name, role, "disabled"); ``--json``: also the list as JSON,
    ``[{"username": ..., "role": ..., "disabled": false}, ...]`` (no ids, no hashes)."""
    services = services_from(args)
    try:
        users = services.accounts.users()
    finally:
        services.close()
    for user in users:
        fields = [user["username"], user["role"], *(["disabled"] if user["disabled"] else [])]
        print("\t".join(fields), file=out or sys.stdout)
    write_json(
        getattr(args, "json", None),
        [{"username": u["username"], "role": u["role"], "disabled": bool(u["disabled"])} for u in users],
    )
    return 0


def cmd_passwd(args: argparse.Namespace, out: TextIO | None = None) -> int:
    services = services_from(args)
    try:
        services.accounts.set_password(
            args.username, read_password(f"new password for {args.username}"), by=cli_actor()
        )
    finally:
        services.close()
    print(f"password of {args.username!r} changed", file=out or sys.stdout)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "users", help="accounts of the search service", description="Accounts of the search service (minterpr serve)."
    )
    parser.set_defaults(group_parser=parser)
    sub = parser.add_subparsers(dest="users_command", metavar="USERS_COMMAND")
    add = sub.add_parser("add", help="add a user (password from the terminal or one line of stdin)")
    add.add_argument("username")
    add.add_argument("--role", required=True, choices=("viewer", "analyst", "admin", "auditor"))
    add_state_arguments(add)
    add.set_defaults(handler=database_errors(cmd_add))
    add_common_options(add, needs=("serve",))
    listing = sub.add_parser("list", help="list the users and their roles")
    add_state_arguments(listing)
    listing.set_defaults(handler=database_errors(cmd_list))
    add_common_options(
        listing,
        json=True,
        needs=("serve",),
        json_help="also write the users as JSON to PATH ('-' or no value: to stdout, the table to stderr)",
    )
    passwd = sub.add_parser("passwd", help="set a user's password")
    passwd.add_argument("username")
    add_state_arguments(passwd)
    passwd.set_defaults(handler=database_errors(cmd_passwd))
    add_common_options(passwd, needs=("serve",))
