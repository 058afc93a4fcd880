"""The audit-tampering probe of ``probe_service.py``: an exported audit log edited (re-hashed or not) and
entries swapped in the database behind the service's back; the verification must find each."""

from __future__ import annotations

import json
import shutil
import sqlite3
from typing import Any

from probe_service_common import Ctx, minterpr


# ----------------------------------------------------------------------------- audit tampering
# the contents (all but seq) of the first login entry and the first key_create entry exchanged
_FIRST = "(SELECT min(seq) FROM audit_log WHERE action = '{}')"
_COLUMNS = ("time", "user", "action", "case_id", "details", "request_id", "prev_hash", "hash")
SWAP = (
    "CREATE TEMP TABLE a AS SELECT * FROM audit_log WHERE seq = {l}; "
    "CREATE TEMP TABLE b AS SELECT * FROM audit_log WHERE seq = {k}; "
    + "".join(
        f"UPDATE audit_log SET {c} = (SELECT {c} FROM b) WHERE seq = {{l}}; "
        f"UPDATE audit_log SET {c} = (SELECT {c} FROM a) WHERE seq = {{k}}; "
        for c in _COLUMNS
    )
).format(l=_FIRST.format("login"), k=_FIRST.format("key_create"))


def audit_tamper(ctx: Ctx) -> None:
    from minterpr.serving.audit import entry_hash

    cat = "audit tampering"
    out = ctx.work / "audit"
    out.mkdir(exist_ok=True)
    export = minterpr("audit", "export", "--data", str(ctx.data), "--out", str(out / "log.jsonl"))
    head = minterpr("audit", "head", "--data", str(ctx.data)).stdout.split()
    head_hash = next((w for w in head if len(w) == 64), "")
    lines = (out / "log.jsonl").read_text().splitlines()
    ctx.record(
        cat,
        "export and head",
        "exit 0, a head hash",
        f"exit {export.returncode}, {len(lines)} lines",
        export.returncode == 0 and bool(head_hash) and len(lines) > 10,
    )
    entries = [json.loads(line) for line in lines]
    mid = len(entries) // 2

    def edited(k: int, rehash: bool = False, chain: bool = False) -> list[dict[str, Any]]:
        copy = [dict(e) for e in entries]
        copy[k]["details"] = {**copy[k]["details"], "text": "edited"} if isinstance(copy[k]["details"], dict) else "x"
        if rehash or chain:
            for j in range(k, len(copy) if chain else k + 1):
                if j > k:
                    copy[j]["prev"] = copy[j - 1]["hash"]
                copy[j]["hash"] = entry_hash({x: v for x, v in copy[j].items() if x != "hash"})
        return copy

    variants = {
        "untouched": (entries, 0, False),
        "untouched, with --head": (entries, 0, True),
        "a field edited": (edited(mid), 1, False),
        "an entry deleted": (entries[:mid] + entries[mid + 1 :], 1, False),
        "two entries swapped": (entries[:mid] + [entries[mid + 1], entries[mid]] + entries[mid + 2 :], 1, False),
        "an entry duplicated": (entries[:mid] + [entries[mid]] + entries[mid:], 1, False),
        "the first entry deleted": (entries[1:], 1, False),
        "the last entry cut, with --head": (entries[:-1], 1, True),
        "an edit with its hash recomputed": (edited(mid, rehash=True), 1, False),
        "an edit with the chain recomputed, with --head": (edited(mid, chain=True), 1, True),
    }
    for name, (rows, code, with_head) in variants.items():
        path = out / f"{name.replace(' ', '_').replace(',', '')}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        result = minterpr("audit", "verify", str(path), *(["--head", head_hash] if with_head else []))
        ctx.record(cat, name, f"exit {code}", f"exit {result.returncode}", result.returncode == code)
    # rows changed in a copy of the database itself, then exported and verified
    for name, sql in (
        ("a row's details updated in the database", "UPDATE audit_log SET details = '{}' WHERE seq = 3"),
        ("a row deleted from the database", "DELETE FROM audit_log WHERE seq = 4"),
        ("two rows' contents swapped in the database", SWAP),
    ):
        copy = out / name.replace(" ", "_").replace("'", "")
        shutil.rmtree(copy, ignore_errors=True)
        backup = minterpr("db", "backup", str(copy / "backup"), "--data", str(ctx.data))
        con = sqlite3.connect(copy / "backup" / "minterpr.db")
        try:  # the table's triggers refuse it: someone with the file drops them first
            con.execute(sql)
            refused = False
        except sqlite3.DatabaseError:
            refused = True
        con.executescript("DROP TRIGGER IF EXISTS audit_no_update; DROP TRIGGER IF EXISTS audit_no_delete; " + sql)
        con.commit()
        con.close()
        ctx.record(cat, f"{name}: refused by the table's trigger", "refused", str(refused), refused)
        exported = minterpr("audit", "export", "--data", str(copy / "backup"), "--out", str(copy / "log.jsonl"))
        result = minterpr("audit", "verify", str(copy / "log.jsonl"))
        ctx.record(
            cat,
            name,
            "exit 1",
            f"backup {backup.returncode}, export {exported.returncode}, verify {result.returncode}",
            backup.returncode == 0 and result.returncode == 1,
        )
    with ctx.http("aud") as http:
        report = http.get("/api/audit/verify").json()
    ctx.record(cat, "the live log verifies", "ok", str(report.get("ok")), report.get("ok") is True)
    raw_text = (out / "log.jsonl").read_text(encoding="utf-8")
    ctx.record(
        cat,
        "exported lines hold no raw U+2028/U+2029",
        "none",
        str(raw_text.count("\u2028")),
        "\u2028" not in raw_text and "\u2029" not in raw_text,
    )
