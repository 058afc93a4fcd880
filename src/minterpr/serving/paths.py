"""The one policy for every server path a request names (ingest sources, detector models, runs, stores).

A request field that names a path on the server is declared with :func:`server_path` (its OpenAPI
property carries ``x-server-path``: what kind of path it is) and every route that takes such a request
passes the body through :func:`check_request_paths` before using it. The policy, links resolved first:

- the service's own state is never named: its SQLite database (and its ``-wal``/``-shm``/``-journal``
  files), its data folder itself or a folder holding it — reading the database file in the server
  process, even once, drops that process's SQLite locks (POSIX locks belong to the process) and lets
  another process delete the WAL under the running server;
- an ``input`` (a source to ingest, a detector model) lies in ``data_dir/incoming`` or an import root,
  never elsewhere in the state (credentials, uploads, galleries);
- a ``store`` or a ``run`` lies in the data folder or an import root (a run already serving a gallery
  registered from the command line may be named again wherever it is), outside the state but for the
  stores the service built (``data_dir/galleries``);
- a folder named holds no link to the state, and an input's folder no link outside the allowed
  folders (a folder of links would otherwise reach them); an input file is not a playlist or other
  text naming files (HLS ``#EXTM3U``, ffconcat, DASH, SDP: the decoder would open what they name).

Example (a settings object; the database is never a request's path):
    >>> from pathlib import Path
    >>> from minterpr.serving.settings import ServeSettings
    >>> settings = ServeSettings(data_dir=Path("/srv/minterpr"))
    >>> check_path(settings, "run", "/srv/minterpr/minterpr.db", "run").message.split(" is ")[1][:31]
    "part of the service's own state"
    >>> check_path(settings, "source", "/srv/minterpr/incoming/cam1.mp4", "input") is None
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Literal

from pydantic import BaseModel, Field

from minterpr.serving.errors import ApiError
from minterpr.serving.settings import ServeSettings

PathKind = Literal["input", "store", "run"]
MARK = "x-server-path"  # the OpenAPI property's extension naming the kind of path (the enumerating test reads it)
_LINK_SCAN_MAX = 100_000  # entries of a named folder looked at for links into the state (a store of crops is large)


def server_path(kind: PathKind, **field: Any) -> Any:
    """A ``Field`` for a request string naming a path on the server of ``kind``.

    >>> server_path("input", max_length=10).json_schema_extra
    {'x-server-path': 'input'}
    """
    return Field(json_schema_extra={MARK: kind}, **field)


def path_fields(model: type[BaseModel]) -> dict[str, PathKind]:
    """The fields of a request model that name server paths, with their kind."""
    return {
        name: info.json_schema_extra[MARK]
        for name, info in model.model_fields.items()
        if isinstance(info.json_schema_extra, dict) and MARK in info.json_schema_extra
    }


def _database(settings: ServeSettings) -> Path | None:
    url = settings.resolved_database_url()
    return Path(url[len("sqlite:///") :]).expanduser().resolve() if url.startswith("sqlite:///") else None


def _within(target: Path, root: Path) -> bool:
    return target == root or root in target.parents


def _core_state(settings: ServeSettings, target: Path) -> bool:
    """The database file or one of its side files, the data folder itself, or a folder holding it."""
    data = Path(settings.data_dir).expanduser().resolve()
    database = _database(settings)
    if database is not None and target.parent == database.parent and target.name.startswith(database.name):
        return True
    return target == data or target in data.parents


def _refusal(settings: ServeSettings, target: Path, kind: PathKind) -> str | None:
    """Why ``target`` (resolved) may not be named as a ``kind``, or None."""
    if _core_state(settings, target) or (kind == "input" and settings.is_state(target)):
        return "part of the service's own state (its database, credentials, uploads or galleries)"
    galleries = Path(settings.galleries_dir).expanduser().resolve()
    if kind != "input" and settings.is_state(target) and not _within(target, galleries):
        return "part of the service's own state (its database, credentials or uploads)"
    return None


def check_path(
    settings: ServeSettings, field: str, value: str | Path, kind: PathKind, known: Iterable[str] = ()
) -> ApiError | None:
    """The 403 a request naming ``value`` in ``field`` gets, or None when the policy lets it through;
    ``known`` are runs already serving galleries (registered from the command line, anywhere)."""
    named = Path(value).expanduser()
    target = named.resolve()
    where = f"put it in {settings.incoming_dir}" + (
        " or an import root" if kind == "input" else ", the data folder or an import root"
    )
    reason = _refusal(settings, target, kind)
    if reason is not None:
        return ApiError(403, "outside_roots", f"{value} is {reason}; {where}", field=field)
    if not settings.importable(target) and not (kind == "run" and str(named.absolute()) in set(known)):
        return ApiError(
            403, "outside_roots", f"{value} is outside the folders this service may read; {where}", field=field
        )
    if target.is_dir():
        for count, entry in enumerate(target.rglob("*")):
            if count >= _LINK_SCAN_MAX:
                break
            if not entry.is_symlink():
                continue
            linked = entry.resolve()
            if _refusal(settings, linked, kind) is not None:
                return ApiError(
                    403,
                    "outside_roots",
                    f"{value}: {entry.relative_to(target)} links to the service's own state; {where}",
                    field=field,
                )
            if kind == "input" and not settings.importable(linked):  # a folder of links would read anywhere
                return ApiError(
                    403,
                    "outside_roots",
                    f"{value}: {entry.relative_to(target)} links outside the folders this service may read; {where}",
                    field=field,
                )
    elif kind == "input" and target.is_file() and _names_other_files(target):
        return ApiError(
            403,
            "outside_roots",
            f"{value} is a playlist or a text file naming other files (HLS, "
            "concat, DASH, SDP): ingest the video itself",
            field=field,
        )
    return None


def _names_other_files(path: Path) -> bool:
    """Whether ``path`` is text — a playlist or description (HLS ``#EXTM3U``, ffconcat, DASH, SDP) that a
    decoder would follow to other files or addresses — rather than a video, an image or a model, none of
    which begins with a kilobyte of text."""
    try:
        with open(path, "rb") as file:
            head = file.read(1024)
    except OSError:
        return False
    if not head or b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(head) - 4:  # not merely a character cut at the kilobyte's end
            return False
    return True


def check_request_paths(settings: ServeSettings, body: BaseModel, known: Iterable[str] = ()) -> None:
    """Raise the 403 of the first path field of ``body`` the policy refuses (fields left out pass)."""
    known = set(known)
    for name, kind in path_fields(type(body)).items():
        value = getattr(body, name)
        if value is not None:
            refused = check_path(settings, name, value, kind, known)
            if refused is not None:
                raise refused
