"""What ``minterpr serve``, ``users`` and ``audit`` share: where the service keeps its state, and a new password."""
from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path
from typing import Any

from minterpr.cli.common import CLIError

SERVE_EXTRA = "pip install 'minterpr[serve]'"


def require_serve() -> None:
    """CLIError naming the extra when the service's packages are missing."""
    try:
        import fastapi  # noqa: F401
        import sqlalchemy  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as err:
        raise CLIError(f"the service needs packages that are not installed ({err.name}): {SERVE_EXTRA}") from None


def read_password(prompt: str = "password") -> str:
    """A new password: typed twice on a terminal (not echoed), else one line of standard input."""
    if sys.stdin is not None and sys.stdin.isatty():
        first = getpass.getpass(f"{prompt}: ")
        if getpass.getpass(f"{prompt} (again): ") != first:
            raise CLIError("the two passwords differ")
        return first
    line = sys.stdin.readline() if sys.stdin is not None else ""
    if not line:
        raise CLIError("no password on standard input")
    return line.rstrip("\r\n")


def settings_from(args: argparse.Namespace, **extra: Any) -> Any:
    from minterpr.serving.settings import ServeSettings

    return ServeSettings(data_dir=Path(args.data), database_url=getattr(args, "database_url", None),
                         cookie_secure=getattr(args, "cookie_secure", False),
                         retention_days=getattr(args, "retention_days", None),
                         torch_threads=getattr(args, "torch_threads", None), **extra)


def services_from(args: argparse.Namespace) -> Any:
    """The service layer over the state folder / database the parsed options name (the serve extra is checked first)."""
    require_serve()
    from minterpr.serving.service import build_services

    return build_services(settings_from(args))


def add_state_arguments(parser: argparse.ArgumentParser) -> None:
    """--data and --database-url: where the service keeps its state (shared with users / audit)."""
    parser.add_argument("--data", default="outputs/serve", metavar="DIR",
                        help="the service's state folder (default outputs/serve)")
    parser.add_argument("--database-url", metavar="URL", help="SQLAlchemy URL (default: SQLite in --data)")
