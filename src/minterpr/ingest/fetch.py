"""``minterpr models fetch NAME``: a catalogue model (:mod:`minterpr.ingest.detector_zoo`) into the model cache.

The file is downloaded from the catalogue's URL (or ``source``: a URL, or a local FILE the user
already has) into ``CACHE/NAME.part``, with a progress bar, **resumed** with an HTTP ``Range``
request when a ``.part`` of an earlier attempt is there (a server that ignores the range sends
the whole file again, and it is written from the start). It is checked against the SHA-256
the catalogue pins before it is moved into place: a mismatch keeps nothing and says, in one
line, both hashes and that ``--sha256 HEX`` accepts a file the user has checked themselves.

Example (offline: a file of yours):
    >>> path = fetch_model("yolox-nano", source="yolox_nano.onnx")  # doctest: +SKIP
    >>> path.name  # doctest: +SKIP
    'yolox_nano.onnx'
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

from minterpr.errors import InputError, first_line
from minterpr.fileio import atomic_write
from minterpr.ingest.detector_zoo import catalogue_entry, model_cache_dir

BLOCK = 1 << 16  # bytes read per step (the progress bar's grain)
TIMEOUT_S = 30.0  # per network operation: a stalled server fails instead of hanging


def sha256_of(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _bar(total: int | None, initial: int, enabled: bool, name: str) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        unit="B",
        unit_scale=True,
        desc=f"fetch {name}",
        file=sys.stderr,
        disable=not enabled,
    )


def download(url: str, part: Path, *, progress: bool = True, label: str = "") -> None:
    """Download ``url`` into ``part``, continuing a partial ``part`` with a Range request."""
    have = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(
        url, headers={"User-Agent": "minterpr", **({"Range": f"bytes={have}-"} if have else {})}
    )
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:  # the range starts at the end: the part is already whole
            return
        raise InputError(f"{url}: the download failed (HTTP {err.code} {err.reason})") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise InputError(
            f"{url}: the download failed ({first_line(reason)}); with no network, give a copy you have with --from FILE"
        ) from None
    with response:
        resumed = have and response.status == 206
        if not resumed:
            have = 0  # the server sent the whole file (no range support): start over
        length = response.headers.get("Content-Length")
        total = have + int(length) if length and length.isdigit() else None
        bar = _bar(total, have, progress, label)
        try:
            with open(part, "ab" if resumed else "wb") as out:
                while True:
                    try:
                        block = response.read(BLOCK)
                    except OSError as err:  # a dropped connection: the part stays for the next try
                        raise InputError(
                            f"{url}: the download stopped after {have} bytes ({first_line(err)}); "
                            f"run the same command again to continue"
                        ) from None
                    if not block:
                        break
                    out.write(block)
                    have += len(block)
                    bar.update(len(block))
        finally:
            bar.close()
    if total is not None and have < total:
        raise InputError(
            f"{url}: the download stopped after {have} of {total} bytes; run the same command again to continue"
        )


def fetch_model(
    name: str,
    *,
    source: str | None = None,
    sha256: str | None = None,
    cache: str | os.PathLike[str] | None = None,
    progress: bool = True,
    say: Callable[[str], None] = lambda line: None,
) -> Path:
    """Put the catalogue model ``name`` into the cache; its path there (see the module doc).
    ``sha256``: the hash to accept instead of the catalogue's (a file the user has checked)."""
    entry = catalogue_entry(name)
    expected = (sha256 or entry.sha256).strip().lower()
    if len(expected) != 64 or any(c not in "0123456789abcdef" for c in expected):
        raise InputError(f"--sha256 {sha256!r}: expected 64 hex digits (the file's SHA-256)")
    folder = Path(cache or model_cache_dir())
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(
            f"{folder}: cannot create the model cache ({err.strerror or err}); set "
            f"MINTERPR_MODEL_CACHE to a folder you can write"
        ) from None
    target = folder / entry.file
    if target.is_file() and sha256_of(target) == expected:
        say(f"{name}: already in the model cache ({target})")
        return target
    where = source or entry.url
    part = folder / f"{entry.file}.part"
    if source is not None and "://" not in source:  # a local copy
        local = Path(source).expanduser()
        if not local.is_file():
            raise InputError(f"--from {source}: no such file (give a file or an http(s):// URL)")
        with open(local, "rb") as src:
            atomic_write(part, lambda f: shutil.copyfileobj(src, f), durable=False)
    else:
        if not where.startswith(("http://", "https://")):
            raise InputError(f"--from {source}: only http:// and https:// URLs (or a local file) can be fetched")
        say(f"{name}: downloading {where}")
        download(where, part, progress=progress, label=name)
    got = sha256_of(part)
    if got != expected:
        part.unlink(missing_ok=True)
        what = "the --sha256 given" if sha256 else "the catalogue's pin"
        raise InputError(
            f"{where}: SHA-256 {got} is not {expected} ({what}); nothing was kept. If you have "
            f"checked this file yourself, accept it with --sha256 {got}"
        )
    os.replace(part, target)
    say(f"{name}: {target} ({target.stat().st_size / 1e6:.1f} MB, SHA-256 {got[:12]}...)")
    return target
