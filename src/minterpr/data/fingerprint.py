"""Fingerprints of a built dataset's files: what a finished build marker records and readers compare.

Manifests and dialogue files are fingerprinted by size and SHA-256; the images folder, cheaply, by the
number, total size and listing of its files (one stat each, no content read). :mod:`minterpr.data.build`
writes and checks the markers.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from pathlib import Path
from typing import Iterable

from minterpr.data.layout import IMAGES_DIR
from minterpr.fileio import TEMPORARY_GLOB


def file_fingerprint(path: str | os.PathLike[str]) -> dict[str, object]:
    """``{"bytes": size, "sha256": hex}`` of one file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return {"bytes": size, "sha256": digest.hexdigest()}


def folder_fingerprint(folder: str | os.PathLike[str]) -> dict[str, object]:
    """``{"files", "bytes", "sha256"}`` of the files under ``folder``: their number, total size and
    the SHA-256 of the sorted ``path<TAB>size`` listing. Cheap (one stat per file, no content
    read), it sees files added, removed, truncated or rewritten with another size. ``folder``
    may be a link (PETA's images/); links inside it are not followed; temporaries are left out."""
    root = os.fspath(folder)
    entries: list[tuple[str, int]] = []
    pending = [""]
    while pending:
        relative = pending.pop()
        with os.scandir(os.path.join(root, relative) if relative else root) as listing:
            for entry in listing:
                name = f"{relative}/{entry.name}" if relative else entry.name
                if entry.is_dir(follow_symlinks=False):
                    pending.append(name)
                elif entry.is_file() and not fnmatch.fnmatchcase(entry.name, TEMPORARY_GLOB):
                    entries.append((name, entry.stat().st_size))
    entries.sort()
    digest = hashlib.sha256("".join(f"{name}\t{size}\n" for name, size in entries).encode("utf-8", "surrogateescape"))
    return {"files": len(entries), "bytes": sum(size for _, size in entries), "sha256": digest.hexdigest()}


def dataset_fingerprint(
    data_dir: str | os.PathLike[str], files: Iterable[str], images: str | None = IMAGES_DIR
) -> dict[str, object]:
    """The fingerprint a finished marker holds: each of ``files`` (relative to ``data_dir``) and
    the ``images`` folder when there is one."""
    root = Path(data_dir)
    result: dict[str, object] = {"files": {name: file_fingerprint(root / name) for name in sorted(files)}}
    if images is not None and (root / images).is_dir():
        result["images"] = {"folder": images, **folder_fingerprint(root / images)}
    return result


def well_formed_fingerprint(fingerprint: object) -> bool:
    """Does a marker's fingerprint have the fields :func:`dataset_fingerprint` writes?"""

    def entry(value: object, keys: tuple[str, ...]) -> bool:
        return (
            isinstance(value, dict)
            and all(isinstance(value.get(k), int) for k in keys[:-1])
            and isinstance(value.get(keys[-1]), str)
        )

    if not isinstance(fingerprint, dict) or not isinstance(fingerprint.get("files"), dict):
        return False
    images = fingerprint.get("images")
    return all(
        isinstance(name, str) and entry(want, ("bytes", "sha256")) for name, want in fingerprint["files"].items()
    ) and (images is None or (entry(images, ("files", "bytes", "sha256")) and isinstance(images.get("folder"), str)))
