"""A hash-chained, append-only audit log: who did what, in which case, when.

Each entry is ``{"seq", "time", "user", "action", "case", "details", "request", "prev", "hash"}``:
``hash`` is the SHA-256 of the entry's canonical JSON without ``hash`` (``prev`` included), ``prev``
the hash of the entry before (64 zeros for the first). ``request`` is the id of the HTTP request
that wrote the entry (its ``X-Request-ID``, :func:`minterpr.serving.metrics.request_id`; an
ingestion job's entries carry the id of the request that started it), None for what the command
line wrote; it is hashed when it is not None, so entries written before it existed (schema 0002
and older, exports without the field) keep their hashes. Editing an entry changes its hash; removing
or reordering entries breaks a ``prev`` link or the ``seq`` count. The table refuses UPDATE and
DELETE (a database trigger, :mod:`~minterpr.serving.db`); entries are appended inside the
transaction of what they record, under the write lock, so the chain never forks.

:func:`export_lines` writes the log as JSON lines for an auditor; :func:`verify_lines` checks
such a file (``minterpr audit verify FILE``) and, given the live head hash, that nothing was cut
from its end. Anyone can recompute a chain, so an export is only as good as the head hash it is
checked against: ``minterpr audit head`` prints it, keep it somewhere the service cannot write.

Example:
    >>> from minterpr.serving.db import Database
    >>> db = Database("sqlite://")
    >>> with db.write() as tx:
    ...     _ = append(tx, "ana", "login", None, {"via": "password"})
    ...     _ = append(tx, "ana", "case_open", 1, {"purpose": "missing child report 12"}, request="req-7")
    >>> lines = list(export_lines(db))
    >>> verify_lines(lines).ok, json.loads(lines[1])["request"]
    (True, 'req-7')
    >>> tampered = lines[1].replace("12", "13")
    >>> report = verify_lines([lines[0], tampered])
    >>> report.ok, report.problems[0]
    (False, 'line 2 (seq 2): hash does not match the entry (edited)')
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator

from sqlalchemy import select
from sqlalchemy.orm import Session

from minterpr.serving.db import AuditRow
from minterpr.serving.metrics import request_id

GENESIS = "0" * 64  # prev of the first entry
_FIELDS = ("seq", "time", "user", "action", "case", "details", "request", "prev", "hash")
_OPTIONAL = ("request",)  # hashed only when not None; an export made before it existed lacks it


def canonical(value: Any) -> str:
    """The one JSON spelling of ``value`` that is hashed: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def entry_hash(entry: dict[str, Any]) -> str:
    """SHA-256 (hex) of the entry without its ``hash``."""
    body = {key: entry[key] for key in _FIELDS if key != "hash" and not (key in _OPTIONAL and entry.get(key) is None)}
    return hashlib.sha256(canonical(body).encode("utf-8")).hexdigest()


def _row_entry(row: AuditRow) -> dict[str, Any]:
    return {
        "seq": row.seq,
        "time": row.time,
        "user": row.user,
        "action": row.action,
        "case": row.case_id,
        "details": json.loads(row.details),
        "request": row.request_id,
        "prev": row.prev_hash,
        "hash": row.hash,
    }


def head(tx: Session) -> tuple[int, str]:
    """(seq, hash) of the last entry; (0, GENESIS) for an empty log."""
    row = tx.execute(select(AuditRow.seq, AuditRow.hash).order_by(AuditRow.seq.desc()).limit(1)).first()
    return (int(row[0]), str(row[1])) if row else (0, GENESIS)


def append(
    tx: Session,
    user: str | None,
    action: str,
    case_id: int | None,
    details: dict[str, Any],
    *,
    request: str | None = None,
) -> dict[str, Any]:
    """Append one entry in ``tx`` (a :meth:`Database.write` transaction); returns it. ``request``:
    the request id to record, by default that of the request being served (None outside one)."""
    seq, prev = head(tx)
    request = request or request_id()
    entry = {
        "seq": seq + 1,
        "time": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
        "user": user,
        "action": action,
        "case": case_id,
        "details": json.loads(canonical(details)),
        "request": request,
        "prev": prev,
    }
    entry["hash"] = entry_hash(entry)
    tx.add(
        AuditRow(
            seq=entry["seq"],
            time=entry["time"],
            user=user,
            action=action,
            case_id=case_id,
            details=canonical(entry["details"]),
            request_id=request,
            prev_hash=prev,
            hash=entry["hash"],
        )
    )
    tx.flush()
    return entry


def entries(
    db: Any, *, after: int = 0, limit: int | None = None, case_id: int | None = None, upto: int | None = None
) -> list[dict[str, Any]]:
    """Entries with ``after`` < seq (<= ``upto``) in order (of one case, if given)."""
    with db.transaction() as tx:
        query = select(AuditRow).where(AuditRow.seq > after).order_by(AuditRow.seq)
        if upto is not None:
            query = query.where(AuditRow.seq <= upto)
        if case_id is not None:
            query = query.where(AuditRow.case_id == case_id)
        if limit is not None:
            query = query.limit(limit)
        return [_row_entry(row) for row in tx.scalars(query)]


def export_lines(db: Any, batch: int = 1000, *, upto: int | None = None) -> Iterator[str]:
    """The log (up to seq ``upto``) as JSON lines (one entry each, newline-terminated), read in batches."""
    after = 0
    while True:
        chunk = entries(db, after=after, limit=batch, upto=upto)
        if not chunk:
            return
        for entry in chunk:  # U+2028/2029 escaped: the same JSON (and hash), but safe as a JavaScript line
            yield canonical(entry).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029") + "\n"
        after = chunk[-1]["seq"]


@dataclass
class VerifyReport:
    """What :func:`verify_lines` found."""

    entries: int = 0  # entries read
    head: str = GENESIS  # hash of the last entry read
    problems: list[str] = field(default_factory=list)  # one sentence each, first found first

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_lines(
    lines: Iterable[str | bytes], *, expected_head: str | None = None, max_problems: int = 20
) -> VerifyReport:
    """Check an exported log: every line one entry, hashes recomputed, ``prev`` links and ``seq``
    consecutive from 1; with ``expected_head``, the last hash must be it (nothing cut off the end)."""
    report = VerifyReport()
    prev, expected_seq = GENESIS, 1
    for number, raw in enumerate(lines, 1):
        if len(report.problems) >= max_problems:
            report.problems.append("(stopped after too many problems)")
            return report
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        if not text.strip():
            continue
        try:
            entry = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            report.problems.append(f"line {number}: not a JSON entry")
            continue
        if not isinstance(entry, dict) or not set(_FIELDS) - set(_OPTIONAL) <= set(entry) <= set(_FIELDS):
            report.problems.append(f"line {number}: not an audit entry (expected the fields {', '.join(_FIELDS)})")
            continue
        report.entries += 1
        where = f"line {number} (seq {entry['seq']})"
        if entry["seq"] != expected_seq:
            report.problems.append(f"{where}: expected seq {expected_seq} (entries removed or reordered)")
        try:
            recomputed = entry_hash(entry)
        except (TypeError, ValueError):
            recomputed = None
        if recomputed != entry["hash"]:
            report.problems.append(f"{where}: hash does not match the entry (edited)")
        elif entry["prev"] != prev:
            report.problems.append(
                f"{where}: prev does not match the hash of the entry before (an entry "
                "before it was removed, edited or reordered)"
            )
        prev = entry["hash"] if isinstance(entry["hash"], str) else GENESIS
        expected_seq = (entry["seq"] + 1) if isinstance(entry["seq"], int) else expected_seq + 1
        report.head = prev
    if expected_head is not None and report.head != expected_head:
        report.problems.append(
            f"the last entry's hash {report.head[:16]}... is not the expected head "
            f"{expected_head[:16]}... (entries missing at the end, or another log)"
        )
    return report


def verify_database(db: Any) -> VerifyReport:
    """:func:`verify_lines` over the live table (what ``GET /api/audit/verify`` answers)."""
    return verify_lines(export_lines(db))
