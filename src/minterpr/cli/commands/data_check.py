"""``minterpr data validate`` and ``minterpr data stats``.

validate: every record of every file is checked (lenient reading, so each bad record is
reported, not just the first). Problems go to stdout as ``FILE:LINE: field: reason`` and make
the exit code 1 (so does a file in a folder minterpr built whose build marker fails: an
unfinished build or a file changed since it, ``DIR/dataset.json: build: reason; rebuild it with
`COMMAND` ...``); warnings print as ``FILE:LINE: field: warning: reason`` and do not; a valid
file prints one ``FILE: OK ...`` line. Exit 2: a missing file or an undetectable format.

stats: a readable block of counts (see :mod:`minterpr.data.stats`), ``--json OUT`` writes the
same numbers.

Formats are rows of :data:`FORMATS`; adding one is one :class:`DataFormat` line.

Example:
    $ minterpr data validate train.jsonl test.jsonl --image-root data/imgs --check-images
    $ minterpr data stats test_reid.json --json stats.json
"""

from __future__ import annotations

import argparse
import codecs
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from minterpr.cli.shared.common import add_common_options, write_json
from minterpr.data.errors import DataError, ReadReport
from minterpr.data.formats.captions import captions_to_samples, read_caption_dataset
from minterpr.data.formats.chatpedes import iter_chatpedes
from minterpr.data.formats.gallery import iter_gallery
from minterpr.data.formats.minterpedes import iter_minterpedes
from minterpr.data.formats.pa100k import read_pa100k
from minterpr.data.formats.peta import peta_subsets, read_peta
from minterpr.data.stats import dialogue_stats, format_stats, gallery_stats

log = logging.getLogger(__name__)

SNIFF_BYTES = 1 << 16  # how much of a file format detection looks at


@dataclass(frozen=True)
class ReadOptions:
    """Options every format's reader gets from the command line."""

    image_root: str | None = None  # where image paths resolve; None: the data file's directory
    check_images: bool = False  # a missing image is an error of its record
    allow_outside_root: bool = False  # with check_images: paths leaving the image root are allowed, not errors


@dataclass(frozen=True)
class Sniff:
    """What format detection sees of a file."""

    path: Path
    head: bytes  # the file's first SNIFF_BYTES, without a UTF-8 BOM
    first_char: str  # first non-blank character, "" for a blank file
    first_keys: frozenset[str]  # keys of the first line in head that parses as a JSON object


@dataclass(frozen=True)
class DataFormat:
    """One row of the format table."""

    name: str  # the --format value
    kind: str  # what a record is, for summaries ("dialogues", "images")
    read: Callable[[str, ReadReport, ReadOptions], Iterable[object]]  # lenient streaming read into the report
    stats: Callable[[Iterable[object]], dict[str, object]]  # statistics of the records read
    detect: Callable[[Sniff], bool]  # does this file's content look like the format
    extensions: tuple[str, ...] = ()  # suffixes that decide when no content detector matches


FORMATS: tuple[DataFormat, ...] = (
    DataFormat(
        "minterpedes",
        "dialogues",
        lambda path, report, o: iter_minterpedes(
            path,
            report=report,
            image_root=o.image_root,
            check_images=o.check_images,
            allow_outside_root=o.allow_outside_root,
        ),
        dialogue_stats,
        lambda s: "conversations" in s.first_keys,
        (".jsonl",),
    ),
    DataFormat(
        "chatpedes",
        "dialogues",
        lambda path, report, o: iter_chatpedes(
            path,
            report=report,
            image_root=o.image_root,
            check_images=o.check_images,
            allow_outside_root=o.allow_outside_root,
        ),
        dialogue_stats,
        lambda s: s.first_char == "[" and b'"chats"' in s.head,
        (".json",),
    ),
    DataFormat(
        "gallery",
        "images",
        lambda path, report, o: iter_gallery(
            path,
            report=report,
            image_root=o.image_root,
            check_images=o.check_images,
            allow_outside_root=o.allow_outside_root,
        ),
        gallery_stats,
        lambda s: bool({"path", "attributes"} & s.first_keys),
        (".jsonl",),
    ),
    DataFormat(
        "captions",
        "caption records",
        lambda path, report, o: _lenient(
            read_caption_dataset(
                path,
                strict=False,
                image_root=o.image_root,
                check_images=o.check_images,
                allow_outside_root=o.allow_outside_root,
            ),
            report,
        ),
        lambda records: dialogue_stats(captions_to_samples(list(records))),
        lambda s: s.first_char == "[" and b'"captions"' in s.head,
        (),
    ),
    DataFormat(
        "peta",
        "images",
        lambda path, report, o: _lenient(read_peta(path, strict=False), report),
        gallery_stats,
        lambda s: s.path.is_dir() and _is_peta(s.path),
        (),
    ),
    DataFormat(
        "pa100k",
        "images",
        lambda path, report, o: _lenient(read_pa100k(path, image_root=o.image_root, strict=False), report),
        gallery_stats,
        lambda s: False,
        (".mat",),
    ),
)


def _lenient(result: tuple[list, ReadReport], report: ReadReport) -> list:
    """Move a lenient reader's problems and warnings into the command's report."""
    records, own = result
    report.problems.extend(own.problems)
    report.warnings.extend(own.warnings)
    report.records_read += len(records)
    return records


def _is_peta(path: Path) -> bool:
    try:
        return bool(peta_subsets(path))
    except (OSError, ValueError):
        return False


class UsageError(Exception):
    """A problem with the command line or the files named on it (exit code 2)."""


def sniff(path: Path) -> Sniff:
    if path.is_dir():
        return Sniff(path, b"", "", frozenset())
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
    head = head.removeprefix(codecs.BOM_UTF8)
    stripped = head.lstrip()
    first_char = chr(stripped[0]) if stripped else ""
    keys: frozenset[str] = frozenset()
    if first_char == "{":
        for raw in head.split(b"\n")[:-1] or [head]:  # the last piece may be cut mid-line
            try:
                value = json.loads(raw)
            except (ValueError, UnicodeDecodeError, RecursionError):  # a deeply nested head is no reason to fail
                continue
            if isinstance(value, dict):
                keys = frozenset(value)
                break
    return Sniff(path, head, first_char, keys)


def format_by_name(name: str) -> DataFormat:
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise UsageError(f"unknown format {name!r}: must be one of {', '.join(f.name for f in FORMATS)}")


def detect_format(path: Path) -> DataFormat:
    """The format of a file: by content, else by a suffix that only one format claims."""
    seen = sniff(path)
    for fmt in FORMATS:
        if fmt.detect(seen):
            return fmt
    by_suffix = [fmt for fmt in FORMATS if path.suffix.lower() in fmt.extensions]
    if len(by_suffix) == 1:
        return by_suffix[0]
    raise UsageError(
        f"{path}: cannot detect the format from its content; pass --format ({', '.join(f.name for f in FORMATS)})"
    )


def _resolve(paths: list[str], format_name: str) -> list[tuple[str, DataFormat]]:
    resolved = []
    for name in paths:
        path = Path(name)
        if not path.exists():
            raise UsageError(f"{name}: no such file")
        if not path.is_file() and not (path.is_dir() and format_name in ("auto", "peta")):
            raise UsageError(f"{name}: not a file")
        resolved.append((name, detect_format(path) if format_name == "auto" else format_by_name(format_name)))
    return resolved


def _options(args: argparse.Namespace) -> ReadOptions:
    if args.image_root is not None and not Path(args.image_root).is_dir():
        raise UsageError(f"{args.image_root}: --image-root is not a directory")
    return ReadOptions(
        image_root=args.image_root, check_images=args.check_images, allow_outside_root=args.allow_outside_root
    )


def _warning_line(warning: DataError) -> str:
    return f"{warning.file}:{warning.line}: {warning.field}: warning: {warning.reason}"


def validate_file(name: str, fmt: DataFormat, options: ReadOptions) -> bool:
    """Check every record of one file, print its problems and warnings; True when valid."""
    report = ReadReport(name)
    for _ in fmt.read(name, report, options):
        pass  # records are dropped as they stream by: validation holds none of them
    issues = [(e.line, e.format()) for e in report.problems] + [(w.line, _warning_line(w)) for w in report.warnings]
    for _, text in sorted(issues, key=lambda item: item[0]):
        print(text)
    warnings = f", {len(report.warnings)} warning{'s' if len(report.warnings) != 1 else ''}" if report.warnings else ""
    if report.ok:
        print(f"{name}: OK ({fmt.name}, {report.records_read:,} {fmt.kind}{warnings})")
    else:
        print(
            f"{name}: {report.skipped:,} bad record(s), {report.records_read:,} good {fmt.kind} ({fmt.name}{warnings})",
            file=sys.stderr,
        )
    return report.ok


def _run(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (UsageError, OSError) as exc:
            print(f"minterpr data {args.data_command}: error: {exc}", file=sys.stderr)
            return 2

    return run


def check_build_markers(names: Iterable[str], image_root: str | None = None) -> bool:
    """Verify the build marker of each folder holding one of ``names`` (and of ``image_root``)
    that minterpr built; print a problem line per unfinished or changed build; True when none."""
    from minterpr.data.build import check_if_built
    from minterpr.data.layout import DATASET_FILE
    from minterpr.errors import DatasetError

    folders = [Path(name).parent for name in names if not Path(name).is_dir()]
    folders += [Path(image_root)] if image_root is not None else []
    ok, seen = True, set()
    for folder in folders:
        if folder.resolve() in seen:
            continue
        seen.add(folder.resolve())
        try:
            check_if_built(folder)
        except DatasetError as err:
            print(f"{folder / DATASET_FILE}: build: {err.reason}")
            ok = False
    return ok


def cmd_validate(args: argparse.Namespace) -> int:
    options = _options(args)
    # build markers first: a cut file of an unfinished build may not even be detectable
    built = check_build_markers([name for name in args.files if Path(name).exists()], args.image_root)
    resolved = _resolve(args.files, args.format)
    results = [validate_file(name, fmt, options) for name, fmt in resolved]
    return 0 if all(results) and built else 1


def cmd_stats(args: argparse.Namespace) -> int:
    options = _options(args)
    [(name, fmt)] = _resolve([args.file], args.format)
    report = ReadReport(name)
    stats = fmt.stats(fmt.read(name, report, options))
    if not report.ok:
        log.warning(
            "%s: %s bad record(s) skipped; `minterpr data validate %s` lists them", name, f"{report.skipped:,}", name
        )
    print(format_stats(stats, title=f"{name} ({fmt.name})"))
    write_json(
        args.json, json.dumps({"file": name, "format": fmt.name, "skipped_records": report.skipped, **stats}, indent=2)
    )
    return 0


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        default="auto",
        choices=["auto", *(f.name for f in FORMATS)],
        help="file format (default: detect from the content)",
    )
    parser.add_argument(
        "--image-root", metavar="DIR", help="directory image paths are relative to (default: the data file's directory)"
    )
    parser.add_argument(
        "--check-images",
        action="store_true",
        help="report records whose images are missing or whose image paths leave the image root",
    )
    parser.add_argument(
        "--allow-outside-root",
        action="store_true",
        help="with --check-images: accept image paths that leave the image root (../x.jpg, /abs.jpg)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    validate = subparsers.add_parser(
        "validate",
        help="check dataset files record by record",
        description="Check every record; print FILE:LINE: field: reason per problem.",
    )
    validate.add_argument("files", nargs="+", metavar="FILE")
    _add_common(validate)
    validate.set_defaults(handler=_run(cmd_validate))
    add_common_options(validate)

    stats = subparsers.add_parser(
        "stats",
        help="print dataset statistics",
        description="Counts, turn histograms and text lengths of a dataset file.",
    )
    stats.add_argument("file", metavar="FILE")
    _add_common(stats)
    stats.set_defaults(handler=_run(cmd_stats))
    add_common_options(
        stats,
        json=True,
        json_help="also write the statistics as JSON to PATH ('-' or no value: to stdout, the table to stderr)",
    )
