"""The appearance model at run time: same-person vectors of gallery crops, beside the attribute model.

The attribute model's embedding meets text and predicts attributes; it was never trained to tell
two people apart. The appearance model (:class:`~minterpr.models.reid.ReidModel`, an OSNet trained
on identities) is: its vectors are what "search with this image", reference-image feedback,
duplicates and presence compare. A gallery index carries them as ``GalleryIndex.appearance``
(``(N, A)`` float32, L2-normalised rows) beside its ``embeddings``; a stored gallery keeps them in
``appearance.npy`` with the appearance model's fingerprint.

Example (with a trained appearance model):
    >>> from minterpr.runtime.appearance import load_appearance
    >>> appearance = load_appearance("runs/reid/best.pt")  # doctest: +SKIP
    >>> vectors, kept, failed = appearance.embed_files(["a.jpg", "b.jpg"])  # doctest: +SKIP
    >>> vectors.shape  # doctest: +SKIP
    (2, 512)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from minterpr.errors import ImageError, InputError
from minterpr.data.paths import resolve_under
from minterpr.index.gallery_index import GalleryIndex

if TYPE_CHECKING:
    from minterpr.interaction.appearance import SamePersonCalibration
    import torch

    from minterpr.models.reid import ReidModel

logger = logging.getLogger(__name__)

DEFAULT_APPEARANCE_BATCH = 64  # crops per forward pass: OSNet x0.25 at 256x128 is ~1.3 MB per crop
# what computes the vectors when no engine is named: ONNX Runtime on the CPU where installed, else torch
DEFAULT_APPEARANCE_ENGINE = "auto"


@dataclass
class Appearance:
    """A loaded appearance model and where it came from."""

    model: "ReidModel"  # eval mode, CPU
    path: Path  # the file it was read from
    batch_size: int = DEFAULT_APPEARANCE_BATCH  # crops per forward pass
    # cosine -> same-person probability fitted on val (same_person.json beside the model); None = not fitted
    same_person: "SamePersonCalibration | None" = None
    # what computes the vectors: "auto" = ONNX Runtime on the CPU where installed (same vectors to ~1e-6,
    #   faster: docs/benchmarks.md), else torch; "torch"; "onnx" (refused off the CPU)
    engine: str = "auto"
    onnx_cache: Path | None = None  # the .onnx export to reuse (None: exported in memory at first use)
    _fingerprint: str | None = field(default=None, repr=False)
    _engine: Any = field(default=None, repr=False)

    @property
    def fingerprint(self) -> str:
        """The model's fingerprint (16 hex characters): what a stored gallery's appearance vectors record."""
        if self._fingerprint is None:
            from minterpr.models.fingerprint import model_fingerprint

            self._fingerprint = model_fingerprint(self.model)
        return self._fingerprint

    @property
    def dim(self) -> int:
        return int(self.model.config.feature_dim)

    @property
    def engine_name(self) -> str:
        """ "torch" or "onnx": what computes the vectors ("auto" resolved at first use)."""
        if self._engine is None:
            from minterpr.models.onnx_reid import ReidEngine

            self._engine = ReidEngine(self.model, self.engine, cache=self.onnx_cache)
        return str(self._engine.engine_name)

    def embed_pixels(self, pixels: "torch.Tensor", *, lane: bool = False) -> np.ndarray:
        """Preprocessed crops ``(B, 3, H, W)`` -> ``(B, A)`` float32 L2-normalised vectors
        (``lane``: on the ONNX engine's one-thread twin, for batches run side by side)."""
        import torch

        if self.engine_name == "onnx":
            onnx = self._engine.onnx.lane() if lane else self._engine.onnx
            return np.asarray(onnx(pixels), dtype=np.float32)
        with torch.inference_mode():
            return self.model.embed(pixels).float().numpy()

    def embed_files(
        self, paths: Sequence[str], *, strict: bool = False
    ) -> tuple[np.ndarray, list[int], list[tuple[int, ImageError]]]:
        """Image files -> ``(k, A)`` L2-normalised vectors of the readable ones, their positions in
        ``paths``, and the ImageError of each other one (``strict``: the first is raised)."""
        import torch

        from functools import partial

        from minterpr.runtime.image_batches import encode_readable, lane_count

        lanes = lane_count(self.engine_name)
        with torch.inference_mode():
            vectors, kept, failed = encode_readable(
                list(paths),
                self.batch_size,
                self.model.preprocess,
                partial(self.embed_pixels, lane=lanes > 1),
                lanes=lanes,
                strict=strict,
            )
        out = np.concatenate(vectors) if vectors else np.zeros((0, self.dim), np.float32)
        return np.ascontiguousarray(out, dtype=np.float32), kept, failed

    def add_to(self, index: GalleryIndex, *, allow_outside_root: bool = False) -> GalleryIndex:
        """``index`` with ``appearance`` vectors for every image (a copy; the embeddings are shared).
        Every image must still be readable: the first that is not raises its ImageError, naming it."""
        paths = [
            resolve_under(index.root or None, image.path, allow_outside=allow_outside_root) for image in index.images
        ]
        vectors, _, _ = self.embed_files(paths, strict=True)
        return with_appearance(index, vectors, self.same_person)


def with_appearance(
    index: GalleryIndex, vectors: np.ndarray | None, same_person: "SamePersonCalibration | None" = None
) -> GalleryIndex:
    """A copy of ``index`` carrying ``vectors`` as its appearance (``(N, A)``, one row per image) and
    ``same_person``, their calibration (sessions compare images by appearance only with one)."""
    copy = replace(index, appearance=vectors, same_person=None if vectors is None else same_person)
    copy.vectors, copy.fused = index.vectors, index.fused
    return copy


AUTO, SHIPPED, NONE = "auto", "shipped", "none"  # the appearance choices besides a path (module doc)


def appearance_file(path: str | Path) -> Path:
    """Where the appearance model named by ``path`` lies: ``"shipped[:NAME]"`` resolved in the
    model catalogue, a directory holding ``config.json``, or a run's ``best.pt`` (a run directory
    means its ``best.pt``). A path with nothing there raises :class:`~minterpr.errors.RunError`.

    Example:
        >>> appearance_file("/nonexistent")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        minterpr.errors.RunError: /nonexistent: no appearance model here ...
    """
    from minterpr.errors import RunError
    from minterpr.models.zoo import DEFAULT_APPEARANCE_MODEL, SHIPPED_PREFIX, resolve_model

    if isinstance(path, str) and (path == SHIPPED_PREFIX or path.startswith(SHIPPED_PREFIX + ":")):
        path = f"{SHIPPED_PREFIX}:{path.partition(':')[2] or DEFAULT_APPEARANCE_MODEL}"
    file = resolve_model(path) if isinstance(path, str) else Path(path)
    if file.is_dir() and not (file / "config.json").is_file():
        file = file / "best.pt"
    if not file.exists():
        raise RunError(
            str(file),
            "no appearance model here (the shipped one: --appearance shipped; train one with "
            "`minterpr train --config reid`)",
        )
    return file


def load_appearance(
    path: str | Path,
    *,
    batch_size: int = DEFAULT_APPEARANCE_BATCH,
    engine: str | None = None,
    onnx_cache: str | Path | None = None,
) -> Appearance:
    """The appearance model in ``path``: ``"shipped"`` (or ``"shipped:NAME"``, the checked directory
    under ``models/``), an appearance model directory (safetensors + ``config.json``), a re-id run's
    ``best.pt`` or a run directory holding one. Nothing beyond tensors is unpickled.

    A missing or foreign file raises :class:`~minterpr.errors.RunError` naming it and what is missing
    (a folder of the attribute model: "holds the attribute model only").

    Example:
        >>> load_appearance("/nonexistent/best.pt")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        minterpr.errors.RunError: /nonexistent/best.pt: no appearance model here ...
    """
    from minterpr.errors import RunError
    from minterpr.models.reid_dir import load_reid_any

    if batch_size < 1:
        raise InputError(f"load_appearance: batch_size must be at least 1, got {batch_size}")
    file = appearance_file(path)
    from minterpr.interaction.appearance import read_same_person

    model = load_reid_any(file)
    try:
        same_person = read_same_person(file)
    except ValueError as err:
        raise RunError(str(file), str(err)) from None
    return Appearance(
        model,
        file,
        batch_size,
        same_person,
        engine or DEFAULT_APPEARANCE_ENGINE,
        None if onnx_cache is None else Path(onnx_cache),
    )


def choose_appearance(
    appearance: str | Path | None,
    run_path: Path | None,
    *,
    batch_size: int = DEFAULT_APPEARANCE_BATCH,
    engine: str | None = None,
    onnx_cache: str | Path | None = None,
) -> Appearance | None:
    """The appearance model a pipeline gets: ``None`` / ``"none"`` = none; ``"auto"`` = the shipped one
    when the attribute model at ``run_path`` is a shipped real-pixel model (a directory of the
    ``models/`` folder), else none (synthetic and test runs have no real people to compare);
    ``"shipped[:NAME]"`` or a path = that one (:func:`load_appearance`). A models folder holding
    the attribute model only (``$MINTERPR_MODELS`` without the appearance model) gives none under
    ``"auto"``, said in one logged line, and RunError naming ``zoo.json`` under ``"shipped"``.

    Example:
        >>> choose_appearance("none", None) is None, choose_appearance("auto", Path("runs/synth")) is None
        (True, True)
    """
    if appearance is None or appearance == NONE:
        return None
    if appearance == AUTO:
        if run_path is None or not is_shipped_attribute_model(run_path):
            return None
        from minterpr.models.zoo import DEFAULT_APPEARANCE_MODEL, shipped_models

        if DEFAULT_APPEARANCE_MODEL not in shipped_models():  # a models folder holding the attribute model only
            logger.warning(
                "no shipped appearance model (%s) beside %s: galleries get no appearance vectors; "
                "name one with --appearance PATH",
                DEFAULT_APPEARANCE_MODEL,
                run_path,
            )
            return None
        appearance = SHIPPED
    return load_appearance(appearance, batch_size=batch_size, engine=engine, onnx_cache=onnx_cache)


def is_shipped_attribute_model(path: Path) -> bool:
    """Whether ``path`` is an attribute model directory of the shipped ``models/`` folder (zoo.json)."""
    from minterpr.models.zoo import shipped_kind, shipped_models, shipped_models_dir

    try:
        root, zoo = shipped_models_dir().resolve(), shipped_models()
        where = Path(path).resolve()
    except (OSError, ValueError):
        return False
    return where.parent == root and where.name in zoo and shipped_kind(where.name) != "appearance"


def calibrated_for(index: GalleryIndex, stored: Mapping[str, Any] | None, looks: Appearance | None) -> GalleryIndex:
    """A stored gallery's ``index`` with the same-person calibration of ``looks`` (the pipeline's
    appearance model) when its vectors came from that model (``stored``: the manifest's appearance
    entry), so sessions over it compare images by appearance; unchanged otherwise (a gallery of
    another appearance model is searched as one without vectors, said in one logged line).

    Example:
        >>> import numpy as np
        >>> from minterpr.types import GalleryImage
        >>> index = GalleryIndex([GalleryImage("a.jpg", "x")], np.ones((1, 2), np.float32))
        >>> calibrated_for(index, None, None) is index
        True
    """
    if index.appearance is None or looks is None or looks.same_person is None or stored is None:
        return index
    if stored.get("model_fingerprint") != looks.fingerprint:
        logger.warning(
            "the gallery's appearance vectors come from model %s, the loaded appearance model is %s: "
            "its images are compared without them (rebuild them with `minterpr index build --update`)",
            stored.get("model_fingerprint"),
            looks.fingerprint,
        )
        return index
    return with_appearance(index, index.appearance, looks.same_person)
