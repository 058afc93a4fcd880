"""Probe minterpr with bad inputs, as a new user would, and count what goes wrong (issue 11).

About 380 cases (``probe_cases.py`` lists each: what is tried, how, what is right) in nine
families: broken dataset files, broken run directories (incl. a pickle payload in last.pt for
``train --resume``), odd images, odd text, chat on stdin, odd indices, odd galleries, threads
sharing a backend, killed / truncated dataset builds. Every outcome is one of:

* clear error     the documented refusal: exit code 2 (1 or 2 for ``data validate``) with a
                  short message and no traceback; API: a ``MinterprError`` with a message
* handled ok      the expected success (or a bad record reported and skipped)
* traceback       CLI: a Python traceback or a crash; API: an undocumented exception type
                  (KeyError, TypeError, RecursionError, torch errors, ...)
* silently wrong  no error, but a wrong result: a refusal was expected, a failed turn changed
                  the session, a payload ran, a rerun repaired nothing, an image embeds wrong
* refused ok      a documented error for an input that is valid
* hang            no answer within the case's timeout
* probe failed    the probe itself could not run (a fixture or public name is missing)

The issue's target is 0 traceback and 0 silently wrong. CLI cases run ``python -m minterpr``
in subprocesses; API cases of one family share one worker process (``--worker``). Fixtures (a
tiny synthetic dataset, a tiny trained run, the bad files) are built first, under ``--fixtures
DIR`` when given (kept and reused by the next run: delete it after a change to the dataset or
model format) or a temporary folder. Exit code is 0.

Usage:
    .venv/bin/python benchmarks/probe_bad_inputs.py [--only FAMILY[,FAMILY]] [--json OUT]
        [--fixtures DIR] [--jobs N] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from probe_cases import CASES, FAMILIES, Case  # noqa: E402
from probe_checks import CHECKS  # noqa: E402
from probe_fixtures import PYTHON, build_all, child_env  # noqa: E402

OUTCOMES = ("clear error", "handled ok", "traceback", "silently wrong", "refused ok", "hang", "probe failed")
API_OUTCOME = {
    "clear": "clear error",
    "ok": "handled ok",
    "unclear": "traceback",
    "silent": "silently wrong",
    "refused": "refused ok",
    "probe failed": "probe failed",
}
MAX_MESSAGE_LINES = 6  # a clear CLI error is a line or two; more is noise a user must dig through


# ----------------------------------------------------------------------------- CLI cases
def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


def _traceback_line(text: str) -> str:
    """The exception line of the last traceback in ``text``."""
    tail = text[text.rfind("Traceback (most recent call last)") :].strip().splitlines()
    for line in reversed(tail):
        if line and not line.startswith(" ") and not line.startswith("Traceback"):
            return line[:300]
    return tail[-1][:300] if tail else ""


def classify_cli(case: Case, F: Path, rc: int | None, out: str, err: str, seconds: float) -> tuple[str, str]:
    if rc is None:
        return "hang", f"no exit within {case.timeout:.0f}s"
    if "Traceback (most recent call last)" in err + out:
        return "traceback", _traceback_line(err if "Traceback (most" in err else out)
    if rc < 0:
        return "traceback", f"killed by signal {-rc}"
    check = CHECKS[case.check](F, out) if case.check else None
    if check and check[0] == "probe failed":
        return check
    message = _first_line(err) or _first_line(out)
    if case.expect in ("chat", "either_chat"):
        return _classify_chat(case, rc, out, err, check)
    if check:
        return check
    if rc == 0:
        if case.expect in ("ok", "either"):
            return "handled ok", ""
        if case.expect == "report" and any(
            w in (out + err).lower() for w in ("skipped", "bad record", "error", "warning")
        ):
            return "handled ok", "reported: " + _first_line(err)
        return "silently wrong", "exit 0; a refusal was expected" + (f" (printed: {message})" if message else "")
    codes = case.codes if case.expect != "ok" else ()
    if rc in codes or (case.expect == "either" and rc in case.codes):
        if not message:
            return "traceback", f"exit {rc} without a message"
        if len(err.strip().splitlines()) > MAX_MESSAGE_LINES and rc == 2:
            return "traceback", f"exit {rc} with {len(err.strip().splitlines())} lines on stderr: {message}"
        if case.mentions and not re.search(case.mentions, err + out):
            return "traceback", f"exit {rc}, but the message does not say what is wrong: {message}"
        return "clear error", message
    if case.expect == "ok" and rc == 2 and message:
        return "refused ok", message
    return "traceback", f"exit {rc}: {message}"


def _classify_chat(case: Case, rc: int, out: str, err: str, check) -> tuple[str, str]:
    from probe_api import chat_verdict

    if rc != 0:
        return "traceback", f"chat ended with exit {rc}: {_first_line(err)}"
    outcome, detail = chat_verdict(case.expect, out)
    return API_OUTCOME[outcome], detail


def run_cli(case: Case, F: Path) -> dict:
    argv = [a.replace("{F}", str(F)) for a in case.cli or ()]
    start = time.perf_counter()
    proc = subprocess.Popen(
        [PYTHON, "-m", "minterpr", *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
        cwd=str(F),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(case.stdin or b"", timeout=case.timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc = None
    seconds = time.perf_counter() - start
    out_s, err_s = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    outcome, detail = classify_cli(case, F, rc, out_s, err_s, seconds)
    return {"exit": rc, "outcome": outcome, "detail": detail, "seconds": round(seconds, 2)}


# ----------------------------------------------------------------------------- API cases (worker)
class ProbeTimeout(Exception):
    pass


def worker(family: str, F: Path) -> int:
    """Run the API cases of one family in this process; one JSON line per case on stdout."""
    import probe_api
    import probe_api_threads  # noqa: F401  (registers the thread probes in probe_api.PROBES)

    ctx = probe_api.Ctx(F)
    for case in (c for c in CASES if c.family == family and c.api):

        def on_alarm(signum, frame):
            raise ProbeTimeout()

        signal.signal(signal.SIGALRM, on_alarm)
        signal.alarm(int(case.timeout))
        start = time.perf_counter()
        try:
            outcome, detail = probe_api.run_case(ctx, case.api, case.arg)
            outcome = API_OUTCOME[outcome]
        except ProbeTimeout:
            outcome, detail = "hang", f"no return within {case.timeout:.0f}s"
        finally:
            signal.alarm(0)
        print(
            json.dumps(
                {
                    "name": case.name,
                    "outcome": outcome,
                    "detail": detail,
                    "seconds": round(time.perf_counter() - start, 2),
                }
            ),
            flush=True,
        )
    return 0


def run_worker(family: str, F: Path, cases: list[Case]) -> dict[str, dict]:
    """The family's worker process; cases it never answered are a hang (timeout) or a crash."""
    budget = sum(c.timeout for c in cases) + 120
    proc = subprocess.Popen(
        [PYTHON, str(Path(__file__).resolve()), "--worker", family, "--fixtures", str(F)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=budget)
        died = proc.returncode != 0
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        died = True
    results = {}
    for line in out.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            results[row.pop("name")] = row
    for case in cases:
        if case.name not in results:
            reason = _traceback_line(err) if "Traceback" in err else (f"worker exit {proc.returncode}" if died else "?")
            results[case.name] = {
                "outcome": "traceback" if proc.returncode not in (None, 0) else "hang",
                "detail": f"the worker died: {reason}",
                "seconds": 0.0,
            }
    return results


# ----------------------------------------------------------------------------- report
def table(rows: list[dict], families: list[str]) -> str:
    heads = (
        "family",
        "cases",
        "clear error",
        "handled ok",
        "traceback/unclear",
        "silently wrong",
        "refused ok",
        "hang",
        "probe failed",
    )
    lines = [f"{heads[0]:10}" + "".join(f"{h:>18}" for h in heads[1:])]
    for fam in [*families, "total"]:
        sel = [r for r in rows if fam == "total" or r["family"] == fam]
        if not sel:
            continue
        counts = [sum(r["outcome"] == o for r in sel) for o in OUTCOMES]
        lines.append(f"{fam:10}{len(sel):>18}" + "".join(f"{n:>18}" for n in counts))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", metavar="FAMILY", help=f"comma-separated families: {', '.join(FAMILIES)}")
    parser.add_argument("--json", metavar="OUT", help="write every case and its outcome as JSON")
    parser.add_argument("--fixtures", metavar="DIR", help="build fixtures here and keep them (reused when present)")
    parser.add_argument("--jobs", type=int, default=max(2, os.cpu_count() or 2), help="processes at a time")
    parser.add_argument("--verbose", action="store_true", help="print every case as it finishes")
    parser.add_argument("--worker", metavar="FAMILY", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, Path(args.fixtures))
    families = list(FAMILIES) if not args.only else [f.strip() for f in args.only.split(",")]
    unknown = set(families) - set(FAMILIES)
    if unknown:
        parser.error(f"unknown family {', '.join(sorted(unknown))} (choose from {', '.join(FAMILIES)})")
    tmp = None if args.fixtures else tempfile.TemporaryDirectory(prefix="minterpr-probe-")
    F = Path(args.fixtures or tmp.name).resolve()
    t0 = time.perf_counter()
    notes: list[str] = []
    print(f"building fixtures in {F} ...", flush=True)
    try:
        build_all(F, notes)
    except Exception as exc:  # noqa: BLE001 - a benchmark reports, it does not crash
        print(f"fixtures could not be built: {exc}", file=sys.stderr)
        return 0
    for note in notes:
        print(f"  {note}")
    print(f"fixtures ready in {time.perf_counter() - t0:.0f}s", flush=True)
    t1 = time.perf_counter()
    cases = [c for c in CASES if c.family in families]
    results: dict[str, dict] = {}
    lock = threading.Lock()

    def record(name: str, row: dict) -> None:
        with lock:
            results[name] = row
            if args.verbose:
                print(f"  {row['outcome']:15} {name}  {row['detail'][:120]}", flush=True)

    def api_family(fam: str) -> None:
        fam_cases = [c for c in cases if c.family == fam and c.api]
        for name, row in run_worker(fam, F, fam_cases).items():
            record(name, row)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(api_family, fam) for fam in families if any(c.family == fam and c.api for c in cases)]
        futures += [pool.submit(lambda c=c: record(c.name, run_cli(c, F))) for c in cases if c.cli is not None]
        for future in futures:
            future.result()
    rows = [
        {
            "name": c.name,
            "family": c.family,
            "kind": "cli" if c.cli is not None else "api",
            "what": c.what,
            "expect": c.expect,
            **({"argv": list(c.cli)} if c.cli is not None else {"probe": c.api}),
            **results[c.name],
        }
        for c in cases
    ]
    seconds = time.perf_counter() - t1
    print()
    print(table(rows, families))
    failing = [r for r in rows if r["outcome"] not in ("clear error", "handled ok")]
    if failing:
        print(f"\nfailing cases ({len(failing)}):")
        for r in failing:
            print(f"  [{r['outcome']}] {r['name']}: {r['what']}\n      {r['detail']}")
    print(f"\n{len(rows)} cases in {seconds:.0f}s (+ {t1 - t0:.0f}s fixtures), {args.jobs} jobs")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"fixtures_seconds": round(t1 - t0, 1), "seconds": round(seconds, 1), "notes": notes, "cases": rows},
                indent=1,
                default=str,
            )
            + "\n"
        )
        print(f"wrote {args.json}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
