"""State probes of ``probe_service.py`` (issue 39): every path a request names against the service's own
database, links and playlists in ``incoming/``, the export record's paths, the caption route's gallery
name, settings out of bounds at start, ``minterpr db`` / ``users`` against bad databases, and backups
(private modes, a destination inside the state, a manifest naming a file outside the backup)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from probe_service_common import Ctx, child_env, got, minterpr, start_session


def _one_line(result: subprocess.CompletedProcess) -> bool:
    """Exit 2 with one line on stderr and no traceback."""
    lines = result.stderr.strip().splitlines()
    return result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr


def _said(result: subprocess.CompletedProcess) -> str:
    return f"exit {result.returncode}: {(result.stderr.strip().splitlines() or [''])[-1][:120]}"


def request_paths(ctx: Ctx) -> None:
    cat = "request paths (one policy)"
    world, incoming = ctx.work / "world", ctx.data / "incoming"
    (incoming / "clean").mkdir(parents=True, exist_ok=True)
    database = ctx.data / "minterpr.db"
    link = incoming / "db-link"
    if not link.is_symlink():
        link.symlink_to(database)
    folder = incoming / "db-links"
    folder.mkdir(exist_ok=True)
    if not (folder / "model.pt").is_symlink():
        (folder / "model.pt").symlink_to(database)
    ingest = {
        "gallery": "probe39",
        "source": str(incoming / "clean"),
        "run": str(world / "run"),
        "detector": "onnx",
        "detector_model": str(incoming / "clean" / "m.onnx"),
    }
    register = {"name": "probe39", "directory": str(incoming / "clean"), "run_dir": str(incoming / "clean")}
    for route, body, fields in (
        ("/api/ingest", ingest, ("source", "run", "detector_model")),
        ("/api/galleries", register, ("directory", "run_dir")),
    ):
        for name in fields:
            for bad in (database, database.with_name("minterpr.db-wal"), link, folder):
                with ctx.http("root") as http:
                    r = http.post(route, json={**body, name: str(bad)})
                field = r.json().get("error", {}).get("field") if r.status_code == 403 else None
                ctx.record(
                    cat,
                    f"{route} {name}={bad.name}",
                    "403 outside_roots naming the field",
                    got(r),
                    got(r) == "403 outside_roots" and field == name,
                )
    added = minterpr(
        "users",
        "add",
        "probe39",
        "--role",
        "viewer",
        "--data",
        str(ctx.data),
        stdin="a long enough probe password 39\n",
    )
    ctx.record(cat, "users add beside the server", "exit 0", _said(added), added.returncode == 0)

    def session(_: int) -> int:
        with ctx.http("carl") as http:
            return http.post("/api/sessions", json={"case_id": ctx.case, "gallery": "test"}).status_code

    with ThreadPoolExecutor(20) as pool:
        codes = list(pool.map(session, range(20)))
    ctx.record(
        cat,
        "20 concurrent sessions after the refusals and the CLI writer",
        "no 500",
        f"{sum(c >= 500 for c in codes)} x 5xx of 20",
        all(c < 500 for c in codes),
    )


def incoming_links(ctx: Ctx) -> None:
    cat = "links and playlists in incoming/"
    world, incoming = ctx.work / "world", ctx.data / "incoming"
    links = incoming / "outside-links"
    links.mkdir(parents=True, exist_ok=True)
    crop = next(p for p in (world / "crops").iterdir() if p.suffix == ".png")
    if not (links / "a.png").is_symlink():
        (links / "a.png").symlink_to(crop)
    playlist = incoming / "cam.m3u8"
    playlist.write_text(f"#EXTM3U\n#EXTINF:10,\n{ctx.work / 'video.avi'}\nhttp://127.0.0.1:9/x.ts\n")
    concat = incoming / "list.txt"
    concat.write_text(f"ffconcat version 1.0\nfile '{ctx.work / 'video.avi'}'\n")
    for source in (links, playlist, concat):
        with ctx.http("root") as http:
            r = http.post("/api/ingest", json={"gallery": "probe39b", "source": str(source), "run": str(world / "run")})
        ctx.record(cat, f"ingest {source.name}", "403", got(r), r.status_code == 403)


def export_paths(ctx: Ctx) -> None:
    cat = "export record paths"
    sid = start_session(ctx, "dan", ctx.case, turns=1)
    with ctx.http("dan") as http:
        top = http.get(f"/api/sessions/{sid}").json()["results"][0]["gallery_index"]
        http.post(f"/api/sessions/{sid}/confirm", json={"gallery_index": top, "acknowledge": True}).raise_for_status()
        r = http.post(f"/api/sessions/{sid}/export")
    world = str((ctx.work / "world").resolve())
    ctx.record(
        cat,
        "JSON export record",
        "200, gallery-relative paths",
        f"{got(r)}, {'absolute' if world in r.text or 'absolute_path' in r.text else 'relative'}",
        r.status_code == 200 and world not in r.text and "absolute_path" not in r.text,
    )


def caption_name(ctx: Ctx) -> None:
    cat = "caption gallery name"
    for name in ("../../etc", ".hidden", "a/b"):
        with ctx.http("root") as http:
            r = http.post("/api/ingest/caption", json={"gallery": name})
        ctx.record(cat, f"caption gallery {name!r}", "422", got(r), r.status_code == 422)


def settings_bounds(ctx: Ctx) -> None:
    cat = "settings at start"
    for variable, value in (
        ("MINTERPR_LOGIN_TTL_HOURS", "nan"),
        ("MINTERPR_LOGIN_TTL_HOURS", "-5"),
        ("MINTERPR_MAX_UPLOAD_BYTES", "-1"),
        ("MINTERPR_MAX_REQUEST_BYTES", "0"),
        ("MINTERPR_MAX_RESULTS", "0"),
        ("MINTERPR_RESULTS_PER_TURN", "0"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "minterpr", "serve", "--no-serve", "--data", str(ctx.work / "bounds")],
            capture_output=True,
            text=True,
            timeout=120,
            env={**child_env(), variable: value},
        )
        ctx.record(
            cat,
            f"{variable}={value}",
            "exit 2, one line naming it",
            _said(result),
            _one_line(result) and variable in result.stderr,
        )


def database_errors(ctx: Ctx) -> None:
    cat = "db and users on bad databases"
    bad = ctx.work / "not-a-db"
    bad.mkdir(exist_ok=True)
    (bad / "minterpr.db").write_text("not a database")
    url = "postgresql+psycopg://minterpr:probe-secret-39@127.0.0.1:9/minterpr"
    for args in (
        ("db", "current", "--data", str(bad)),
        ("users", "list", "--data", str(bad)),
        ("db", "current", "--data", str(ctx.work / "pg"), "--database-url", url),
        ("users", "list", "--data", str(ctx.work / "pg"), "--database-url", url),
    ):
        result = minterpr(*args)
        ctx.record(
            cat,
            " ".join(a if "secret" not in a else "postgresql://...:***@..." for a in args[:3]),
            "exit 2, one line, no password",
            _said(result),
            _one_line(result) and "probe-secret-39" not in result.stderr + result.stdout,
        )
    newer = ctx.work / "newer"
    shutil.rmtree(newer, ignore_errors=True)
    minterpr("db", "upgrade", "--data", str(newer))
    import sqlite3

    with sqlite3.connect(newer / "minterpr.db") as con:
        con.execute("UPDATE alembic_version SET version_num = '0099'")
    result = minterpr("db", "upgrade", "--data", str(newer))
    ctx.record(cat, "db upgrade of a newer schema", "exit 2, one line", _said(result), _one_line(result))


def backups(ctx: Ctx) -> None:
    cat = "backup and restore"
    out = ctx.work / "backup39"
    for folder in (out, ctx.work / "restored39", ctx.work / "restored39-outside"):  # a reused --work folder
        shutil.rmtree(folder, ignore_errors=True)
    made = minterpr("db", "backup", str(out), "--data", str(ctx.data))
    modes = {
        p.name: stat.S_IMODE(p.stat().st_mode) for p in (out, out / "minterpr.db", out / "manifest.json") if p.exists()
    }
    ctx.record(
        cat,
        "backup modes",
        "0700 folder, 0600 database and manifest",
        f"{_said(made)} {modes}",
        made.returncode == 0 and modes == {"backup39": 0o700, "minterpr.db": 0o600, "manifest.json": 0o600},
    )
    inside = ctx.data / "backups" / "b"
    result = minterpr("db", "backup", str(inside), "--data", str(ctx.data))
    ctx.record(
        cat,
        "backup into the state folder",
        "exit 2, one line, nothing written",
        _said(result),
        _one_line(result) and not (ctx.data / "backups").exists(),
    )
    restored = ctx.work / "restored39"
    fine = minterpr("db", "restore", str(out), "--data", str(restored))
    mode = stat.S_IMODE(restored.stat().st_mode) if restored.exists() else None
    ctx.record(
        cat, "restore", "exit 0, 0700", f"{_said(fine)} {oct(mode or 0)}", fine.returncode == 0 and mode == 0o700
    )
    manifest = json.loads((out / "manifest.json").read_text())
    for name in (str(ctx.data / "minterpr.db"), "../state/minterpr.db"):
        (out / "manifest.json").write_text(json.dumps({**manifest, "database": name}))
        target = ctx.work / "restored39-outside"
        result = minterpr("db", "restore", str(out), "--data", str(target))
        ctx.record(
            cat,
            f"manifest database {name!r}",
            "exit 2, one line, nothing written",
            _said(result),
            _one_line(result) and not target.exists(),
        )
    os.chmod(out / "manifest.json", 0o600)


STATE: dict[str, Any] = {
    "request_paths": request_paths,
    "incoming_links": incoming_links,
    "export_paths": export_paths,
    "caption_name": caption_name,
    "settings_bounds": settings_bounds,
    "database_errors": database_errors,
    "backups": backups,
}
