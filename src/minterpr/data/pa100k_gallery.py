"""PA-100K as gallery manifests: what ``minterpr eval-attributes`` (and attribute training) reads.

``build_pa100k_gallery(root, out)`` reads ``root/annotation.mat`` with the strict-by-row
PA-100K reader (:func:`minterpr.data.formats.pa100k.read_pa100k`; images that are not in
``root/data`` are left out with a warning), links ``out/images`` to ``root/data`` (no image is
copied) and writes, with the build marker of :mod:`minterpr.data.build`:

* ``gallery_<split>.jsonl`` for each split of the annotation (train / val / test), and
* ``gallery_all.jsonl``: every image, for a model that never saw PA-100K.

PA-100K has no identities: each image is its own person (``pa100k:<file stem>``), with no
camera. No dialogues are written (PA-100K names no colours; the dialogues would say little).

Example:
    >>> info = build_pa100k_gallery("../shared/data/pa100k", "data/pa100k")  # doctest: +SKIP
    >>> info["splits"]["all"]["images"]                                       # doctest: +SKIP
    1998
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from minterpr.data.build import DIR_PLACEHOLDER, begin_build, finish_build
from minterpr.data.layout import IMAGES_DIR, SPLITS
from minterpr.data.formats.gallery import write_gallery
from minterpr.data.formats.pa100k import load_mat, mat_strings, read_pa100k
from minterpr.data.layout import gallery_file
from minterpr.errors import DatasetError

ANNOTATION, IMAGE_FOLDER = "annotation.mat", "data"  # the release's names under its root
ALL = "all"  # gallery_all.jsonl: every image of every split


def build_pa100k_gallery(root: str | Path, out_dir: str | Path) -> dict:
    """Write the gallery manifests of a PA-100K copy into ``out_dir``; returns the marker.

    DatasetError when ``root`` lacks ``annotation.mat`` or ``data/``, or ``out_dir/images``
    is something else than a link to ``root/data``; the reader's first problem (a malformed
    annotation) is raised as its DataError (``FILE:ROW: field: reason``)."""
    source = Path(root).resolve()
    mat_path, folder = source / ANNOTATION, source / IMAGE_FOLDER
    for path in (mat_path, folder):
        if not path.exists():
            raise DatasetError(
                path, f"not found: --root must be the PA-100K folder holding {ANNOTATION} and {IMAGE_FOLDER}/"
            )
    out = Path(out_dir)
    link = out / IMAGES_DIR
    if (link.is_symlink() or link.exists()) and (not link.is_symlink() or link.resolve() != folder):
        raise DatasetError(out, f"{link} exists and is not a link to {folder}: move it away or choose another --out")
    images, report = read_pa100k(mat_path, image_root=folder, strict=False)
    if report.problems:
        raise report.problems[0]
    mat = load_mat(mat_path)
    split_of = {
        name: split
        for split in SPLITS
        if f"{split}_images_name" in mat
        for name in mat_strings(mat[f"{split}_images_name"])
        if name
    }
    rebuild = ["data", "pa100k", "--root", str(source), "--out", DIR_PLACEHOLDER]
    begin_build(out, rebuild)
    if not link.is_symlink():
        link.symlink_to(folder, target_is_directory=True)
    linked = [replace(image, path=f"{IMAGES_DIR}/{image.path}") for image in images]
    galleries = {split: [im for im, raw in zip(linked, images) if split_of.get(raw.path) == split] for split in SPLITS}
    galleries[ALL] = linked
    files = []
    info: dict = {
        "name": "pa100k",
        "source": str(source),
        "splits": {},
        "warnings": len(report.warnings),
        "first_warnings": [str(w) for w in report.warnings[:3]],
    }
    for split, gallery in galleries.items():
        if not gallery:
            continue
        name = gallery_file(split)
        write_gallery(gallery, out / name)
        files.append(name)
        info["splits"][split] = {"images": len(gallery), "identities": len({im.person_id for im in gallery})}
    return finish_build(out, info, rebuild, files)
