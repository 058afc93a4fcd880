"""Ingestion jobs in the service: start, live progress, cancel (:mod:`minterpr.ingest` underneath).

A job ingests a source on the server (a video, a folder of frames or crops) into a gallery: a
registered one (its store and run), or a new one the service creates and owns under
``data_dir/galleries/NAME`` (retention may then delete its crops). Jobs run one at a time in a
background thread (two cores: a second would only slow the first); each reports
:class:`~minterpr.ingest.IngestProgress`, kept in memory for live polling and server-sent events
and written to the database about once a second. A cancelled job keeps its progress; starting
the same source and options again resumes it, as does a job the server was stopped during
(its status then reads ``interrupted``); :meth:`Jobs.resume` does that for a job by its id. When a job ends, the gallery is registered (or its
version bumped), so sessions see the new images.

The detector is ``auto`` by default: YOLOX-nano when the server's model cache has it (``minterpr
models fetch yolox-nano``), else HOG, the job's first message saying so; or ``hog``, ``yolox-nano``,
or (``detector="onnx"``) the ONNX detection model at ``detector_model``, a file inside
``data_dir/incoming`` or an import root like the source.

The queue also runs MTG captioning jobs (``kind`` "caption", :mod:`minterpr.serving.caption_jobs`):
:meth:`Jobs.queue` records and runs a job of any kind, whose work reports with :meth:`Jobs.report`
and ends with :meth:`Jobs.finish`; read, streamed, cancelled and audited (``{kind}_start``,
``{kind}_cancel``, ``{kind}_done`` ...) the same way. A job's kind is kept in its options (rows
from before it are ingestions).

Example (an admin's principal; the source inside ``data_dir/incoming`` or an import root):
    >>> job = services.jobs.start(admin, IngestRequest(gallery="lobby", source="/srv/in/cam1.mp4",  # doctest: +SKIP
    ...                           run="runs/synthetic", camera="lobby:cam1", start="2026-12-01T10:00:00Z"))
    >>> services.jobs.wait(job.id).status  # doctest: +SKIP
    'done'
"""

from __future__ import annotations

import contextvars
import dataclasses
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from sqlalchemy import select

from minterpr.errors import MinterprError
from minterpr.serving import audit
from minterpr.serving.accounts import Principal
from minterpr.serving.db import GalleryRow, IngestJob, now
from minterpr.serving.errors import ApiError
from minterpr.serving.paths import check_request_paths
from minterpr.serving.schemas.jobs import IngestRequest, JobView

TERMINAL = ("done", "failed", "cancelled", "interrupted")
# the stopped ingestions that resume starts again (retention keeps their uploaded video a while)
RESUMABLE = ("cancelled", "interrupted", "failed")
_PERSIST_EVERY_S = 1.0
KINDS = ("ingest", "caption")  # what a job does: ingest a source, caption a gallery (minterpr.serving.caption_jobs)


def _kind(job: IngestJob | None) -> str:
    """A job row's kind (rows written before captioning jobs existed are ingestions)."""
    kind = (job.options or {}).get("kind") if job is not None else None
    return kind if kind in KINDS else "ingest"


class Jobs:
    """The ingestion queue of one service (``services.jobs``)."""

    def __init__(self, services: Any) -> None:
        self.services = services
        self.db = services.db
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minterpr-ingest")
        self._progress: dict[str, dict[str, Any]] = {}
        self._cancel: dict[str, threading.Event] = {}
        self._persisted: dict[str, float] = {}  # job -> when its progress was last written
        self._lock = threading.Lock()
        with self.db.write() as tx:  # jobs a previous process left unfinished
            for job in tx.scalars(select(IngestJob).where(IngestJob.status.in_(("queued", "running")))):
                job.status, job.message, job.updated = (
                    "interrupted",
                    "the server stopped; start it again to resume",
                    now(),
                )

    def start(self, principal: Principal, request: IngestRequest) -> JobView:
        """Queue a job (422 for a missing source or a new gallery without a run; 409 when ingestion's
        packages are not installed)."""
        try:
            from minterpr.ingest import IngestOptions
        except ImportError as err:
            raise ApiError(409, "unavailable", f"ingestion is not installed here ({err})") from None

        try:
            source = Path(request.source).expanduser()
        except RuntimeError:  # "~name" of no user on this server
            raise ApiError(
                422, "invalid", f"source not found on the server: {request.source}", field="source"
            ) from None
        settings = self.services.settings
        from minterpr.models.zoo import shipped_models, shipped_models_dir

        known_runs = {row.run_dir for row in self.services.galleries.rows()}  # runs already serving galleries
        known_runs |= {str((shipped_models_dir() / name).absolute()) for name in shipped_models()}  # the installation's
        if request.detector == "onnx" and request.detector_model is None:
            raise ApiError(
                422, "invalid", "the onnx detector needs detector_model (a .onnx file)", field="detector_model"
            )
        if request.detector != "onnx" and request.detector_model is not None:
            raise ApiError(422, "invalid", "detector_model goes with detector onnx", field="detector_model")
        check_request_paths(settings, request, known_runs)  # every path the request names (serving.paths)
        if not source.exists():
            raise ApiError(422, "invalid", f"source not found on the server: {request.source}", field="source")
        with self.db.transaction() as tx:
            row = tx.scalar(select(GalleryRow).where(GalleryRow.name == request.gallery))
        if row is not None:
            directory, run_dir, managed = row.directory, row.run_dir, row.managed
            if request.run is not None and Path(request.run).absolute() != Path(run_dir):
                raise ApiError(
                    422, "invalid", f"gallery {request.gallery!r} was built by {run_dir}; ingest with it", field="run"
                )
        else:
            if request.run is None:
                raise ApiError(422, "invalid", "a new gallery needs the run that embeds it", field="run")
            directory = str((self.services.settings.galleries_dir / request.gallery).absolute())
            run_dir, managed = str(Path(request.run).absolute()), True
        detector_options = (
            {} if request.detector_model is None else {"model": str(Path(request.detector_model).absolute())}
        )
        try:
            options = IngestOptions(
                camera=request.camera,
                start=request.start,
                every=request.every,
                target_fps=request.target_fps,
                frames=request.frames,
                best_k=request.best_k,
                detector=request.detector,
                detector_options=detector_options,
            )
        except (TypeError, ValueError) as err:
            raise ApiError(422, "invalid", str(err)) from None
        if request.detector in ("onnx", "yolox-nano"):  # a model that does not load fails now, not in the background
            from minterpr.ingest import create_detector

            try:
                create_detector(request.detector, detector_options)
            except MinterprError as err:
                raise ApiError(422, "invalid", f"detector_model: {err}", field="detector_model") from None
        source_path = str(source.absolute())

        def work(job_id: str, stop: threading.Event) -> None:
            self._run(job_id, principal, source_path, directory, run_dir, managed, request.gallery, options, stop)

        return self.queue(
            principal,
            "ingest",
            request.gallery,
            source_path,
            request.model_dump(),
            {"gallery": request.gallery, "source": source_path},
            work,
        )

    def queue(
        self,
        principal: Principal,
        kind: str,
        gallery: str,
        source: str,
        options: dict[str, Any],
        details: dict[str, Any],
        work: Callable[[str, threading.Event], None],
    ) -> JobView:
        """Record a job of ``kind`` ("ingest", "caption"), audit ``{kind}_start`` with ``details``, and run
        ``work(job_id, stop)`` in the queue (after the jobs before it); ``work`` reports with :meth:`report`
        and ends with :meth:`finish` (an exception it lets out ends the job as failed)."""
        job_id = uuid.uuid4().hex
        with self.db.write() as tx:
            t = now()
            tx.add(
                IngestJob(
                    id=job_id,
                    gallery=gallery,
                    source=source,
                    options={**options, "kind": kind},
                    user_id=principal.user_id,
                    status="queued",
                    progress={},
                    message="",
                    created=t,
                    updated=t,
                )
            )
            audit.append(tx, principal.username, f"{kind}_start", None, {"job": job_id, **details})
        stop = threading.Event()
        with self._lock:
            self._cancel[job_id] = stop
            self._progress[job_id] = {}
        # in a copy of this request's context: the job's audit entries carry the id of the request that started it
        self._pool.submit(contextvars.copy_context().run, self._guarded, job_id, principal, work, stop)
        return self.view(job_id)

    def _guarded(
        self, job_id: str, principal: Principal, work: Callable[[str, threading.Event], None], stop: threading.Event
    ) -> None:
        if stop.is_set():
            self.finish(job_id, principal, "cancelled", "cancelled before it started", {})
            return
        self._update(job_id, "running", {}, "starting")
        try:
            work(job_id, stop)
        except Exception as err:  # noqa: BLE001 - a background job must record why it stopped
            self.finish(job_id, principal, "failed", f"unexpected error: {type(err).__name__}: {err}", {})

    def report(self, job_id: str, progress: dict[str, Any], message: str = "") -> None:
        """A running job's progress: kept for live polling, written to the database about once a second."""
        with self._lock:
            self._progress[job_id] = progress
            due = time.monotonic() - self._persisted.get(job_id, 0.0) >= _PERSIST_EVERY_S
            if due:
                self._persisted[job_id] = time.monotonic()
        if due:
            self._update(job_id, "running", progress, message)

    def _run(
        self,
        job_id: str,
        principal: Principal,
        source: str,
        directory: str,
        run_dir: str,
        managed: bool,
        gallery: str,
        options: Any,
        stop: threading.Event,
    ) -> None:
        from minterpr.ingest import IngestCancelled, ingest

        def progress(event: Any) -> None:
            self.report(job_id, dataclasses.asdict(event), event.message)

        try:
            pipeline = self.services.galleries.pipeline(run_dir)
            result = ingest(source, directory, run=pipeline, options=options, progress=progress, cancel=stop.is_set)
            if result.rows_total == 0:  # no store was written: say why, rather than fail to register it
                why = ", ".join(f"{n} {reason}" for reason, n in result.rejected.items()) or "none"
                raise MinterprError(
                    f"no crops of one person were kept from {source} ({result.detections} "
                    f"detections, {result.tracks} tracks; not cropped: {why}); nothing was "
                    f"added{self._note(options, result)}"
                )
            self.services.galleries.register(gallery, directory, run_dir, by=principal.username, managed=managed)
        except IngestCancelled as err:
            self.finish(job_id, principal, "cancelled", str(err), {})
        except (MinterprError, ApiError) as err:
            self.finish(job_id, principal, "failed", str(err), {})
        else:
            summary = {
                "rows_added": result.rows_added,
                "rows_total": result.rows_total,
                "tracks": result.tracks,
                "crops": result.crops,
                "frames_read": result.frames_read,
                "seconds": round(result.seconds, 2),
                "skipped": len(result.skipped),
                "resumed": result.resumed,
                "rejected": dict(result.rejected),
            }
            self.finish(
                job_id,
                principal,
                "done",
                f"{result.rows_added} images added to {gallery}{self._note(options, result)}",
                summary,
            )

    @staticmethod
    def _note(options: Any, result: Any) -> str:
        """``"; <the HOG fallback line>"`` when a video was ingested with ``auto`` and no YOLOX-nano, else "":
        the job's last message keeps it (its first progress message is soon replaced)."""
        from minterpr.ingest.detector_zoo import resolve_detector

        note = None if result.kind == "crops" else resolve_detector(options.detector, options.detector_options)[2]
        return f"; {note}" if note else ""

    def _update(self, job_id: str, status: str, progress: dict[str, Any], message: str) -> None:
        with self.db.write() as tx:
            job = tx.get(IngestJob, job_id)
            if job is not None and job.status not in TERMINAL:
                job.status, job.progress, job.message, job.updated = status, progress, message, now()

    def finish(self, job_id: str, principal: Principal, status: str, message: str, summary: dict[str, Any]) -> None:
        """End a job: its last progress (with ``summary`` as ``result``), status and message; audited as
        ``{kind}_{status}``."""
        with self._lock:
            progress = {**self._progress.get(job_id, {}), **({"result": summary} if summary else {})}
            self._progress[job_id] = progress
            self._persisted.pop(job_id, None)
        with self.db.write() as tx:
            job = tx.get(IngestJob, job_id)
            kind = _kind(job)
            if job is not None:
                job.status, job.progress, job.message, job.updated = status, progress, message, now()
            audit.append(tx, principal.username, f"{kind}_{status}", None, {"job": job_id, "message": message})

    def view(self, job_id: str) -> JobView:
        with self.db.transaction() as tx:
            job = tx.get(IngestJob, job_id) if isinstance(job_id, str) and len(job_id) <= 32 else None
        if job is None:
            raise ApiError(404, "not_found", f"no ingestion job {job_id!r}", field="job_id")
        with self._lock:
            live = self._progress.get(job_id)
        progress = live if live and job.status not in TERMINAL else (job.progress or {})
        return JobView(
            id=job.id,
            kind=_kind(job),
            gallery=job.gallery,
            source=job.source,
            status=job.status,
            progress=progress,
            message=job.message,
            created=job.created,
            updated=job.updated,
        )

    def list(self) -> list[JobView]:
        with self.db.transaction() as tx:
            ids = list(tx.scalars(select(IngestJob.id).order_by(IngestJob.created)))
        return [self.view(job_id) for job_id in ids]

    def cancel(self, principal: Principal, job_id: str) -> JobView:
        view = self.view(job_id)
        if view.status in TERMINAL:
            raise ApiError(409, "finished", f"job {job_id} has already ended ({view.status})")
        with self._lock:
            stop = self._cancel.get(job_id)
        if stop is not None:
            stop.set()
        self.services.audit.record(principal, f"{view.kind}_cancel", None, {"job": job_id})
        return self.view(job_id)

    def resume(self, principal: Principal, job_id: str) -> JobView:
        """Start a cancelled, interrupted or failed ingestion again with its recorded request: a new job
        that resumes where that one stopped (ingestion keeps its work per source and options); audited
        as ``ingest_resume``. 409 for a job of another kind or one not stopped; the request's checks
        (paths, run, detector) are made again, as of now."""
        view = self.view(job_id)
        if view.kind != "ingest":
            raise ApiError(409, "conflict", f"job {job_id} is a {view.kind} job: start it again from its form")
        if view.status not in RESUMABLE:
            raise ApiError(
                409, "conflict", f"job {job_id} is {view.status}: only a cancelled, interrupted or failed job resumes"
            )
        with self.db.transaction() as tx:
            options = dict(tx.get(IngestJob, job_id).options or {})
        options.pop("kind", None)
        try:
            request = IngestRequest(**options)
        except ValueError as err:  # a row from an older version whose request no longer validates
            raise ApiError(
                409, "conflict", f"job {job_id}'s request cannot be made again ({err}); start a new job"
            ) from None
        resumed = self.start(principal, request)
        self.services.audit.record(principal, "ingest_resume", None, {"job": resumed.id, "resumes": job_id})
        return resumed

    def wait(self, job_id: str, timeout: float = 60.0) -> JobView:
        """Block until the job ends (tests, the command line)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            view = self.view(job_id)
            if view.status in TERMINAL:
                return view
            time.sleep(0.05)
        return self.view(job_id)

    def shutdown(self) -> None:
        with self._lock:
            for stop in self._cancel.values():
                stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
