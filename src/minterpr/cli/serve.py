"""``minterpr serve``: the search service — JSON API and web page — on uvicorn.

    minterpr serve --demo                                  # the demo gallery (built and trained when absent)
    minterpr serve --data /srv/minterpr --gallery lobby galleries/lobby runs/synthetic --port 8000
    minterpr serve --data /srv/minterpr --create-admin root --no-serve   # password read from the terminal / stdin
    minterpr serve --data /srv/minterpr --retention-days 30 --purge      # apply retention and exit

State (users, cases, sessions, the audit log) lives in ``--data`` (SQLite in WAL mode) or in
the database of ``--database-url``. Passwords are read from the terminal (or one line of
standard input when it is not a terminal) and never printed or logged. ``--demo`` writes the
password of the user it creates to DATA/demo_credentials.txt, readable by its owner only.
With ``--retention-days N`` the service purges what is older than N days at start and daily.
See docs/service.md.
"""
from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
import os
import secrets
import sys
import threading
from pathlib import Path
from typing import Any

from minterpr.cli.simulate import CLIError

SERVE_EXTRA = "pip install 'minterpr[serve]'"
DEMO_TIMES_START = dt.datetime(2026, 3, 2, 8, 0, tzinfo=dt.timezone.utc)  # synthetic capture times of the demo


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


def ensure_demo_gallery(services: Any, demo_out: str | os.PathLike[str] = "outputs/demo", seed: int = 0) -> tuple[Path, Path]:
    """The demo's run and stored test gallery, registered as gallery "demo": the world is built and
    the model trained when absent (cached as ``minterpr demo`` caches them); the store is built once
    per model, with synthetic capture times spread over a day so time filters have something to cut."""
    from minterpr.cli.demo import build_data, train_model
    from minterpr.data.formats.gallery import read_gallery
    from minterpr.errors import MinterprError
    from minterpr.index.gallery_store import build_vector_index, open_gallery, save_gallery

    out = Path(demo_out)
    data_dir = build_data(out, seed)
    run_dir = train_model(out, data_dir, seed)
    store = Path(services.settings.galleries_dir) / "demo"
    pipeline = services.galleries.pipeline(str(run_dir.absolute()))
    try:
        open_gallery(store, expected_fingerprint=pipeline.model_fingerprint)
    except MinterprError:
        print(f"[serve] embedding the demo gallery into {store} ...", flush=True)
        images = read_gallery(data_dir / "gallery_test.jsonl")
        index = pipeline.index_images(images, root=str(data_dir.absolute()), progress=True)
        step = 86400 / max(1, len(index))
        metadata = [{"time": (DEMO_TIMES_START + dt.timedelta(seconds=round(k * step))).isoformat()}
                    for k in range(len(index))]
        vectors = build_vector_index("exact", index, metadata, model_fingerprint=pipeline.model_fingerprint)
        save_gallery(index, store, model_fingerprint=pipeline.model_fingerprint, vector_index=vectors, metadata=metadata,
                     rebuild=f"minterpr serve --demo --demo-out {out}")
    rows = {row.name: row for row in services.galleries.rows()}
    if "demo" not in rows or Path(rows["demo"].directory) != store.absolute():
        services.galleries.register("demo", store, run_dir, by="minterpr serve --demo")
    return run_dir, store


def _demo_user(services: Any, data_dir: Path) -> str | None:
    """Create user "demo" (admin) when there is no user; its password goes to a 0600 file, never to the screen."""
    if services.accounts.users():
        return None
    password = secrets.token_urlsafe(12)
    services.accounts.create_user("demo", password, "admin", by="minterpr serve --demo")
    path = data_dir / "demo_credentials.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"username: demo\npassword: {password}\n")
    return str(path)


def _retention_loop(services: Any, days: int, stop: threading.Event) -> None:
    from minterpr.serving.retention import purge

    while not stop.wait(86400):
        purge(services, days, by="retention schedule")


def cmd_serve(args: argparse.Namespace) -> int:
    require_serve()
    from minterpr.serving.retention import purge
    from minterpr.serving.service import build_services

    data_dir = Path(args.data)
    settings = settings_from(args, demo_gallery="demo" if args.demo else None)
    services = build_services(settings)
    try:
        if args.create_admin:
            services.accounts.create_user(args.create_admin, read_password(f"password for {args.create_admin}"),
                                          "admin", by="minterpr serve --create-admin")
            print(f"[serve] admin {args.create_admin!r} created", flush=True)
        for name, store, run in args.gallery or ():
            services.galleries.register(name, store, run, by="minterpr serve --gallery")
            print(f"[serve] gallery {name!r}: {store}", flush=True)
        if args.demo:
            ensure_demo_gallery(services, args.demo_out)
            credentials = _demo_user(services, data_dir)
            if credentials:
                print(f"[serve] created user 'demo' (admin); its password is in {credentials}", flush=True)
        if args.retention_days is not None:
            report = purge(services, args.retention_days, by="minterpr serve")
            print(f"[serve] retention {args.retention_days} days: {json.dumps(report.model_dump())}", flush=True)
        if args.purge or args.no_serve:
            return 0
    except BaseException:
        services.close()
        raise
    return _run_server(services, settings, args)


def _run_server(services: Any, settings: Any, args: argparse.Namespace) -> int:
    import uvicorn

    from minterpr.serving.app import create_app

    stop = threading.Event()
    if args.retention_days is not None:
        threading.Thread(target=_retention_loop, args=(services, args.retention_days, stop), daemon=True).start()
    app = create_app(settings, services)
    print(f"[serve] open http://{args.host}:{args.port}/ (API docs: http://{args.host}:{args.port}/api/docs)",
          flush=True)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, workers=1)
    finally:
        stop.set()
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("serve", help="the search service: web page and JSON API",
                                   description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    add_state_arguments(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--demo", action="store_true", help="serve the demo gallery (built and trained when absent)")
    parser.add_argument("--demo-out", default="outputs/demo", metavar="DIR", help="the demo's cache (default outputs/demo)")
    parser.add_argument("--gallery", nargs=3, action="append", metavar=("NAME", "STORE", "RUN"),
                        help="register a gallery store built by RUN (minterpr index build) under NAME")
    parser.add_argument("--create-admin", metavar="USERNAME", help="create an admin (password from the terminal/stdin)")
    parser.add_argument("--retention-days", type=int, metavar="N", help="purge sessions, crops and embeddings older "
                                                                        "than N days at start and daily")
    parser.add_argument("--purge", action="store_true", help="with --retention-days: purge, then exit")
    parser.add_argument("--no-serve", action="store_true", help="do the set-up asked for, then exit")
    parser.add_argument("--cookie-secure", action="store_true", help="mark cookies Secure (serving behind TLS)")
    parser.add_argument("--torch-threads", type=int, metavar="N", help="torch threads in the server")
    parser.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    parser.set_defaults(handler=cmd_serve)


def add_state_arguments(parser: argparse.ArgumentParser) -> None:
    """--data and --database-url: where the service keeps its state (shared with users / audit)."""
    parser.add_argument("--data", default="outputs/serve", metavar="DIR",
                        help="the service's state folder (default outputs/serve)")
    parser.add_argument("--database-url", metavar="URL", help="SQLAlchemy URL (default: SQLite in --data)")
