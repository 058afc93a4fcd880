"""PETA reader: pedestrian images with per-identity attribute labels, as ontology attributes.

Layout (the official release): ``<root>/<subset>/archive/<images>`` and
``<root>/<subset>/archive/Label.txt``, where ``root`` is the ``PETA dataset`` folder (its parent
is accepted too). ``Label.txt`` has one row per identity: the identity key (the file-name prefix
of its images), then the labels that hold (whitespace separated, CRLF tolerated). Keys and file
prefixes are matched as integers, so ``1`` matches ``001_...`` whatever the zero padding.

Identity and camera per subset (checked on the real release; see ``docs/ontology.md``):

============  ============================  ===============================================
subset        file name                     identity / camera / view
============  ============================  ===============================================
3DPeS         ``<id>_<track>_FRAME_<n>_RGB``  id; the 2nd token is a track number (up to 1296,
                                            sometimes ``B_<n>``), not one of the 8 cameras:
                                            camera None
CAVIAR4REID   ``<id>_<n>``                  id; camera not in the name: None
GRID          ``<id>_<cam>_<frame>_<box>``  id, camera ``peta-grid:cam<cam>``; PETA renumbered
                                            GRID's unpaired distractors (original id 0000) as
                                            ids 0251-1025, each with its own label row, so they
                                            are ordinary one-image identities here
MIT           ``<id>_<gender>_<view>``      id; view back / fore (= front)
SARC3D        ``<id>_<view>``               id; view front / back / left / right (= side)
TownCentre    ``<id>_<frame>``              id; one camera: ``peta-towncentre:cam1``
i-LID         ``<id>_<n>``                  id; camera not in the name: None
CUHK          ``<n>.jpg``, keyed by name    one label row per image and no identity in the
                                            name: every image is its own identity (its stem)
other         ``<id>_...``                  id = leading number; camera None (generic rule)
============  ============================  ===============================================

Person ids are ``peta-<subset>:<id as in the file name>`` with the subset lower-cased without
punctuation (``peta-3dpes:100``, ``peta-grid:0069``, ``peta-ilid:0001``).

Example:
    >>> images = read_peta("../shared/data/peta", subsets=["GRID"])  # doctest: +SKIP
    >>> images[0].person_id, images[0].camera_id                      # doctest: +SKIP
    ('peta-grid:0001', 'peta-grid:cam1')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from minterpr.data.errors import DataError, ReadReport
from minterpr.data.formats.jsonl import ReadResult
from minterpr.data.label_maps import PETA_CLOSED_SLOTS, PETA_LABELS, labels_to_attributes
from minterpr.data.layout import IMAGE_SUFFIXES
from minterpr.types import GalleryImage, person_id

_VIEWS = {"front": "front", "fore": "front", "back": "back", "left": "side", "right": "side", "side": "side"}


@dataclass(frozen=True)
class PetaRule:
    """How one subset's file names give identity, camera and view."""

    pattern: str  # regex on the file name with groups id and, optionally, cam / view
    camera: str | None = None  # fixed camera for single-camera subsets ("cam1"), else None
    by_file: bool = False  # label rows are keyed by the full file name (CUHK)


_GENERIC = PetaRule(r"(?P<id>\d+)(?:_.*)?\.\w+")
PETA_RULES: dict[str, PetaRule] = {
    "3DPeS": PetaRule(r"(?P<id>\d+)_(?:[A-Za-z]+_)?\d+_FRAME_\d+_RGB\.bmp"),
    "CAVIAR4REID": PetaRule(r"(?P<id>\d+)_\d+\.\w+"),
    "GRID": PetaRule(r"(?P<id>\d+)_(?P<cam>\d+)_.*\.jpe?g"),
    "MIT": PetaRule(r"(?P<id>\d+)_(?:male|female)_(?P<view>back|fore|front)\.\w+"),
    "SARC3D": PetaRule(r"(?P<id>\d+)_(?P<view>front|back|left|right)\.\w+"),
    "TownCentre": PetaRule(r"(?P<id>\d+)_\d+\.\w+", camera="cam1"),
    "i-LID": PetaRule(r"(?P<id>\d+)_\d+\.\w+"),
    "CUHK": PetaRule(r"(?P<id>.+)\.\w+", by_file=True),
}


def peta_namespace(subset: str) -> str:
    """Person-id namespace of a subset.

    >>> peta_namespace("i-LID"), peta_namespace("3DPeS")
    ('peta-ilid', 'peta-3dpes')
    """
    return "peta-" + re.sub(r"[^a-z0-9]", "", subset.lower())


def resolve_peta_root(root: str | Path) -> Path:
    """The ``PETA dataset`` folder, given it or its parent; raises FileNotFoundError."""
    root = Path(root)
    if (root / "PETA dataset").is_dir():
        root = root / "PETA dataset"
    if not root.is_dir():
        raise FileNotFoundError(f"PETA root not found: {root}")
    return root


def peta_subsets(root: str | Path) -> list[str]:
    """Names of the subsets under ``root`` (folders holding ``archive/Label.txt``), sorted."""
    base = resolve_peta_root(root)
    return sorted(p.name for p in base.iterdir() if (p / "archive" / "Label.txt").is_file())


def _key(text: str, by_file: bool) -> str:
    """Canonical match key: the integer value of a numeric id (ignores zero padding)."""
    stem = Path(text).stem if by_file else text
    return str(int(stem)) if stem.isdecimal() else stem


def read_label_file(
    path: str | Path, *, by_file: bool = False, strict: bool = True, report: ReadReport | None = None
) -> dict[str, tuple[int, str, list[str]]]:
    """Parse a PETA ``Label.txt``: match key -> (line, key as written, labels in file order).

    Unknown labels and duplicate keys are :class:`DataError` (raised when strict, else recorded
    in ``report`` and the row skipped).
    """
    file = str(path)
    rows: dict[str, tuple[int, str, list[str]]] = {}
    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    for line_no, line in enumerate(text.splitlines(), start=1):  # splitlines drops \r of CRLF too
        tokens = line.split()
        if not tokens:
            continue
        try:
            key, labels = tokens[0], tokens[1:]
            if not by_file and not key.isdecimal():
                raise DataError(file, line_no, "id", f"expected a numeric identity key, got {key!r}")
            unknown = [label for label in labels if label not in PETA_LABELS]
            if unknown:
                raise DataError(file, line_no, "labels", f"unknown PETA label {unknown[0]!r}")
            match = _key(key, by_file)
            if match in rows:
                raise DataError(file, line_no, "id", f"identity {key!r} already labelled on line {rows[match][0]}")
            if not labels and report is not None:
                report.warn(DataError(file, line_no, "labels", f"identity {key!r} has no labels"))
            rows[match] = (line_no, key, labels)
        except DataError as error:
            if strict or report is None:
                raise
            report.add(error)
    return rows


def _read_subset(base: Path, subset: str, strict: bool, report: ReadReport) -> list[GalleryImage]:
    rule = PETA_RULES.get(subset, _GENERIC)
    namespace = peta_namespace(subset)
    archive = base / subset / "archive"
    label_path = archive / "Label.txt"
    if subset not in PETA_RULES:
        report.warn(
            DataError(str(archive), 0, "subset", f"no file-name rule for {subset!r}: identity = leading number")
        )
    rows = read_label_file(label_path, by_file=rule.by_file, strict=strict, report=report)
    pattern = re.compile(rule.pattern, re.IGNORECASE)
    by_key: dict[str, dict[str, tuple[str, ...]]] = {}  # attributes per label row, mapped once
    images: list[GalleryImage] = []
    for file in sorted(archive.iterdir()):
        if file.suffix.lower() not in IMAGE_SUFFIXES:
            continue
        match = pattern.fullmatch(file.name)
        if match is None:
            error = DataError(str(file), 0, "file name", f"does not follow the {subset} naming rule {rule.pattern}")
            if strict:
                raise error
            report.add(error)
            continue
        local = file.stem if rule.by_file else match.group("id")
        key = _key(file.name if rule.by_file else local, rule.by_file)
        attributes = None
        if key in rows:
            if key not in by_key:
                by_key[key] = labels_to_attributes(rows[key][2], PETA_LABELS, PETA_CLOSED_SLOTS)
            attributes = dict(by_key[key])  # one dict per image: callers may edit theirs
        else:
            report.warn(DataError(str(file), 0, "labels", f"no row for identity {local!r} in {label_path}"))
        groups = match.groupdict()
        camera = rule.camera or (f"cam{int(groups['cam'])}" if groups.get("cam") else None)
        view = _VIEWS[groups["view"].lower()] if groups.get("view") else None
        images.append(
            GalleryImage(
                path=f"{subset}/archive/{file.name}",
                person_id=person_id(namespace, local),
                camera_id=person_id(namespace, camera) if camera else None,
                view=view,
                attributes=attributes,
            )
        )
    for key in sorted(rows.keys() - by_key.keys(), key=lambda k: rows[k][0]):
        line_no, written, _ = rows[key]
        report.warn(DataError(str(label_path), line_no, "id", f"identity {written!r} has no image"))
    return images


def read_peta(
    root: str | Path, *, subsets: Iterable[str] | None = None, strict: bool = True
) -> list[GalleryImage] | ReadResult[GalleryImage]:
    """Read PETA subsets into gallery images carrying their identity's ontology attributes.

    ``root`` is the ``PETA dataset`` folder or its parent; ``subsets`` defaults to every subset
    found (:func:`peta_subsets`). Image paths are relative to the ``PETA dataset`` folder.
    Images without a label row are kept with ``attributes=None``; they and label rows without
    images are reported as warnings. Strict mode raises the first :class:`DataError` (unknown
    label, duplicate key, file name off the subset's rule); lenient mode returns
    a :class:`ReadResult` (unpacks as ``images, report``).
    """
    base = resolve_peta_root(root)
    available = peta_subsets(base)
    chosen = list(subsets) if subsets is not None else available
    missing = [s for s in chosen if s not in available]
    if missing:
        raise ValueError(f"unknown PETA subset {missing[0]!r}: must be one of {', '.join(available)}")
    report = ReadReport(str(base))
    images: list[GalleryImage] = []
    for subset in chosen:
        images.extend(_read_subset(base, subset, strict, report))
    report.records_read = len(images)
    return images if strict else ReadResult(images, report)
