"""MTG captioning as a service job: a registered gallery's crops asked by the service's model.

``POST /api/ingest/caption`` (and the ingest page's "Caption a gallery" form; permission
``ingest:run``, as ingestion) queues a job in the ingestion queue (:class:`~minterpr.serving.jobs.Jobs`)
that runs :func:`minterpr.vlm.caption.caption_gallery` over the gallery's store, appending to
its own captions file ``STORE/vlm_captions.jsonl`` (what ``minterpr vlm caption --index STORE``
writes, what ``serve --vlm-captions`` reads). The file is append-only and its crops are skipped,
so a cancelled, failed or interrupted job (the server stopped) resumes where it stopped when it is
started again.

The endpoint is the service's ``vlm`` setting (URL, model, the API key's variable), never a
request's: a request names the gallery and how much of it, so it cannot make the server call a
URL of its choosing. The job's client has the ``caption`` use only, no answer cache (the captions
file is its memory) and its own budget (``vlm_caption_max_calls``, ``vlm_caption_max_tokens``).
It gives up after :data:`GIVE_UP_AFTER` crops in a row without a usable answer (the endpoint is
down or answers nonsense) rather than spend every crop's deadline on it.

Progress (the job's status, as an ingestion's): ``stage`` "caption", ``fraction``, ``crops_done``
of ``crops_total`` (the gallery's crops; those captioned before count as done), ``captioned``,
``skipped``, ``failed`` (crops without a usable answer), ``unreadable``, ``calls``,
``calls_failed``, ``tokens``. Every call the model is asked is audited as a ``vlm_call`` entry
(job, gallery, purpose, endpoint, model, outcome, latency, tokens; never the key) as it is made;
the job's start and end are ``caption_start`` and ``caption_done`` / ``caption_failed`` /
``caption_cancelled`` (``caption_cancel`` for the request). When it ends having captioned a crop,
the gallery is opened again (:meth:`~minterpr.serving.galleries.Galleries.bump`), so that with
``vlm_captions`` on, searches use the new captions (sessions over it are rebuilt from their events).

Example (an admin's principal; ``serve --vlm-url ... --vlm-model ...``):
    >>> job = start_caption(services, admin, CaptionRequest(gallery="lobby"))  # doctest: +SKIP
    >>> services.jobs.wait(job.id).progress["captioned"]  # doctest: +SKIP
    24
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any

from sqlalchemy import select

from minterpr.errors import MinterprError
from minterpr.serving import audit
from minterpr.serving.accounts import Principal
from minterpr.serving.db import GalleryRow
from minterpr.serving.errors import ApiError
from minterpr.serving.schemas.jobs import CaptionRequest, JobView

GIVE_UP_AFTER = 5  # crops in a row without a usable answer after which a job stops (start it again to resume)
AUDITED = (
    "purpose",
    "endpoint",
    "model",
    "outcome",
    "latency_s",
    "prompt_tokens",
    "completion_tokens",
    "attempts",
)  # attempts: HTTP requests, retries included


def caption_config(settings: Any) -> Any:
    """The job's VLMConfig: the service's endpoint, the caption use, no cache, the job's budget.

    Example:
        >>> from pathlib import Path
        >>> from minterpr.serving.settings import ServeSettings
        >>> from minterpr.vlm.config import VLMConfig
        >>> vlm = VLMConfig("http://127.0.0.1:11434/v1", "m", uses=("reading",), cache_path="cache.json")
        >>> config = caption_config(ServeSettings(data_dir=Path("/srv"), vlm=vlm, vlm_caption_max_calls=50))
        >>> config.uses, config.cache_path, config.max_calls, config.url
        (('caption',), None, 50, 'http://127.0.0.1:11434/v1')
    """
    return dataclasses.replace(
        settings.vlm,
        uses=("caption",),
        cache_path=None,
        max_calls=settings.vlm_caption_max_calls,
        max_total_tokens=settings.vlm_caption_max_tokens,
    )


def start_caption(services: Any, principal: Principal, request: CaptionRequest) -> JobView:
    """Queue a captioning job (409 ``unavailable`` without a configured model or its API key, or when the
    store's captions file is a symbolic link; 404 for a gallery that is not registered)."""
    settings = services.settings
    if settings.vlm is None:
        raise ApiError(
            409,
            "unavailable",
            "no vision-language model is configured: serve with --vlm-url and "
            "--vlm-model (or the vlm setting) to caption galleries",
        )
    try:
        settings.vlm.api_key()  # the variable must be set; the key itself is not kept
    except MinterprError as err:
        raise ApiError(409, "unavailable", str(err)) from None
    try:
        import httpx  # noqa: F401 - the client's one dependency, checked before anything is queued
    except ImportError:
        raise ApiError(409, "unavailable", "the VLM client needs httpx: pip install 'minterpr[vlm]'") from None
    with services.db.transaction() as tx:
        row = tx.scalar(select(GalleryRow).where(GalleryRow.name == request.gallery))
    if row is None:
        raise ApiError(404, "not_found", f"no gallery {request.gallery!r}", field="gallery")
    config = caption_config(settings)
    directory = row.directory
    from minterpr.vlm.caption import CAPTIONS_FILE

    if os.path.islink(os.path.join(directory, CAPTIONS_FILE)):  # the job appends to it: never through a link
        raise ApiError(
            409,
            "unavailable",
            f"{os.path.join(directory, CAPTIONS_FILE)} is a symbolic link; the "
            "captioning job writes only a regular file in the gallery's store",
        )

    def work(job_id: str, stop: threading.Event) -> None:
        _run(services, principal, job_id, request, directory, config, stop)

    options = {**request.model_dump(), "endpoint": config.url, "model": config.model}
    return services.jobs.queue(
        principal,
        "caption",
        request.gallery,
        directory,
        options,
        {"gallery": request.gallery, "endpoint": config.url, "model": config.model},
        work,
    )


def _run(
    services: Any,
    principal: Principal,
    job_id: str,
    request: CaptionRequest,
    directory: str,
    config: Any,
    stop: threading.Event,
) -> None:
    from minterpr.index.store.gallery_store import load_gallery
    from minterpr.vlm.caption import CAPTIONS_FILE, caption_gallery
    from minterpr.vlm.client import VLMClient

    jobs, gallery = services.jobs, request.gallery
    try:
        index = load_gallery(directory, fused=False)
    except MinterprError as err:
        jobs.finish(job_id, principal, "failed", f"gallery {gallery!r} cannot be read: {err}", {})
        return
    total = len(index.images)
    client = VLMClient(config)
    audited = [0]  # calls already audited

    def audit_calls() -> None:
        calls = client.calls[audited[0] :]
        if calls:
            with services.db.write() as tx:
                for call in calls:
                    record = call.to_dict()
                    audit.append(
                        tx,
                        principal.username,
                        "vlm_call",
                        None,
                        {"job": job_id, "gallery": gallery, **{k: record[k] for k in AUDITED}},
                    )
            audited[0] += len(calls)

    def on_crop(counts: dict[str, Any]) -> None:
        audit_calls()
        jobs.report(job_id, progress(counts, client.usage(), total), f"captioning {gallery}")

    try:
        report = caption_gallery(
            index.images,
            index.root,
            client,
            os.path.join(directory, CAPTIONS_FILE),
            batch_size=request.batch_size,
            limit=request.limit,
            on_crop=on_crop,
            cancel=stop.is_set,
            give_up_after=GIVE_UP_AFTER,
        )
    except (MinterprError, OSError) as err:
        audit_calls()
        jobs.finish(job_id, principal, "failed", f"captioning {gallery} stopped: {err}", {})
        return
    finally:
        client.close()
    audit_calls()
    summary = progress(report, report["usage"], total)
    jobs.report(job_id, summary, f"opening {gallery} again with its captions")
    reopened = False
    if report["captioned"]:
        services.galleries.bump(gallery)  # sessions over it are rebuilt; with vlm_captions, on the new captions
        try:
            services.galleries.get(gallery)  # opened now, in the job, not by the first search
            reopened = True
        except ApiError as err:
            summary["reopen_error"] = err.message
    result = {**summary, "seconds": report["seconds"], "reopened": reopened, "stopped": report["stopped"]}
    said = (
        f"{report['captioned']} crops of {gallery} captioned ({report['skipped']} done before, "
        f"{report['nothing_seen']} with nothing seen, {report['failed']} without an answer, "
        f"{report['unreadable']} unreadable)"
    )
    if report["stopped"] == "cancelled":
        jobs.finish(job_id, principal, "cancelled", f"{said}; start it again to resume", result)
    elif report["stopped"]:
        jobs.finish(
            job_id, principal, "failed", f"{said}; stopped: {report['stopped']}; start it again to resume", result
        )
    else:
        jobs.finish(job_id, principal, "done", said, result)


def progress(counts: dict[str, Any], usage: dict[str, Any], total: int) -> dict[str, Any]:
    """A captioning job's progress from :func:`~minterpr.vlm.caption.caption_gallery`'s counts and the
    client's usage.

    Example:
        >>> usage = {"calls": 12, "failed": 2, "prompt_tokens": 500, "completion_tokens": 100}
        >>> line = progress({"captioned": 2, "skipped": 4, "failed": 1, "unreadable": 0}, usage, 10)
        >>> line["crops_done"], line["fraction"], line["tokens"], line["calls_failed"]
        (7, 0.7, 600, 2)
    """
    seen_none = counts.get("nothing_seen", 0)  # answered, nothing seen: done, not captioned
    done = counts["skipped"] + counts["captioned"] + seen_none + counts["failed"] + counts["unreadable"]
    return {
        "stage": "caption",
        "fraction": round(done / total, 4) if total else 1.0,
        "crops_done": done,
        "crops_total": total,
        "captioned": counts["captioned"],
        "nothing_seen": seen_none,
        "skipped": counts["skipped"],
        "failed": counts["failed"],
        "unreadable": counts["unreadable"],
        "calls": usage["calls"],
        "calls_failed": usage["failed"],
        "tokens": usage["prompt_tokens"] + usage["completion_tokens"],
    }
