"""The detector catalogue: third-party detection models minterpr knows how to fetch and run.

Each entry names the file's public release, the SHA-256 it is checked against, the decoder that
reads its output (:mod:`minterpr.ingest.onnx_decoders`) and the settings it was measured with.
``minterpr models fetch NAME`` puts the file in the model cache (:func:`model_cache_dir`:
``$MINTERPR_MODEL_CACHE``, else ``$XDG_CACHE_HOME/minterpr/models``, else
``~/.cache/minterpr/models``; :mod:`minterpr.ingest.fetch`), and the detector of the same name
(``--detector yolox-nano``) runs it from there.

Ingestion's default detector is ``auto`` (:func:`resolve_detector`): YOLOX-nano when it is in
the cache, else OpenCV's HOG, with one line saying how to get the better one.

The pin of ``yolox-nano`` was taken from the copy in the development machine's shared weights
folder: a copy of the YOLOX project's release file, whose hash the project does not publish.

Example:
    >>> CATALOGUE["yolox-nano"].decoder, CATALOGUE["yolox-nano"].file
    ('yolox', 'yolox_nano.onnx')
    >>> resolve_detector("hog", {}, cache="/nonexistent")
    ('hog', {}, None)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from minterpr.errors import InputError

CACHE_ENV = "MINTERPR_MODEL_CACHE"  # a folder for fetched models, instead of the user's cache folder
AUTO = "auto"  # the detector name that picks the best one present


@dataclass(frozen=True)
class CatalogueEntry:
    """A fetchable detection model."""

    name: str  # the name of `models fetch NAME` and of the detector
    file: str  # its file name in the cache
    url: str  # the public release it is downloaded from
    sha256: str  # the hex digest the file must have
    decoder: str  # the ONNX output decoder that reads it
    options: Mapping[str, Any] = field(default_factory=dict)  # the onnx detector's settings for it
    summary: str = ""  # one line for `minterpr models`
    licence: str = ""  # the model's licence and training data


CATALOGUE: dict[str, CatalogueEntry] = {
    "yolox-nano": CatalogueEntry(
        "yolox-nano",
        "yolox_nano.onnx",
        "https://github.com/Megvii-BaseDetection/YOLOX/releases/download/0.1.1rc0/yolox_nano.onnx",
        # taken from the copy in ../shared/weights (a copy of the release; the project publishes no hash)
        "e8af074932d4ed7e232278e3055cefcdea3edf178874a3694ae292649fb464dd",
        "yolox",
        # 0.4: recall 0.94 / precision 0.90 at IoU 0.5 on the street labels (0.3: 0.94 / 0.83; 0.5:
        # 0.93 / 0.99), and ByteTrack still gets the 0.4-0.5 ones for its second association
        {"score_threshold": 0.4},
        "YOLOX-nano (Ge et al. 2021), COCO's 80 classes, 416 x 416 input, 3.6 MB; people only are read",
        "Apache-2.0 (YOLOX); trained on COCO 2017",
    ),
}


def model_cache_dir() -> Path:
    """Where fetched models live (see the module doc)."""
    env = os.environ.get(CACHE_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".cache") / "minterpr" / "models"


def catalogue_entry(name: str) -> CatalogueEntry:
    """The entry ``name``; InputError listing the known ones otherwise."""
    if name not in CATALOGUE:
        raise InputError(f"no model {name!r} in the detector catalogue (known: {', '.join(sorted(CATALOGUE))})")
    return CATALOGUE[name]


def cached_model(name: str, cache: str | os.PathLike[str] | None = None) -> Path | None:
    """The cached file of ``name``, None when it has not been fetched."""
    path = Path(cache or model_cache_dir()) / catalogue_entry(name).file
    return path if path.is_file() else None


def fetch_hint(name: str = "yolox-nano") -> str:
    return f"minterpr models fetch {name}"


def catalogue_detector_options(
    name: str, options: Mapping[str, Any] | None = None, cache: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """The onnx detector's options for the catalogue model ``name`` (``options`` override them;
    ``model=PATH`` runs another copy); InputError in one line when it has not been fetched."""
    entry, given = catalogue_entry(name), dict(options or {})
    if "model" not in given:
        path = cached_model(name, cache)
        if path is None:
            raise InputError(
                f"the {name} detector is not in the model cache ({Path(cache or model_cache_dir())}): "
                f"get it with `{fetch_hint(name)}` (or `{fetch_hint(name)} --from FILE`)"
            )
        given["model"] = os.fspath(path)
    return {"decoder": entry.decoder, **entry.options, **given}


def resolve_detector(
    name: str, options: Mapping[str, Any] | None = None, cache: str | os.PathLike[str] | None = None
) -> tuple[str, dict[str, Any], str | None]:
    """(registered detector name, its options, a one-line note or None) for ingestion's
    ``detector``: ``auto`` is ``yolox-nano`` when cached, else ``hog`` with a note saying so;
    ``onnx:PATH`` is ``onnx`` with ``model=PATH``; any other name is itself. ``auto`` takes no
    options (they would be another detector's)."""
    given = dict(options or {})
    if name.startswith("onnx:"):
        path = name[len("onnx:") :]
        if not path:
            raise InputError("--detector onnx:PATH needs the model's path after 'onnx:'")
        return "onnx", {"model": path, **given}, None
    if name != AUTO:
        return name, given, None
    if given:  # options of one detector would be wrong for the other
        raise InputError(
            f"detector options ({', '.join(sorted(given))}) need a named detector: give --detector "
            f"hog, yolox-nano or onnx:PATH with them"
        )
    if cached_model("yolox-nano", cache) is not None:
        return "yolox-nano", given, None
    note = (
        f"people detector: OpenCV's HOG (YOLOX-nano finds far more of the people in street footage; "
        f"get it with `{fetch_hint()}`)"
    )
    return "hog", {}, note
