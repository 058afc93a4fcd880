"""The ``minterpr`` console command.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module is listed
below, imported only when the parser is built (so ``import minterpr`` stays light) and its
handler receives the parsed namespace and returns an exit code. A command group may name a default
subcommand, run when the word after the group names none (``minterpr models DIR`` is ``models list DIR``).
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


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers of ``parser`` by name ({} where it has none)."""
    return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def with_default_subcommand(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """``argv`` with a command group's default subcommand put in where the word after the group names none of
    its subcommands (nor asks for help): ``models runs/ --json x`` is ``models list runs/ --json x`` and
    ``models`` alone ``models list``. A group declares its default with ``set_defaults(default_subcommand=NAME)``.

    >>> parser = build_parser()
    >>> with_default_subcommand(parser, ["models", "runs/"]), with_default_subcommand(parser, ["models"])
    (['models', 'list', 'runs/'], ['models', 'list'])
    >>> with_default_subcommand(parser, ["models", "fetch", "yolox-nano"])
    ['models', 'fetch', 'yolox-nano']
    """
    argv = list(argv)
    group = _subcommands(parser).get(argv[0]) if argv else None
    default = group.get_default("default_subcommand") if group is not None else None
    if default is None or (argv[1:2] and (argv[1] in _subcommands(group) or argv[1] in ("-h", "--help"))):
        return argv
    return [argv[0], default, *argv[1:]]


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
    args = parser.parse_args(with_default_subcommand(parser, sys.argv[1:] if argv is None else argv))
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
