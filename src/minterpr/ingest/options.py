"""The options and the result of an ingestion, and where a gallery named on the command line lives.

Example:
    >>> IngestOptions(camera="lobby:cam1", every=2).every
    2
    >>> info = SourceInfo("video", Path("cam.mp4"), 25.0, 250, 1920, 1080, "pyav")
    >>> every_of(IngestOptions(), info), every_of(IngestOptions(every=2), info), every_of(IngestOptions(target_fps=25), info)
    (8, 2, 1)
    >>> check_options(IngestOptions(every=0))
    Traceback (most recent call last):
    ...
    minterpr.errors.InputError: every must be a positive integer, got 0
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from minterpr.errors import InputError
from minterpr.ingest.detection import Detector
from minterpr.ingest.detectors import DETECTORS
from minterpr.ingest.sources import SourceInfo
from minterpr.ingest.tracking import CropFilter, TrackerConfig

GALLERIES_ENV = "MINTERPR_GALLERIES"  # where bare gallery names live (default ./galleries)
# Frames per second of video that go through the detector unless `every` / `target_fps` say
# otherwise. vtest.avi (10 frames/s) is then read every 3rd frame: 1.1x real time on ONE core
# (every 2nd: 0.75x, real time only with both cores), with the same detection recall and people
# covered on the synthetic videos (docs/ingest.md, "Measured").
DEFAULT_TARGET_FPS = 3.0


def gallery_dir(name_or_dir: str | os.PathLike[str], home: str | os.PathLike[str] | None = None) -> Path:
    """``--gallery``: a bare name (no ``/``) is ``home/NAME`` (home: ``$MINTERPR_GALLERIES`` or
    ``./galleries``); anything else is a folder path.

    >>> gallery_dir("lobby", home="/data/galleries").as_posix(), gallery_dir("./lobby").as_posix()
    ('/data/galleries/lobby', 'lobby')
    """
    text = os.fspath(name_or_dir)
    if not text.strip():
        raise InputError("--gallery must name a gallery or a folder")
    if os.sep in text or "/" in text or text in (".", "..") or text.startswith("~"):
        return Path(text).expanduser()
    return Path(home or os.environ.get(GALLERIES_ENV) or "galleries") / text


@dataclass(frozen=True)
class IngestOptions:
    """How a source is ingested (all optional; see docs/ingest.md)."""

    camera: str | None = None  # camera id of every row (the `camera` filter)
    start: str | None = None  # ISO 8601 time of frame 0 (crops: of every crop); None: rows get no `time`
    every: int | None = None  # detect and track every Nth frame; None: from target_fps
    target_fps: float | None = None  # if set, every = max(1, round(source fps / target_fps)) (it wins over every);
    # both None: target_fps = DEFAULT_TARGET_FPS
    detect_max_height: int | None = None  # taller frames are shrunk to this height for the detector (boxes mapped
    # back, crops cut from the full frame): the detector's cost follows the pixels; None: full size
    fps: float | None = None  # the source's frame rate, overriding the container's (frame folders: 25)
    frames: bool = False  # a folder SOURCE holds one video's frames (detect + track), not crops
    detector: str = "auto"  # a name in DETECTORS, "onnx:PATH", or "auto": yolox-nano when fetched, else hog
    detector_options: Mapping[str, Any] = field(default_factory=dict)  # that detector's keyword options
    best_k: int = 3  # crops kept per track
    min_gap_s: float = 1.0  # crops of one track at least this many seconds apart
    min_track_detections: int = 2  # tracks detected on fewer processed frames are dropped
    tracker: TrackerConfig = TrackerConfig()  # ByteTrack's settings
    crop_filter: CropFilter = CropFilter()  # which tracked detections may become crops (one person, sharp, large)
    chunk_frames: int = 64  # frames per durable detection chunk (a kill loses at most one)
    jpeg_quality: int = 95  # of the crops written
    batch_size: int = 32  # crops embedded per batch
    restart: bool = False  # discard this source's saved progress in the gallery and redo it


@dataclass(frozen=True)
class IngestResult:
    """What an ingestion did."""

    gallery: Path  # the store's folder
    job: str  # the job id (rows' `job`)
    source: str  # absolute path of the source
    kind: str  # "video", "frames" or "crops"
    rows_added: int  # rows of this job in the store
    rows_total: int  # rows in the store
    frames_read: int  # frames decoded (0 for crops)
    frames_processed: int  # frames that went through the detector
    detections: int  # people detected
    tracks: int  # tracks kept
    crops: int  # crops selected (rows_added + unreadable ones)
    skipped: tuple[tuple[str, str], ...]  # (path, reason) of crops or frames that could not be read
    seconds: float  # wall time of this call
    resumed: bool  # progress saved by an earlier run was used
    already_done: bool  # the job had finished before: nothing was redone
    video_fps: float | None  # the source's frame rate
    duration_s: float | None  # the video's length in seconds
    rejected: Mapping[str, int] = field(default_factory=dict)  # reason (crowded, small, blurry) -> tracked
    # detections that did not become crops for it (one may have several reasons)


def create_detector(name: str, options: Mapping[str, Any] | None = None) -> Detector:
    """``DETECTORS.create(name, **options)`` with unknown options as one InputError; ``name`` may
    also be ``auto`` or ``onnx:PATH`` (:func:`minterpr.ingest.detector_zoo.resolve_detector`)."""
    from minterpr.ingest.detector_zoo import resolve_detector

    name, resolved, _ = resolve_detector(name, options)
    try:
        return DETECTORS.create(name, **resolved)
    except TypeError as err:
        raise InputError(f"detector {name!r}: bad option ({err})") from None


def check_options(options: IngestOptions) -> None:
    """InputError for an option out of range."""
    for name in ("every", "best_k", "min_track_detections", "chunk_frames", "batch_size", "detect_max_height"):
        value = getattr(options, name)
        if value is None and name in ("every", "detect_max_height"):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{name} must be a positive integer, got {value!r}")
    if options.target_fps is not None and not options.target_fps > 0:
        raise InputError(f"target_fps must be a positive number, got {options.target_fps!r}")
    if options.detect_max_height is not None and options.detect_max_height < 128:
        raise InputError(
            f"detect_max_height must be at least 128 pixels (a person must stay detectable), "
            f"got {options.detect_max_height}"
        )
    if not 1 <= options.jpeg_quality <= 100 or options.min_gap_s < 0:
        raise InputError("jpeg_quality must be 1..100 and min_gap_s >= 0")
    if options.camera is not None and (not isinstance(options.camera, str) or not options.camera.strip()):
        raise InputError(f"camera must be a non-empty string, got {options.camera!r}")


def every_of(options: IngestOptions, info: SourceInfo) -> int:
    """The frame step: the one that gives about ``target_fps`` processed frames per second of
    video when it is set, else ``every``, else the one for :data:`DEFAULT_TARGET_FPS`."""
    if options.target_fps is None and options.every is not None:
        return options.every
    return max(1, round(info.fps / (options.target_fps or DEFAULT_TARGET_FPS)))
