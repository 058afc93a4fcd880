"""Load probes of ``probe_service.py``: kill -9 in the middle of turns, 20 concurrent sessions with
a CLI writer beside the server, and the rate limits against X-Forwarded-For and spraying."""

from __future__ import annotations

import secrets
import sqlite3
import threading
import time
from typing import Any

from probe_service_common import (
    DEFAULT_LOGIN_LIMITS,
    PASSWORD,
    Ctx,
    got,
    minterpr,
    open_case,
    png_bytes,
    start_session,
    uploads_count,
)

TEXTS = (
    "a man in a red jacket",
    "blue jeans",
    "a black backpack",
    "short hair",
    "white shoes",
    "a cap",
    "a grey coat",
    "glasses",
)


def kill9(ctx: Ctx) -> None:
    """Six sessions make turns; the server is SIGKILLed once ten are acknowledged, then started again.
    Every acknowledged turn must be stored, at most the one in flight more, and the sessions go on."""
    import httpx

    cat = "kill -9 mid-turn"
    case = open_case(ctx, "ana")
    sids = [start_session(ctx, "ana", case, turns=0) for _ in range(6)]
    acked = {sid: 0 for sid in sids}
    inflight = {sid: 0 for sid in sids}
    killed = threading.Event()

    def drive(sid: str) -> None:
        with httpx.Client(base_url=ctx.url, headers={"X-API-Key": ctx.keys["ana"]}, timeout=60) as http:
            for text in TEXTS:
                if killed.is_set():
                    return
                inflight[sid] = 1
                try:
                    r = http.post(f"/api/sessions/{sid}/describe", json={"text": text})
                except httpx.TransportError:
                    return
                if r.status_code == 200:
                    acked[sid] += 1
                inflight[sid] = 0

    threads = [threading.Thread(target=drive, args=(sid,)) for sid in sids]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while sum(acked.values()) < 10 and time.monotonic() < deadline:
        time.sleep(0.005)
    ctx.server.process.kill()  # SIGKILL
    killed.set()
    ctx.server.process.wait()
    for t in threads:
        t.join()
    ctx.server.start()
    with ctx.http("ana") as http:
        for sid in sids:
            seq = http.get(f"/api/sessions/{sid}").json().get("seq")
            ok = seq is not None and acked[sid] <= seq <= acked[sid] + inflight[sid]
            ctx.record(
                cat,
                f"session {sid[:8]}: stored turns",
                f"{acked[sid]} acknowledged (+{inflight[sid]} in flight)",
                str(seq),
                ok,
            )
            r = http.post(f"/api/sessions/{sid}/describe", json={"text": "a scarf"})
            ctx.record(cat, f"session {sid[:8]} goes on after the restart", "200", got(r), r.status_code == 200)
    con = sqlite3.connect(ctx.data / "minterpr.db", timeout=30)
    check = con.execute("PRAGMA integrity_check").fetchone()[0]
    con.close()
    ctx.record(cat, "the database after the kill", "integrity_check ok", check, check == "ok")
    with ctx.http("aud") as http:
        report = http.get("/api/audit/verify").json()
    ctx.record(cat, "the audit chain after the kill", "ok", str(report.get("ok")), report.get("ok") is True)


def concurrency(ctx: Ctx, sessions: int = 20, turns: int = 3) -> None:
    """``sessions`` sessions at once (ana's and bob's keys), ``turns`` turns each, while the CLI adds a
    user to the same database: no error, every session holds exactly its turns."""
    import httpx

    cat = f"{sessions} concurrent sessions"
    errors: list[str] = []
    done: dict[str, int] = {}
    barrier = threading.Barrier(sessions + 1)

    def drive(k: int) -> None:
        who = "ana" if k % 2 else "bob"
        with httpx.Client(base_url=ctx.url, headers={"X-API-Key": ctx.keys[who]}, timeout=120) as http:
            barrier.wait()
            r = http.post("/api/sessions", json={"case_id": ctx.case, "gallery": "test"})
            if r.status_code != 201:
                errors.append(f"start: {got(r)}")
                return
            sid = r.json()["session_id"]
            for text in TEXTS[:turns]:
                r = http.post(f"/api/sessions/{sid}/describe", json={"text": text})
                if r.status_code != 200:
                    errors.append(f"describe: {got(r)}")
            done[sid] = http.get(f"/api/sessions/{sid}").json()["seq"]

    threads = [threading.Thread(target=drive, args=(k,)) for k in range(sessions)]
    for t in threads:
        t.start()
    barrier.wait()
    name = "cli" + secrets.token_hex(3)
    cli = minterpr("users", "add", name, "--role", "viewer", "--data", str(ctx.data), stdin=PASSWORD + "\n")
    for t in threads:
        t.join()
    ctx.record(cat, "no request failed", "0 errors", f"{len(errors)} errors {errors[:3]}", not errors)
    ctx.record(
        cat,
        "every session holds its turns",
        f"{sessions} sessions x {turns}",
        f"{sum(v == turns for v in done.values())} of {sessions}",
        len(done) == sessions and all(v == turns for v in done.values()),
    )
    ctx.record(
        cat,
        "`minterpr users add` beside the server",
        "exit 0",
        f"exit {cli.returncode} {cli.stderr[-200:]}",
        cli.returncode == 0,
    )


def _audit_count(ctx: Ctx, action: str) -> int:
    count, after = 0, 0
    with ctx.http("aud") as http:
        while True:
            entries = http.get("/api/audit/entries", params={"after": after, "limit": 1000}).json()
            if not entries:
                return count
            count += sum(e["action"] == action for e in entries)
            after = entries[-1]["seq"]


def rate_limits(ctx: Ctx) -> None:
    """After the restart (fresh buckets): forwarded headers do not buy more login attempts, neither
    for one account nor sprayed over many names; refused attempts are not audited; uploads are limited."""
    import httpx

    cat = "rate limits (X-Forwarded-For, spraying, uploads)"
    ctx.server.kill()  # the server again, with the default login limits (10 at once then 1 per 2 s per client)
    ctx.server.config = ctx.work / "probe_default_logins.toml"
    ctx.server.config.write_text(DEFAULT_LOGIN_LIMITS + "\n")
    ctx.server.start()
    before = _audit_count(ctx, "login_failed")
    answered = 0

    def attempts(username: Any, n: int, header: str) -> list[int]:
        nonlocal answered
        statuses = []
        for k in range(n):
            ip = f"203.0.113.{k + 1}"
            value = f"for={ip}" if header == "Forwarded" else ip
            r = httpx.post(
                ctx.url + "/api/auth/login",
                headers={header: value},
                json={"username": username(k), "password": "wrong password " + str(k)},
            )
            statuses.append(r.status_code)
            answered += r.status_code == 401
        return statuses

    # what the buckets allow: the burst, plus what refills while the (slow, Argon2id) attempts run, plus one
    started = time.monotonic()
    one = attempts(lambda k: "vic", 8, "X-Forwarded-For")
    spent = time.monotonic() - started
    allowed = 5 + int(0.2 * spent) + 1
    ctx.record(
        cat,
        "8 wrong passwords for one account, each from a new X-Forwarded-For",
        f"at most {allowed} answered (5 at once, 1 per 5 s), then 429",
        str(one),
        429 in one and one.count(401) <= allowed,
    )
    spray = attempts(lambda k: f"nobody{k}", 45, "X-Forwarded-For")
    spent = time.monotonic() - started
    allowed = 10 + int(0.5 * spent) + 1
    answered_all = one.count(401) + spray.count(401)
    ctx.record(
        cat,
        "45 unknown usernames, each from a new X-Forwarded-For",
        f"at most {allowed} answered from this client in {spent:.0f} s (10 at once, 1 per 2 s)",
        f"{answered_all} answered, first 429 at {spray.index(429) + 1 if 429 in spray else None}",
        429 in spray and answered_all <= allowed,
    )
    for header in ("X-Forwarded-For", "Forwarded", "X-Real-IP", "X-Client-IP", "True-Client-IP"):
        statuses = []
        for k in range(3):  # back to back: the bucket refills one attempt per 2 s, a bypass would answer 401 each time
            address = f"198.51.100.{k + 70}"
            r = httpx.post(
                ctx.url + "/api/auth/login",
                headers={header: f"for={address}" if header == "Forwarded" else address},
                json={"username": f"nobody-else{k}", "password": "wrong password"},
            )
            answered += r.status_code == 401
            statuses.append(r.status_code)
        ctx.record(
            cat,
            f"{header} from fresh addresses after the limit",
            "429 (at most one refilled attempt)",
            str(statuses),
            statuses.count(429) >= 2,
        )
    after = _audit_count(ctx, "login_failed")
    ctx.record(
        cat,
        "refused (429) attempts write no audit row",
        f"{answered} login_failed entries",
        str(after - before),
        after - before == answered,
    )
    sid = start_session(ctx, "carl", ctx.case, turns=0)
    before_files = uploads_count(ctx)
    statuses = []
    with ctx.http("carl") as http:
        for _ in range(25):
            r = http.post(f"/api/sessions/{sid}/example/upload", files={"file": ("p.png", png_bytes(), "image/png")})
            statuses.append(r.status_code)
    stored = uploads_count(ctx) - before_files
    ctx.record(
        cat, "25 uploads at once", "429 after the 12 allowed at once", f"{statuses.count(429)} x 429", 429 in statuses
    )
    ctx.record(
        cat,
        "refused uploads are not stored",
        f"{statuses.count(200)} stored",
        str(stored),
        stored <= statuses.count(200),
    )


LOAD = {"kill9": kill9, "concurrency": concurrency, "rate_limits": rate_limits}
