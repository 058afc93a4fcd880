"""Image paths of datasets and galleries stay inside their root unless the user opts in.

A dataset record or a gallery manifest names images relative to its folder; a path such as
``../../etc/passwd`` or ``/home/someone/photo.jpg`` in a downloaded file must not make minterpr
read outside that folder. :func:`resolve_under` is the one check every reader of image paths
uses (evaluation, ``data show``, ``data validate --check-images``, galleries, example images).

Example:
    >>> resolve_under("data/synth", "images/0001.png")
    'data/synth/images/0001.png'
    >>> resolve_under("data/synth", "../secret.png")
    Traceback (most recent call last):
    ...
    minterpr.errors.InputError: image path '../secret.png' leaves its root 'data/synth' (allow paths outside the root to read it)
    >>> resolve_under(None, "/photos/a.jpg")  # no root: the path is the user's own
    '/photos/a.jpg'
"""

from __future__ import annotations

import os

from minterpr.errors import InputError


def is_under(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (relative to ``root``, or absolute) stays inside ``root`` once ``..`` and
    symbolic links of the path itself are resolved lexically (links inside the root are trusted:
    PETA datasets link their images folder to the release)."""
    root_abs = os.path.abspath(root)
    joined = os.path.abspath(os.path.join(root_abs, path))
    return os.path.commonpath([root_abs, joined]) == root_abs


def resolve_under(
    root: str | os.PathLike[str] | None, path: str | os.PathLike[str], *, allow_outside: bool = False
) -> str:
    """``root/path`` when it stays inside ``root``; InputError otherwise (unless ``allow_outside``).

    ``root`` None means there is no folder to stay in: the path is returned as given.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"image path must be a string, got {type(path).__name__}")
    path = os.fspath(path)
    if not path or "\x00" in path:
        raise InputError(f"image path {path!r} is empty or contains a NUL character")
    if root is None:
        return path
    root = os.fspath(root)
    if not allow_outside and not is_under(root, path):
        raise InputError(f"image path {path!r} leaves its root {root!r} (allow paths outside the root to read it)")
    return os.path.join(root, path)
