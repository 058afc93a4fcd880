"""Atomic file writes: a file appears at its path complete, or not at all.

Every writer in minterpr (datasets, reports, configs, model files, checkpoints, feature caches)
goes through :func:`atomic_write` or :func:`atomic_open`: the content goes to a temporary file
``.NAME.<random>.tmp`` in the same folder, is flushed and fsync'ed, then ``os.replace``'d over
``NAME`` (atomic on POSIX and Windows) and the folder is fsync'ed. A process killed at any
moment leaves the old file or the new one, never half of one; the temporaries it may leave are
removed by :func:`remove_stale_temporaries`. Files get the usual permissions (0666 less the
umask, so 0644 by default): unlike ``tempfile.mkstemp`` (0600), others can read what we write.

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> with atomic_open(folder / "notes.txt") as f:
    ...     _ = f.write("hello\\n")
    >>> (folder / "notes.txt").read_text()
    'hello\\n'
    >>> _ = atomic_write(folder / "blob.bin", lambda f: f.write(b"\\x00\\x01"))
    >>> sorted(p.name for p in folder.iterdir())  # no temporary left behind
    ['blob.bin', 'notes.txt']
"""

from __future__ import annotations

import os
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Callable, Iterator

TEMPORARY_GLOB = ".*.tmp"  # what a killed writer may leave behind


def _temporary_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make a rename in ``directory`` durable; platforms that cannot open folders skip it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", *, durable: bool = True) -> Iterator[IO[Any]]:
    """Open ``path`` for writing (``"w"``: UTF-8 text with ``\\n`` newlines, ``"wb"``: bytes);
    the file replaces ``path`` when the block ends without error and is discarded otherwise.
    Parent folders are created. ``durable=False`` skips the fsyncs (still atomic for a killed
    process, not for a power cut): for many small files whose set a fingerprint checks later."""
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary_path(target)
    # O_EXCL on a fresh random name; 0o666 so the umask, not mkstemp's 0600, sets the permissions
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        if mode == "w":
            file: IO[Any] = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        else:
            file = os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    try:
        with file:
            yield file
            file.flush()
            if durable:
                os.fsync(file.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_directory(target.parent)


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[bytes]], Any], *, durable: bool = True) -> Path:
    """Call ``write(binary_file)`` and move the result to ``path`` atomically; returns ``path``."""
    with atomic_open(path, "wb", durable=durable) as f:
        write(f)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically; returns ``path``."""
    with atomic_open(path, "w") as f:
        f.write(text)
    return Path(path)


def remove_stale_temporaries(directory: str | os.PathLike[str]) -> int:
    """Delete the ``.NAME.*.tmp`` files a killed writer left in ``directory``; returns how many.

    Only for folders that one process writes at a time (a run, a dataset build): another
    writer's temporary in progress would be removed too."""
    count = 0
    folder = Path(directory)
    if not folder.is_dir():
        return 0
    for tmp in folder.glob(TEMPORARY_GLOB):
        if tmp.is_file():
            tmp.unlink(missing_ok=True)
            count += 1
    return count
