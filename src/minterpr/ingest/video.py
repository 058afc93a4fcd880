"""The detection stage of a video or frame folder: decode, detect, track, keep the best crops.

:func:`detect_and_track` runs it, or resumes it from the job's finished chunks
(:mod:`minterpr.ingest.job`): their detections are replayed through a fresh tracker and crop
picker (no pixels needed; the crops they kept are on disk), then decoding goes on from the
first frame of the first missing chunk. :func:`tracked_detections` replays a finished job for
evaluation.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from minterpr.errors import ImageError
from minterpr.fileio import atomic_write
from minterpr.ingest.detection import Detections, Detector
from minterpr.ingest.job import JobFolder, job_id
from minterpr.ingest.options import IngestOptions, every_of
from minterpr.ingest.progress import Reporter
from minterpr.ingest.sources import SourceInfo, iter_frames, open_source
from minterpr.ingest.tracking import (
    BestCrops,
    Candidate,
    Tracker,
    covered_share,
    crop_box,
    crop_flags,
    crop_quality,
    measure_sharpness,
)

# The frame each kept crop was cut from is stored at ingest, downscaled to this width (aspect kept),
# rather than decoded from the source when someone looks: the gallery stays self-contained (a
# video may be moved, or deleted under retention, after ingestion), a click costs one file read
# instead of decoding a compressed stream from its previous key frame, and the frame is read
# through the same permission check and audit as a full-size crop (serving/search.py). 960 px keeps
# a 720p frame's people recognisable at ~60-120 kB a frame; one file serves every crop of that frame.
FRAME_MAX_WIDTH = 960
FRAME_JPEG_QUALITY = 80


def frame_name(frame: int) -> str:
    """The stored frame's file name (in ``GALLERY/frames/<job>/``)."""
    return f"f{frame:07d}.jpg"


def _write_frame(path: Path, frame: np.ndarray) -> None:
    """The whole (H, W, 3) BGR frame as a JPEG, at most FRAME_MAX_WIDTH wide (written once per frame)."""
    if path.is_file():
        return
    from PIL import Image

    image = Image.fromarray(np.ascontiguousarray(frame[:, :, ::-1]))
    if image.width > FRAME_MAX_WIDTH:
        image = image.resize(
            (FRAME_MAX_WIDTH, max(1, round(image.height * FRAME_MAX_WIDTH / image.width))), Image.Resampling.LANCZOS
        )
    atomic_write(path, lambda f: image.save(f, format="JPEG", quality=FRAME_JPEG_QUALITY), durable=False)


def detect_people(detector: Detector, frame: np.ndarray, max_height: int | None) -> Detections:
    """``detector.detect(frame)``, on the frame shrunk to ``max_height`` rows (aspect kept, area
    interpolation) when it is taller; the boxes come back in the full frame's pixels."""
    height, width = frame.shape[:2]
    if max_height is None or height <= max_height:
        return detector.detect(frame)
    import cv2

    scale = max_height / height
    size = (max(1, round(width * scale)), max_height)  # (W, H) for OpenCV
    found = detector.detect(cv2.resize(frame, size, interpolation=cv2.INTER_AREA))
    factors = np.array([width / size[0], height / size[1]] * 2, np.float64)  # exact per axis (rounded width)
    boxes = np.clip(found.boxes * factors, 0, [width, height, width, height])
    return Detections(boxes, found.scores, found.crowd)


def _write_crop(path: Path, frame: np.ndarray, box: Any, quality: int) -> None:
    from PIL import Image

    x1, y1, x2, y2 = crop_box(box, frame.shape[1], frame.shape[0])
    image = Image.fromarray(np.ascontiguousarray(frame[y1:y2, x1:x2, ::-1]))
    atomic_write(path, lambda f: image.save(f, format="JPEG", quality=quality), durable=False)


class Tracking:
    """Tracker + crop picker over processed frames, live (with pixels) or replayed (without)."""

    def __init__(self, options: IngestOptions, info: SourceInfo, every: int, job: JobFolder) -> None:
        self.options, self.job = options, job
        self.tracker = Tracker(options.tracker, frame_rate=info.fps / every)
        self.picker = BestCrops(options.best_k, min_gap=round(options.min_gap_s * info.fps))
        self.detections = self.processed = 0
        self.log: list[tuple[int, tuple[float, ...], float, int]] | None = None  # (frame, box, score, track)
        self.frames: list[int] | None = None  # the processed frames, when logging
        self.sizes: dict[int, tuple[int, int]] = {}  # processed frame -> its (width, height) in pixels
        self.rejected: dict[str, int] = {}  # reason -> tracked detections that did not become crops for it
        # track -> [first frame, last frame, first box (4), last box (4)]: where a track begins and ends,
        # crops or not (tracklet linking: minterpr.ingest.links); replayed from the chunks like the rest
        self.spans: dict[int, list[float]] = {}

    def step(self, index: int, size: tuple[int, int], dets: list[list[float]], frame: np.ndarray | None) -> None:
        # a detection: box, score, sharpness, and (since crowd marks) crowd; chunks of before have 6 values
        rows = np.asarray(dets, np.float64)
        rows = rows.reshape(-1, rows.shape[1] if rows.ndim == 2 else 7)
        if rows.shape[1] == 6:
            rows = np.concatenate([rows, np.zeros((len(rows), 1))], axis=1)
        ids = self.tracker.update(rows[:, :4], rows[:, 4])
        self.detections += len(rows)
        self.processed += 1
        self.sizes[index] = (int(size[0]), int(size[1]))
        if self.log is not None and self.frames is not None:
            self.frames.append(index)
            self.log += [(index, tuple(map(float, row[:4])), float(row[4]), t) for row, t in zip(rows, ids.tolist())]
        # crowded: another box covers it, or its detector suppressed a box beside it (two people, one box)
        covered = np.maximum(covered_share(rows[:, :4]), rows[:, 6])
        for k, track in enumerate(ids.tolist()):
            if track < 0:
                continue
            box = tuple(float(v) for v in rows[k, :4])
            span = self.spans.get(track)
            if span is None:
                self.spans[track] = [index, index, *box, *box]
            else:
                span[1], span[6:10] = index, box
            score, sharp = float(rows[k, 4]), float(rows[k, 5])
            flags = crop_flags(box, sharp, float(covered[k]), self.options.crop_filter)
            for flag in flags:  # it is still tracked; it only never becomes a crop
                self.rejected[flag] = self.rejected.get(flag, 0) + 1
            if flags:
                self.picker.count(track)
                continue
            candidate = Candidate(
                track,
                index,
                k,
                box,
                score,
                sharp,
                crop_quality(box, score, sharp, *size),  # type: ignore[arg-type]
                round(float(covered[k]), 4),
            )
            if self.picker.offer(candidate) and frame is not None:
                _write_crop(self.job.crops / candidate.name, frame, box, self.options.jpeg_quality)
                _write_frame(self.job.frames / frame_name(index), frame)


def detect_and_track(
    info: SourceInfo,
    job: JobFolder,
    detector: Detector,
    options: IngestOptions,
    every: int,
    reporter: Reporter,
    skipped: list[tuple[str, str]],
) -> tuple[Tracking, int]:
    """Run (or resume) the detection stage; the tracking state at its end and the frames read."""
    tracking = Tracking(options, info, every, job)
    chunk_frames = options.chunk_frames
    first, frames_read, eof = 0, 0, False
    for chunk in job.finished_chunks():
        for index, width, height, dets in chunk["frames"]:
            tracking.step(index, (width, height), dets, None)
        first, frames_read, eof = (chunk["chunk"] + 1) * chunk_frames, chunk["frames_read"], bool(chunk["eof"])
        skipped.extend(tuple(s) for s in chunk.get("skipped", []))
    report = lambda done: reporter.update(  # noqa: E731
        "detect",
        done,
        info.frames,
        frames=done,
        detections=tracking.detections,
        tracks=tracking.picker.tracks(options.min_track_detections),
        crops=tracking.picker.kept_count(),
    )
    report(frames_read)
    if eof:
        return tracking, frames_read
    current, pending, lost, last = first // chunk_frames, [], [], first - 1

    def unreadable(index: int, reason: str) -> None:
        lost.append([f"frame {index}", reason])

    frames = iter_frames(info, first=first, every=every, on_error=unreadable)
    try:
        for index, frame in frames:
            while index // chunk_frames > current:
                job.write_chunk(current, pending, eof=False, frames_read=(current + 1) * chunk_frames, skipped=lost)
                skipped.extend(tuple(s) for s in lost)
                current, pending, lost = current + 1, [], []
            if frame is not None:
                found = detect_people(detector, frame, options.detect_max_height)
                crowd = found.crowd if found.crowd is not None else np.zeros(len(found))
                dets = [
                    [*map(float, box), float(score), measure_sharpness(frame, box), float(marked)]
                    for box, score, marked in zip(found.boxes, found.scores, crowd)
                ]
                size = (int(frame.shape[1]), int(frame.shape[0]))
                tracking.step(index, size, dets, frame)
                pending.append([index, size[0], size[1], dets])
            last = index
            report(index + 1)
    except ImageError as err:  # a damaged stream: it ends here, the same way on every run
        if last < 0:
            raise
        lost.append([f"frame {last + 1}", err.reason])
    finally:
        close = getattr(frames, "close", None)
        if close is not None:
            close()
    if last < 0:
        raise ImageError(info.path, "no frame could be decoded")
    job.write_chunk(current, pending, eof=True, frames_read=last + 1, skipped=lost)
    skipped.extend(tuple(s) for s in lost)
    report(last + 1)
    return tracking, last + 1


def tracked_detections(
    gallery: str | os.PathLike[str], source: str | os.PathLike[str], options: IngestOptions = IngestOptions()
) -> tuple[list[int], list[tuple[Any, ...]]]:
    """Replay the saved detections of ``source``'s job in ``gallery`` through the tracker (as a
    resumed run does): the processed frames, and every detection as (frame, box, score, track id
    or -1). For evaluation (:mod:`minterpr.ingest.evaluate`)."""
    info = open_source(source, frames=options.frames, fps=options.fps)
    every = every_of(options, info)
    job = JobFolder(Path(gallery).expanduser().absolute(), job_id(info.path))
    tracking = Tracking(options, info, every, job)
    tracking.log, tracking.frames = [], []
    for chunk in job.finished_chunks():
        for index, width, height, dets in chunk["frames"]:
            tracking.step(index, (width, height), dets, None)
    return tracking.frames, tracking.log
