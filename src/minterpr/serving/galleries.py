"""Galleries the service searches: a name -> a gallery store and the run that built it.

:class:`Galleries` registers stores (checked: a finished store, built by that run's model),
opens them once per version (memory-mapped; the model of each run loaded once and shared) and
cuts them to a case's scope: the images of the allowed cameras whose time lies in the allowed
window. An image's camera is its ``camera_id``; its time the ``time`` of its free metadata (ISO
8601, or UNIX seconds); with a time bound in the scope, images without a time are out of it.
With ``caption_weight`` (``serve --vlm-captions``), a store holding MTG captions (its
``vlm_captions.jsonl``, :func:`minterpr.vlm.caption.use_captions`) is searched with their evidence
beside the image model's; a store without them as before. Captions written to a store that is
already open take effect when it is opened again (``Galleries.bump``, a re-registration, a restart).

Example:
    >>> import numpy as np
    >>> times = np.array([0.0, 50.0, np.nan]); cams = np.array(["a", "b", "a"], dtype=object)
    >>> scope_rows(cams, times, ["a"], None, None).tolist(), scope_rows(cams, times, None, 10.0, None).tolist()
    ([0, 2], [1])
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from sqlalchemy import select

from minterpr.errors import MinterprError
from minterpr.serving import audit
from minterpr.serving.db import Database, GalleryRow, now
from minterpr.serving.errors import ApiError, public_message
from minterpr.serving.schemas.search import GalleryView

TIME_KEY = "time"  # the metadata key of an image's capture time
MAX_SCOPES = 8  # scoped indexes kept per gallery (a scope's index copies its embeddings: N x D x 4 bytes at most)


def parse_time(value: Any) -> float:
    """UNIX seconds of an ISO 8601 string (naive = UTC), a datetime or a number; NaN when there is none.

    >>> parse_time("1970-01-01T00:01:00Z"), parse_time(12), math.isnan(parse_time(None))
    (60.0, 12.0, True)
    """
    if value is None or isinstance(value, bool):
        return math.nan
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else math.nan
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return math.nan
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.timestamp()
    return math.nan


def format_time(seconds: float | None) -> str | None:
    """ISO 8601 UTC of UNIX seconds (None for NaN / None)."""
    if seconds is None or math.isnan(seconds):
        return None
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat()


def scope_rows(
    cameras: np.ndarray, times: np.ndarray, allowed: Sequence[str] | None, start: float | None, end: float | None
) -> np.ndarray:
    """Gallery positions inside a scope (``allowed`` cameras, None = all; ``start``/``end`` seconds, None = open)."""
    keep = np.ones(len(cameras), dtype=bool)
    if allowed is not None:
        keep &= np.isin(cameras, np.array(list(allowed), dtype=object))
    if start is not None:
        keep &= times >= start  # NaN compares False: an image without a time is out
    if end is not None:
        keep &= times <= end
    return np.flatnonzero(keep)


@dataclass
class LoadedGallery:
    """A registered gallery, opened: the index (shared, read-only) and per-image camera and time."""

    id: int
    name: str
    version: int
    directory: str
    run_dir: str
    managed: bool
    pipeline: Any  # minterpr.runtime.pipeline.Pipeline of the run
    backend: Any  # the run's backend for sessions: the same model, reading example images the service stored
    index: Any  # GalleryIndex (memory-mapped, with its vector index)
    metadata: list[dict[str, Any]]  # free metadata per image
    cameras: np.ndarray  # (N,) object: camera id or None
    times: np.ndarray  # (N,) float64 UNIX seconds, NaN = unknown
    captions: dict[str, Any] = field(default_factory=dict)  # the MTG captions searched with ({} = none)
    _scoped: dict[tuple, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def view(self) -> GalleryView:
        known = self.times[~np.isnan(self.times)]
        cams = sorted({c for c in self.cameras.tolist() if c is not None})
        as_dt = lambda t: datetime.fromtimestamp(float(t), timezone.utc)
        return GalleryView(
            name=self.name,
            images=len(self.index),
            cameras=cams,
            time_start=as_dt(known.min()) if len(known) else None,
            time_end=as_dt(known.max()) if len(known) else None,
            model_fingerprint=self.pipeline.fingerprint,
            version=self.version,
        )

    def scoped(
        self, cameras: Sequence[str] | None, start: float | None, end: float | None
    ) -> tuple[np.ndarray | None, Any]:
        """(rows, index) of a scope: rows None and the whole index when the scope holds every image,
        else the gallery positions and an index of those images (cached per scope)."""
        key = (None if cameras is None else tuple(sorted(cameras)), start, end)
        with self._lock:
            if key not in self._scoped:
                rows = scope_rows(self.cameras, self.times, cameras, start, end)
                if len(rows) == len(self.index):
                    self._scoped[key] = (None, self.index)
                else:
                    self._scoped[key] = (rows, self.index.subset(rows) if len(rows) else None)
                if len(self._scoped) > MAX_SCOPES:  # each holds a copy of its rows: forget the oldest
                    self._scoped.pop(next(iter(self._scoped)))
            return self._scoped[key]


class Galleries:
    """The registry (database) and the opened galleries (memory)."""

    def __init__(
        self, db: Database, device: str = "cpu", caption_weight: float | None = None, *, appearance: str = "auto"
    ) -> None:
        self.db = db
        self.device = device  # where every run's model is loaded
        self.appearance = appearance  # the appearance model beside each run (load_pipeline's appearance=)
        self.caption_weight = caption_weight  # MTG captions a store holds, at this weight; None = not read
        self._pipelines: dict[str, tuple[Any, Any]] = {}
        self._loaded: dict[int, LoadedGallery] = {}
        self._lock = threading.Lock()
        self._open_lock = threading.Lock()
        from minterpr.index.vectors.vector_index import VECTOR_INDEXES

        VECTOR_INDEXES.names()  # register the backends now: their lazy first import is not thread-safe

    def pipeline(self, run_dir: str) -> Any:
        """The run's pipeline, loaded once (RunError for a broken run)."""
        return self._run(run_dir)[0]

    def _run(self, run_dir: str) -> tuple[Any, Any]:
        """(pipeline, session backend) of a run. The session backend is a shallow copy of the pipeline's
        (one model, one text cache) that may read images outside the gallery root: uploaded examples
        live in the service's folder, and sessions only ever receive paths the service made."""
        with self._lock:
            if run_dir not in self._pipelines:
                import copy

                from minterpr.runtime.pipeline import load_pipeline

                pipeline = load_pipeline(run_dir, device=self.device, appearance=self.appearance)
                backend = copy.copy(pipeline.backend)
                backend.allow_outside_root = True
                self._pipelines[run_dir] = (pipeline, backend)
            return self._pipelines[run_dir]

    def register(
        self, name: str, directory: str | Path, run_dir: str | Path, *, by: str | None = None, managed: bool = False
    ) -> LoadedGallery:
        """Add (or re-point) gallery ``name``; the store must open with the run's model (DatasetError /
        RunError otherwise, as 422)."""
        directory, run_dir = str(Path(directory).absolute()), str(Path(run_dir).absolute())
        try:
            self._open(0, name, 0, directory, run_dir, managed)  # refuse before anything is recorded
        except MinterprError as err:
            raise ApiError(422, "bad_gallery", str(err), field="directory") from None
        with self.db.write() as tx:
            row = tx.scalar(select(GalleryRow).where(GalleryRow.name == name))
            if row is None:
                row = GalleryRow(
                    name=name, directory=directory, run_dir=run_dir, created=now(), version=1, managed=managed
                )
                tx.add(row)
            else:
                row.directory, row.run_dir, row.version, row.managed = directory, run_dir, row.version + 1, managed
            tx.flush()
            audit.append(tx, by, "gallery_register", None, {"gallery": name, "directory": directory, "run": run_dir})
            gallery_id = row.id
        return self.get(name, gallery_id=gallery_id)

    def bump(self, name: str) -> None:
        """Mark a gallery's store as rewritten: sessions over it are rebuilt from their events."""
        with self.db.write() as tx:
            row = tx.scalar(select(GalleryRow).where(GalleryRow.name == name))
            if row is not None:
                row.version += 1

    def rows(self) -> list[GalleryRow]:
        with self.db.transaction() as tx:
            return list(tx.scalars(select(GalleryRow).order_by(GalleryRow.name)))

    def get(self, name: str | None = None, *, gallery_id: int | None = None) -> LoadedGallery:
        """The opened gallery by name or id (opened again when its version changed); 404 when unknown."""
        with self.db.transaction() as tx:
            query = select(GalleryRow).where(
                GalleryRow.id == gallery_id if gallery_id is not None else GalleryRow.name == name
            )
            row = tx.scalar(query)
        if row is None:
            raise ApiError(
                404, "not_found", f"no gallery {name if name is not None else gallery_id!r}", field="gallery"
            )
        loaded = self._loaded.get(row.id)
        if loaded is None or loaded.version != row.version:
            with self._open_lock:  # one thread opens a gallery; the others wait and share it
                loaded = self._loaded.get(row.id)
                if loaded is None or loaded.version != row.version:
                    try:
                        loaded = self._open(row.id, row.name, row.version, row.directory, row.run_dir, row.managed)
                    except MinterprError as err:
                        raise ApiError(
                            409, "gallery_unavailable", public_message(f"gallery {row.name!r} cannot be opened: {err}")
                        ) from None
                    self._loaded[row.id] = loaded
        return loaded

    def current(self, gallery_id: int, version: int) -> LoadedGallery | None:
        """The opened gallery when it is open at ``version`` (no database read), else None."""
        loaded = self._loaded.get(gallery_id)
        return loaded if loaded is not None and loaded.version == version else None

    def list(self) -> list[GalleryView]:
        return [self.get(gallery_id=row.id).view() for row in self.rows()]

    def _open(
        self, gallery_id: int, name: str, version: int, directory: str, run_dir: str, managed: bool
    ) -> LoadedGallery:
        from minterpr.index.store.gallery_store import open_gallery

        pipeline, backend = self._run(run_dir)
        stored = open_gallery(directory, expected_fingerprint=pipeline.fingerprint)
        from minterpr.runtime.appearance import calibrated_for

        # sessions compare images by appearance when the vectors are the loaded appearance model's
        index, captions = calibrated_for(stored.index, stored.manifest.appearance, pipeline.appearance), {}
        if self.caption_weight is not None:
            from minterpr.vlm.caption import use_captions

            index, captions = use_captions(index, directory, self.caption_weight)
        _warm_up(backend, index)
        metadata = stored.metadata
        cameras = np.array([image.camera_id for image in index.images], dtype=object)
        times = np.array([parse_time(m.get(TIME_KEY)) for m in metadata], dtype=np.float64)
        return LoadedGallery(
            gallery_id,
            name,
            version,
            directory,
            run_dir,
            managed,
            pipeline,
            backend,
            index,
            metadata,
            cameras,
            times,
            captions,
        )


def _warm_up(backend: Any, index: Any) -> None:
    """Encode one description now, so the first user's turn does not pay for loading the text encoder
    (seconds: an ONNX session is built or read from its cache)."""
    from minterpr.types import DescriptionTurn

    if len(index):
        backend.encode_turns([DescriptionTurn("a person")], index)
