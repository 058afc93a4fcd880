"""Requests and responses of the ingestion-job routes.

Example:
    >>> IngestRequest(gallery="lobby", source="/srv/video/cam1.mp4", camera="lobby:cam1").every is None  # ~3 frames/s
    True
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from minterpr.serving.schemas import NAME_MAX, Name, Strict, Text


class IngestRequest(Strict):
    gallery: Name = Field(min_length=1, max_length=NAME_MAX)
    source: Text = Field(min_length=1, max_length=4096, description="a video file, or a folder of crops / frames, "
                                                                    "on the server")
    run: Text | None = Field(default=None, max_length=4096, description="the run that embeds a new gallery")
    camera: Text | None = Field(default=None, min_length=1, max_length=200)
    start: Text | None = Field(default=None, max_length=64, description="ISO 8601 time of the first frame")
    every: int | None = Field(default=None, ge=1, le=1000,
                              description="detect every Nth frame (default: about 3 frames per second of video)")
    target_fps: float | None = Field(default=None, gt=0, le=1000)
    frames: bool = False  # a folder of one video's frames rather than crops
    best_k: int = Field(default=3, ge=1, le=100)
    detector: Literal["hog", "onnx"] = Field(default="hog", description="hog: OpenCV's people detector; onnx: the "
                                                                        "ONNX detection model at detector_model")
    detector_model: Text | None = Field(default=None, max_length=4096,
                                        description="the .onnx file (on the server, inside an import root) of detector onnx")


class JobView(Strict):
    id: str
    gallery: str
    source: str
    status: Literal["queued", "running", "done", "failed", "cancelled", "interrupted"]
    progress: dict[str, Any]  # the last IngestProgress (stage, fraction, frames, tracks, crops, fps, message, ...)
    message: str
    created: float
    updated: float
