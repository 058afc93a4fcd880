"""Requests and responses of the job routes: ingestion, and MTG captioning of a registered gallery.

A caption request names the gallery only (and how much of it): the endpoint, the model and the
API key's variable come from the service's settings (``vlm``), never from a request, so a request
cannot make the server call a URL of its choosing.

Example:
    >>> IngestRequest(gallery="lobby", source="/srv/video/cam1.mp4", camera="lobby:cam1").every is None  # ~3 frames/s
    True
    >>> CaptionRequest(gallery="lobby").batch_size
    16
    >>> CaptionRequest(gallery="lobby", url="http://169.254.169.254/v1")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for CaptionRequest
    url
      Extra inputs are not permitted ...
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from minterpr.serving.paths import server_path
from minterpr.serving.schemas.search import NAME_MAX, Name, Strict, Text


class IngestRequest(Strict):
    gallery: Name = Field(min_length=1, max_length=NAME_MAX)
    source: Text = server_path(
        "input", min_length=1, max_length=4096, description="a video file, or a folder of crops / frames, on the server"
    )
    run: Text | None = server_path(
        "run", default=None, max_length=4096, description="the run that embeds a new gallery"
    )
    camera: Text | None = Field(default=None, min_length=1, max_length=200)
    start: Text | None = Field(default=None, max_length=64, description="ISO 8601 time of the first frame")
    every: int | None = Field(
        default=None, ge=1, le=1000, description="detect every Nth frame (default: about 3 frames per second of video)"
    )
    target_fps: float | None = Field(default=None, gt=0, le=1000)
    frames: bool = False  # a folder of one video's frames rather than crops
    best_k: int = Field(default=3, ge=1, le=100)
    detector: Literal["auto", "hog", "onnx", "yolox-nano"] = Field(
        default="auto",
        description="auto: yolox-nano when the server has fetched it (`minterpr models fetch "
        "yolox-nano`), else hog; hog: OpenCV's people detector; yolox-nano: YOLOX-nano "
        "from the model cache; onnx: the ONNX detection model at detector_model",
    )
    detector_model: Text | None = server_path(
        "input",
        default=None,
        max_length=4096,
        description="the .onnx file (on the server, inside an import root) of detector onnx",
    )


class CaptionRequest(Strict):
    """Caption a registered gallery's crops with the service's vision-language model (CTGI's MTG)."""

    gallery: Name = Field(
        min_length=1, max_length=NAME_MAX, description="a registered gallery; its crops not yet captioned are asked"
    )
    batch_size: int = Field(default=16, ge=1, le=1000, description="crops written to the captions file at a time")
    limit: int | None = Field(default=None, ge=1, le=10_000_000, description="caption at most this many more crops")


class JobView(Strict):
    id: str
    kind: Literal["ingest", "caption"] = "ingest"  # ingest a source; caption a gallery (MTG)
    gallery: str
    source: str
    status: Literal["queued", "running", "done", "failed", "cancelled", "interrupted"]
    # ingest: the last IngestProgress (stage, fraction, frames, tracks, crops, fps, message, ...); caption: stage,
    # fraction, crops_done, crops_total, captioned, skipped, failed, calls, calls_failed, tokens
    progress: dict[str, Any]
    message: str
    created: float
    updated: float
