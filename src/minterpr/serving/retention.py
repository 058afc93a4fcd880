"""Retention: forget what is older than N days.

:func:`purge` removes

* **sessions** not touched for N days: their events, their uploaded example images;
* **videos** uploaded from the ingestion page more than N days ago (the file's time), unless a job
  still uses it: one that has not ended (queued or running), or an ingestion stopped (cancelled,
  interrupted or failed: its Resume reads the video again) less than N days ago — a stopped job
  nobody resumed for N days no longer holds its video, else one failed job would keep footage for
  ever. Each removed video is audited as ``video_expired`` (its file, as ``video_upload`` named
  it); the crops already cut from it are images of their gallery, under the rule below;
* **images** captured more than N days ago (the ``time`` of their metadata) from every gallery
  store: the store is rewritten without their embeddings, attribute probabilities and records
  (and its vector index rebuilt); in galleries the service ingested itself (``managed``) their
  crop files are deleted too — a registered folder of someone else's images is left on disk;
* expired logins.

Images without a capture time are kept (nothing says they are old). The audit log is not
purged: it is the record of what was done with the data, and holds paths and texts, not
pictures. A purge is itself audited. Sessions over a rewritten store replay by image path; one
that named a purged image can no longer be rebuilt and answers 410.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from minterpr.serving.service import build_services
    >>> from minterpr.serving.settings import ServeSettings
    >>> services = build_services(ServeSettings(data_dir=Path(tempfile.mkdtemp())))
    >>> purge(services, 30).model_dump()
    {'days': 30, 'sessions': 0, 'events': 0, 'uploads': 0, 'videos': 0, 'images': 0, 'galleries': []}
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import numpy as np
from sqlalchemy import delete, select

from minterpr.data.paths import resolve_under
from minterpr.errors import InputError, MinterprError
from minterpr.serving import audit
from minterpr.serving.db import IngestJob, Login, SearchSession, SessionEvent, now
from minterpr.serving.jobs import RESUMABLE
from minterpr.serving.schemas.search import RetentionReport

DAY = 86400.0


def purge(services: Any, days: int, *, by: str | None = None, clock: float | None = None) -> RetentionReport:
    """Apply an N-day retention to the service's state (see the module doc); returns what was removed."""
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise InputError(f"retention needs a whole number of days >= 1, got {days!r}")
    cutoff = (now() if clock is None else clock) - days * DAY
    db, settings = services.db, services.settings
    with db.write() as tx:
        old = list(tx.scalars(select(SearchSession.id).where(SearchSession.updated < cutoff)))
        removed_events = 0
        for sid in old:
            removed_events += tx.execute(delete(SessionEvent).where(SessionEvent.session_id == sid)).rowcount or 0
            tx.execute(delete(SearchSession).where(SearchSession.id == sid))
        tx.execute(delete(Login).where(Login.expires < cutoff))
    uploads = 0
    for sid in old:
        folder = settings.uploads_dir / sid
        if folder.is_dir():
            uploads += sum(1 for _ in folder.iterdir())
            shutil.rmtree(folder, ignore_errors=True)
    videos = _purge_videos(services, cutoff)
    services.search.forget()
    images, touched = 0, []
    for row in services.galleries.rows():
        removed = _purge_gallery(services, row, cutoff)
        if removed:
            images += removed
            touched.append(row.name)
    report = RetentionReport(
        days=days,
        sessions=len(old),
        events=removed_events,
        uploads=uploads,
        videos=len(videos),
        images=images,
        galleries=touched,
    )
    with db.write() as tx:
        for name in videos:
            audit.append(tx, by, "video_expired", None, {"file": name})
        audit.append(tx, by, "retention_purge", None, report.model_dump())
    return report


def _purge_videos(services: Any, cutoff: float) -> list[str]:
    """Remove the uploaded videos (and stray partial uploads) last written before ``cutoff`` that no job
    uses (queued or running, or stopped after ``cutoff`` so it may resume); returns the removed files' names."""
    folder = services.settings.video_uploads_dir
    if not folder.is_dir():
        return []
    with services.db.transaction() as tx:
        # a stopped job's `updated` is when it stopped (an interrupted one's: when the server came back)
        in_use = IngestJob.status.in_(("queued", "running")) | (
            IngestJob.status.in_(RESUMABLE) & (IngestJob.updated >= cutoff)
        )
        busy = {os.path.realpath(source) for source in tx.scalars(select(IngestJob.source).where(in_use))}
    removed: list[str] = []
    for path in sorted(folder.iterdir()):
        try:
            if not path.is_file() or path.stat().st_mtime >= cutoff or os.path.realpath(path) in busy:
                continue
            path.unlink()
        except OSError:
            continue  # gone meanwhile, or not ours to remove: the next purge tries again
        removed.append(path.name)
    return removed


def _purge_gallery(services: Any, row: Any, cutoff: float) -> int:
    """Rewrite one store without its images older than ``cutoff``; returns how many were removed."""
    from minterpr.index.store.fused_store import build_fused
    from minterpr.index.store.gallery_store import save_gallery
    from minterpr.index.store.store_vectors import build_vector_index

    loaded = services.galleries.get(gallery_id=row.id)
    old = loaded.times < cutoff  # NaN (no time) compares False: kept
    if not old.any():
        return 0
    keep = np.flatnonzero(~old)
    index = loaded.index.subset(keep)
    index.skipped = loaded.index.skipped
    metadata = [loaded.metadata[i] for i in keep.tolist()]
    fingerprint = loaded.pipeline.fingerprint
    backend = _vector_backend(loaded)
    vectors = (
        build_vector_index(backend, index, metadata, model_fingerprint=fingerprint)
        if backend is not None and len(keep)
        else None
    )
    removed_paths = [loaded.index.images[i].path for i in np.flatnonzero(old).tolist()]
    # the frames the removed crops were cut from go too, unless a kept crop was cut from the same frame
    kept_frames = {m.get("frame_image") for m in metadata}
    removed_paths += sorted(
        {
            loaded.metadata[i]["frame_image"]
            for i in np.flatnonzero(old).tolist()
            if isinstance(loaded.metadata[i].get("frame_image"), str)
        }
        - kept_frames
    )
    old_fused = loaded.index.fused  # a store that had a fused index keeps one, with its probe settings
    fused = build_fused(index, like=old_fused.params()) if old_fused is not None and len(keep) else None
    save_gallery(
        index,
        loaded.directory,
        model_fingerprint=fingerprint,
        vector_index=vectors,
        metadata=metadata,
        rebuild=_rebuild(loaded.directory),
        fused_index=fused,
    )
    if loaded.managed and loaded.index.root is not None:
        for path in removed_paths:
            try:
                os.remove(resolve_under(loaded.index.root, path))
            except (OSError, InputError):
                pass  # already gone, or not under the root: never delete outside the gallery's folder
    services.galleries.bump(row.name)
    return int(old.sum())


def _vector_backend(loaded: Any) -> str | None:
    vectors = getattr(loaded.index, "vectors", None)
    return None if vectors is None else str(vectors.name)


def _rebuild(directory: str) -> str | None:
    from minterpr.index.store.gallery_store import read_manifest

    try:
        return read_manifest(directory).rebuild
    except MinterprError:  # the old manifest's command is a nicety
        return None
