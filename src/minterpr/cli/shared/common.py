"""What every ``minterpr`` command shares: options and what they do, output and :class:`CLIError`.
Commands import this module (and the narrower ones beside it: :mod:`~minterpr.cli.shared.model_options`
for the model and gallery they score with, :mod:`~minterpr.cli.shared.service_state`,
:mod:`~minterpr.cli.shared.demo_world`, ...), never each other.

:func:`add_common_options` gives a command, after its handler is set:

* ``--verbose`` / ``--quiet`` (``-v`` / ``-q``, one or the other): the ``minterpr`` logger
  (:mod:`logging`) prints INFO and above to stderr by default, DEBUG too with ``--verbose``,
  warnings and errors only with ``--quiet``, which also turns progress bars off
  (:func:`show_progress`). Diagnostics (what is being done, where a file went) are log records;
  a command's results (tables, summaries, chat replies) stay on stdout.
* ``--device DEVICE`` (``device=True``) on commands that run a model: ``cpu`` (default),
  ``cuda``, ``cuda:1``, ``mps``.
* ``--torch-threads N`` (``threads``, by default where ``device`` is) on commands that run a model: torch's
  intra-op threads (default: torch's own, one per core). Jobs sharing a machine should split
  its cores: two trainings of two threads each on 2 cores stepped 7x slower than with one
  thread each (docs/benchmarks.md, "Threads").
* ``--json [PATH|-]`` (``json=True``) on commands that write a JSON report: to PATH (atomically),
  or with ``-`` (or no value) to stdout, and then nothing else goes to stdout: whatever the command
  would print there goes to stderr (:func:`write_json` writes the report).

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="minterpr toy")
    >>> def toy(args):
    ...     print("table")
    ...     write_json(args.json, {"r1": 50.0})
    ...     return 0
    >>> parser.set_defaults(handler=toy)
    >>> add_common_options(parser, device=True, json=True)
    >>> args = parser.parse_args(["--json", "-", "--quiet", "--device", "cuda"])
    >>> args.json, args.quiet, args.verbose, args.device
    ('-', True, False, 'cuda')
    >>> import contextlib, io, sys
    >>> with contextlib.redirect_stderr(io.StringIO()) as err:
    ...     code = args.handler(args)  # the table goes to stderr, the JSON alone to stdout
    {
      "r1": 50.0
    }
    >>> err.getvalue()
    'table\\n'
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import functools
import importlib.util
import json as jsonlib
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable, TextIO

from minterpr.errors import InputError
from minterpr.fileio import atomic_write_text

LOGGER_NAME = "minterpr"  # the package's logger: every module logs under it (minterpr.cli.commands.eval, ...)
STDOUT = "-"  # --json - : the report to stdout
DEFAULT_DEVICE = "cpu"
_JSON_STDOUT: contextvars.ContextVar[TextIO | None] = contextvars.ContextVar("minterpr_json_stdout", default=None)


# extra -> the modules a command of it cannot run without (checked before any work: one line
# naming the extra, not a traceback minutes later); the weights packages name themselves
EXTRAS: dict[str, tuple[str, ...]] = {
    "model": ("torch", "transformers", "safetensors"),
    "serve": ("fastapi", "uvicorn", "sqlalchemy", "jinja2", "multipart", "alembic", "argon2", "prometheus_client"),
    "ingest": ("cv2", "av", "supervision", "trackers", "scipy"),
}


def install_hint(extra: str) -> str:
    """The install command for ``extra``, pinned by the repository's constraints file."""
    return f"pip install -c constraints.txt 'minterpr[{extra}]'"


def require_extras(command: str, extras: tuple[str, ...]) -> None:
    """CLIError naming the first missing module, its extra and the install command."""
    for extra in extras:
        if extra not in EXTRAS:
            raise ValueError(f"unknown extra {extra!r}: must be one of {', '.join(EXTRAS)}")
        for module in EXTRAS[extra]:
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):  # a broken or half-removed package
                found = False
            if not found:
                raise CLIError(
                    f"{command} needs the [{extra}] extra ({module} is not installed): {install_hint(extra)}"
                )


def check_output_path(path: str | None, option: str) -> None:
    """CLIError unless a file can be written at ``path`` (its folder, created on writing, is a folder
    we may write in; ``path`` itself is not a folder). None and ``-`` (stdout) pass."""
    if path is None or path == STDOUT:
        return
    target = Path(path)
    if target.is_dir():
        raise CLIError(f"{option} {path}: is a folder; name a file in it")
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise CLIError(f"{option} {path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CLIError(f"{option} {path}: cannot write in {folder} (permission denied)")


def add_common_options(
    parser: argparse.ArgumentParser,
    *,
    device: bool = False,
    json: bool = False,
    device_default: str | None = DEFAULT_DEVICE,
    threads: bool | None = None,
    json_help: str | None = None,
    needs: tuple[str, ...] = (),
    outputs: tuple[str, ...] = (),
) -> None:
    """Add ``--verbose``/``--quiet`` (and ``--device``, ``--torch-threads``, ``--json``) to ``parser`` and make its
    handler configure logging (and stdout for ``--json -``) before it runs.

    Before the handler, the extras in ``needs`` must be installed and ``--json`` and the options
    named by ``outputs`` (their ``dest``) must be writable paths: one line, exit 2, no work done.

    Call it after ``parser.set_defaults(handler=...)``; ValueError otherwise (a programming error
    that every test building the parser finds). ``device_default``: None where the command has a
    default of its own (``train``: the config's device). ``threads``: None = with ``--device``.
    """
    handler = parser.get_default("handler")
    if handler is None:
        raise ValueError(f"{parser.prog}: call add_common_options after parser.set_defaults(handler=...)")
    group = parser.add_argument_group("common options")
    loudness = group.add_mutually_exclusive_group()
    loudness.add_argument("-v", "--verbose", action="store_true", help="debug messages too")
    loudness.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only, no progress bars")
    if device:
        default = "the config's" if device_default is None else device_default
        group.add_argument(
            "--device",
            default=device_default,
            metavar="DEVICE",
            help=f"torch device the model runs on, e.g. cpu, cuda, cuda:1 (default: {default})",
        )
    threads = device if threads is None else threads
    if threads:
        group.add_argument(
            "--torch-threads",
            type=thread_count,
            metavar="N",
            help="torch's CPU threads (default: one per core); give each of several jobs on one machine its share",
        )
    if json:
        group.add_argument(
            "--json",
            nargs="?",
            const=STDOUT,
            metavar="PATH|-",
            help=json_help
            or "write the JSON report to PATH; '-' (or no value): to stdout, and nothing else goes there",
        )
    parser.set_defaults(
        handler=_configured(handler, parser.prog.removeprefix("minterpr ") or parser.prog, needs, outputs, threads)
    )


def _configured(
    handler: Callable[[argparse.Namespace], int],
    command: str = "",
    needs: tuple[str, ...] = (),
    outputs: tuple[str, ...] = (),
    threads: bool = False,
) -> Callable[[argparse.Namespace], int]:
    if getattr(handler, "_common_options", False):
        return handler

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        configure_logging(verbosity(args))
        if getattr(args, "quiet", False):
            quiet_third_party()
        require_extras(command, needs)
        if threads and args.torch_threads is not None:  # the common option (serve's own is a validated setting)
            from minterpr.models.device import set_torch_threads  # torch only when asked for

            set_torch_threads(args.torch_threads)
        check_output_path(getattr(args, "json", None), "--json")
        for dest in outputs:
            check_output_path(getattr(args, dest, None), "--" + dest.replace("_", "-"))
        if getattr(args, "json", None) != STDOUT:
            return handler(args)
        token = _JSON_STDOUT.set(sys.stdout)
        try:
            with contextlib.redirect_stdout(sys.stderr):  # the report alone on stdout
                return handler(args)
        finally:
            _JSON_STDOUT.reset(token)

    run._common_options = True  # type: ignore[attr-defined]
    return run


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 ("0" and "two" are one line naming the value)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def thread_count(text: str) -> int:
    """argparse type of ``--torch-threads``: 1 to the service's bound (more crashes torch)."""
    from minterpr.serving.settings import MAX_TORCH_THREADS

    value = positive_int(text)
    if value > MAX_TORCH_THREADS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_TORCH_THREADS} threads, got {value}")
    return value


def quiet_third_party() -> None:
    """``--quiet``: no third-party progress bars either (transformers' "Loading weights 103/103" when a
    text encoder loads, the hub's downloads, any tqdm): their switches are set before they are imported,
    and turned off in those already imported."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["TQDM_DISABLE"] = "1"  # tqdm >= 4.66 reads its defaults from TQDM_* variables (when first imported)
    os.environ["TRANSFORMERS_VERBOSITY"] = "error"
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
        transformers_logging.set_verbosity_error()


def verbosity(args: argparse.Namespace) -> int:
    """The logging level the flags ask for: WARNING (--quiet), INFO (default), DEBUG (--verbose)."""
    if getattr(args, "quiet", False):
        return logging.WARNING
    return logging.DEBUG if getattr(args, "verbose", False) else logging.INFO


def show_progress(args: argparse.Namespace, default: bool = True) -> bool:
    """Whether progress bars are shown: never with --quiet, else ``default``."""
    return bool(default) and not getattr(args, "quiet", False)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted (tests swap it)."""

    def __init__(self) -> None:
        super().__init__()

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:  # StreamHandler.__init__ assigns it
        pass


class _Formatter(logging.Formatter):
    """INFO: the message alone; other levels: ``warning: ...``; with --verbose: time and logger too."""

    def __init__(self, detailed: bool) -> None:
        super().__init__()
        self.detailed = detailed

    def format(self, record: logging.LogRecord) -> str:
        message = super().format(record)
        if self.detailed:
            return f"{self.formatTime(record, '%H:%M:%S')} {record.name} {record.levelname.lower()}: {message}"
        return message if record.levelno == logging.INFO else f"{record.levelname.lower()}: {message}"


def configure_logging(level: int = logging.INFO) -> logging.Logger:
    """Set the ``minterpr`` logger's level and give it one stderr handler (repeated calls reuse it).

    Example:
        >>> configure_logging(logging.WARNING).getEffectiveLevel() == logging.WARNING
        True
    """
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level)
    handler = next((h for h in logger.handlers if isinstance(h, _StderrHandler)), None)
    if handler is None:
        handler = _StderrHandler()
        logger.addHandler(handler)
    handler.setFormatter(_Formatter(detailed=level <= logging.DEBUG))
    return logger


def write_json(target: str | None, data: Any) -> str | None:
    """Write ``data`` (a JSON string, or a value to dump with indent 2) to ``target``: a file
    (atomically), ``-`` for stdout (the real stdout under ``--json -``), None for nowhere.
    Returns where it went ("-" or the path)."""
    if target is None:
        return None
    text = data if isinstance(data, str) else jsonlib.dumps(data, indent=2, allow_nan=False)
    text = text if text.endswith("\n") else text + "\n"
    if target == STDOUT:
        stream = _JSON_STDOUT.get() or sys.stdout
        stream.write(text)
        stream.flush()
        return STDOUT
    try:
        atomic_write_text(target, text)
    except OSError as err:  # named by the target, never by the temporary file beside it
        raise CLIError(f"{target}: cannot write the JSON report: {err.strerror or err}") from None
    return target


class CLIError(InputError):
    """A user error on the command line: ``minterpr.cli.main`` prints it as one line, exit code 2."""


def add_picture_options(parser: argparse.ArgumentParser, what: str) -> None:
    """--pictures N, --pictures-dir DIR, --pictures-seed S, --pictures-top K."""
    parser.add_argument(
        "--pictures",
        type=int,
        default=0,
        metavar="N",
        help=f"draw a ranked strip (one row per round) for N {what}, a seeded sample",
    )
    parser.add_argument("--pictures-dir", metavar="DIR", help="where the strips go (DIR/query_<number>.png)")
    parser.add_argument("--pictures-seed", type=int, default=0, metavar="S", help="seed of the sample (default 0)")
    parser.add_argument("--pictures-top", type=int, default=8, metavar="K", help="images per row (default 8)")


def check_picture_options(args: argparse.Namespace) -> None:
    """InputError (exit 2) for picture options that do not go together, before any work is done."""
    from minterpr.errors import InputError

    if args.pictures < 0 or args.pictures_top < 1:
        raise InputError("--pictures must be >= 0 and --pictures-top >= 1")
    if args.pictures and not args.pictures_dir:
        raise InputError("--pictures N needs --pictures-dir DIR (where the strips go)")
    if args.pictures_dir and not args.pictures:
        raise InputError("--pictures-dir needs --pictures N (how many queries to draw)")
