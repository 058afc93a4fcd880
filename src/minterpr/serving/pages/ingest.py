"""The ingestion page: start a job on the server (source, gallery, run, detector) and watch its progress.

``/ingest`` (permission ``ingest:run``) shows a form and the jobs; the form posts to ``/ingest``
(303 back to the page, or the page with the error in place), and the job list — status, a
progress bar, stage, frames, detections, tracks, crops, the job's last message — is the fragment
``/ingest/jobs``, which the page re-fetches every second with htmx while a job runs (without
JavaScript, a "Refresh" link reloads the page); a job not yet ended has a Cancel button (posting
to ``/ingest/{id}/cancel``, as ``POST /api/ingest/{id}/cancel``); a cancelled, interrupted or failed
ingestion has a Resume button (``/ingest/{id}/resume``: a new job with its request, which carries on
where it stopped). The detector is HOG or an ONNX model file on the
server (inside ``data_dir/incoming`` or an import root, like the source): ``services.jobs.start``
checks both and the form shows its message next to the field it names.

With a vision-language model configured (``serve --vlm-url``), a second form, "Caption a gallery",
picks a registered gallery and posts to ``/ingest/caption``: an MTG captioning job
(:mod:`~minterpr.serving.caption_jobs`) in the same list, its line the crops done of the gallery's,
the calls, the tokens and the crops without an answer. The form names the settings' model and
endpoint; it has no field for them (a request never chooses the URL).

A video can be uploaded from the browser first (``/ingest/upload``, at most ``max_video_bytes``:
streamed to disk under ``incoming/uploads``, opened and a first frame decoded before it is kept,
:func:`~minterpr.serving.uploads.store_video`); the form then names it as the source.

The model is chosen from a list (:func:`model_choices`): the shipped models, the real-footage one
preselected, and the runs of the registered galleries, or "the gallery's own" for a gallery that
exists. The detector is ``auto`` (YOLOX-nano when the server has fetched it, else HOG), HOG,
YOLOX-nano or an ONNX file; its settings: how often frames are read (every Nth) and how many crops
each track keeps.

Example:
    >>> job_line({"stage": "detect", "fraction": 0.4, "frames": 120, "detections": 300, "tracks": 9, "crops": 20})
    'detect · 40% · 120 frames · 300 detections · 9 tracks · 20 crops'
    >>> job_line({"stage": "caption", "fraction": 0.5, "crops_done": 12, "crops_total": 24, "calls": 60,
    ...           "tokens": 3600, "failed": 1})
    'caption · 50% · 12/24 crops · 60 calls · 3,600 tokens · 1 without an answer'
"""

from typing import Any

FORM_FIELDS = (
    "gallery",
    "source",
    "run",
    "camera",
    "start",
    "detector",
    "detector_model",
    "every",
    "best_k",
)  # the form's fields (text, a choice, numbers)
NUMBER_FIELDS = ("every", "best_k")  # sent as text by the browser, integers in the request


def model_choices(
    shipped: dict[str, Any], shipped_dir: Any, default: str, runs: list[str]
) -> list[tuple[str, str, bool]]:
    """(value, label, preselected) of the form's model list: the shipped models (``minterpr models``'
    first lines), the default one preselected, then the runs registered galleries were built with.

    >>> model_choices({"lite2": {"summary": "real footage"}}, "/m", "lite2", ["/runs/a", "/m/lite2"])
    [('/m/lite2', 'shipped: lite2 (real footage)', True), ('/runs/a', 'run: /runs/a', False)]
    """
    from pathlib import Path

    out = [
        (
            str(Path(shipped_dir) / name),
            f"shipped: {name}" + (f" ({info['summary']})" if info.get("summary") else ""),
            name == default,
        )
        for name, info in sorted(shipped.items())
    ]
    seen = {value for value, _, _ in out}
    out += [(run, f"run: {run}", False) for run in sorted(set(runs)) if run not in seen]
    return out


def job_line(progress: dict[str, Any]) -> str:
    """One line of a job's progress for people ('' before the first event)."""
    if not progress or "stage" not in progress:
        return ""
    parts = [str(progress["stage"])]
    if progress.get("fraction") is not None:
        parts.append(f"{round(100 * float(progress['fraction']))}%")
    if "crops_total" in progress:  # a captioning job
        parts.append(f"{progress.get('crops_done', 0)}/{progress['crops_total']} crops")
        parts += [f"{progress[k]:,} {k}" for k in ("calls", "tokens") if progress.get(k)]
        if progress.get("failed"):
            parts.append(f"{progress['failed']} without an answer")
        return " · ".join(parts)
    parts += [f"{progress[k]} {k}" for k in ("frames", "detections", "tracks", "crops") if progress.get(k)]
    return " · ".join(parts)


def _request_from(form: dict[str, str]) -> Any:
    """The IngestRequest of a posted form (empty fields left out); ApiError 422 naming the field otherwise."""
    from pydantic import ValidationError

    from minterpr.serving.errors import ApiError
    from minterpr.serving.schemas.jobs import IngestRequest

    data: dict[str, Any] = {k: v.strip() for k, v in form.items() if v.strip()}
    for name in NUMBER_FIELDS:  # a whole number, or the field named
        if name in data:
            if not data[name].isdigit():
                raise ApiError(422, "invalid", f"{name}: a whole number, got {data[name]!r}", field=name)
            data[name] = int(data[name])
    if form.get("frames") == "yes":
        data["frames"] = True
    try:
        return IngestRequest(**data)
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first.get("loc") else None
        raise ApiError(422, "invalid", f"{field}: {first['msg']}" if field else first["msg"], field=field) from None


def _caption_request(gallery: str) -> Any:
    """The CaptionRequest of the caption form (the gallery only); ApiError 422 otherwise."""
    from pydantic import ValidationError

    from minterpr.serving.errors import ApiError
    from minterpr.serving.schemas.jobs import CaptionRequest

    try:
        return CaptionRequest(gallery=gallery.strip())
    except ValidationError:
        raise ApiError(422, "invalid", "choose a registered gallery to caption", field="gallery") from None


def register_ingest(app: Any, pages: Any) -> None:
    """Add the ingestion page's routes to ``app`` (called by :func:`minterpr.serving.pages.search.register`)."""
    from fastapi import APIRouter, Depends, Request
    from fastapi import Path as PathParam
    from fastapi.responses import RedirectResponse
    from starlette.concurrency import run_in_threadpool

    from minterpr.serving.deps import current_user, optional_user
    from minterpr.serving.errors import ApiError
    from minterpr.serving.jobs import TERMINAL

    router = APIRouter(include_in_schema=False)

    def _jobs() -> list[Any]:
        return sorted(pages.services.jobs.list(), key=lambda j: j.created, reverse=True)

    def _page(
        request: Any,
        user: Any,
        status: int = 200,
        error: str | None = None,
        field: str | None = None,
        form: dict[str, str] | None = None,
        caption_error: str | None = None,
        upload_error: str | None = None,
        uploaded: Any = None,
    ) -> Any:
        pages.need(user, "ingest:run")
        jobs = _jobs()
        from minterpr.models.zoo import DEFAULT_REAL_MODEL, shipped_models, shipped_models_dir

        models = model_choices(
            shipped_models(),
            shipped_models_dir(),
            DEFAULT_REAL_MODEL,
            [row.run_dir for row in pages.services.galleries.rows()],
        )
        return pages.render(
            request,
            "ingest.html",
            status,
            user=user,
            jobs=jobs,
            job_line=job_line,
            error=error,
            error_field=field,
            galleries=pages.galleries(),
            terminal=TERMINAL,
            running=any(j.status not in TERMINAL for j in jobs),
            models=models,
            incoming=pages.settings.incoming_dir,
            form=form or {"detector": "auto"},
            vlm=pages.settings.vlm,
            caption_error=caption_error,
            upload_error=upload_error,
            uploaded=uploaded,
            max_video_mib=pages.settings.max_video_bytes // 2**20,
        )

    @router.get("/ingest")
    def ingest_page(request: Request, user: Any = Depends(optional_user)) -> Any:
        if user is None:
            return RedirectResponse("/login?next=/ingest", status_code=303)
        return _page(request, user)

    @router.get("/ingest/jobs")
    def ingest_jobs(request: Request, user: Any = Depends(current_user)) -> Any:
        pages.need(user, "ingest:run")
        jobs = _jobs()
        return pages.render(
            request,
            "_ingest_jobs.html",
            jobs=jobs,
            job_line=job_line,
            terminal=TERMINAL,
            running=any(j.status not in TERMINAL for j in jobs),
        )

    @router.post("/ingest")
    async def ingest_start(request: Request, user: Any = Depends(current_user)) -> Any:
        data = await request.form()
        form = {k: str(data.get(k, "")) for k in FORM_FIELDS}
        form["frames"] = "yes" if data.get("frames") == "yes" else ""
        pages.need(user, "ingest:run")
        try:
            body = _request_from(form)
            await run_in_threadpool(pages.services.jobs.start, user, body)
        except ApiError as err:
            return _page(request, user, err.status, err.message, err.field, form)
        return RedirectResponse("/ingest", status_code=303)

    @router.post("/ingest/upload")
    async def video_upload(request: Request, user: Any = Depends(current_user)) -> Any:
        from minterpr.serving.uploads import store_video

        pages.need(user, "ingest:run")
        data = await request.form()  # parsed by the CSRF check already: the file is spooled to disk
        video = data.get("video")
        form = {"detector": "auto"}
        try:
            if video is None or isinstance(video, str) or not video.filename:
                raise ApiError(422, "invalid", "choose a video file to upload", field="video")
            folder = pages.settings.video_uploads_dir
            stored = await run_in_threadpool(
                store_video, video.file, video.filename, folder, max_bytes=pages.settings.max_video_bytes
            )
        except ApiError as err:
            return _page(request, user, err.status, upload_error=err.message)
        pages.services.audit.record(user, "video_upload", None, {"file": stored.name, "name": video.filename[:200]})
        form["source"] = str(stored)
        return _page(request, user, form=form, uploaded=stored)

    @router.post("/ingest/{job_id}/cancel")
    async def job_cancel(
        request: Request, job_id: str = PathParam(pattern=r"^[0-9a-f]{32}$"), user: Any = Depends(current_user)
    ) -> Any:
        pages.need(user, "ingest:run")
        try:
            await run_in_threadpool(pages.services.jobs.cancel, user, job_id)
        except ApiError as err:
            return _page(request, user, err.status, err.message)
        return RedirectResponse("/ingest", status_code=303)

    @router.post("/ingest/{job_id}/resume")
    async def job_resume(
        request: Request, job_id: str = PathParam(pattern=r"^[0-9a-f]{32}$"), user: Any = Depends(current_user)
    ) -> Any:
        pages.need(user, "ingest:run")
        try:
            await run_in_threadpool(pages.services.jobs.resume, user, job_id)
        except ApiError as err:
            return _page(request, user, err.status, err.message, err.field)
        return RedirectResponse("/ingest", status_code=303)

    @router.post("/ingest/caption")
    async def caption_start(request: Request, user: Any = Depends(current_user)) -> Any:
        from minterpr.serving.caption_jobs import start_caption

        data = await request.form()
        pages.need(user, "ingest:run")
        try:
            body = _caption_request(str(data.get("gallery", "")))
            await run_in_threadpool(start_caption, pages.services, user, body)
        except ApiError as err:
            return _page(request, user, err.status, caption_error=err.message)
        return RedirectResponse("/ingest", status_code=303)

    app.include_router(router)
