"""The public entry point: load a trained run, index a gallery, converse with it.

Example:
    >>> from minterpr import load_pipeline                            # doctest: +SKIP
    >>> pipe = load_pipeline("runs/synthetic")                        # model + preprocessing, CPU
    >>> gallery = pipe.index_images(["a.jpg", "b.jpg"], root="photos")
    >>> session = pipe.session(gallery)
    >>> step = session.describe("a young woman in a red jacket and jeans")
    >>> step.ranking[:5], step.action
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from minterpr.index.gallery_index import GalleryIndex
from minterpr.types import GalleryImage


@dataclass
class Pipeline:
    """A trained model ready to index galleries and run search sessions."""

    backend: Any  # minterpr.index.neural_backend.NeuralBackend (a RetrievalBackend)
    run_dir: Path | None  # where the model came from
    # weight of the attribute evidence in re-ranking: the one `minterpr train` chose on the
    # validation split and stored in model.pt; None = the re-ranking default
    attribute_weight: float | None = None

    def rerank_config(self) -> Any:
        """The :class:`~minterpr.interaction.reranking.RerankConfig` sessions use by default."""
        from minterpr.interaction.reranking import RerankConfig

        return RerankConfig.with_attribute_weight(self.attribute_weight)

    @property
    def model(self) -> Any:
        return self.backend.model

    def index_images(self, paths: Sequence[str | GalleryImage], person_ids: Sequence[str] | None = None,
                     camera_ids: Sequence[str | None] | None = None, *, root: str | None = None,
                     progress: bool = True) -> GalleryIndex:
        """Embed gallery images (batched, with a progress bar) into a searchable index.

        ``paths`` are image paths (relative to ``root`` when given) or GalleryImage records.
        Person ids are optional: an unknown person gets its own id per image.
        """
        images = []
        for k, item in enumerate(paths):
            if isinstance(item, GalleryImage):
                images.append(item)
                continue
            pid = person_ids[k] if person_ids is not None else f"gallery:{k}"
            camera = camera_ids[k] if camera_ids is not None else None
            images.append(GalleryImage(str(item), pid, camera_id=camera))
        if person_ids is not None and len(person_ids) != len(images):
            raise ValueError(f"{len(person_ids)} person ids for {len(images)} images")
        return self.backend.index_images(images, root=root, progress=progress)

    def session(self, gallery: GalleryIndex, **options: Any) -> Any:
        """A new interactive :class:`~minterpr.interaction.session.Session` over ``gallery``.

        Options are Session's keywords (question_policy, reference_policy, reranking, seed, ...);
        ``reranking`` defaults to :meth:`rerank_config`.
        """
        from minterpr.interaction.session import Session

        options.setdefault("reranking", self.rerank_config())
        return Session(self.backend, gallery, **options)


def load_pipeline(run_dir: str | Path, *, device: str = "cpu", batch_size: int = 64) -> Pipeline:
    """Load ``RUN_DIR/model.pt`` (written by ``minterpr train``) as a pipeline; CPU by default."""
    path = Path(run_dir)
    model_path = path / "model.pt" if path.is_dir() else path
    if not model_path.is_file():
        raise FileNotFoundError(f"{model_path} not found: train a model first "
                                f"(`minterpr train --config synthetic --data DATA --out {run_dir}`)")
    from minterpr.index.neural_backend import NeuralBackend
    from minterpr.models.io import model_from_checkpoint, read_checkpoint

    payload = read_checkpoint(model_path, map_location=device)
    model = model_from_checkpoint(payload, map_location=device)
    scoring = payload["extra"].get("scoring") or {}
    weight = scoring.get("attribute_weight")
    return Pipeline(NeuralBackend(model, device=device, batch_size=batch_size), path if path.is_dir() else None,
                    None if weight is None else float(weight))
