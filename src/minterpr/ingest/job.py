"""Durable progress of one ingestion job: what a rerun after a kill continues from.

A job is one source ingested into one gallery; its folder is ``GALLERY/ingest/<job>/`` (``job``
= 12 hex characters of the SHA-256 of the source's absolute path)::

    job.json                  what the job is: source, its size and time, options, detector, model
    detect/chunk-00000.json   the detections of frames [0, F), F = chunk_frames, written once the
                              last of them is processed (the file is its own marker); the chunk
                              holding the end of the video says so ("eof")
    embed/shard-00000.*       embedded crops (minterpr.runtime.batch_embed's shard files and markers)
    done.json                 the rows were added to the store (written after it was saved)

and the crops themselves in ``GALLERY/crops/<job>/``, the frames they were cut from (downscaled,
one file per frame: :data:`minterpr.ingest.video.FRAME_MAX_WIDTH`) in ``GALLERY/frames/<job>/``. Every file is written through
:mod:`minterpr.fileio`. A rerun reads the finished chunks, replays the tracker and the crop
selection over their detections (fast: no pixels), and goes on decoding from the first frame of
the first missing chunk, so it ends with the same tracks, crops and rows as a run that was
never stopped. ``job.json`` written by other settings is refused (``restart`` discards the job).

One process at a time may ingest into a gallery: :func:`gallery_lock` holds an exclusive
``flock`` on ``GALLERY/ingest/.lock`` for the whole job.

Example:
    >>> job_id("/videos/cam1.mp4") == job_id("/videos/cam1.mp4"), len(job_id("/videos/cam1.mp4"))
    (True, 12)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from minterpr.errors import DatasetError, InputError
from minterpr.fileio import atomic_write_text

JOB_FORMAT = "minterpr-ingest-job"  # job.json "format"
JOB_VERSION = 1
INGEST_DIR, CROPS_DIR, FRAMES_DIR = "ingest", "crops", "frames"  # in the gallery folder


def job_id(source: str | os.PathLike[str]) -> str:
    """The job of ``source`` (its absolute path) in any gallery."""
    return hashlib.sha256(os.fspath(Path(source).absolute()).encode("utf-8")).hexdigest()[:12]


@contextmanager
def gallery_lock(gallery: Path) -> Iterator[None]:
    """Hold the gallery's ingestion lock, or raise InputError at once if another process holds it."""
    folder = gallery / INGEST_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(
            f"{gallery}: cannot create the gallery folder ({err.strerror}); give --gallery a folder "
            f"you can write, or set $MINTERPR_GALLERIES for bare names"
        ) from None
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        yield
        return
    with open(folder / ".lock", "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise InputError(f"{gallery}: another ingest is writing to this gallery; wait for it to finish") from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return out


class JobFolder:
    """The durable state of one job (see the module doc)."""

    def __init__(self, gallery: Path, job: str) -> None:
        self.gallery, self.job = gallery, job
        self.path = gallery / INGEST_DIR / job
        self.crops = gallery / CROPS_DIR / job
        self.frames = gallery / FRAMES_DIR / job  # the (downscaled) frames the kept crops were cut from

    def start(self, description: dict[str, Any], *, restart: bool) -> bool:
        """Write ``job.json`` for a new job, or check the one there; True when progress is resumed."""
        description = {"format": JOB_FORMAT, "version": JOB_VERSION, "job": self.job, **description}
        path = self.path / "job.json"
        if restart:
            self.discard()
        elif path.is_file():
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                old = None
            if old == description:
                return True
            if not isinstance(old, dict):
                raise DatasetError(path, "unreadable ingestion progress; rerun with --restart to start over")
            changes = "; ".join(_differences(old, description)[:4])
            raise InputError(
                f"{self.gallery}: {description.get('source')} was ingested into this gallery with other "
                f"settings ({changes}); rerun with the same ones to continue, or --restart to redo it"
            )
        self.discard()
        atomic_write_text(path, json.dumps(description, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        return False

    def discard(self) -> None:
        """Remove the job's progress, crops and frames (its rows stay in the store until replaced)."""
        shutil.rmtree(self.path, ignore_errors=True)
        shutil.rmtree(self.crops, ignore_errors=True)
        shutil.rmtree(self.frames, ignore_errors=True)

    # ------------------------------------------------------------------ detection chunks
    def chunk_path(self, chunk: int) -> Path:
        return self.path / "detect" / f"chunk-{chunk:05d}.json"

    def finished_chunks(self) -> Iterator[dict[str, Any]]:
        """The finished chunks 0, 1, ... up to the first missing one (or the one marked eof)."""
        chunk = 0
        while (path := self.chunk_path(chunk)).is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as err:
                raise DatasetError(path, f"unreadable detection chunk ({err}); delete it and rerun") from None
            yield data
            if data.get("eof"):
                return
            chunk += 1

    def write_chunk(
        self,
        chunk: int,
        frames: list[list[Any]],
        *,
        eof: bool,
        frames_read: int,
        skipped: list[list[str]] | None = None,
    ) -> None:
        """The chunk's processed frames ``[[index, width, height, [[x1, y1, x2, y2, score, sharpness],
        ...]], ...]``, the frames read by its end, and the frames that could not be read."""
        data = {"chunk": chunk, "frames": frames, "eof": eof, "frames_read": frames_read, "skipped": skipped or []}
        atomic_write_text(self.chunk_path(chunk), json.dumps(data, separators=(",", ":")) + "\n")

    # ------------------------------------------------------------------ the end
    @property
    def embed_dir(self) -> Path:
        return self.path / "embed"

    def done(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.path / "done.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def mark_done(self, summary: dict[str, Any]) -> None:
        atomic_write_text(self.path / "done.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")

    def clear_done(self) -> None:
        (self.path / "done.json").unlink(missing_ok=True)
