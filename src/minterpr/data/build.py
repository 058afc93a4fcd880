"""Write a dataset directory: gallery manifests, MInterPEDES dialogues; the build marker.

Every dataset minterpr builds (the synthetic world, PETA dialogues) has the same layout, so
training, evaluation and simulation read them alike::

    DIR/dataset.json            the build marker: what was built, how to rebuild it, state, fingerprint
    DIR/images/...              the images (for PETA a link to the PETA release)
    DIR/gallery_<split>.jsonl   every image of the split with identity, camera, attributes
    DIR/<split>.jsonl           MInterPEDES dialogues whose targets are that split's images

Gallery paths are relative to DIR, so DIR is the image root. The names are
:mod:`minterpr.data.layout`'s; :class:`minterpr.data.dataset.BuiltDataset` reads a build.

**Build marker.** A build first replaces ``dataset.json`` with an *in progress* marker
(:func:`begin_build`, which also removes the temporaries a killed build left), writes every
file through a temporary that is renamed into place, and writes the *finished* marker last
(:func:`finish_build`) with a fingerprint of what it wrote (:mod:`minterpr.data.fingerprint`):
size and SHA-256 of every manifest and dialogue file, and the number, total size and a SHA-256
of the sorted ``(path, size)`` listing of the files under ``images/``. Readers call :func:`require_built_dataset` (train,
simulate: they need the built layout) or :func:`check_if_built` (eval, validate, chat: a folder
without ``dataset.json`` is read as is); both raise :class:`~minterpr.errors.DatasetError`
naming the command that rebuilds the folder when the build did not finish or a file changed.
The check costs about 0.1 s on the default synthetic build (8,064 images, 18 MB of JSONL).

Example:
    >>> import tempfile
    >>> from minterpr.data.formats.gallery import write_gallery
    >>> from minterpr.types import GalleryImage
    >>> folder = Path(tempfile.mkdtemp())
    >>> rebuild = ["data", "mark", DIR_PLACEHOLDER]
    >>> _ = begin_build(folder, rebuild)
    >>> check_if_built(folder)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    minterpr.errors.DatasetError: ...: the build did not finish (killed, failed or still running); rerun `minterpr data mark ...` to finish it
    >>> _ = write_gallery([GalleryImage("a.jpg", "x:1")], folder / "gallery_test.jsonl")
    >>> _ = finish_build(folder, {"name": "custom"}, rebuild, ["gallery_test.jsonl"])
    >>> require_built_dataset(folder)["state"]
    'finished'
    >>> _ = (folder / "gallery_test.jsonl").write_text("")
    >>> require_built_dataset(folder)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    minterpr.errors.DatasetError: ...: gallery_test.jsonl has 0 bytes, the build wrote 91 (truncated or replaced); rebuild it with `minterpr data mark ...` to repair it
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import asdict
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from minterpr.data.dialogue_synthesis import DialogueSynthesisConfig, ambiguity, synthesize_records
from minterpr.data.fingerprint import dataset_fingerprint, file_fingerprint, folder_fingerprint, well_formed_fingerprint
from minterpr.data.formats.gallery import write_gallery
from minterpr.data.formats.minterpedes import write_minterpedes
from minterpr.data.layout import (
    DATASET_FILE,
    GALLERY_PREFIX,
    IMAGES_DIR,
    dialogues_file,
    gallery_file,
    split_files,
    split_of_file,
)
from minterpr.errors import DatasetError
from minterpr.fileio import atomic_write_text, remove_stale_temporaries
from minterpr.types import GalleryImage, RetrievalSample, split_person_id

MARKER_FORMAT = 1  # version of dataset.json's marker fields
BUILDING, FINISHED = "building", "finished"  # dataset.json "state"
DIR_PLACEHOLDER = "{DIR}"  # stands for the dataset folder in a stored rebuild command
BUILD_HINT = (
    "build one with `minterpr data synth --out {dir}` or `minterpr data peta --root PETA --out {dir}`, "
    "or fingerprint a folder you assembled yourself with `minterpr data mark {dir}`"
)


def _integer_ids(images: Sequence[GalleryImage]) -> dict[str, int]:
    """Dense integer ids for MInterPEDES's ``id`` field, in first-seen order."""
    ids: dict[str, int] = {}
    for image in images:
        ids.setdefault(image.person_id, len(ids))
    return ids


def write_split(
    out_dir: Path,
    split: str,
    gallery: Sequence[GalleryImage],
    config: DialogueSynthesisConfig,
    *,
    namespace: str,
    targets: Sequence[GalleryImage] | None = None,
) -> dict[str, float]:
    """Write ``gallery_<split>.jsonl`` and ``<split>.jsonl``; return counts and ambiguity (percent)."""
    write_gallery(gallery, out_dir / gallery_file(split))
    targets = list(gallery if targets is None else targets)
    records = synthesize_records(targets, gallery, config)
    int_ids = _integer_ids(gallery)
    samples = []
    for record in records:
        sample = record.sample
        local = split_person_id(sample.person_id)[1]
        # MInterPEDES ids are integers: keep them when they are, else use the dense map (the
        # gallery manifest keeps the real namespaced identity of every target path).
        number = (
            int(local)
            if namespace == split_person_id(sample.person_id)[0] and local.isdigit()
            else int_ids[sample.person_id]
        )
        samples.append(RetrievalSample(sample.target_path, f"{namespace}:{number}", sample.dialogue))
    write_minterpedes(samples, out_dir / dialogues_file(split), namespace=namespace)
    return {
        "images": len(gallery),
        "identities": len(int_ids),
        "records": len(samples),
        "ambiguity_description": round(ambiguity(records, gallery, rounds=1), 2),
        "ambiguity_after_text_turns": round(ambiguity(records, gallery), 2),
    }


# ------------------------------------------------------------------------- rebuild commands
def synth_rebuild_args(config: Mapping[str, Mapping[str, object]]) -> list[str]:
    """``minterpr`` arguments that rebuild a synthetic dataset from dataset.json's ``config``."""
    world, dialogues = config.get("world", {}), config.get("dialogues", {})
    size = world.get("image_size", (256, 128))
    options = [
        ("--seed", world.get("seed", 0)),
        ("--train-identities", world.get("train_identities")),
        ("--val-identities", world.get("val_identities")),
        ("--test-identities", world.get("test_identities")),
        ("--cameras", world.get("cameras")),
        ("--height", size[0]),
        ("--width", size[1]),  # type: ignore[index]
        ("--max-qa-turns", dialogues.get("max_qa_turns")),
        ("--max-image-turns", dialogues.get("max_image_turns")),
    ]
    return ["data", "synth", "--out", DIR_PLACEHOLDER] + [str(x) for o, v in options if v is not None for x in (o, v)]


def peta_rebuild_args(source: str, seed: object, dialogues: Mapping[str, object]) -> list[str]:
    """``minterpr`` arguments that rebuild a PETA dataset."""
    return [
        "data",
        "peta",
        "--root",
        str(source),
        "--out",
        DIR_PLACEHOLDER,
        "--seed",
        str(seed),
        "--max-qa-turns",
        str(dialogues.get("max_qa_turns", 3)),
        "--max-image-turns",
        str(dialogues.get("max_image_turns", 3)),
    ]


def rebuild_command(data_dir: str | os.PathLike[str], rebuild: Sequence[str]) -> str:
    """The shell command of stored rebuild arguments, for the folder ``data_dir``.

    >>> rebuild_command("my data", ["data", "mark", DIR_PLACEHOLDER])
    "minterpr data mark 'my data'"
    """
    return shlex.join(["minterpr", *(os.fspath(data_dir) if a == DIR_PLACEHOLDER else str(a) for a in rebuild)])


def _marker_rebuild(data_dir: Path, marker: Mapping[str, object]) -> str:
    """How to rebuild the folder of ``marker`` (markers written before build markers included)."""
    rebuild = marker.get("rebuild")
    if isinstance(rebuild, list) and rebuild and all(isinstance(a, str) for a in rebuild):
        return f"`{rebuild_command(data_dir, rebuild)}`"
    if marker.get("name") == "synthetic" and isinstance(marker.get("config"), dict):
        return f"`{rebuild_command(data_dir, synth_rebuild_args(marker['config']))}`"  # type: ignore[arg-type]
    if marker.get("name") == "peta" and isinstance(marker.get("dialogues"), dict):
        args = peta_rebuild_args(str(marker.get("source", "PETA")), marker.get("seed", 0), marker["dialogues"])  # type: ignore[arg-type]
        return f"`{rebuild_command(data_dir, args)}`"
    return BUILD_HINT.format(dir=shlex.quote(os.fspath(data_dir)))


# --------------------------------------------------------------------------------- writing
def _write_marker(out_dir: Path, marker: Mapping[str, object]) -> None:
    atomic_write_text(out_dir / DATASET_FILE, json.dumps(marker, indent=2, sort_keys=True) + "\n")


def begin_build(
    out_dir: str | os.PathLike[str], rebuild: Sequence[str], *, folders: Iterable[str | os.PathLike[str]] = ()
) -> Path:
    """Start a build in ``out_dir``: replace its marker by an *in progress* one (so that readers
    refuse the folder until :func:`finish_build`) and remove the temporaries a killed build left
    in ``out_dir`` and in ``folders`` (the other folders the build writes). ``rebuild`` are the
    ``minterpr`` arguments of the build, with :data:`DIR_PLACEHOLDER` for the folder."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise DatasetError(out, "exists and is not a folder: choose another output folder")
    out.mkdir(parents=True, exist_ok=True)
    _write_marker(out, {"minterpr_dataset": MARKER_FORMAT, "state": BUILDING, "rebuild": list(rebuild)})
    for folder in (out, *folders):
        remove_stale_temporaries(folder)
    return out


def finish_build(
    out_dir: str | os.PathLike[str],
    info: Mapping[str, object],
    rebuild: Sequence[str],
    files: Iterable[str],
    images: str | None = IMAGES_DIR,
) -> dict:
    """Write the *finished* marker last: ``info`` (what was built), the rebuild arguments and the
    fingerprint of ``files`` and of the ``images`` folder. Returns the marker."""
    out = Path(out_dir)
    marker = {
        **info,
        "minterpr_dataset": MARKER_FORMAT,
        "state": FINISHED,
        "rebuild": list(rebuild),
        "fingerprint": dataset_fingerprint(out, files, images),
    }
    _write_marker(out, marker)
    return marker


# --------------------------------------------------------------------------------- reading
def read_marker(data_dir: str | os.PathLike[str]) -> dict | None:
    """DIR/dataset.json when it is a minterpr marker; None when the folder has none (or a
    dataset.json that is not minterpr's); DatasetError when it cannot be read."""
    folder = Path(data_dir)
    path = folder / DATASET_FILE
    if not path.is_file():
        return None
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise DatasetError(
            folder,
            f"{DATASET_FILE} cannot be read ({type(err).__name__}: {err}); "
            + BUILD_HINT.format(dir=shlex.quote(os.fspath(folder))),
        ) from None
    if not isinstance(marker, dict):
        return None
    legacy = marker.get("name") in ("synthetic", "peta") and "splits" in marker
    return marker if "minterpr_dataset" in marker or legacy else None


def _stale_reason(folder: Path, marker: Mapping[str, object]) -> str | None:
    """What differs between the folder and the marker's fingerprint; None when nothing does."""
    if marker.get("state") == BUILDING:
        return "the build did not finish (killed, failed or still running)"
    fingerprint = marker.get("fingerprint")
    if marker.get("state") != FINISHED or not well_formed_fingerprint(fingerprint):
        return (
            f"{DATASET_FILE} has no build fingerprint (built before build markers, or edited), so it cannot be checked"
        )
    assert isinstance(fingerprint, dict)
    for name, want in sorted(fingerprint["files"].items()):
        path = folder / name
        if not path.is_file():
            return f"{name} is missing (the build wrote it)"
        got = file_fingerprint(path)
        if got["bytes"] != want.get("bytes"):
            return f"{name} has {got['bytes']:,} bytes, the build wrote {want.get('bytes'):,} (truncated or replaced)"
        if got["sha256"] != want.get("sha256"):
            return f"{name} changed since the build (same size, different content)"
    images = fingerprint.get("images")
    if isinstance(images, dict):
        where = folder / str(images.get("folder", IMAGES_DIR))
        if not where.is_dir():
            return f"{images.get('folder')}/ is missing (the build wrote {images.get('files'):,} files there)"
        got = folder_fingerprint(where)
        if got != {k: images.get(k) for k in got}:
            return (
                f"{images.get('folder')}/ changed since the build: {got['files']:,} files of {got['bytes']:,} bytes "
                f"now, the build wrote {images.get('files'):,} of {images.get('bytes'):,} (files added, removed, "
                "renamed or rewritten: a mixed or damaged build)"
            )
    return None


def check_if_built(data_dir: str | os.PathLike[str]) -> dict | None:
    """Verify the build marker of ``data_dir`` when it has one: its finished marker, or None when
    the folder has no minterpr marker (a folder minterpr did not build: read it as is).

    Raises DatasetError, naming the command that rebuilds the folder, when the build did not
    finish or a file changed since it (missing, truncated, rewritten, images added or removed)."""
    folder = Path(data_dir)
    marker = read_marker(folder)
    if marker is None:
        return None
    try:
        reason = _stale_reason(folder, marker)
    except OSError as err:  # an unreadable file or folder of the build (permissions, I/O error)
        raise DatasetError(folder, f"cannot check the build: {err.filename or folder}: {err.strerror or err}") from None
    if reason is not None:
        verb = "rerun" if marker.get("state") == BUILDING else "rebuild it with"
        raise DatasetError(
            folder,
            f"{reason}; {verb} {_marker_rebuild(folder, marker)} to {'finish' if verb == 'rerun' else 'repair'} it",
        )
    return marker


def require_built_dataset(data_dir: str | os.PathLike[str]) -> dict:
    """The finished, verified marker of a dataset folder (for commands that need the built
    layout: training, simulate). DatasetError when the folder is missing, has no marker, or
    :func:`check_if_built` refuses it."""
    folder = Path(data_dir)
    if not folder.is_dir():
        raise DatasetError(folder, "no such dataset folder; " + BUILD_HINT.format(dir=shlex.quote(os.fspath(folder))))
    marker = check_if_built(folder)
    if marker is None:
        raise DatasetError(
            folder,
            f"no {DATASET_FILE} build marker: not a dataset minterpr built or checked; "
            + BUILD_HINT.format(dir=shlex.quote(os.fspath(folder))),
        )
    return marker


def mark_dataset(data_dir: str | os.PathLike[str]) -> dict:
    """Check and fingerprint a folder assembled by hand (``gallery_<split>.jsonl``, optional
    ``<split>.jsonl``, images): writes a finished marker, so that commands needing a built
    dataset read it, and refuse it again once a file changes. Every file is read strictly first
    (its first bad line raises). A folder minterpr built is rebuilt with its own command, not marked."""
    from minterpr.data.formats.gallery import read_gallery
    from minterpr.data.formats.minterpedes import read_minterpedes

    folder = Path(data_dir)
    if not folder.is_dir():
        raise DatasetError(folder, "no such folder")
    marker = read_marker(folder)
    rebuild = ["data", "mark", DIR_PLACEHOLDER]
    if marker is not None and marker.get("rebuild", [])[:2] != rebuild[:2]:
        raise DatasetError(
            folder,
            f"minterpr built this folder: rebuild it with {_marker_rebuild(folder, marker)} instead of marking it",
        )
    files = [name for name in split_files() if (folder / name).is_file()]
    if not any(name.startswith(GALLERY_PREFIX) for name in files):
        raise DatasetError(folder, "no gallery_<split>.jsonl manifest (split: train, val or test): nothing to mark")
    splits: dict[str, dict[str, int]] = {}
    for name in files:
        split = split_of_file(name)
        key = "images" if name.startswith(GALLERY_PREFIX) else "records"
        count = len(read_gallery(folder / name)) if key == "images" else len(read_minterpedes(folder / name))
        splits.setdefault(split, {})[key] = count
    begin_build(folder, rebuild)
    return finish_build(folder, {"name": "custom", "splits": splits}, rebuild, files)


def dialogue_config_dict(config: DialogueSynthesisConfig) -> dict:
    out = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}
    if out.get("description_style") == "synthetic":  # the default: builds made before the option keep their marker
        del out["description_style"]
    return out
