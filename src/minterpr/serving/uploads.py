"""Uploads: example images into a session (checked, decoded safely, stored re-encoded), and videos
from the ingestion page (:func:`store_video`: streamed to disk, size-limited, opened before use).

An upload must declare an image type (JPEG, PNG, WebP, BMP), fit ``max_upload_bytes``, have a
header that says at most ``max_image_pixels`` (checked before decoding), and decode whole with
:func:`minterpr.data.images.load_rgb`. It is stored as a PNG of the decoded pixels (metadata
such as EXIF location dropped) named by the SHA-256 of that PNG, in the session's folder.

Example:
    >>> import io, tempfile
    >>> from PIL import Image
    >>> buffer = io.BytesIO(); Image.new("RGB", (8, 16), "red").save(buffer, "JPEG")
    >>> name = store_upload(buffer.getvalue(), "image/jpeg", tempfile.mkdtemp(), max_bytes=10**6, max_pixels=10**6)
    >>> name.endswith(".png") and len(name) == 68
    True
    >>> store_upload(b"GIF89a...", "image/gif", tempfile.mkdtemp(), max_bytes=10**6, max_pixels=10**6)
    Traceback (most recent call last):
    ...
    minterpr.serving.errors.ApiError: image type 'image/gif' is not accepted: send image/jpeg, image/png, image/webp or image/bmp
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError

from minterpr.data.images import load_rgb
from minterpr.errors import ImageError, MinterprError
from minterpr.fileio import atomic_write
from minterpr.serving.errors import ApiError

IMAGE_TYPES = {"image/jpeg": "JPEG", "image/png": "PNG", "image/webp": "WEBP", "image/bmp": "BMP"}


def _size(n: int) -> str:
    """``n`` bytes for people: ``'5 MiB'``, ``'32 KiB'``, ``'100 bytes'`` (rounded down to one decimal).

    >>> _size(5 * 2**20), _size(32768), _size(1536), _size(100)
    ('5 MiB', '32 KiB', '1.5 KiB', '100 bytes')
    """
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{int(n / scale * 10) / 10:g} {unit}"
    return f"{n} bytes"


def store_upload(
    data: bytes, content_type: str | None, folder: str | os.PathLike[str], *, max_bytes: int, max_pixels: int
) -> str:
    """Check and store one uploaded image; returns its file name in ``folder``. ApiError 413 / 415 / 422."""
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind not in IMAGE_TYPES:
        accepted = ", ".join(list(IMAGE_TYPES)[:-1]) + f" or {list(IMAGE_TYPES)[-1]}"
        raise ApiError(
            415,
            "unsupported_media_type",
            f"image type {kind or 'none'!r} is not accepted: send {accepted}",
            field="file",
        )
    if len(data) > max_bytes:
        raise ApiError(
            413,
            "too_large",
            f"the image has more than the {_size(max_bytes)} an upload may have "
            "(the server's max_upload_bytes): send a smaller copy",
            field="file",
        )
    if not data:
        raise ApiError(422, "bad_image", "the uploaded file is empty", field="file")
    try:
        with Image.open(io.BytesIO(data)) as header:  # reads the header only
            width, height = header.size
            actual = header.format
    except Image.DecompressionBombError as err:  # a header claiming more pixels than Pillow will open
        claimed = re.search(r"\((\d+) pixels\)", str(err))
        size = _header_size(data)
        said = f"{size[0]}x{size[1]}" if size else f"{claimed.group(1) if claimed else 'too many'} pixels"
        raise ApiError(
            413,
            "too_large",
            f"the image is {said}: more than {max_pixels} pixels (the server's max_image_pixels): send a smaller copy",
            field="file",
        ) from None
    except (UnidentifiedImageError, OSError, ValueError):
        raise ApiError(
            422, "bad_image", "the uploaded file is not an image of a supported type", field="file"
        ) from None
    if actual != IMAGE_TYPES[kind]:
        raise ApiError(
            415, "unsupported_media_type", f"declared {kind} but the file is {actual or 'unknown'}", field="file"
        )
    if width * height > max_pixels:
        raise ApiError(
            413,
            "too_large",
            f"the image is {width}x{height}: more than {max_pixels} pixels (the "
            "server's max_image_pixels): send a smaller copy",
            field="file",
        )
    with tempfile.TemporaryDirectory(prefix="minterpr-upload-") as scratch:
        raw = Path(scratch) / "upload"
        raw.write_bytes(data)
        try:
            image = load_rgb(raw)  # decodes whole: truncated or corrupt files fail here
        except ImageError as err:
            reason = str(err).split(": ", 1)[-1]
            raise ApiError(422, "bad_image", f"the uploaded image cannot be read: {reason}", field="file") from None
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    png = buffer.getvalue()
    name = hashlib.sha256(png).hexdigest() + ".png"
    target = Path(folder) / name
    if not target.exists():
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)

        def write(f: Any) -> None:
            os.fchmod(f.fileno(), 0o600)  # a picture of a person: its owner (the service) only, before it is named
            f.write(png)

        atomic_write(target, write)
    return name


def _header_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) a PNG header claims, read without Pillow (which refuses to open a bomb)."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    return None


def thumbnail(path: str | os.PathLike[str], height: int) -> bytes:
    """A JPEG of the image at ``path``, ``height`` pixels high at most (ImageError when unreadable)."""
    image = load_rgb(path)
    if image.height > height:
        image = image.resize((max(1, round(image.width * height / image.height)), height))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=85)
    return buffer.getvalue()


VIDEO_SUFFIXES = (".mp4", ".avi", ".mkv", ".mov", ".webm", ".m4v", ".mpg", ".mpeg")  # what the upload form takes
_CHUNK = 1024 * 1024  # bytes copied at a time: memory stays flat whatever the video's size


def store_video(stream: Any, filename: str | None, folder: str | os.PathLike[str], *, max_bytes: int) -> Path:
    """Copy an uploaded video from the file object ``stream`` into ``folder`` a chunk at a time, then
    check it opens as a video with frames (:func:`minterpr.ingest.sources.open_source`) before anything
    runs; the stored path, named by the SHA-256 of its bytes. ApiError 413 (more than ``max_bytes``),
    415 (not a video file name), 422 (empty, or not a video that can be read: nothing is kept), 409
    (ingestion not installed).

    >>> import io, tempfile
    >>> store_video(io.BytesIO(b"x" * 10), "cam.mp4", tempfile.mkdtemp(), max_bytes=5)
    Traceback (most recent call last):
    ...
    minterpr.serving.errors.ApiError: the video has more than 5 bytes: upload at most 5 bytes, or put it in the incoming folder
    """
    suffix = Path(filename or "").suffix.lower()
    if suffix not in VIDEO_SUFFIXES:
        raise ApiError(
            415,
            "unsupported_media_type",
            f"{Path(filename or '').name or 'the file'} is not a video file "
            f"name: send one ending in {', '.join(VIDEO_SUFFIXES)}",
            field="video",
        )
    target_dir = Path(folder)
    target_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with tempfile.NamedTemporaryFile(dir=target_dir, prefix=".upload-", suffix=suffix, delete=False) as out:
        partial = Path(out.name)
        try:
            os.fchmod(out.fileno(), 0o600)  # footage of people: the service's own
            while chunk := stream.read(_CHUNK):
                size += len(chunk)
                if size > max_bytes:
                    raise ApiError(
                        413,
                        "too_large",
                        f"the video has more than {max_bytes} bytes: upload at most "
                        f"{max_bytes} bytes, or put it in the incoming folder",
                        field="video",
                    )
                digest.update(chunk)
                out.write(chunk)
        except BaseException:
            out.close()
            partial.unlink(missing_ok=True)
            raise
    try:
        if size == 0:
            raise ApiError(422, "bad_video", "the uploaded file is empty", field="video")
        try:
            from minterpr.ingest.sources import iter_frames, open_source
        except ImportError as err:
            raise ApiError(409, "unavailable", f"ingestion is not installed here ({err})") from None
        try:
            info = open_source(partial)
            frames = iter_frames(info)
            first = next(frames, None)  # a first frame decodes: the job will not fail at its first read
            frames.close()
        except (MinterprError, OSError) as err:
            reason = str(err).split(": ", 1)[-1]
            raise ApiError(
                422, "bad_video", f"the uploaded file is not a video that can be read: {reason}", field="video"
            ) from None
        if info.kind != "video" or first is None or first[1] is None:
            raise ApiError(422, "bad_video", "the uploaded video has no frame that decodes", field="video")
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    target = target_dir / f"{digest.hexdigest()[:32]}{suffix}"
    os.replace(partial, target)  # the same video twice is one file
    return target
