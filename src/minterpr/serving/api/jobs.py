"""Routes of the job queue: start an ingestion or an MTG captioning job, list, read (poll), stream
(server-sent events), cancel, resume (a cancelled, interrupted or failed ingestion: a new job with its
request, resuming where it stopped). Every route needs ``ingest:run`` (admins).

``POST /api/ingest/caption`` (:class:`~minterpr.serving.schemas.jobs.CaptionRequest`: the gallery, a
batch size, a limit) captions a registered gallery with the service's vision-language model
(:mod:`~minterpr.serving.caption_jobs`; 409 ``unavailable`` when none is configured).

Example:
    >>> sorted(route.path for route in router.routes)  # doctest: +NORMALIZE_WHITESPACE
    ['/api/ingest', '/api/ingest', '/api/ingest/caption', '/api/ingest/caption', '/api/ingest/{job_id}',
     '/api/ingest/{job_id}/cancel', '/api/ingest/{job_id}/events', '/api/ingest/{job_id}/resume']
"""

from __future__ import annotations

import asyncio
from typing import Annotated, AsyncIterator

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from minterpr.serving.accounts import Principal
from minterpr.serving.api.search import ERRORS
from minterpr.serving.deps import get_services, require
from minterpr.serving.jobs import TERMINAL
from minterpr.serving.schemas.jobs import CaptionRequest, IngestRequest, JobView

router = APIRouter(prefix="/api/ingest")
JobId = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$", description="a job id (32 hex characters)")]  # as api.Id
POLL_S = 0.5  # how often the event stream looks at the job


@router.post("", response_model=JobView, status_code=202, tags=["ingest"], responses=ERRORS)
def start(body: IngestRequest, request: Request, principal: Principal = Depends(require("ingest:run"))) -> JobView:
    return get_services(request).jobs.start(principal, body)


@router.post("/caption", response_model=JobView, status_code=202, tags=["ingest"], responses=ERRORS)
def caption(body: CaptionRequest, request: Request, principal: Principal = Depends(require("ingest:run"))) -> JobView:
    """Caption a registered gallery's crops with the service's vision-language model (MTG; resumable)."""
    from minterpr.serving.caption_jobs import start_caption

    return start_caption(get_services(request), principal, body)


@router.api_route("/caption", methods=["GET", "PUT", "PATCH", "DELETE"], include_in_schema=False)
def caption_other_methods() -> None:
    """405 (Allow: POST), not ``GET /{job_id}``'s 422 for the job id "caption": the path is an operation."""
    raise StarletteHTTPException(405)


@router.get("", response_model=list[JobView], tags=["ingest"], responses=ERRORS)
def jobs(request: Request, _: Principal = Depends(require("ingest:run"))) -> list[JobView]:
    return get_services(request).jobs.list()


@router.get("/{job_id}", response_model=JobView, tags=["ingest"], responses=ERRORS)
def job(request: Request, job_id: JobId, _: Principal = Depends(require("ingest:run"))) -> JobView:
    return get_services(request).jobs.view(job_id)


@router.get("/{job_id}/events", tags=["ingest"], responses=ERRORS, response_class=StreamingResponse)
async def events(request: Request, job_id: JobId, _: Principal = Depends(require("ingest:run"))) -> StreamingResponse:
    """Server-sent events: one ``progress`` event per change, then ``end`` with the final state."""
    jobs = get_services(request).jobs
    first = await asyncio.to_thread(jobs.view, job_id)  # 404 before the stream starts

    async def stream() -> AsyncIterator[str]:
        view, sent = first, None
        while True:
            data = view.model_dump_json()
            if data != sent:
                sent = data
                yield f"event: {'end' if view.status in TERMINAL else 'progress'}\ndata: {data}\n\n"
            if view.status in TERMINAL or await request.is_disconnected():
                return
            await asyncio.sleep(POLL_S)
            view = await asyncio.to_thread(jobs.view, job_id)

    return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


@router.post("/{job_id}/cancel", response_model=JobView, tags=["ingest"], responses=ERRORS)
def cancel(request: Request, job_id: JobId, principal: Principal = Depends(require("ingest:run"))) -> JobView:
    return get_services(request).jobs.cancel(principal, job_id)


@router.post("/{job_id}/resume", response_model=JobView, status_code=202, tags=["ingest"], responses=ERRORS)
def resume(request: Request, job_id: JobId, principal: Principal = Depends(require("ingest:run"))) -> JobView:
    """Start a cancelled, interrupted or failed ingestion again (a new job, resuming its work)."""
    return get_services(request).jobs.resume(principal, job_id)
