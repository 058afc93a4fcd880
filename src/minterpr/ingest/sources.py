"""What ingestion reads: a video file (PyAV, OpenCV as fallback), a folder of frames, or a
folder of crops; and the start time that puts a clock on frames.

:func:`open_source` probes a source once (``SourceInfo``: kind, frame rate, frame count, size,
decoder) and refuses with one line what cannot be read: a missing path, a file no decoder
opens, a folder without images. :func:`iter_frames` yields ``(index, BGR frame)`` for every
``every``-th frame from ``first`` on: every frame is decoded (a compressed video needs its
predecessors) but only those are converted to arrays. The same source gives the same frames
each time, so a resumed ingestion sees what an uninterrupted one saw.

Example:
    >>> parse_start("2026-12-01T10:00:00")
    datetime.datetime(2026, 12, 1, 10, 0)
    >>> frame_time(parse_start("2026-12-01T10:00:00"), 25, 10.0)
    '2026-12-01T10:00:02.500'
    >>> parse_start("yesterday")
    Traceback (most recent call last):
    ...
    minterpr.errors.InputError: --start 'yesterday' is not an ISO 8601 time (e.g. 2026-12-01T10:00:00 or 2026-12-01T10:00:00+01:00)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from minterpr.data.layout import IMAGE_SUFFIXES  # what a folder source's images may be
from minterpr.errors import ImageError, InputError

FRAMES_FPS = 25.0  # frame rate of a folder of frames unless told
VIDEO_HINT = "pip install 'minterpr[ingest]' (PyAV, or opencv-python-headless<5)"


def parse_start(text: str | datetime | None) -> datetime | None:
    """``--start``: an ISO 8601 time (``Z`` and offsets accepted; aware times become UTC)."""
    if text is None or isinstance(text, datetime):
        start = text
    else:
        try:
            start = datetime.fromisoformat(str(text).strip())
        except ValueError:
            raise InputError(
                f"--start {text!r} is not an ISO 8601 time (e.g. 2026-12-01T10:00:00 or 2026-12-01T10:00:00+01:00)"
            ) from None
    if start is not None and start.tzinfo is not None:
        start = start.astimezone(timezone.utc)
    return start


def frame_time(start: datetime | None, frame: int, fps: float) -> str | None:
    """ISO time of ``frame`` (start + frame / fps), to the millisecond; None without a start."""
    if start is None:
        return None
    return (start + timedelta(seconds=frame / fps)).isoformat(timespec="milliseconds")


def _natural_key(path: Path) -> list[Any]:
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", path.as_posix())]


def list_images(folder: Path) -> list[Path]:
    """The image files under ``folder`` (recursively), in natural name order (frame2 before frame10)."""
    files = [p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES]
    return sorted(files, key=lambda p: _natural_key(p.relative_to(folder)))


@dataclass(frozen=True)
class SourceInfo:
    """A probed source."""

    kind: str  # "video", "frames" (a folder of one video's frames) or "crops" (a folder of person crops)
    path: Path  # absolute path of the file or folder
    fps: float  # frames per second (frames: FRAMES_FPS unless told; crops: 0)
    frames: int | None  # frame (or crop) count when known
    width: int | None  # frame size in pixels (video only)
    height: int | None
    decoder: str  # "pyav", "opencv" or "pillow": recorded with a job, so a resume decodes alike
    files: tuple[str, ...] = ()  # folder sources: the image files, relative to path, in order

    @property
    def duration_s(self) -> float | None:
        return None if self.kind == "crops" or not self.frames or not self.fps else self.frames / self.fps


def _probe_video(path: Path, fps: float | None) -> SourceInfo:
    reasons = []
    try:
        import av

        try:
            with av.open(os.fspath(path)) as container:
                if not container.streams.video:
                    raise ImageError(path, "no video stream in the file")
                stream = container.streams.video[0]
                rate = float(stream.average_rate or stream.guessed_rate or 0) or None
                count = int(stream.frames or 0) or None
                if count is None and stream.duration and stream.time_base and rate:
                    count = int(round(float(stream.duration * stream.time_base) * rate)) or None
                return SourceInfo(
                    "video", path, fps or rate or FRAMES_FPS, count, stream.width or None, stream.height or None, "pyav"
                )
        except ImageError:
            raise
        except Exception as err:  # PyAV's errors (InvalidDataError, ...) derive from several bases
            reasons.append(f"PyAV: {type(err).__name__}: {err}")
    except ImportError:
        reasons.append("PyAV is not installed")
    try:
        import cv2
    except ImportError:
        raise ImageError(path, f"cannot open the video ({'; '.join(reasons)}; {VIDEO_HINT})") from None
    capture = cv2.VideoCapture(os.fspath(path))
    try:
        ok, _ = capture.read() if capture.isOpened() else (False, None)
        if not ok:
            raise ImageError(path, f"not a readable video ({'; '.join(reasons + ['OpenCV cannot decode it'])})")
        rate = float(capture.get(cv2.CAP_PROP_FPS) or 0) or None
        count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT) or 0) or None
        return SourceInfo(
            "video",
            path,
            fps or rate or FRAMES_FPS,
            count,
            int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)),
            int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)),
            "opencv",
        )
    finally:
        capture.release()


def open_source(source: str | os.PathLike[str], *, frames: bool = False, fps: float | None = None) -> SourceInfo:
    """Probe ``source`` (see the module doc); ``frames``: a folder holds one video's frames, not crops."""
    path = Path(source).expanduser().absolute()
    if fps is not None and not (isinstance(fps, (int, float)) and fps > 0):
        raise InputError(f"--fps must be a positive number of frames per second, got {fps!r}")
    if not path.exists():
        raise InputError(f"{path}: no such video file or folder")
    if path.is_dir():
        files = list_images(path)
        if not files:
            raise InputError(f"{path}: an empty folder (no {', '.join(IMAGE_SUFFIXES)} images in it)")
        names = tuple(p.relative_to(path).as_posix() for p in files)
        if frames:
            return SourceInfo("frames", path, float(fps or FRAMES_FPS), len(names), None, None, "pillow", names)
        return SourceInfo("crops", path, 0.0, len(names), None, None, "pillow", names)
    if frames:
        raise InputError(f"{path}: --frames needs a folder of frames, this is a file")
    return _probe_video(path, fps)


Frames = Iterator[tuple[int, "np.ndarray | None"]]


def _pyav_frames(info: SourceInfo, first: int, every: int) -> Frames:
    import av

    try:
        with av.open(os.fspath(info.path)) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"  # frame-parallel decoding: same frames, in order
            for index, frame in enumerate(container.decode(stream)):
                if index >= first:
                    yield index, frame.to_ndarray(format="bgr24") if index % every == 0 else None
    except av.error.FFmpegError as err:  # a damaged stream: it ends there, the same way every time
        raise ImageError(info.path, f"the video cannot be decoded past this point ({err})") from None


def _opencv_frames(info: SourceInfo, first: int, every: int) -> Frames:
    import cv2

    capture = cv2.VideoCapture(os.fspath(info.path))
    try:
        index = 0
        while True:
            if index >= first and index % every == 0:
                ok, frame = capture.read()
                if not ok:
                    return
                yield index, frame
            elif not capture.grab():
                return
            elif index >= first:
                yield index, None
            index += 1
    finally:
        capture.release()


def _folder_frames(info: SourceInfo, first: int, every: int, on_error: Callable[[int, str], None] | None) -> Frames:
    from minterpr.data.images import load_rgb

    for index in range(first, len(info.files)):
        if index % every:
            yield index, None
            continue
        try:
            image = load_rgb(info.path / info.files[index])
        except ImageError as err:
            if on_error is None:
                raise
            on_error(index, f"{info.files[index]}: {err.reason}")
            yield index, None
            continue
        yield index, np.ascontiguousarray(np.asarray(image)[:, :, ::-1])


def iter_frames(
    info: SourceInfo, *, first: int = 0, every: int = 1, on_error: Callable[[int, str], None] | None = None
) -> Frames:
    """``(index, frame)`` for every frame from ``first`` on: the (H, W, 3) uint8 BGR frame when
    ``index % every == 0``, else None (decoded, not converted). A frame folder's unreadable frame
    goes to ``on_error(index, reason)`` (and yields None); without it, its ImageError is raised.
    A video that cannot be decoded past some point raises ImageError there."""
    if info.kind == "crops":
        raise InputError(f"{info.path}: a folder of crops has no frames")
    if info.kind == "frames":
        return _folder_frames(info, first, every, on_error)
    return _pyav_frames(info, first, every) if info.decoder == "pyav" else _opencv_frames(info, first, every)
