"""``minterpr serve``: the search service — JSON API and web page — on uvicorn.

    minterpr serve --demo                                  # the demo gallery (built and trained when absent)
    minterpr serve --demo street [--video V] [--run RUN]   # and beside it a real street video, ingested once
    minterpr serve --data /srv/minterpr --gallery lobby galleries/lobby runs/synthetic --port 8000
    minterpr serve --data /srv/minterpr --create-admin root --no-serve   # password read from the terminal / stdin
    minterpr serve --data /srv/minterpr --retention-days 30 --purge      # apply retention and exit

State (users, cases, sessions, the audit log) lives in ``--data`` (SQLite in WAL mode) or in
the database of ``--database-url``. Passwords are read from the terminal (or one line of
standard input when it is not a terminal) and never printed or logged. ``--demo`` writes the
password of the user it creates to DATA/demo_credentials.txt, readable by its owner only.
With ``--retention-days N`` the service purges what is older than N days at start and daily.
The port is bound first (a port in use is one line naming it, before any training); once the
server listens it prints the address to open, the demo user and its password file, and that
Ctrl+C stops it. ``--verbose`` / ``--quiet`` set the ``minterpr`` log and, unless
``--log-level`` is given, uvicorn's; ``--device`` is where the models run. See docs/service.md.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import shlex
import socket
import threading
from pathlib import Path
from typing import Any

from minterpr.cli.shared.common import CLIError, add_common_options, require_extras, show_progress
from minterpr.cli.shared.serve_demo import DEMO_USER, demo_user, ensure_demo_gallery
from minterpr.cli.shared.service_state import add_state_arguments, read_password, require_serve, settings_from
from minterpr.cli.shared.vlm_options import add_caption_arguments, add_vlm_arguments

log = logging.getLogger(__name__)


def gallery_specs(values: list[list[str]] | None) -> list[tuple[str, str, str]]:
    """``--gallery NAME STORE [RUN]`` occurrences as (name, store, run directory); RUN defaults to the shipped
    model and is resolved as every other command resolves ``--run`` (``shipped[:NAME]``, ``hf-hub:ORG/NAME``,
    a path), not as a folder named "shipped" in the working directory.

    >>> from minterpr.models.zoo import shipped_model_dir
    >>> specs = gallery_specs([["lobby", "galleries/lobby"], ["hall", "galleries/hall", "runs/mine"]])
    >>> specs == [("lobby", "galleries/lobby", str(shipped_model_dir())), ("hall", "galleries/hall", "runs/mine")]
    True
    """
    from minterpr.models.zoo import resolve_model

    specs = []
    for words in values or ():
        if len(words) not in (2, 3):
            raise CLIError(f"--gallery takes NAME STORE [RUN], got {len(words)} value(s): {' '.join(words)}")
        specs.append((words[0], words[1], str(resolve_model(words[2] if len(words) == 3 else "shipped"))))
    return specs


def _retention_loop(services: Any, days: int, stop: threading.Event) -> None:
    from minterpr.serving.retention import purge

    while not stop.wait(86400):
        purge(services, days, by="retention schedule")


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to (host, port), made before the server (and, with --demo, before any training)
    so that a port in use is one clear line naming it, not a traceback after minutes of work.
    SO_REUSEADDR as uvicorn sets it: a port in TIME_WAIT is free, one with a listener is not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise CLIError(f"--host {host!r}: not an address of this machine ({err.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise CLIError(
                f"port {port} on {host} is already in use (another minterpr serve?): stop that "
                f"program, or choose another port with --port, e.g. --port {port + 1}"
            ) from None
        if err.errno == errno.EACCES:
            raise CLIError(
                f"port {port} on {host}: permission denied (ports below 1024 need privileges); "
                f"choose another with --port, e.g. --port 8000"
            ) from None
        raise CLIError(f"cannot listen on {host}:{port}: {err.strerror}; choose another --host/--port") from None
    return sock


def address(host: str, port: int) -> str:
    """The URL to open: a wildcard host is reached through 127.0.0.1 on this machine.

    >>> address("0.0.0.0", 8000), address("::1", 8080)
    ('http://127.0.0.1:8000/', 'http://[::1]:8080/')
    """
    shown = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    return f"http://[{shown}]:{port}/" if ":" in shown else f"http://{shown}:{port}/"


def banner(url: str, credentials: Path | None, made_now: bool, gallery: str | None) -> str:
    """What `minterpr serve` prints once it listens: where to go, how to log in, how to stop.

    >>> print(banner("http://127.0.0.1:8000/", Path("outputs/serve/demo_credentials.txt"), True, "demo (24 images)"))
    <BLANKLINE>
    minterpr serve is running: the demo (24 images)
      open      http://127.0.0.1:8000/   (API: http://127.0.0.1:8000/api/docs)
      log in    username demo, password in outputs/serve/demo_credentials.txt (created now; readable by you only):
                  cat outputs/serve/demo_credentials.txt
      stop      Ctrl+C
    <BLANKLINE>
    """
    lines = [
        "",
        f"minterpr serve is running{': the ' + gallery if gallery else ''}",
        f"  open      {url}   (API: {url}api/docs)",
    ]
    if credentials is not None:
        lines += [
            f"  log in    username {DEMO_USER}, password in {credentials} "
            f"({'created now; ' if made_now else ''}readable by you only):",
            f"              cat {shlex.quote(str(credentials))}",
        ]
    lines += ["  stop      Ctrl+C", ""]
    return "\n".join(lines)


def uvicorn_level(args: argparse.Namespace) -> str:
    """uvicorn's log level: --log-level when given, else from --verbose / --quiet (info by default)."""
    if args.log_level:
        return args.log_level
    return "debug" if getattr(args, "verbose", False) else "warning" if getattr(args, "quiet", False) else "info"


def cmd_serve(args: argparse.Namespace) -> int:
    require_serve()
    if args.demo or args.gallery:  # galleries are searched with their model
        require_extras("serve", ("model",))
    from minterpr.serving.retention import purge
    from minterpr.serving.service import build_services

    if args.workers != 1:
        raise CLIError(
            f"--workers {args.workers}: minterpr serve runs one worker process (its rate limits, live "
            "sessions and ingestion queue are in memory); it serves requests on threads, and more "
            "servers go behind a load balancer with sticky sessions (docs/service.md)"
        )
    galleries = gallery_specs(args.gallery)  # malformed --gallery: one line before anything starts
    serving = not (args.purge or args.no_serve)
    settings = settings_from(
        args,
        demo_gallery="demo" if args.demo else None,  # a bad setting: one line, first
        device=args.device,
        appearance=args.appearance,
    )
    data_dir = Path(settings.data_dir)
    sock = listen(args.host, args.port) if serving else None  # before anything slow: a taken port fails now
    credentials, made_now, described = None, False, None
    try:
        services = build_services(settings, upgrade=args.upgrade_db)
    except BaseException:
        if sock is not None:
            sock.close()
        raise
    try:
        if args.create_admin:
            services.accounts.create_user(
                args.create_admin,
                read_password(f"password for {args.create_admin}"),
                "admin",
                by="minterpr serve --create-admin",
            )
            log.info("[serve] admin %r created", args.create_admin)
        for name, store, run in galleries:
            services.galleries.register(name, store, run, by="minterpr serve --gallery")
            log.info("[serve] gallery %r: %s", name, store)
        street = None
        if args.demo == "street":  # checked before the synthetic demo's minutes of work
            from minterpr.cli.shared.serve_street import street_model, street_video

            street = street_video(args.video), street_model(args.run)
        elif args.video or args.run:
            raise CLIError("--video and --run go with --demo street")
        if args.demo:
            # decided before the minutes of building: a user added by hand meanwhile does not cancel it
            credentials, made_now = demo_user(services, data_dir)
            if made_now and not serving:  # the banner says it when serving
                print(f"[serve] created user '{DEMO_USER}' (admin); its password is in {credentials}", flush=True)
            elif credentials is None:
                count = len(services.accounts.users())
                print(
                    f"[serve] no '{DEMO_USER}' admin created: the service has {count} user{'s' * (count != 1)} "
                    "already; log in as one of them (`minterpr users list`)",
                    flush=True,
                )
            log.info("[serve] preparing the demo gallery in %s (built and trained once, then reused)", args.demo_out)
            ensure_demo_gallery(services, args.demo_out, progress=show_progress(args))
            images = next((g.images for g in services.galleries.list() if g.name == "demo"), None)
            described = f"demo gallery ({images} images)"
            if street is not None:
                from minterpr.cli.shared.serve_street import STREET_GALLERY, ensure_street_gallery

                ensure_street_gallery(services, *street, progress=show_progress(args))
                crops = next((g.images for g in services.galleries.list() if g.name == STREET_GALLERY), None)
                described += f" and street gallery ({crops} crops of {street[0].name})"
        if settings.retention_days is not None:
            report = purge(services, settings.retention_days, by="minterpr serve")
            print(f"[serve] retention {settings.retention_days} days: {json.dumps(report.model_dump())}", flush=True)
        if not serving:
            services.close()
            return 0
    except BaseException:
        services.close()
        if sock is not None:
            sock.close()
        raise
    assert sock is not None
    return _run_server(
        services, settings, args, sock, banner(address(args.host, args.port), credentials, made_now, described)
    )


def _run_server(services: Any, settings: Any, args: argparse.Namespace, sock: socket.socket, text: str) -> int:
    import uvicorn

    from minterpr.serving.app import create_app

    stop = threading.Event()
    if settings.retention_days is not None:
        threading.Thread(target=_retention_loop, args=(services, settings.retention_days, stop), daemon=True).start()
    server = uvicorn.Server(server_config(create_app(settings, services), settings, args))
    print(text, flush=True)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl+C it shut down on: the normal way to stop, exit 0
        pass
    finally:
        stop.set()
        sock.close()
        services.close()
    log.info("[serve] stopped")
    return 0


def server_config(app: Any, settings: Any, args: argparse.Namespace) -> Any:
    """uvicorn's settings: X-Forwarded-For is believed only from ``settings.trusted_proxies`` (uvicorn
    would otherwise trust it from 127.0.0.1, where the demo listens, and a client could pick the
    address the login limit counts)."""
    import uvicorn

    trusted = list(settings.trusted_proxies)
    extra: dict[str, Any] = {}
    if getattr(args, "log_format", "text") == "json":
        from minterpr.serving.logs import json_log_config

        extra["log_config"] = json_log_config(uvicorn_level(args))
    return uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=uvicorn_level(args),
        workers=1,
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted or [],
        **extra,
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="the search service: web page and JSON API",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_state_arguments(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument(
        "--demo",
        nargs="?",
        const="synthetic",
        choices=("synthetic", "street"),
        help="serve the demo gallery (built and trained when absent); 'street' adds a real street "
        "video ingested beside it (docs/ingest.md)",
    )
    parser.add_argument("--video", metavar="PATH", help="--demo street: the video (default: vtest.avi, see docs)")
    parser.add_argument(
        "--run", metavar="RUN", help="--demo street: the model for real footage (default: the shipped one in models/)"
    )
    parser.add_argument(
        "--demo-out", default="outputs/demo", metavar="DIR", help="the demo's cache (default outputs/demo)"
    )
    parser.add_argument(
        "--gallery",
        nargs="+",
        action="append",
        metavar="NAME STORE [RUN]",
        help="register a gallery store built by RUN (minterpr index build) under NAME; without RUN "
        "the shipped real-pixel model",
    )
    parser.add_argument("--create-admin", metavar="USERNAME", help="create an admin (password from the terminal/stdin)")
    parser.add_argument(
        "--retention-days",
        type=int,
        metavar="N",
        help="purge sessions, crops and embeddings older than N days at start and daily",
    )
    parser.add_argument("--purge", action="store_true", help="with --retention-days: purge, then exit")
    parser.add_argument("--no-serve", action="store_true", help="do the set-up asked for, then exit")
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="log lines as text (default) or JSON objects with the request id",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="worker processes: 1 (the only value accepted; requests run on threads)",
    )
    parser.add_argument(
        "--upgrade-db",
        action="store_true",
        help="bring an older database's schema up to date first (default: refuse it; see minterpr db)",
    )
    parser.add_argument(
        "--cookie-secure", action="store_true", default=None, help="mark cookies Secure (serving behind TLS)"
    )
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        metavar="ADDR",
        help="a reverse proxy (address or network) whose X-Forwarded-For names the client; "
        "repeat for several (default: none, the header is ignored)",
    )
    parser.add_argument("--torch-threads", type=int, metavar="N", help="torch threads in the server")
    parser.add_argument(
        "--appearance",
        metavar="auto|shipped|none|PATH",
        help="the appearance (same-person) model beside each gallery's run: auto (default: the shipped "
        "one beside a shipped attribute model, none beside other runs), shipped, a model "
        "directory or a reid run's best.pt, or none",
    )
    parser.add_argument(
        "--log-level",
        choices=("critical", "error", "warning", "info", "debug"),
        help="the web server's (uvicorn's) log level (default: info; debug with --verbose, warning with --quiet)",
    )
    add_vlm_arguments(parser)
    add_caption_arguments(parser, per_store=True)
    parser.set_defaults(handler=cmd_serve)
    add_common_options(parser, device=True, threads=False)  # its own --torch-threads: a setting
