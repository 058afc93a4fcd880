"""``minterpr data ...``: dataset validation, statistics, building and inspection.

Each ``data`` subcommand lives in a module of ``DATA_MODULES`` exposing ``register(subparsers)``.
"""

from __future__ import annotations

import argparse
import importlib

DATA_MODULES = (
    "minterpr.cli.commands.data_check",  # validate, stats
    "minterpr.cli.commands.data_build",  # synth, peta
    "minterpr.cli.commands.data_show",  # show
    "minterpr.cli.commands.data_convert",  # convert
    "minterpr.cli.commands.data_reid",  # reid
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("data", help="validate, inspect and build datasets")
    parser.set_defaults(group_parser=parser)
    data_subparsers = parser.add_subparsers(dest="data_command", metavar="DATA_COMMAND")
    for module_name in DATA_MODULES:
        importlib.import_module(module_name).register(data_subparsers)
