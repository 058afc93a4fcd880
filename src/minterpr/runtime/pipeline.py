"""The public entry point: load a trained run, index a gallery, converse with it.

Example (with a trained run and a folder of photos):
    >>> from minterpr import load_pipeline
    >>> pipe = load_pipeline("runs/synthetic")  # doctest: +SKIP
    >>> gallery = pipe.index_images(["a.jpg", "b.jpg"], root="photos")  # doctest: +SKIP
    >>> session = pipe.session(gallery)  # doctest: +SKIP
    >>> step = session.describe("a young woman in a red jacket and jeans")  # doctest: +SKIP
    >>> step.ranking[:5], step.action  # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from minterpr.errors import InputError
from minterpr.index.gallery_index import GalleryIndex
from minterpr.runtime.neural_backend import DEFAULT_BATCH_SIZE, RUN_ENGINE
from minterpr.runtime.run import RunExtras, TrainedRun, load_run
from minterpr.types import GalleryImage

if TYPE_CHECKING:  # for type checkers only: sessions and models load when used
    from minterpr.runtime.appearance import Appearance
    from minterpr.interaction.reranking import RerankConfig
    from minterpr.interaction.session import Session
    from minterpr.models.query_model import RetrievalModel
    from minterpr.runtime.neural_backend import NeuralBackend


@dataclass
class Pipeline:
    """A trained model ready to index galleries and run search sessions: the loaded run (the model
    and what training chose for it) and the backend that encodes with it; everything about the run
    is read from :attr:`run`, never copied."""

    run: TrainedRun  # the model, where it was read from, its typed extras (scoring, calibration, fitted records)
    backend: "NeuralBackend"  # the run's model as a RetrievalBackend (indexing, query encoding)
    # the appearance model (same-person vectors, minterpr.runtime.appearance); None = none loaded:
    #   image-to-image comparisons then fall back to the attribute model's embedding
    appearance: "Appearance | None" = None

    @property
    def model(self) -> "RetrievalModel":
        return self.run.model

    @property
    def extras(self) -> RunExtras:
        """What training stored with the model (:class:`~minterpr.interaction.fitted.RunExtras`)."""
        return self.run.extras

    @property
    def run_dir(self) -> Path | None:
        """The run directory the model came from; None when a model file or directory was given."""
        return self.run.run_dir

    @property
    def model_path(self) -> Path:
        """The model file (or exported directory) it was read from: where fitted records are stored."""
        return self.run.model_path

    @property
    def fingerprint(self) -> str:
        """The model's fingerprint (:attr:`TrainedRun.fingerprint`): what a stored gallery records
        (``minterpr.index.store.gallery_store``) and is checked against when reopened."""
        return self.run.fingerprint

    @property
    def appearance_fingerprint(self) -> str | None:
        """The appearance model's fingerprint (what a store's ``appearance.npy`` records); None without one."""
        return None if self.appearance is None else self.appearance.fingerprint

    def rerank_config(self) -> "RerankConfig":
        """The :class:`~minterpr.interaction.reranking.RerankConfig` sessions use by default: the
        stored scoring (attribute weight and probability floor), else the defaults."""
        return self.run.rerank_config()

    def evidence_policy(self) -> Any:
        """The :class:`~minterpr.interaction.explain.EvidencePolicy` of this run's fitted records:
        which facts its explanations may mark ✓ / ✗ (confident, calibrated, recognisable labels, and
        the slot answer the slot answer calibration supports, when fitted)."""
        from minterpr.interaction.explain import EvidencePolicy

        return EvidencePolicy.from_extras(self.extras)

    def index_images(
        self,
        paths: Sequence[str | GalleryImage],
        person_ids: Sequence[str] | None = None,
        camera_ids: Sequence[str | None] | None = None,
        *,
        root: str | None = None,
        progress: bool = True,
        strict: bool = False,
    ) -> GalleryIndex:
        """Embed gallery images (batched, with a progress bar) into a searchable index.

        ``paths`` are image paths (relative to ``root`` when given) or GalleryImage records.
        Person ids are optional: an unknown person gets its own id per image. Wrong types or
        lengths raise :class:`~minterpr.errors.InputError` before anything is read. An image
        that cannot be read is skipped and listed in the index's ``skipped``
        (``skipped_summary()``); ``strict=True`` raises its ImageError instead.
        """
        items = _sequence(paths, "paths", "image paths or GalleryImage records")
        if not items:
            raise InputError("index_images: no images given (paths is empty)")
        pids = None if person_ids is None else _sequence(person_ids, "person_ids", "person id strings")
        cameras = None if camera_ids is None else _sequence(camera_ids, "camera_ids", "camera id strings or None")
        for name, ids, optional in (("person_ids", pids, False), ("camera_ids", cameras, True)):
            if ids is None:
                continue
            if len(ids) != len(items):
                raise InputError(f"index_images: {len(ids)} {name} for {len(items)} images")
            for k, value in enumerate(ids):
                if not (isinstance(value, str) or (optional and value is None)):
                    raise InputError(
                        f"index_images: {name}[{k}] must be a string"
                        f"{' or None' if optional else ''}, got {type(value).__name__}"
                    )
        images = []
        for k, item in enumerate(items):
            if isinstance(item, GalleryImage):
                images.append(item)
            elif isinstance(item, (str, os.PathLike)):
                images.append(
                    GalleryImage(
                        os.fspath(item),
                        pids[k] if pids is not None else f"gallery:{k}",
                        camera_id=cameras[k] if cameras is not None else None,
                    )
                )
            else:
                raise InputError(
                    f"index_images: paths[{k}] must be an image path or a GalleryImage, got {type(item).__name__}"
                )
        index = self.backend.index_images(images, root=root, progress=progress, strict=strict)
        if self.appearance is not None:  # the images the attribute model read: readable, inside the root
            index = self.appearance.add_to(index, allow_outside_root=self.backend.allow_outside_root)
        return index

    def session(self, gallery: GalleryIndex, **options: Any) -> "Session":
        """A new interactive :class:`~minterpr.interaction.session.Session` over ``gallery``.

        Options are Session's keywords (question_policy, reference_policy, reranking, seed, ...);
        ``reranking`` defaults to :meth:`rerank_config`, ``evidence`` to :meth:`evidence_policy`,
        ``match_temperature`` to the run's fitted one (``RunExtras.match_temperature``), ``appearance``
        to the pipeline's appearance model.
        """
        from minterpr.interaction.session import Session

        options.setdefault("reranking", self.rerank_config())
        options.setdefault("evidence", self.evidence_policy())
        options.setdefault("match_temperature", self.extras.match_temperature())
        options.setdefault("appearance", self.appearance)  # embeds example images outside the gallery
        return Session(self.backend, gallery, **options)


def _sequence(values: Any, name: str, what: str) -> list[Any]:
    """``values`` as a list; one string (or a non-sequence) is refused, not split into characters."""
    if isinstance(values, (str, bytes, os.PathLike)) or not hasattr(values, "__iter__"):
        raise InputError(f"index_images: {name} must be a list of {what}, got {type(values).__name__}")
    return list(values)


def load_pipeline(
    run_dir: str | Path = "shipped",
    *,
    device: str = "cpu",
    batch_size: int = DEFAULT_BATCH_SIZE,
    engine: str = RUN_ENGINE,
    onnx_cache: str | Path | None = None,
    text_precision: str = "fp32",
    image_precision: str = "fp32",
    appearance: str | Path | None = "auto",
) -> Pipeline:
    """Load a run directory (its ``model.pt``, written by ``minterpr train``), a model file, a
    model directory (``minterpr models export``: safetensors + JSON), ``"shipped[:NAME]"`` or
    ``"hf-hub:ORG/NAME[@REV]"`` (:mod:`minterpr.models.zoo`) as a pipeline; CPU by default.
    Without a run: the shipped real-pixel model. A broken or missing run raises :class:`~minterpr.errors.RunError`
    (see :func:`minterpr.runtime.run.load_run`). ``engine`` and ``onnx_cache``: what encodes
    gallery images (:class:`~minterpr.runtime.neural_backend.NeuralBackend`; "auto" = ONNX Runtime
    on CPU when installed, same results as "torch" to ~1e-6, 2.5-4x faster). ``text_precision``
    "int8" runs the query text encoder with int8 weights (opt-in; faster turns, features within
    cosine ~0.97 of fp32, replay accuracy in docs/benchmarks.md). ``image_precision`` "int8" encodes
    gallery images with the int8 image tower a model directory ships (opt-in; ~1.6x faster on
    2 cores, figures in docs/benchmarks.md; InputError where the model has none). ``appearance``: the appearance
    model whose vectors the pipeline's galleries carry beside the embeddings
    (:func:`~minterpr.runtime.appearance.choose_appearance`): ``"auto"`` (default) = the shipped one
    beside a shipped real-pixel attribute model, none beside any other run; ``"shipped"`` or a path
    (a model directory, a reid run's ``best.pt``) = that one; ``None`` / ``"none"`` = none."""
    run = load_run(run_dir, device=device)
    backend = run.backend(
        batch_size, engine=engine, onnx_cache=onnx_cache, text_precision=text_precision, image_precision=image_precision
    )
    from minterpr.models.onnx_export import sibling_onnx_path
    from minterpr.runtime.appearance import choose_appearance

    # the appearance model computes where the attribute model does: ONNX Runtime on the CPU unless engine="torch"
    looks = choose_appearance(
        appearance,
        run.model_path,
        engine="torch" if str(device) != "cpu" else engine,
        onnx_cache=sibling_onnx_path(onnx_cache, "appearance"),
    )
    return Pipeline(run, backend, looks)
