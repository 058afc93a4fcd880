"""PA-100K reader: ``annotation.mat`` (26 binary attributes per image) to gallery images.

The MATLAB file holds ``attributes`` (the 26 names, a cell column) and, per split ``s`` in
train/val/test, ``s_images_name`` (file names, a cell column) and ``s_label`` (an N×26 0/1
matrix). The release also carries ``text_images_name``, a misspelt twin of
``test_images_name``; it is ignored. PA-100K has no identity labels, so every image is its own
identity (``pa100k:<file stem>``), with no camera. Positive labels map through
:data:`PA100K_LABELS`, the view labels (Front/Side/Back) go to ``GalleryImage.view``, and the
labelled negatives listed in :data:`PA100K_NEGATIVES` add what they imply (``Female = 0`` ->
male).

Reading .mat files needs scipy: ``pip install 'minterpr[mat]'``.

Example:
    >>> images = read_pa100k("../shared/data/pa100k/annotation.mat",
    ...                      image_root="../shared/data/pa100k/data")  # doctest: +SKIP
    >>> images[0].person_id, images[0].view                             # doctest: +SKIP
    ('pa100k:000001', 'back')
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import numpy as np

from minterpr.data.errors import DataError, ReadReport
from minterpr.data.formats.jsonl import ReadResult
from minterpr.data.label_maps import PA100K_LABELS, PA100K_NEGATIVES, PA100K_VIEWS, labels_to_attributes
from minterpr.types import GalleryImage, person_id

PA100K_SPLITS = ("train", "val", "test")
NAMESPACE = "pa100k"
# Positive labels plus "not <label>" entries for the negatives PA-100K annotates.
_TABLE = {**PA100K_LABELS, **{f"not {name}": assertion for name, assertion in PA100K_NEGATIVES.items()}}


def load_mat(path: str | Path, **kwargs: Any) -> dict[str, Any]:
    """``scipy.io.loadmat`` with an ImportError that names the pip extra when scipy is missing."""
    try:
        from scipy.io import loadmat
    except ImportError:
        raise ImportError("reading MATLAB .mat files needs scipy: pip install 'minterpr[mat]'") from None
    return loadmat(str(path), **kwargs)


def mat_strings(cells: Any) -> list[str]:
    """A MATLAB cell array of strings as a flat list; empty cells become ``""``.

    >>> mat_strings(np.array([[np.array(["a.jpg"])], [np.zeros((0, 0))]], dtype=object))
    ['a.jpg', '']
    """
    out = []
    for cell in np.asarray(cells, dtype=object).ravel():
        values = np.asarray(cell).ravel()
        out.append(str(values[0]).strip() if values.size else "")
    return out


def _read_split(
    mat: dict[str, Any],
    split: str,
    names: list[str],
    file: str,
    image_root: Path | None,
    seen: dict[str, str],
    report: ReadReport,
) -> list[GalleryImage]:
    """One split's images; raises DataError for a malformed split, records row problems."""
    name_key, label_key = f"{split}_images_name", f"{split}_label"
    for key in (name_key, label_key):
        if key not in mat:
            raise DataError(file, 0, key, "missing variable")
    files = mat_strings(mat[name_key])
    labels = np.asarray(mat[label_key])
    if labels.ndim != 2 or labels.shape != (len(files), len(names)):
        raise DataError(file, 0, label_key, f"expected shape ({len(files)}, {len(names)}), got {labels.shape}")
    images: list[GalleryImage] = []
    for row_no, (name, row) in enumerate(zip(files, labels), start=1):  # row_no: 1-based row of the split
        if not name:
            report.warn(DataError(file, row_no, name_key, "empty image name: row skipped"))
            continue
        if not np.isin(row, (0, 1)).all():
            report.add(DataError(file, row_no, label_key, f"labels must be 0 or 1, got {sorted(set(row.tolist()))}"))
            continue
        if name in seen:
            report.add(DataError(file, row_no, name_key, f"{name!r} already listed in {seen[name]}"))
            continue
        seen[name] = split
        if image_root is not None and not (image_root / name).is_file():
            report.warn(DataError(file, row_no, name_key, f"image not found: {image_root / name}"))
            continue
        positives = [n for n, v in zip(names, row) if v == 1]
        negatives = [f"not {n}" for n, v in zip(names, row) if v == 0 and n in PA100K_NEGATIVES]
        views = [PA100K_VIEWS[n] for n in positives if n in PA100K_VIEWS]
        images.append(
            GalleryImage(
                path=name,
                person_id=person_id(NAMESPACE, Path(name).stem),
                view=views[0] if len(views) == 1 else None,
                attributes=labels_to_attributes(positives + negatives, _TABLE),
            )
        )
    return images


def _warn_unlisted(mat: dict[str, Any], root: Path, file: str, report: ReadReport) -> None:
    """Warn about images in ``root`` that no split of the annotation lists."""
    listed = {
        name
        for split in PA100K_SPLITS
        if f"{split}_images_name" in mat
        for name in mat_strings(mat[f"{split}_images_name"])
    }
    for image in sorted(root.iterdir()):
        if image.suffix.lower() in (".jpg", ".jpeg", ".png") and image.name not in listed:
            report.warn(DataError(str(image), 0, "images_name", f"image not listed in {file}"))


def read_pa100k(
    mat_path: str | Path,
    *,
    image_root: str | Path | None = None,
    splits: Iterable[str] = PA100K_SPLITS,
    strict: bool = True,
) -> list[GalleryImage] | ReadResult[GalleryImage]:
    """Read PA-100K's ``annotation.mat`` into one gallery image per annotated image.

    Image paths are the file names as listed (relative to the ``data`` folder). With
    ``image_root``, only images found there are returned and the others are reported as
    warnings, as are images in ``image_root`` that no split lists. Rows with an empty name (the
    truncated copy's first test row) are skipped with a warning. Strict mode raises the first
    :class:`DataError` (missing variable, wrong shape, unknown attribute, a label other than
    0/1, a repeated image); lenient mode skips what it must and returns a :class:`ReadResult`
    (unpacks as ``images, report``), which also carries the warnings.
    """
    file = str(mat_path)
    splits = tuple(splits)
    unknown = [s for s in splits if s not in PA100K_SPLITS]
    if unknown:
        raise ValueError(f"unknown PA-100K split {unknown[0]!r}: must be one of {', '.join(PA100K_SPLITS)}")
    mat = load_mat(mat_path)
    report = ReadReport(file)
    root = Path(image_root) if image_root is not None else None
    images: list[GalleryImage] = []
    try:
        if "attributes" not in mat:
            raise DataError(file, 0, "attributes", "missing variable")
        names = mat_strings(mat["attributes"])
        for i, name in enumerate(names, start=1):
            if name not in PA100K_LABELS:
                raise DataError(file, i, "attributes", f"unknown PA-100K attribute {name!r}")
        seen: dict[str, str] = {}  # image name -> split that listed it first
        for split in splits:
            try:
                images.extend(_read_split(mat, split, names, file, root, seen, report))
            except DataError as error:
                if strict:
                    raise
                report.add(error)
    except DataError as error:
        if strict:
            raise
        report.add(error)
    if root is not None and root.is_dir():
        _warn_unlisted(mat, root, file, report)
    if strict and report.problems:
        raise report.problems[0]
    report.records_read = len(images)
    return images if strict else ReadResult(images, report)
