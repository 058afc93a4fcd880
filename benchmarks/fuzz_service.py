"""schemathesis (its command line) against a real ``minterpr serve``, over every operation of the spec.

The server and its state are ``probe_service.py``'s (the tests' tiny world, one user per role,
open cases and sessions). Requests carry the admin's API key (every permission but the
auditor's), and the path parameters are real where a real one exists (``schemathesis.toml``
``[parameters]``: the admin's own case and session, a spare API key), so the documented success
of each operation is reachable and the ``positive_data_acceptance`` check means something; the
generated bodies, queries and the negative phase still vary everything else. Excluded: the
operations that would end the run's own access or delete the world it searches (logout,
retention). Exit status: schemathesis's.

Usage:
    taskset -c 0 python benchmarks/fuzz_service.py                        # ~5 min
    python benchmarks/fuzz_service.py --max-examples 10 --checks not_a_server_error
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from probe_service import PASSWORD, prepare, start_session  # noqa: E402

EXCLUDED = "^/api/(auth/logout|admin/retention)$"
# rules between fields or of the server that a JSON Schema cannot state, each refused with a 422 saying
# which: a password's strength (admin/users), a case's start after its end (cases), detector_model only
# with the onnx detector and a source that exists (ingest). A second run checks these paths with
# every check but positive_data_acceptance (a per-operation setting in the config file was not honoured
# by schemathesis 4.32.5 next to --checks all).
SEMANTIC = "^/api/(admin/users|cases|ingest)$"
# Real ids, and the values whose validity the spec cannot state (a password's strength, a file on the
# server, cross-field rules of ingestion): pinned, so that a refusal of the rest is a finding.
CONFIG = """[parameters]
"path.case_id" = {case}
"path.session_id" = "{sid}"
"path.key_id" = {spare}
"path.gallery_index" = 0
"body.gallery_index" = 0
"body.case_id" = {case}
"body.password" = "{password}"

[[operations]]
include-path = "/api/ingest"
include-method = "POST"
parameters = {{"body.source" = "{incoming}", "body.detector" = "onnx", "body.detector_model" = "{incoming}/detector.onnx", "body.start" = "2026-03-02T08:00:00Z"}}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", help="folder for the world and the state (default: a temporary one)")
    parser.add_argument("--max-examples", type=int, default=25)
    parser.add_argument("--checks", default="all")
    parser.add_argument("--phases", default="examples,coverage,fuzzing")
    parser.add_argument("--report", metavar="DIR", help="schemathesis --report junit into DIR")
    args = parser.parse_args(argv)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="fuzz_service_"))
    work.mkdir(parents=True, exist_ok=True)
    ctx = prepare(work)
    try:
        case = ctx.case
        sid = start_session(ctx, "root", case, turns=1)
        with ctx.http("root") as http:
            spare = http.post("/api/keys", json={"name": "spare"}).json()["id"]
        incoming = ctx.data / "incoming"
        incoming.mkdir(exist_ok=True)
        (incoming / "detector.onnx").write_bytes(b"not a model: a job with it fails at once")
        config = work / "schemathesis.toml"
        config.write_text(CONFIG.format(case=case, sid=sid, spare=spare, password=PASSWORD, incoming=incoming))
        binary = Path(sys.executable).with_name("schemathesis")
        base = [
            str(binary) if binary.exists() else (shutil.which("schemathesis") or "schemathesis"),
            "--no-color",
            "--config-file",
            str(config),
            "run",
            f"{ctx.url}/api/openapi.json",
            "--phases",
            args.phases,
            "--max-examples",
            str(args.max_examples),
            "--workers",
            "1",
            "-H",
            f"X-API-Key: {ctx.keys['root']}",
            "--request-timeout",
            "60",
            "--suppress-health-check",
            "all",
            "--continue-on-failure",
        ]
        runs = [
            ["--checks", args.checks, "--exclude-path-regex", f"{EXCLUDED[:-2]}|{SEMANTIC[7:-2]})$"],
            ["--checks", args.checks, "--exclude-checks", "positive_data_acceptance", "--include-path-regex", SEMANTIC],
        ]  # their GETs take no parameters: positive_data_acceptance has nothing to vary there
        codes = []
        for k, extra in enumerate(runs):
            command = (
                base + extra + (["--report", "junit", "--report-dir", f"{args.report}/{k}"] if args.report else [])
            )
            shown = [c if not c.startswith("X-API-Key") else "X-API-Key: <the admin's key>" for c in command]
            print("$ " + " ".join(shown), flush=True)
            codes.append(subprocess.run(command, env=dict(os.environ, SCHEMATHESIS_HOOKS="")).returncode)
        print(f"exit statuses: {codes}")
        return max(codes)
    finally:
        ctx.server.kill()


if __name__ == "__main__":
    sys.exit(main())
