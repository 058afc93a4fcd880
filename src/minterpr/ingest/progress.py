"""Progress events and cancellation of an ingestion job.

:func:`minterpr.ingest.ingest` reports :class:`IngestProgress` events to a callback (the CLI
draws a progress bar from them, the web service streams them) and asks a cancellation hook
between frames and batches; when it says stop, :class:`IngestCancelled` is raised — the
durable progress stays, and the same call later continues from it.

Stages, in order: ``open`` (probing the source), ``detect`` (videos and frame folders: decode,
detect, track; ``done``/``total`` count frames) or ``copy`` (crop folders: files), ``embed``
(crops), ``index`` (writing the gallery store), ``done``.

Example:
    >>> events = []
    >>> reporter = Reporter(events.append, None, weights={"detect": 0.9, "embed": 0.1}, min_interval=0)
    >>> reporter.update("detect", 50, 100, frames=50)
    >>> events[-1].fraction, events[-1].message
    (0.45, 'detect: 50/100 frames, 0 detections, 0 tracks')
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable, Mapping

from minterpr.errors import MinterprError

STAGES = ("open", "detect", "copy", "embed", "index", "done")
UNITS = {"detect": "frames", "copy": "files", "embed": "crops"}


class IngestCancelled(MinterprError):
    """The cancellation hook asked the ingestion to stop; its progress is saved (rerun to continue)."""


@dataclass(frozen=True)
class IngestProgress:
    """One progress event (see the module doc for the stages)."""

    stage: str  # one of STAGES
    done: int  # units of the stage done: frames read (detect), files (copy), crops (embed)
    total: int | None  # units in the stage; None when unknown (a video that does not state its length)
    fraction: float | None  # 0..1 of the whole job, estimated; None when unknown
    frames: int  # frames read so far
    detections: int  # people detected so far
    tracks: int  # tracks so far (seen on at least min_track_detections processed frames)
    crops: int  # crops kept so far
    elapsed_s: float  # seconds since the job started
    fps: float | None  # frames read per second in this run (detect)
    message: str  # one human-readable line


class Reporter:
    """Throttles events to ``callback`` (at most one per ``min_interval`` seconds, plus every stage
    change) and raises IngestCancelled when ``cancel()`` is true. ``weights``: each stage's share
    of the job, for ``fraction``."""

    def __init__(
        self,
        callback: Callable[[IngestProgress], None] | None,
        cancel: Callable[[], bool] | None,
        *,
        weights: Mapping[str, float],
        min_interval: float = 0.2,
    ) -> None:
        self.callback, self.cancel = callback, cancel
        self.weights, self.min_interval = dict(weights), float(min_interval)
        self.started = time.perf_counter()
        self.last_sent = float("-inf")
        self.last: IngestProgress = IngestProgress("open", 0, None, 0.0, 0, 0, 0, 0, 0.0, None, "opening the source")
        self.frames_at_start: int | None = None  # frames already read by an earlier run (a resumed job)

    def check(self) -> None:
        """Raise IngestCancelled if the hook says stop."""
        if self.cancel is not None and self.cancel():
            raise IngestCancelled("ingestion cancelled; its progress is saved: run it again to continue")

    def _fraction(self, stage: str, done: int, total: int | None) -> float | None:
        before = 0.0
        for name in STAGES:
            if name == stage:
                break
            before += self.weights.get(name, 0.0)
        if stage == "done":
            return 1.0
        if not total:
            return None if stage in UNITS else round(before, 4)
        return round(min(1.0, before + self.weights.get(stage, 0.0) * min(1.0, done / total)), 4)

    def update(
        self,
        stage: str,
        done: int,
        total: int | None,
        *,
        force: bool = False,
        frames: int | None = None,
        detections: int | None = None,
        tracks: int | None = None,
        crops: int | None = None,
        message: str | None = None,
    ) -> None:
        """Record progress; send it if due. Checks the cancellation hook first."""
        self.check()
        last = self.last
        frames = last.frames if frames is None else frames
        elapsed = time.perf_counter() - self.started
        if stage == "detect" and self.frames_at_start is None:
            self.frames_at_start = frames
        fps = None
        if stage == "detect" and elapsed > 0 and self.frames_at_start is not None:
            fps = round((frames - self.frames_at_start) / elapsed, 2)
        event = replace(
            last,
            stage=stage,
            done=done,
            total=total,
            fraction=self._fraction(stage, done, total),
            frames=frames,
            detections=last.detections if detections is None else detections,
            tracks=last.tracks if tracks is None else tracks,
            crops=last.crops if crops is None else crops,
            elapsed_s=round(elapsed, 3),
            fps=fps if fps is not None else last.fps,
            message="",
        )
        if message is None:
            of = f"/{total}" if total else ""
            message = f"{stage}: {done}{of} {UNITS[stage]}" if stage in UNITS else stage
            if stage == "detect":
                message += f", {event.detections} detections, {event.tracks} tracks"
        event = replace(event, message=message)
        self.last = event
        now = time.perf_counter()
        if self.callback is not None and (force or stage != last.stage or now - self.last_sent >= self.min_interval):
            self.last_sent = now
            self.callback(event)
