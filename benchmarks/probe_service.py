"""Security probes against a real ``minterpr serve``: an attacker's and a careless user's requests.

A real server (``python -m minterpr serve``: uvicorn on loopback) runs over a temporary state
folder holding the tests' tiny world (``tests/support/serving.py``: a freshly initialised tiny
model and a 24-image gallery on three cameras; no ``../shared`` data), one user per role and a
few more, cases and sessions. The probes (``probe_service_cases.py``) then try, each with its
expected outcome: no credentials, forged / expired / revoked tokens and API keys, CSRF variants on
every state-changing route (the routes are read from the app: its OpenAPI operations and its page
routes, with the permission each API route requires), role escalation, other users' sessions and
cases, widening a case's scope, injection strings in every text field, path traversal, oversized
and malformed bodies, huge PNG headers, login CSRF, the Content-Security-Policy of pages, the
database's file modes, audit tampering (``minterpr audit verify``), X-Forwarded-For against the
rate limits, a kill -9 in the middle of turns and 20 concurrent sessions; and (``probe_service_state.py``)
every request path against the database, links and playlists in ``incoming/``, the export record's
paths, settings out of bounds, ``db``/``users`` on bad databases, backup modes and restore manifests.

Printed: one Markdown table per category (tried / held / failed) and every failure. Exit 1 when
any probe failed.

Usage:
    taskset -c 0 python benchmarks/probe_service.py                    # all probes (~3 min)
    python benchmarks/probe_service.py --only csrf,login_csrf --json probes.json
    python benchmarks/probe_service.py --work DIR                      # keep the world and state in DIR
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))  # support.serving: the tests' tiny world

PASSWORD = "correct horse battery staple"
USERS = {"root": "admin", "ana": "analyst", "bob": "analyst", "vic": "viewer", "aud": "auditor",
         "carl": "analyst", "dan": "analyst"}
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
        return httpx.Client(base_url=self.url, headers=headers, cookies=cookies, timeout=60, follow_redirects=False,
                            **kw)

    def record(self, category: str, name: str, expected: str, got: str, held: bool) -> None:
        self.results.append(Result(category, name, expected, got, bool(held)))


def fill(path: str, ctx: Ctx, *, sid: str | None = None) -> str:
    """A route template with real ids: ana's case and session, gallery index 0, the move describe."""
    values = {"case_id": str(ctx.case), "session_id": sid or ctx.sid, "sid": sid or ctx.sid, "gallery_index": "0",
              "key_id": str(ctx.key_ids.get("ana", 1)), "job_id": "0" * 32, "move": "describe"}
    for name, value in values.items():
        path = path.replace("{" + name + "}", value)
    return path


# ----------------------------------------------------------------------------- the server
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env() -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TQDM_DISABLE="1",
                PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))


def minterpr(*args: str, stdin: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minterpr", *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=child_env())


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
                [sys.executable, "-m", "minterpr", "serve", "--data", str(self.data), "--config", str(self.config),
                 "--port", str(self.port), "--log-level", "warning", "--quiet"],
                stdout=log, stderr=subprocess.STDOUT, env=child_env())
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
            operations.append({"method": method.upper(), "path": path,
                               "permission": permission(route.dependant) if route else None})
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
    body = {"title": "probe case", "purpose": "report 2026-17: missing person, authorised by the duty officer",
            "cameras": None, "start": None, "end": None, **scope}
    with ctx.http(who) as http:
        made = http.post("/api/cases", json=body)
        made.raise_for_status()
        return int(made.json()["id"])


def make_cases(ctx: Ctx) -> None:
    ctx.case = open_case(ctx, "ana")
    ctx.sid = start_session(ctx, "ana", ctx.case)
    ctx.bob_sid = start_session(ctx, "bob", ctx.case)
    ctx.narrow_case = open_case(ctx, "ana", cameras=["cam:north"], start="2026-03-02T08:00:00Z",
                                end="2026-03-02T09:00:00Z")
    ctx.narrow_sid = start_session(ctx, "ana", ctx.narrow_case, turns=1)
    ctx.closed_case = open_case(ctx, "ana")
    ctx.closed_sid = start_session(ctx, "ana", ctx.closed_case, turns=1)
    with ctx.http("ana") as http:
        http.post(f"/api/cases/{ctx.closed_case}/close").raise_for_status()


# ----------------------------------------------------------------------------- report
def tables(results: list[Result]) -> str:
    order: list[str] = []
    for r in results:
        if r.category not in order:
            order.append(r.category)
    lines = ["| category | tried | held | failed |", "|---|---|---|---|"]
    for category in order:
        rows = [r for r in results if r.category == category]
        held = sum(r.held for r in rows)
        lines.append(f"| {category} | {len(rows)} | {held} | {len(rows) - held} |")
    held = sum(r.held for r in results)
    lines.append(f"| **all** | **{len(results)}** | **{held}** | **{len(results) - held}** |")
    failures = [r for r in results if not r.held]
    if failures:
        lines += ["", "Failures:", ""]
        lines += [f"- `{r.category}` {r.name}: expected {r.expected}, got {r.got}" for r in failures]
    return "\n".join(lines)


def categories() -> dict[str, Callable[[Ctx], None]]:
    """Every probe family, in the order they run (the kill and the rate limits last: a restart resets the buckets)."""
    from probe_service_access import ACCESS
    from probe_service_injection import injection
    from probe_service_load import LOAD
    from probe_service_robust import ROBUST
    from probe_service_state import STATE

    return {**ACCESS, "injection": injection, **ROBUST, **STATE, **LOAD}


def main(argv: list[str] | None = None) -> int:
    CATEGORIES = categories()  # noqa: N806

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", help="folder for the world, the state and the server log (default: a temporary one)")
    parser.add_argument("--only", help="comma-separated categories: " + ",".join(CATEGORIES))
    parser.add_argument("--json", metavar="OUT", help="write every probe's result as JSON")
    args = parser.parse_args(argv)
    chosen = list(CATEGORIES) if not args.only else args.only.split(",")
    unknown = [c for c in chosen if c not in CATEGORIES]
    if unknown:
        parser.error(f"unknown categories {unknown}; known: {', '.join(CATEGORIES)}")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="probe_service_"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    ctx = prepare(work)
    try:
        for name in chosen:
            t, before = time.monotonic(), len(ctx.results)
            try:
                CATEGORIES[name](ctx)
            except Exception as err:  # noqa: BLE001 - a probe family that crashed is a failure, reported
                ctx.record(name, "the probe family ran to its end", "no exception", f"{type(err).__name__}: {err}",
                           False)
            print(f"[probe] {name}: {len(ctx.results) - before} probes, "
                  f"{time.monotonic() - t:.1f} s", file=sys.stderr)
    finally:
        ctx.server.kill()
    print(tables(ctx.results))
    print(f"\n{len(ctx.results)} probes in {time.monotonic() - started:.0f} s; work folder {work}")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in ctx.results], indent=1) + "\n")
    return 1 if any(not r.held for r in ctx.results) else 0


if __name__ == "__main__":
    sys.exit(main())
