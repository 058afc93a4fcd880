"""What the security probes share: the world, the server, the context every probe records into,
and small request helpers (``probe_service.py`` runs the families; each family module imports
only from here, so the probe modules draw no circle)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))  # support.serving: the tests' tiny world

PASSWORD = "correct horse battery staple"
USERS = {
    "root": "admin",
    "ana": "analyst",
    "bob": "analyst",
    "vic": "viewer",
    "aud": "auditor",
    "carl": "analyst",
    "dan": "analyst",
}
CONFIG = """# probe_service.py: turns are not rate-limited (hundreds of probes move sessions); the login
# limit per client is raised for the set-up's logins; the rate-limit probes restart without it
search_rate = {rate_per_s = 1000.0, burst = 100000}
login_client_rate = {rate_per_s = 0.5, burst = 40}
torch_threads = 1
max_request_bytes = 1048576
max_upload_bytes = 262144
"""
DEFAULT_LOGIN_LIMITS = "\n".join(line for line in CONFIG.splitlines() if not line.startswith("login_client_rate"))


@dataclass
class Result:
    category: str
    name: str
    expected: str
    got: str
    held: bool


@dataclass
class Ctx:
    """What the probes share: the server, its state folder, the actors' credentials, ids."""

    url: str
    data: Path
    work: Path
    server: "Server"
    keys: dict[str, str] = field(default_factory=dict)  # username -> API key
    key_ids: dict[str, int] = field(default_factory=dict)
    cookies: dict[str, dict[str, str]] = field(default_factory=dict)  # username -> cookie jar
    csrf: dict[str, str] = field(default_factory=dict)
    case: int = 0  # ana's open case (every camera, unbounded)
    narrow_case: int = 0  # ana's case over cam:north only, 08:00-09:00
    closed_case: int = 0
    sid: str = ""  # ana's session in `case` (a few turns)
    bob_sid: str = ""
    narrow_sid: str = ""
    closed_sid: str = ""  # a session of closed_case
    operations: list[dict[str, Any]] = field(default_factory=list)  # method, path, permission (None: any login)
    page_routes: list[tuple[str, str]] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)

    def http(self, who: str | None = None, *, via: str = "key", **kw: Any) -> Any:
        """An httpx client as ``who`` (None: no credentials) by API key or login cookie."""
        import httpx

        headers = dict(kw.pop("headers", {}))
        cookies = {}
        if who is not None and via == "key":
            headers["X-API-Key"] = self.keys[who]
        elif who is not None:
            cookies = dict(self.cookies[who])
        return httpx.Client(
            base_url=self.url, headers=headers, cookies=cookies, timeout=60, follow_redirects=False, **kw
        )

    def record(self, category: str, name: str, expected: str, got: str, held: bool) -> None:
        self.results.append(Result(category, name, expected, got, bool(held)))


def fill(path: str, ctx: Ctx, *, sid: str | None = None) -> str:
    """A route template with real ids: ana's case and session, gallery index 0, the move describe."""
    values = {
        "case_id": str(ctx.case),
        "session_id": sid or ctx.sid,
        "sid": sid or ctx.sid,
        "gallery_index": "0",
        "key_id": str(ctx.key_ids.get("ana", 1)),
        "job_id": "0" * 32,
        "move": "describe",
    }
    for name, value in values.items():
        path = path.replace("{" + name + "}", value)
    return path


# ----------------------------------------------------------------------------- the server
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env() -> dict[str, str]:
    return dict(
        os.environ,
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        TQDM_DISABLE="1",
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    )


def minterpr(*args: str, stdin: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minterpr", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
    )


class Server:
    """``python -m minterpr serve --data DATA --config CONFIG --port PORT`` (a real uvicorn)."""

    def __init__(self, data: Path, config: Path, log: Path) -> None:
        self.data, self.config, self.log = data, config, log
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 240) -> float:
        import httpx

        started = time.monotonic()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "minterpr",
                    "serve",
                    "--data",
                    str(self.data),
                    "--config",
                    str(self.config),
                    "--port",
                    str(self.port),
                    "--log-level",
                    "warning",
                    "--quiet",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env(),
            )
        while time.monotonic() - started < timeout:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return time.monotonic() - started
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("the server did not start")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait()


# ----------------------------------------------------------------------------- set-up
def routes_of_app(data: Path) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The app's API operations (method, path, the permission its ``require`` names) and page routes,
    read from an app built in this process over an empty state folder."""
    from fastapi.routing import APIRoute

    from minterpr.serving.app import create_app
    from minterpr.serving.security import PERMISSIONS
    from minterpr.serving.settings import ServeSettings

    known = {p for granted in PERMISSIONS.values() for p in granted}

    def permission(dependant: Any) -> str | None:
        for dep in dependant.dependencies:
            for cell in getattr(dep.call, "__closure__", None) or ():
                if isinstance(cell.cell_contents, str) and cell.cell_contents in known:
                    return cell.cell_contents
            found = permission(dep)
            if found:
                return found
        return None

    def flat(routes: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
        """(path, APIRoute) of every route, through included routers (FastAPI >= 0.12x keeps them nested)."""
        for route in routes:
            context = getattr(route, "include_context", None)
            if context is not None:
                yield from flat(context.included_router.routes, prefix + (context.prefix or ""))
            elif isinstance(route, APIRoute):
                yield prefix + route.path, route

    app = create_app(ServeSettings(data_dir=data))
    spec = app.openapi()
    operations, pages = [], []
    routes = list(flat(app.routes))
    by_path = {(path, m): route for path, route in routes if route.include_in_schema for m in route.methods}
    for path, methods in spec["paths"].items():
        for method in methods:
            route = by_path.get((path, method.upper()))
            operations.append(
                {"method": method.upper(), "path": path, "permission": permission(route.dependant) if route else None}
            )
    for path, route in routes:
        if not route.include_in_schema:
            pages += [(m, path) for m in sorted(route.methods - {"HEAD"})]
    app.state.services.close()
    return operations, pages


def prepare(work: Path) -> Ctx:
    """The world (reused from ``work``), a fresh state folder, the server started, actors logged in."""
    from support.serving import build_world

    from minterpr.serving.service import build_services
    from minterpr.serving.settings import ServeSettings

    world = work / "world"
    if not (world / "store").is_dir():
        shutil.rmtree(world, ignore_errors=True)
        build_world(world)
    run, store = world / "run", world / "store"
    data = work / "state"
    shutil.rmtree(data, ignore_errors=True)
    config = work / "probe.toml"
    config.write_text(CONFIG)
    services = build_services(ServeSettings(data_dir=data))
    for name, role in USERS.items():
        services.accounts.create_user(name, PASSWORD, role)
    services.galleries.register("test", store, run, by="root")
    services.close()
    operations, pages = routes_of_app(work / "routes_state")
    server = Server(data, config, work / "server.log")
    server.start()
    ctx = Ctx(server.url, data, work, server, operations=operations, page_routes=pages)
    login_all(ctx)
    make_cases(ctx)
    return ctx


def login_all(ctx: Ctx) -> None:
    import httpx

    for name in USERS:
        response = httpx.post(ctx.url + "/api/auth/login", json={"username": name, "password": PASSWORD})
        response.raise_for_status()
        ctx.cookies[name] = dict(response.cookies)
        ctx.csrf[name] = response.json()["csrf_token"]
        with ctx.http(name, via="cookie", headers={"X-CSRF-Token": ctx.csrf[name]}) as http:
            made = http.post("/api/keys", json={"name": "probe"})
            made.raise_for_status()
            ctx.keys[name], ctx.key_ids[name] = made.json()["key"], made.json()["id"]


def start_session(ctx: Ctx, who: str, case: int, turns: int = 2, **scope: Any) -> str:
    with ctx.http(who) as http:
        made = http.post("/api/sessions", json={"case_id": case, "gallery": "test", **scope})
        made.raise_for_status()
        sid = made.json()["session_id"]
        for text in ("a man in a red jacket", "blue jeans")[:turns]:
            http.post(f"/api/sessions/{sid}/describe", json={"text": text}).raise_for_status()
    return sid


def open_case(ctx: Ctx, who: str, **scope: Any) -> int:
    body = {
        "title": "probe case",
        "purpose": "report 2026-17: missing person, authorised by the duty officer",
        "cameras": None,
        "start": None,
        "end": None,
        **scope,
    }
    with ctx.http(who) as http:
        made = http.post("/api/cases", json=body)
        made.raise_for_status()
        return int(made.json()["id"])


def make_cases(ctx: Ctx) -> None:
    ctx.case = open_case(ctx, "ana")
    ctx.sid = start_session(ctx, "ana", ctx.case)
    ctx.bob_sid = start_session(ctx, "bob", ctx.case)
    ctx.narrow_case = open_case(
        ctx, "ana", cameras=["cam:north"], start="2026-03-02T08:00:00Z", end="2026-03-02T09:00:00Z"
    )
    ctx.narrow_sid = start_session(ctx, "ana", ctx.narrow_case, turns=1)
    ctx.closed_case = open_case(ctx, "ana")
    ctx.closed_sid = start_session(ctx, "ana", ctx.closed_case, turns=1)
    with ctx.http("ana") as http:
        http.post(f"/api/cases/{ctx.closed_case}/close").raise_for_status()


# ----------------------------------------------------------------------------- request helpers
def got(response: Any) -> str:
    code = ""
    if response.headers.get("content-type", "").startswith("application/json"):
        try:
            body = response.json()
            code = body.get("error", {}).get("code", "") if isinstance(body, dict) else ""
        except ValueError:
            pass
    return f"{response.status_code} {code}".strip()


def is_refusal(response: Any, statuses: tuple[int, ...], code: str | None = None) -> bool:
    if response.status_code not in statuses:
        return False
    return code is None or got(response).endswith(code)


def body_for(ctx: Ctx, path: str) -> dict[str, Any]:
    """A valid request for the operation, so that a missing check would show as a success."""
    world = ctx.work / "world"
    bodies = {
        "/api/keys": {"name": "probe"},
        "/api/galleries": {"name": "again", "directory": str(world / "store"), "run_dir": str(world / "run")},
        "/api/cases": {
            "title": "t",
            "purpose": "a purpose of ten characters or more",
            "cameras": None,
            "start": None,
            "end": None,
        },
        "/api/sessions": {"case_id": ctx.case, "gallery": "test"},
        "/api/ingest": {"gallery": "probe", "source": str(ctx.data / "incoming")},
        "/api/admin/users": {"username": "eve", "password": PASSWORD, "role": "admin"},
        "/api/admin/retention": {"days": 36500},
        "/api/auth/login": {"username": "ana", "password": PASSWORD},
    }
    for suffix, body in (
        ("/describe", {"text": "a man in red"}),
        ("/answer", {"text": "yes"}),
        ("/feedback", {"gallery_index": 0, "text": "not him: no backpack"}),
        ("/example", {"gallery_index": 0}),
        ("/confirm", {"gallery_index": 0, "acknowledge": True}),
    ):
        if path.endswith(suffix):
            return body
    return bodies.get(path, {})


def png_bytes(size: tuple[int, int] = (32, 64)) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buffer, "PNG")
    return buffer.getvalue()


def uploads_count(ctx: Ctx) -> int:
    folder = ctx.data / "uploads"
    return sum(1 for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0
