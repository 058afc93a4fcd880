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
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from probe_service_common import Ctx, Result, prepare  # noqa: F401  (Result: the tests build rows)


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
                ctx.record(
                    name, "the probe family ran to its end", "no exception", f"{type(err).__name__}: {err}", False
                )
            print(f"[probe] {name}: {len(ctx.results) - before} probes, {time.monotonic() - t:.1f} s", file=sys.stderr)
    finally:
        ctx.server.kill()
    print(tables(ctx.results))
    print(f"\n{len(ctx.results)} probes in {time.monotonic() - started:.0f} s; work folder {work}")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in ctx.results], indent=1) + "\n")
    return 1 if any(not r.held for r in ctx.results) else 0


if __name__ == "__main__":
    sys.exit(main())
