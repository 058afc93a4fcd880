"""The ``minterpr`` console command.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module is listed
below, imported only when the parser is built (so ``import minterpr`` stays light) and its
handler receives the parsed namespace and returns an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from minterpr.errors import MinterprError

# Modules contributing top-level subcommands, in the order --help lists them.
COMMAND_MODULES = (
    "minterpr.cli.commands.demo",
    "minterpr.cli.commands.data",
    "minterpr.cli.commands.simulate",
    "minterpr.cli.commands.chat",
    "minterpr.cli.commands.index",
    "minterpr.cli.commands.train",
    "minterpr.cli.commands.eval",
    "minterpr.cli.commands.serve",
    "minterpr.cli.commands.users",
    "minterpr.cli.commands.db",
    "minterpr.cli.commands.audit",
    "minterpr.cli.commands.eval_attributes",
    "minterpr.cli.commands.eval_reid",
    "minterpr.cli.commands.calibrate",
    "minterpr.cli.commands.adapt",
    "minterpr.cli.commands.export",
    "minterpr.cli.commands.models",
    "minterpr.cli.commands.ingest",
    "minterpr.cli.commands.vlm",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="minterpr",
        description="Interactive, multi-turn, multimodal person retrieval.",
    )
    from minterpr import __version__

    parser.add_argument("--version", action="version", version=f"minterpr {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def _missing_extra(err: BaseException) -> tuple[str, str] | None:
    """(extra, module) when ``err`` (or what caused it) is a module of one of minterpr's extras not being
    installed (``minterpr.models needs torch`` raised from torch's ModuleNotFoundError), else None.

    >>> _missing_extra(ModuleNotFoundError("No module named 'torch'", name="torch"))
    ('model', 'torch')
    >>> _missing_extra(ModuleNotFoundError("No module named 'nothing'", name="nothing")) is None
    True
    """
    from minterpr.cli.shared.common import EXTRAS

    seen: BaseException | None = err
    while seen is not None:
        module = (getattr(seen, "name", None) or "").split(".")[0]
        for extra, modules in EXTRAS.items():
            if module and module in modules:
                return extra, module
        seen = seen.__cause__ or seen.__context__
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse ``argv`` and run the chosen subcommand; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        # A command group without its subcommand prints that group's help.
        (getattr(args, "group_parser", None) or parser).print_help()
        return 0 if args.command is None else 2
    try:
        return int(handler(args) or 0)
    except MinterprError as err:  # a documented user error (minterpr.errors): one line, exit 2
        # a command group names its subcommand's dest "<group>_command" ("data validate", "index build")
        name = " ".join(part for part in (args.command, getattr(args, f"{args.command}_command", None)) if part)
        print(f"minterpr {name}: error: {err}", file=sys.stderr)
        return 2
    except ImportError as err:  # an optional package missing deep inside a command: its extra, in one line
        extra = _missing_extra(err)
        if extra is None:
            raise
        from minterpr.cli.shared.common import install_hint

        name = " ".join(part for part in (args.command, getattr(args, f"{args.command}_command", None)) if part)
        print(
            f"minterpr {name}: error: {name} needs the [{extra[0]}] extra ({extra[1]} is not installed): "
            f"{install_hint(extra[0])}",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `minterpr ... | head` closed the pipe: not an error
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
