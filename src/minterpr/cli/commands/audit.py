"""``minterpr audit``: export the service's audit log, print its head, verify an export.

    minterpr audit export --data /srv/minterpr --out audit.jsonl   # prints the head hash
    minterpr audit head --data /srv/minterpr                         # seq and hash of the last entry
    minterpr audit verify audit.jsonl --head HASH                    # exit 0 intact, 1 with the problems
    minterpr audit verify audit.jsonl --json -                       # the result as JSON on stdout

``verify`` needs nothing but the file: it recomputes every entry's hash and follows the chain,
so an edited, removed or reordered entry is reported by line. An export cut at its end is only
caught against a head hash kept elsewhere (``--head``). Every subcommand takes ``--json [PATH|-]``
(its result as one JSON object) and ``--verbose``/``--quiet``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from minterpr.cli.shared.common import CLIError, add_common_options, write_json
from minterpr.cli.shared.service_state import add_state_arguments, cli_actor, services_from


def cmd_verify(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from minterpr.serving.audit import verify_lines

    out = out or sys.stdout
    path = Path(args.file)
    if not path.is_file():
        raise CLIError(f"{path}: no such file")
    with open(path, "rb") as f:
        report = verify_lines(f, expected_head=args.head)
    for problem in report.problems:
        print(f"{path}: {problem}", file=out)
    status = "intact" if report.ok else f"NOT intact ({len(report.problems)} problem(s))"
    print(f"{path}: {report.entries} entries, head {report.head}: {status}", file=out)
    write_json(
        getattr(args, "json", None),
        {
            "file": str(path),
            "entries": report.entries,
            "head": report.head,
            "expected_head": args.head,
            "ok": report.ok,
            "problems": list(report.problems),
        },
    )
    return 0 if report.ok else 1


def cmd_export(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from minterpr.fileio import atomic_open

    services = services_from(args)
    try:
        services.audit.append_as(cli_actor(), "audit_export", {"by": "minterpr audit export"})
        seq, head = services.audit.head()
        count = 0  # entries written: seq counts those ever appended, an entry removed leaves a gap
        with atomic_open(args.out, "w") as f:
            for line in services.audit.export_lines(upto=seq):
                f.write(line)
                count += 1
    finally:
        services.close()
    print(f"{args.out}: {count} entries, head {head}", file=out or sys.stdout)
    write_json(getattr(args, "json", None), {"file": str(args.out), "entries": count, "head": head})
    return 0


def cmd_head(args: argparse.Namespace, out: TextIO | None = None) -> int:
    services = services_from(args)
    try:
        seq, head = services.audit.head()
    finally:
        services.close()
    print(f"{seq} {head}", file=out or sys.stdout)
    write_json(getattr(args, "json", None), {"seq": seq, "head": head})
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="export and verify the service's audit log",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(group_parser=parser)
    sub = parser.add_subparsers(dest="audit_command", metavar="AUDIT_COMMAND")
    verify = sub.add_parser("verify", help="check an exported log (JSON lines): exit 0 intact, 1 otherwise")
    verify.add_argument("file", metavar="FILE")
    verify.add_argument("--head", metavar="HASH", help="the head hash the log must end at (from `audit head`)")
    verify.set_defaults(handler=cmd_verify)
    add_common_options(
        verify,
        json=True,
        json_help="also write the result ({file, entries, head, expected_head, "
        "ok, problems}) to PATH ('-' or no value: to stdout, the lines "
        "to stderr)",
    )
    export = sub.add_parser("export", help="write the whole log as JSON lines")
    export.add_argument("--out", required=True, metavar="FILE")
    add_state_arguments(export)
    export.set_defaults(handler=cmd_export)
    add_common_options(
        export,
        json=True,
        needs=("serve",),
        outputs=("out",),
        json_help="also write {file, entries, head} to PATH ('-' or no value: to stdout)",
    )
    head = sub.add_parser("head", help="print the seq and hash of the last entry")
    add_state_arguments(head)
    head.set_defaults(handler=cmd_head)
    add_common_options(
        head, json=True, needs=("serve",), json_help="also write {seq, head} to PATH ('-' or no value: to stdout)"
    )
