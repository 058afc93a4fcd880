"""The street demo of ``minterpr serve --demo street``: a real video ingested beside the synthetic demo.

The video (``--video``, else ``../shared/data/video/vtest.avi`` beside the repository, else Debian's
``opencv-doc`` copy) is ingested once with the real-footage model (``--run``, else
:func:`minterpr.models.zoo.default_real_model_dir`, the shipped ``peta-pa100k-lite2``) into the service's gallery ``street``, with
camera ``street:cam1``, capture times from :data:`STREET_START` and HOG on frames enlarged
1.5 times (:data:`STREET_DETECTOR_OPTIONS`: its people are small). Ingestion is a resumable job
(:mod:`minterpr.ingest`): a later start finds it done and reuses the store in seconds; another
video or model makes a new gallery folder (``street-<hash>``), so nothing is mixed.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any

from minterpr.cli.shared.common import CLIError
from minterpr.errors import RunError

log = logging.getLogger(__name__)

STREET_GALLERY = "street"  # the gallery's name in the service
STREET_CAMERA = "street:cam1"  # the camera of its rows
STREET_START = "2026-03-02T12:00:00+00:00"  # capture time of frame 0 (the demo's day)
# vtest.avi's people are 60-100 px tall, under HOG's ~96 px window: frames enlarged 1.5x first find
# several times more of the labelled people (docs/benchmarks.md, "Street video"), at twice the cost
STREET_DETECTOR_OPTIONS = {"upscale": 1.5}
REPO = Path(__file__).resolve().parents[4]
STREET_VIDEOS = (
    REPO.parent / "shared" / "data" / "video" / "vtest.avi",
    Path("/usr/share/doc/opencv-doc/examples/data/vtest.avi"),
)


def street_video(video: str | os.PathLike[str] | None) -> Path:
    """The video to ingest: ``video`` when given, else the first of :data:`STREET_VIDEOS` found."""
    if video is not None:
        if not Path(video).is_file():
            raise CLIError(f"--video {video}: no such file")
        return Path(video)
    for path in STREET_VIDEOS:
        if path.is_file():
            return path
    raise CLIError(
        "--demo street: no street video found (tried "
        + ", ".join(map(str, STREET_VIDEOS))
        + "); install Debian's opencv-doc or pass --video PATH"
    )


def street_model(run: str | os.PathLike[str] | None) -> str | os.PathLike[str]:
    """``--run`` when given, else the shipped real-footage model; RunError naming ``--run`` when none is shipped."""
    if run is not None:
        return run
    from minterpr.models.zoo import default_real_model_dir

    try:
        return default_real_model_dir()
    except RunError as err:
        raise RunError(err.path, f"{err.reason}; or pass a model with --run RUN") from None


def ensure_street_gallery(services: Any, video: Path, run: str | os.PathLike[str], progress: bool = True) -> Path:
    """Ingest ``video`` with ``run`` into the service's galleries (once) and register it as "street"."""
    from minterpr.ingest import IngestOptions, ingest
    from minterpr.ingest.detector_zoo import cached_model, resolve_detector

    pipeline = services.galleries.pipeline(str(Path(run).absolute()))
    # YOLOX-nano when fetched (it finds most labelled walkers HOG misses), else HOG at 1.5x with the fallback's line
    if cached_model("yolox-nano") is not None:
        detector, options = "yolox-nano", {}
    else:
        detector, options = "hog", STREET_DETECTOR_OPTIONS
        log.info("[serve] street: %s", resolve_detector("auto")[2])
    key = hashlib.sha256(f"{video.resolve()}\0{pipeline.fingerprint}\0{detector}".encode()).hexdigest()[:10]
    store = Path(services.settings.galleries_dir) / f"{STREET_GALLERY}-{key}"
    events = {"last": -1}

    def report(event: Any) -> None:  # a log line per tenth of the work: ingestion takes about a minute
        tenth = int(event.fraction * 10) if event.fraction is not None else -1
        if progress and tenth > events["last"]:
            events["last"] = tenth
            log.info("[serve] street: %s", event.message or f"{event.stage} {tenth * 10}%")

    log.info("[serve] street demo: ingesting %s into %s (once; later starts reuse it)", video, store)
    result = ingest(
        video,
        store,
        run=pipeline,
        progress=report,
        options=IngestOptions(camera=STREET_CAMERA, start=STREET_START, detector=detector, detector_options=options),
    )
    log.info(
        "[serve] street: %d crops of %d tracks%s",
        result.rows_added,
        result.tracks,
        " (cached)" if result.already_done else "",
    )
    rows = {row.name: row for row in services.galleries.rows()}
    if STREET_GALLERY not in rows or Path(rows[STREET_GALLERY].directory) != store.absolute():
        services.galleries.register(STREET_GALLERY, store, run, by="minterpr serve --demo street")
    return store
