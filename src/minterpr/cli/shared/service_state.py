"""What ``minterpr serve``, ``users`` and ``audit`` share: where the service keeps its state, a new password,
and who a change made on the command line is audited as."""

from __future__ import annotations

import argparse
import functools
import getpass
import os
import sys
from typing import Any, Callable

from minterpr.cli.shared.common import CLIError, require_extras
from minterpr.cli.shared.vlm_options import vlm_config
from minterpr.errors import first_line


def require_serve() -> None:
    """CLIError naming the extra when the service's packages are missing."""
    require_extras("serve", ("serve",))


def read_password(prompt: str = "password") -> str:
    """A new password: typed twice on a terminal (not echoed), else one line of standard input."""
    where = "typed" if sys.stdin is not None and sys.stdin.isatty() else "on standard input"
    try:
        if where == "typed":
            first = getpass.getpass(f"{prompt}: ")
            if getpass.getpass(f"{prompt} (again): ") != first:
                raise CLIError("the two passwords differ")
            line = first
        else:
            line = sys.stdin.readline() if sys.stdin is not None else ""
            if not line:
                raise CLIError("no password on standard input")
        line.encode("utf-8")  # a surrogate-escaped byte is no password either
    except UnicodeError:
        raise CLIError(f"the password {where} is not UTF-8 text") from None
    return line.rstrip("\r\n")


def cli_actor() -> str:
    """Who a change made on the command line is audited as: the operating-system user (``os:NAME``,
    never mistaken for a service account)."""
    try:
        return f"os:{getpass.getuser()}"
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return f"os:uid {os.getuid()}" if hasattr(os, "getuid") else "os:unknown"


# flag (argparse dest) -> ServeSettings field; a flag left out (None) yields to the environment,
# then the settings file, then the default (minterpr.serving.config)
_FLAG_SETTINGS = {
    "data": "data_dir",
    "database_url": "database_url",
    "cookie_secure": "cookie_secure",
    "retention_days": "retention_days",
    "torch_threads": "torch_threads",
    "trusted_proxy": "trusted_proxies",
    "vlm_captions": "vlm_captions",
    "vlm_caption_weight": "vlm_caption_weight",
}


def settings_from(args: argparse.Namespace, **extra: Any) -> Any:
    """ServeSettings from the flags in ``args`` (``--vlm-*`` and ``extra`` fields too), the environment
    and the settings file."""
    from minterpr.errors import InputError
    from minterpr.serving.config import load_settings

    flags = {field: getattr(args, dest, None) for dest, field in _FLAG_SETTINGS.items()}
    try:
        return load_settings({**flags, "vlm": vlm_config(args), **extra}, config=getattr(args, "config", None))
    except InputError as err:
        raise CLIError(str(err)) from None


def database_errors(handler: Callable[..., int]) -> Callable[..., int]:
    """``handler`` (a ``db`` or ``users`` command) with the database's own errors — a server that cannot
    be reached, a file that is not a database, a schema this minterpr does not know — as one line
    naming the database (its password masked), exit 2, not a traceback."""

    @functools.wraps(handler)
    def guarded(args: argparse.Namespace, *rest: Any, **options: Any) -> int:
        import sqlite3

        from sqlalchemy.exc import SQLAlchemyError

        try:
            return handler(args, *rest, **options)
        except (SQLAlchemyError, sqlite3.DatabaseError) as err:
            from sqlalchemy.engine import make_url

            url = settings_from(args).resolved_database_url()
            parsed = make_url(url)
            said = first_line(getattr(err, "orig", None) or err)
            if parsed.password:  # a driver's message never shows the password, whatever it quotes
                said = said.replace(str(parsed.password), "***")
            raise CLIError(
                f"database {parsed.render_as_string(hide_password=True)}: {said} (check --data / --database-url and that the "
                "database server is running)"
            ) from None

    return guarded


def services_from(args: argparse.Namespace) -> Any:
    """The service layer over the state folder / database the parsed options name (the serve extra is
    checked first), for a command run beside a server: without the job queue (a server may be ingesting)."""
    require_serve()
    from minterpr.serving.service import build_services

    return build_services(settings_from(args), jobs=False)


def add_state_arguments(parser: argparse.ArgumentParser) -> None:
    """--config, --data and --database-url: where the service keeps its state (shared with users / audit)."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="a TOML settings file (default: $MINTERPR_CONFIG); flags win over MINTERPR_* variables, which win over it",
    )
    parser.add_argument(
        "--data", metavar="DIR", help="the service's state folder (default: $MINTERPR_DATA_DIR, else outputs/serve)"
    )
    parser.add_argument(
        "--database-url", metavar="URL", help="SQLAlchemy URL (default: $MINTERPR_DATABASE_URL, else SQLite in --data)"
    )
