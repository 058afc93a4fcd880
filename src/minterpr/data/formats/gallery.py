"""Gallery manifests: JSON Lines, one :class:`GalleryImage` per line, with ontology attributes.

Each line is ``{"path": str, "person_id": str, "camera_id": str|null, "view": str|null,
"attributes": {slot: [values...]}|null}``. ``path`` and ``person_id`` are required (the id
namespaced, ``"peta-grid:0069"``); the other three may be absent, meaning null. ``attributes``
goes through :meth:`Ontology.validate`, so an unknown slot or value is an error naming it
(field ``attributes.<slot>``); null means "not labelled", ``{}`` "labelled, nothing known".
Unknown fields are errors: a manifest is written by minterpr and has no extras. A path listed
twice is a warning (lenient reads). Blank lines are skipped.

Example:
    >>> import os, tempfile
    >>> image = GalleryImage("grid/0069_1.jpeg", "peta-grid:0069", "peta-grid:cam1", "front",
    ...                      {"gender": ("female",), "upper_colour": ("black", "white")})
    >>> path = os.path.join(tempfile.mkdtemp(), "gallery.jsonl")
    >>> write_gallery([image], path)
    1
    >>> read_gallery(path) == [image]
    True
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, Iterator, Literal, overload

from minterpr.data.errors import DataError, ReadReport
from minterpr.data.formats.jsonl import (
    RECORD,
    ReadResult,
    atomic_writer,
    dumps_record,
    image_checker,
    iter_json_lines,
    json_type,
    short,
)
from minterpr.language.ontology import ONTOLOGY
from minterpr.types import GalleryImage, split_person_id

FIELDS = ("path", "person_id", "camera_id", "view", "attributes")
REQUIRED = ("path", "person_id")

Fail = Callable[[str, str], DataError]  # (field, reason) -> the error for the current line


def parse_record(obj: object, file: str, line: int) -> GalleryImage:
    """Validate one manifest line and build its image; raises DataError naming the field."""

    def fail(field: str, reason: str) -> DataError:
        return DataError(file, line, field, reason)

    if not isinstance(obj, dict):
        raise fail(RECORD, f"expected a JSON object, got {json_type(obj)}")
    for name in REQUIRED:
        if name not in obj:
            raise fail(name, "required field is missing")
    unknown = [key for key in obj if key not in FIELDS]
    if unknown:
        raise fail(unknown[0], f"unknown field: a gallery line has only {', '.join(FIELDS)}")
    texts: dict[str, str | None] = {}
    for name in ("path", "person_id", "camera_id", "view"):
        value = obj.get(name)
        if value is None and name not in REQUIRED:
            texts[name] = None
            continue
        if not isinstance(value, str):
            raise fail(name, f"expected a string{'' if name in REQUIRED else ' or null'}, got {json_type(value)}")
        if not value.strip():
            raise fail(name, "empty string")
        texts[name] = value
    try:
        split_person_id(texts["person_id"])  # type: ignore[arg-type]
    except ValueError as exc:
        raise fail("person_id", str(exc)) from None
    return GalleryImage(
        path=texts["path"],
        person_id=texts["person_id"],
        camera_id=texts["camera_id"],  # type: ignore[arg-type]
        view=texts["view"],
        attributes=_attributes(obj.get("attributes"), fail),
    )


def _attributes(value: object, fail: Fail) -> dict[str, tuple[str, ...]] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise fail("attributes", f"expected an object {{slot: [values]}} or null, got {json_type(value)}")
    out: dict[str, tuple[str, ...]] = {}
    for slot, values in value.items():
        field = f"attributes.{slot}"
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise fail(field, f"expected an array of value names, got {short(values, 40)}")
        try:  # one slot at a time, so the error names the slot at fault
            out.update(ONTOLOGY.validate({slot: tuple(values)}))
        except ValueError as exc:
            raise fail(field, str(exc)) from None
    return out


def iter_gallery(
    path: str | os.PathLike[str],
    *,
    report: ReadReport | None = None,
    image_root: str | os.PathLike[str] | None = None,
    check_images: bool = False,
    allow_outside_root: bool = False,
) -> Iterator[GalleryImage]:
    """Stream the images of a manifest. Without ``report`` the first bad line raises
    :class:`DataError`; with one, bad lines are recorded and skipped, and a path listed twice
    is a warning. ``check_images`` makes a missing file (under ``image_root``, default: the
    manifest's directory) an error, and a path that leaves that root too (unless
    ``allow_outside_root``)."""
    file = str(path)
    checker = image_checker(path, image_root, check_images, allow_outside_root)
    first_line: dict[str, int] = {}  # path -> line of its first listing (lenient only)
    for line, obj in iter_json_lines(path, report):
        try:
            image = parse_record(obj, file, line)
            why = checker.problem(image.path) if checker is not None else None
            if why:
                raise DataError(file, line, "path", why)
        except DataError as exc:
            if report is None:
                raise
            report.add(exc)
            continue
        if report is not None:
            report.records_read += 1
            seen = first_line.setdefault(image.path, line)
            if seen != line:
                report.warn(DataError(file, line, "path", f"image {short(image.path)} already listed at line {seen}"))
        yield image


@overload
def read_gallery(
    path: str | os.PathLike[str],
    *,
    strict: Literal[True] = ...,
    image_root: str | os.PathLike[str] | None = ...,
    check_images: bool = ...,
    allow_outside_root: bool = ...,
) -> list[GalleryImage]: ...
@overload
def read_gallery(
    path: str | os.PathLike[str],
    *,
    strict: Literal[False],
    image_root: str | os.PathLike[str] | None = ...,
    check_images: bool = ...,
    allow_outside_root: bool = ...,
) -> ReadResult[GalleryImage]: ...
def read_gallery(path, *, strict=True, image_root=None, check_images=False, allow_outside_root=False):
    """Read a manifest: a list of images (strict, raises on the first bad line) or, with
    ``strict=False``, a :class:`ReadResult` ``(records, report)``."""
    options = dict(image_root=image_root, check_images=check_images, allow_outside_root=allow_outside_root)
    if strict:
        return list(iter_gallery(path, **options))
    report = ReadReport(str(path))
    images = list(iter_gallery(path, report=report, **options))
    return ReadResult(images, report)


def to_record(image: GalleryImage) -> dict[str, object]:
    """The manifest line of an image: all five fields, attribute values as sorted lists."""
    attributes = (
        None if image.attributes is None else {slot: sorted(values) for slot, values in image.attributes.items()}
    )
    return {
        "path": image.path,
        "person_id": image.person_id,
        "camera_id": image.camera_id,
        "view": image.view,
        "attributes": attributes,
    }


def write_gallery(images: Iterable[GalleryImage], path: str | os.PathLike[str]) -> int:
    """Write a manifest (UTF-8 JSON Lines, atomically); returns the number of images written.

    Each line is validated as the reader would, so an image with an unknown attribute value
    or a person id without a namespace raises ValueError naming it and nothing is written.
    """
    count = 0
    with atomic_writer(path) as f:
        for count, image in enumerate(images, start=1):
            where = f"image {count} ({image.path!r})"
            record = to_record(image)
            try:
                parsed = parse_record(record, str(path), count)
            except DataError as exc:
                raise ValueError(f"{where} is not a valid gallery entry: {exc.field}: {exc.reason}") from None
            if parsed != image:  # e.g. attribute values given unsorted would not read back equal
                raise ValueError(f"{where}: attributes must be normalised (ONTOLOGY.validate) before writing")
            f.write(dumps_record(record, where))
            f.write("\n")
    return count
