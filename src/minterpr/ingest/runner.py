"""``ingest``: a video, a folder of frames or a folder of crops into a searchable gallery store.

A video (or a folder of one video's frames) is decoded, every ``every``-th frame goes through a
people detector and ByteTrack, each track keeps its best ``best_k`` crops (size, sharpness,
detector score; :mod:`minterpr.ingest.tracking`), the crops are written as JPEG files to
``GALLERY/crops/<job>/``, embedded with the run's model, and added to the gallery store
(:mod:`minterpr.ingest.storing`, through :func:`minterpr.index.store.gallery_append.append_gallery`) with their metadata: ``camera``,
``time`` (start + frame / fps, ISO), ``offset_s``, ``frame``, ``box``, ``track``, ``source``,
``job``, ``score``, ``sharpness``, ``link`` (the tracklet link group: :mod:`minterpr.ingest.links`, when
the gallery has appearance vectors), and ``frame_image`` (the frame the crop was cut from, stored
downscaled in ``GALLERY/frames/<job>/``: :mod:`minterpr.ingest.video`) with ``frame_size`` (the
source frame's [width, height], the box's pixels). A folder of crops is indexed as it is: each image one row
(copied, or hard-linked, into ``crops/<job>/``), with ``camera`` and ``time`` from the options.

When the pipeline has an appearance model (``load_pipeline(run, appearance=...)``) every crop
also gets its appearance vector (stored in ``appearance.npy`` with the model's fingerprint), and
the tracklets of the whole gallery are linked again afterwards (:func:`minterpr.ingest.links.relink`).
A gallery with appearance vectors of another model, or without any, is refused before any work.

The job keeps durable progress (:mod:`minterpr.ingest.job`): a rerun after a kill, an error or
a cancel continues and ends with the gallery an uninterrupted run makes; a finished job rerun
changes nothing; a job redone (``restart``) replaces its rows.

Example (with a trained run):
    >>> result = ingest("cam1.mp4", "galleries/lobby", run="runs/synth",  # doctest: +SKIP
    ...                 options=IngestOptions(camera="lobby:cam1", start="2026-12-01T10:00:00", every=2))
    >>> result.tracks, result.rows_added  # doctest: +SKIP
    (14, 41)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable


from minterpr.errors import DatasetError
from minterpr.index.store.gallery_store import STORE_ROOT
from minterpr.fileio import atomic_write
from minterpr.ingest.job import CROPS_DIR, FRAMES_DIR, JobFolder, gallery_lock, job_id
from minterpr.ingest.options import IngestOptions, IngestResult, check_options, create_detector, every_of, gallery_dir
from minterpr.ingest.progress import IngestProgress, Reporter
from minterpr.ingest.sources import SourceInfo, frame_time, open_source, parse_start
from minterpr.ingest.storing import check_appearance, rows_of_job, store_crops
from minterpr.ingest.video import detect_and_track
from minterpr.types import GalleryImage

__all__ = ["IngestOptions", "IngestResult", "gallery_dir", "ingest"]


def _source_stat(info: SourceInfo) -> Any:
    if info.kind == "video":
        stat = info.path.stat()
        return [stat.st_size, stat.st_mtime_ns]
    digest = hashlib.sha256()
    for name in info.files:
        digest.update(f"{name}\0{(info.path / name).stat().st_size}\n".encode("utf-8"))
    return [len(info.files), digest.hexdigest()[:16]]


def _copy_crops(info: SourceInfo, job: JobFolder, reporter: Reporter) -> None:
    """Link (or copy) the folder's crops into the job's crops folder; files already there are kept."""
    for k, name in enumerate(info.files):
        source, target = info.path / name, job.crops / name
        if not (target.is_file() and target.stat().st_size == source.stat().st_size):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            try:
                os.link(source, target)
            except OSError:
                with open(source, "rb") as src:
                    atomic_write(target, lambda f: shutil.copyfileobj(src, f), durable=False)
        reporter.update("copy", k + 1, len(info.files))


def _load(run: Any) -> Any:
    from minterpr.runtime.pipeline import Pipeline, load_pipeline

    return run if isinstance(run, Pipeline) else load_pipeline(run)


def ingest(
    source: str | os.PathLike[str],
    gallery: str | os.PathLike[str],
    *,
    run: Any,
    options: IngestOptions = IngestOptions(),
    progress: Callable[[IngestProgress], None] | None = None,
    cancel: Callable[[], bool] | None = None,
) -> IngestResult:
    """Ingest ``source`` into the gallery store at ``gallery`` with ``run`` (a run directory or a
    loaded :class:`~minterpr.runtime.pipeline.Pipeline`); see the module doc. ``progress`` receives
    :class:`IngestProgress` events; ``cancel()`` true stops it (IngestCancelled, progress kept)."""
    from minterpr.index.store.gallery_store import check_store_folder, read_manifest

    started = time.perf_counter()
    check_options(options)
    start = parse_start(options.start)
    folder = Path(gallery).expanduser().absolute()
    check_store_folder(folder)
    info = open_source(source, frames=options.frames, fps=options.fps)
    pipeline = _load(run)
    fingerprint = pipeline.fingerprint
    if (folder / "gallery.json").is_file():
        manifest = read_manifest(folder)
        if manifest.model_fingerprint != fingerprint:
            raise DatasetError(
                folder,
                f"built by another model (fingerprint {manifest.model_fingerprint}, this "
                f"model's is {fingerprint}); ingest into another gallery",
            )
        if manifest.root != STORE_ROOT:
            raise DatasetError(
                folder, f"a gallery of images under {manifest.root!r}, not an ingested one; ingest into another gallery"
            )
        check_appearance(folder, manifest.appearance, pipeline)
    every = every_of(options, info)
    video = info.kind != "crops"
    detector = create_detector(options.detector, options.detector_options) if video else None
    weights = {"detect": 0.9, "embed": 0.08, "index": 0.02} if video else {"copy": 0.1, "embed": 0.85, "index": 0.05}
    reporter = Reporter(progress, cancel, weights=weights)
    reporter.update("open", 0, None, force=True, message=f"open: {info.kind} {info.path}")
    settings = {k: v for k, v in asdict(options).items() if k not in ("restart", "batch_size", "target_fps")}
    settings.update(
        every=every,
        fps=info.fps,
        start=None if start is None else start.isoformat(),
        detector_options=None,
        detector=None if detector is None else detector.identity(),
    )
    description = {
        "source": os.fspath(info.path),
        "kind": info.kind,
        "source_stat": _source_stat(info),
        "decoder": info.decoder,
        "model_fingerprint": fingerprint,
        "options": settings,
    }
    looks = getattr(pipeline, "appearance", None)
    if looks is not None:  # only then: jobs ingested without an appearance model keep their job.json
        description["appearance_fingerprint"] = looks.fingerprint
    precision = getattr(getattr(pipeline, "backend", None), "image_precision", "fp32")
    if precision != "fp32":  # only then, likewise: an int8 job resumes only in int8
        description["image_precision"] = precision
    with gallery_lock(folder):
        job = JobFolder(folder, job_id(info.path))
        resumed = job.start(json.loads(json.dumps(description)), restart=options.restart)
        done, counts = job.done(), rows_of_job(folder, job.job)
        if done is not None and counts is not None and counts[0] == done["rows"]:
            reporter.update("done", 1, 1, force=True, message=f"done: already ingested ({counts[0]} rows)")
            return IngestResult(
                folder,
                job.job,
                os.fspath(info.path),
                info.kind,
                counts[0],
                counts[1],
                done["frames_read"],
                done["frames_processed"],
                done["detections"],
                done["tracks"],
                done["crops"],
                tuple(map(tuple, done["skipped"])),
                time.perf_counter() - started,
                resumed,
                True,
                info.fps or None,
                info.duration_s,
                done.get("rejected", {}),
            )
        job.clear_done()
        skipped: list[tuple[str, str]] = []
        base = {
            "source": os.fspath(info.path),
            "job": job.job,
            **({"camera": options.camera} if options.camera else {}),
        }
        if video:
            assert detector is not None
            from minterpr.ingest.detector_zoo import resolve_detector

            note = resolve_detector(options.detector, options.detector_options)[2]
            if note is not None:  # the fallback to HOG, said once (the web job shows it, the CLI prints it)
                reporter.update("open", 0, None, force=True, message=note)
            tracking, frames_read = detect_and_track(info, job, detector, options, every, reporter, skipped)
            chosen = tracking.picker.selection(options.min_track_detections)
            images = [
                GalleryImage(f"{CROPS_DIR}/{job.job}/{c.name}", f"{job.job}:t{c.track}", options.camera) for c in chosen
            ]
            when = lambda c: {} if start is None else {"time": frame_time(start, c.frame, info.fps)}  # noqa: E731
            metadata = [
                {
                    **base,
                    **when(c),
                    "offset_s": round(c.frame / info.fps, 3),
                    "frame": c.frame,
                    "box": [round(v, 1) for v in c.box],
                    "track": c.track,
                    "score": round(c.score, 4),
                    "sharpness": round(c.sharpness, 1),
                    "covered": c.covered,
                    **_frame_of(job, c.frame, tracking.sizes),
                    **_span_of(tracking.spans.get(c.track), info.fps),
                }
                for c in chosen
            ]
            stats = (
                frames_read,
                tracking.processed,
                tracking.detections,
                tracking.picker.tracks(options.min_track_detections),
            )
            rejected = dict(sorted(tracking.rejected.items()))
        else:
            _copy_crops(info, job, reporter)
            images = [
                GalleryImage(f"{CROPS_DIR}/{job.job}/{name}", f"{job.job}:{k}", options.camera)
                for k, name in enumerate(info.files)
            ]
            metadata = [
                {**base, **({} if start is None else {"time": start.isoformat(timespec="milliseconds")}), "file": name}
                for name in info.files
            ]
            stats = (0, 0, 0, 0)
            rejected = {}
        rows, total = store_crops(pipeline, images, metadata, folder, job, options, reporter, skipped, info)
        crops_dir = job.crops
        if video and crops_dir.is_dir():  # crops a track later replaced by better ones
            keep = {Path(i.path).name for i in images}
            for path in crops_dir.iterdir():
                if path.name not in keep:
                    path.unlink(missing_ok=True)
        if video and job.frames.is_dir():  # frames only replaced crops were cut from
            keep = {Path(m["frame_image"]).name for m in metadata if "frame_image" in m}
            for path in job.frames.iterdir():
                if path.name not in keep:
                    path.unlink(missing_ok=True)
        if looks is not None and looks.same_person is not None and rows:  # uncalibrated: no links (docs/ingest.md)
            from minterpr.ingest.links import relink

            reporter.update("index", 1, 1, force=True, message="index: linking tracklets")
            relink(folder, looks.same_person)
        summary = dict(
            zip(("frames_read", "frames_processed", "detections", "tracks"), stats),
            crops=len(images),
            rows=rows,
            skipped=[list(s) for s in skipped],
            rejected=rejected,
        )
        job.mark_done(summary)
    reporter.update(
        "done", 1, 1, force=True, crops=len(images), message=f"done: {rows} rows added to {folder} ({total} in all)"
    )
    return IngestResult(
        folder,
        job.job,
        os.fspath(info.path),
        info.kind,
        rows,
        total,
        *stats,
        len(images),
        tuple(skipped),
        time.perf_counter() - started,
        resumed,
        False,
        info.fps or None,
        info.duration_s,
        rejected,
    )


def _span_of(span: list[float] | None, fps: float) -> dict[str, Any]:
    """``track_span`` of a crop's row: its track's first and last time (seconds from the start) and
    boxes, ``[t0, t1, x1, y1, x2, y2 (first), x1, y1, x2, y2 (last)]`` (:mod:`minterpr.ingest.links`)."""
    if span is None:
        return {}
    return {"track_span": [round(span[0] / fps, 3), round(span[1] / fps, 3), *(round(v, 1) for v in span[2:])]}


def _frame_of(job: JobFolder, frame: int, sizes: dict[int, tuple[int, int]]) -> dict[str, Any]:
    """``frame_image`` and ``frame_size`` of a crop's row, when its frame was stored (a job ingested
    before frames were kept has none: the page then says the frame was not kept)."""
    from minterpr.ingest.video import frame_name

    if frame not in sizes or not (job.frames / frame_name(frame)).is_file():
        return {}
    return {"frame_image": f"{FRAMES_DIR}/{job.job}/{frame_name(frame)}", "frame_size": list(sizes[frame])}
