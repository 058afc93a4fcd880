"""``minterpr models export``: a trained run as a portable model directory others can load.

Writes ``DIR/model.safetensors`` (the weights, no pickle), ``DIR/config.json`` (the model config,
the weights' checksum, and the pretrained encoder weights referenced by package instead of
copied) and ``DIR/extras.json`` (calibration, the chosen attribute weight, model selection),
every file readable by everyone (0644). ``minterpr eval --run DIR``, ``chat``, ``simulate`` and
``minterpr.load_pipeline(DIR)`` load it like a run. ``--self-contained`` copies the pretrained
weights too (for a machine without the weights packages).

``--push-to-hub ORG/NAME`` then publishes the directory on the Hugging Face Hub in one commit
(``minterpr.training.publish``): it must hold a model card (README.md or MODEL_CARD.md), and the
commit printed pins it (``--run hf-hub:ORG/NAME@COMMIT``). Without ``--out``, RUN must be an
exported model directory, pushed as it is.

``minterpr export`` is the earlier name, kept as an alias that says so on stderr: "export" alone
also means records written out for someone outside (a confirmed match's zip, ``minterpr audit export``).

Example:
    $ minterpr models export runs/synth --out models/synth
    $ minterpr eval --run models/synth --data data/synth/test.jsonl --json eval.json
    $ minterpr models export models/synth --push-to-hub my-lab/synth-demo --private   # after writing its MODEL_CARD.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from minterpr.cli.shared.common import add_common_options
from minterpr.cli.shared.model_options import RUN_HELP


def run(args: argparse.Namespace) -> int:
    from minterpr.errors import InputError

    pushing = args.push_to_hub is not None  # an empty name is a bad name, not "no push"
    if not pushing and (args.revision or args.private or args.commit_message):
        raise InputError("--revision, --private and --commit-message go with --push-to-hub ORG/NAME")
    if args.out is None:
        if not pushing:
            raise InputError("--out DIR is required (only --push-to-hub of an exported model directory goes without)")
        from minterpr.models.zoo import resolve_model

        return push(args, resolve_model(args.run))  # a path, shipped[:NAME] or a hub model's cached copy
    code = export(args)
    return push(args, Path(args.out)) if code == 0 and pushing else code


ALIAS_NOTE = "minterpr export is now minterpr models export"


def run_alias(args: argparse.Namespace) -> int:
    """``minterpr export``: the note on stderr, then ``minterpr models export``."""
    print(ALIAS_NOTE, file=sys.stderr)
    return run(args)


def push(args: argparse.Namespace, model_dir: Path) -> int:
    from minterpr.training.publish import push_model_dir

    result = push_model_dir(
        model_dir, args.push_to_hub, revision=args.revision, private=args.private, commit_message=args.commit_message
    )
    print(f"pushed {len(result.files)} files to {result.repo_id} ({result.revision}): {result.url}")
    print(f"load exactly this commit with --run {result.reference}")
    return 0


def export(args: argparse.Namespace) -> int:
    from minterpr.runtime.run import export_model_dir

    manifest = export_model_dir(args.run, args.out, self_contained=args.self_contained, precision=args.precision)
    out = Path(args.out)
    total = 0
    for name in (manifest["weights"]["file"], manifest["extras"], "config.json"):
        size = (out / name).stat().st_size
        total += size
        print(f"{out / name}: {size / 1e6:.2f} MB")
    for part, ref in manifest["pretrained"].items():
        print(f"{part}: {len(ref['keys'])} tensors referenced, not copied ({ref['source']})")
    if not manifest["pretrained"]:
        print("every tensor copied (nothing referenced)")
    if "half_precision_drift" in manifest:
        drift = manifest["half_precision_drift"]
        print(
            f"float16 against float32: image cosine >= {drift['image_cosine_min']:.5f}, text cosine >= "
            f"{drift['text_cosine_min']:.5f}, attribute probabilities within {drift['attribute_prob_max_abs']:.4f}"
        )
    print(f"model directory: {out} ({total / 1e6:.2f} MB)")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """``export`` among ``minterpr models``' subcommands."""
    _add(subparsers, run, "write a run's model as a portable directory (safetensors + JSON)")


def register_alias(subparsers: argparse._SubParsersAction) -> None:
    """``minterpr export``, the earlier name, among the top-level commands: no help line, so that
    ``minterpr --help`` leaves it out of the command list."""
    _add(subparsers, run_alias)


def _add(subparsers: argparse._SubParsersAction, handler: Callable, line: str | None = None) -> None:
    listed = {"help": line} if line else {}  # argparse lists a subcommand in --help only when it has a help line
    parser = subparsers.add_parser(
        "export", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, **listed
    )
    parser.add_argument("run", metavar="RUN", help=RUN_HELP)
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="the model directory to write (new or empty, or an earlier "
        "export to replace; files it holds besides, a card, stay)",
    )
    parser.add_argument(
        "--self-contained",
        action="store_true",
        help="copy the unchanged pretrained encoder weights too instead of referencing their package",
    )
    parser.add_argument(
        "--precision",
        choices=("float32", "float16"),
        default="float32",
        help="how the copied weights are stored: float16 halves the size and is refused when it moves "
        "embeddings or attribute probabilities beyond the stated tolerance (docs/model.md)",
    )
    hub = parser.add_argument_group("publishing on the Hugging Face Hub (optional)")
    hub.add_argument(
        "--push-to-hub",
        metavar="ORG/NAME",
        help="upload the model directory (with its model card) to this hub repository, created when missing",
    )
    hub.add_argument(
        "--revision", metavar="BRANCH", help="the hub branch to commit to (default main; created when missing)"
    )
    hub.add_argument("--private", action="store_true", help="create the repository private")
    hub.add_argument("--commit-message", metavar="TEXT", help="the hub commit's message")
    parser.set_defaults(handler=handler)
    add_common_options(parser, needs=("model",))
