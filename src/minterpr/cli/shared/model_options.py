"""The model a command scores with and the gallery it scores: the ``--run`` / ``--backend`` /
``--appearance`` / ``--batch-size`` / ``--text-precision`` / ``--image-precision`` options, loading
what they name (the one way commands load a trained model: :func:`load_pipeline_of`), and a
gallery's images and index.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from minterpr.cli.shared.common import DEFAULT_DEVICE, CLIError
from minterpr.index.gallery_index import GalleryIndex, RetrievalBackend
from minterpr.runtime.neural_backend import DEFAULT_BATCH_SIZE
from minterpr.types import GalleryImage

if TYPE_CHECKING:  # torch-heavy: loaded with a model
    from minterpr.interaction.fitted import RunExtras
    from minterpr.runtime.pipeline import Pipeline

# what --run takes, wherever a command scores with a trained model (load_pipeline_of resolves all of them)
RUN_HELP = (
    "a trained run directory (its model.pt), a model file or directory, 'shipped[:NAME]' or 'hf-hub:ORG/NAME[@REV]'"
)


def add_backend_arguments(parser: argparse.ArgumentParser, default_run: str | None = None) -> None:
    """--run / --backend / --attribute-noise, shared by simulate and chat (--device: add_common_options);
    ``default_run``: the model without --run (None: one of --run / --backend is required)."""
    which = parser.add_mutually_exclusive_group(required=default_run is None)
    which.add_argument(
        "--run",
        metavar="RUN_DIR",
        default=default_run,
        help=RUN_HELP + " (the neural pipeline)" + (f"; default: {default_run}" if default_run else ""),
    )
    which.add_argument(
        "--backend",
        choices=("attribute",),
        help="no model: the attribute backend over the gallery's ground-truth attributes",
    )
    parser.add_argument(
        "--attribute-noise",
        type=float,
        default=None,
        metavar="STD",
        help="attribute backend: logit noise of a simulated attribute classifier (default: exact truth)",
    )
    add_text_precision_argument(parser)
    add_image_precision_argument(parser)


def check_backend_arguments(args: argparse.Namespace) -> None:
    """Refuse a combination of backend options that cannot work, before any data is read."""
    if getattr(args, "backend", None) == "attribute" and getattr(args, "text_precision", "fp32") != "fp32":
        raise CLIError("--text-precision needs --run: the attribute backend encodes no text")
    if getattr(args, "backend", None) == "attribute" and getattr(args, "image_precision", "fp32") != "fp32":
        raise CLIError("--image-precision needs --run: the attribute backend encodes no images")


def load_backend(args: argparse.Namespace) -> tuple[RetrievalBackend, "RunExtras"]:
    """The backend chosen on the command line, and what training fitted for it (a
    :class:`~minterpr.interaction.fitted.RunExtras`: ``--run``'s, chosen on val at training time;
    empty for the attribute backend, so its ``rerank_config()`` and ``match_temperature()`` are the
    defaults).

    ``--run`` loads through :func:`load_pipeline_of` (a run directory or a model file): a broken run
    raises :class:`~minterpr.errors.RunError` (one line, exit 2)."""
    from minterpr.interaction.fitted import RunExtras

    if args.backend == "attribute":
        from minterpr.interaction.attribute_backend import AttributeBackend

        return AttributeBackend(noise=args.attribute_noise, seed=getattr(args, "seed", 0)), RunExtras()
    pipeline = load_pipeline_of(args)
    return pipeline.backend, pipeline.extras


APPEARANCE_HELP = (
    "the appearance (same-person) model whose vectors the gallery keeps beside the embeddings: "
    "auto (default: the shipped one beside a shipped attribute model, none beside other runs), "
    "shipped, a model directory or a reid run's best.pt, or none"
)


def add_appearance_argument(parser: argparse.ArgumentParser) -> None:
    """``--appearance auto|shipped|none|PATH``, wherever a command loads a model to embed a gallery."""
    parser.add_argument("--appearance", default="auto", metavar="auto|shipped|none|PATH", help=APPEARANCE_HELP)


def load_pipeline_of(
    args: argparse.Namespace, run: str | Path | None = None, *, batch_size: int | None = None
) -> "Pipeline":
    """``run`` (default ``--run``) through :func:`minterpr.runtime.pipeline.load_pipeline`, the one
    way commands load a trained model: on ``--device`` (cpu when absent), with ``--text-precision``,
    ``--image-precision`` and ``--appearance`` where the command has them (without it: no appearance model). A broken run raises :class:`~minterpr.errors.RunError` (one line, exit 2)."""
    from minterpr.runtime.pipeline import load_pipeline

    sizes = {} if batch_size is None else {"batch_size": batch_size}  # None: load_pipeline's default
    return load_pipeline(
        args.run if run is None else run,
        device=getattr(args, "device", None) or DEFAULT_DEVICE,
        text_precision=getattr(args, "text_precision", "fp32"),
        image_precision=getattr(args, "image_precision", "fp32"),
        # commands without --appearance keep no gallery: its vectors would go unused
        appearance=getattr(args, "appearance", None),
        **sizes,
    )


def build_index(
    backend: RetrievalBackend, images: list[GalleryImage], root: str, *, complete: bool = True, progress: bool = True
) -> GalleryIndex:
    """The gallery's index; ``complete``: refuse one with skipped (unreadable) images;
    ``progress``: a progress bar when stderr is a terminal."""
    try:
        index = backend.index_images(images, root=root, progress=progress and sys.stderr.isatty())
    except ValueError as err:
        raise CLIError(str(err)) from None
    # simulate draws its targets from the gallery list: an image left out would shift their positions
    return index.require_complete("a simulated evaluation") if complete else index


def add_batch_size_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """--batch-size, the loaded model's batch (``what`` it counts), at the backend's default."""
    parser.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH_SIZE,
        help=f"{what} per forward pass (default {DEFAULT_BATCH_SIZE})",
    )


def add_text_precision_argument(parser: argparse.ArgumentParser) -> None:
    """--text-precision, for the commands that encode conversations with a trained model."""
    parser.add_argument(
        "--text-precision",
        choices=("fp32", "int8"),
        default="fp32",
        help="the query text encoder's weights on ONNX Runtime (CPU): int8 makes a turn's new "
        "utterance ~1.5-2x faster and moves its features a little (default: fp32)",
    )


def add_image_precision_argument(parser: argparse.ArgumentParser) -> None:
    """--image-precision, for the commands that embed a gallery with a trained model."""
    parser.add_argument(
        "--image-precision",
        choices=("fp32", "int8"),
        default="fp32",
        help="the attribute model's image tower on ONNX Runtime (CPU): int8 uses the int8 file its model "
        "directory holds (`minterpr models quantize`); faster on some CPUs only, embeddings within mean "
        "cosine ~0.99, a little less accurate (default: fp32)",
    )


def gallery_images(images_dir: Path, gallery: str | None, split: str) -> list[GalleryImage]:
    """The manifest given, else ``gallery_<split>.jsonl`` in the directory, else every image file in it.
    A directory minterpr built must be a finished, unchanged build (DatasetError otherwise)."""
    from minterpr.data.dataset import BuiltDataset
    from minterpr.data.formats.gallery import read_gallery

    data = BuiltDataset(images_dir)
    data.check()  # a folder without a build marker is read as it is
    if gallery is not None:
        return read_gallery(gallery)
    manifest = data.gallery_path(split)
    if manifest.is_file():
        return data.gallery(split)
    files = data.image_files()
    if not files:
        raise CLIError(f"no gallery manifest ({manifest.name}) and no images in {images_dir}")
    return [GalleryImage(str(p.relative_to(images_dir)), f"local:{i}") for i, p in enumerate(files)]


def describe_choices(extras: "RunExtras") -> str:
    """One line per post-training choice stored with the model
    (:func:`minterpr.training.post_training.calibrate_and_choose_weight`), for the console."""
    lines = []
    if extras.calibration is not None:
        c = extras.calibration
        lines.append(
            f"attribute temperatures fitted on {c.split}: summed slot NLL {c.nll_before:.2f} -> "
            f"{c.nll_after:.2f} ({len(c.temperatures)} slots)"
        )
    if extras.scoring is not None and extras.selection is not None:
        table = ", ".join(f"w={w}: {r1:.1f}" for w, r1 in extras.selection.r1_last_by_weight.items())
        lines.append(
            f"attribute weight {extras.scoring.attribute_weight:g} chosen on {extras.selection.split} "
            f"(R@1 after the last round: {table})"
        )
    return "\n".join(lines)
