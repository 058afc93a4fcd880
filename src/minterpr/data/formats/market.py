"""Market-1501 attributes (Lin et al., ``market_attribute.mat``) and Market-1501 image names.

``market_attribute.mat`` holds a struct ``market_attribute`` with fields ``train`` and
``test``; each is a struct with one field per attribute (``age``, ``backpack``, ``bag``,
``handbag``, ``clothes``, ``down``, ``up``, ``hair``, ``hat``, ``gender``, ``upblack`` ...
``downbrown``), each a 1×N row of codes (1 = first option / absent, 2 = second option /
present; ``age`` 1-4), and ``image_index``, a 1×N cell of identity ids (``'0002'``). Labels are
per identity. Codes map to the ontology through :data:`MARKET1501_LABELS`.

Market-1501 image names are ``<pid>_c<cam>s<seq>_<frame>_<n>.jpg``: pid ``-1`` marks junk
boxes (skipped, with a warning) and ``0000`` distractors, which are different unknown people:
each distractor image is its own identity ``market1501:distractor-<rest of the name>``.

Reading .mat files needs scipy: ``pip install 'minterpr[mat]'``.

Example:
    >>> attrs = read_market_attributes("market_attribute.mat")             # doctest: +SKIP
    >>> attrs["market1501:0002"]["gender"]                                 # doctest: +SKIP
    ('male',)
    >>> market_images("Market-1501/bounding_box_test", attrs)[0].camera_id  # doctest: +SKIP
    'market1501:c1'
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from minterpr.data.errors import DataError, ReadReport
from minterpr.data.formats.jsonl import ReadResult
from minterpr.data.formats.pa100k import load_mat
from minterpr.data.label_maps import MARKET1501_LABELS, labels_to_attributes, market1501_codes
from minterpr.types import Attributes, GalleryImage, person_id

NAMESPACE = "market1501"
MARKET_SPLITS = ("train", "test")
MARKET_NAME = re.compile(r"(?P<pid>-1|\d+)_c(?P<cam>\d+)s(?P<seq>\d+)_(?P<frame>\d+)_(?P<box>\d+)\.jpg")


def _market_pid(raw: Any) -> str:
    """``'0002'``, ``2`` or ``2.0`` -> ``'0002'`` (the zero-padded form of the image names)."""
    value = np.asarray(raw).ravel()
    text = str(value[0]).strip() if value.size else ""
    number = float(text)  # ValueError for non-numbers, caught by the caller
    if number != int(number) or number < 0:
        raise ValueError(text)
    return f"{int(number):04d}"


def _split_fields(struct: Any, split: str, file: str) -> dict[str, np.ndarray]:
    """The attribute rows of one split as flat arrays, all of one length."""
    names = getattr(struct, "_fieldnames", None)
    if names is None:
        raise DataError(file, 0, split, "expected a struct of attribute fields")
    fields = {name: np.atleast_1d(np.asarray(getattr(struct, name), dtype=object)).ravel() for name in names}
    if "image_index" not in fields:
        raise DataError(file, 0, f"{split}.image_index", "missing field")
    missing = [name for name in market1501_codes() if name not in fields]
    if missing:
        raise DataError(file, 0, f"{split}.{missing[0]}", "missing attribute field")
    count = len(fields["image_index"])
    for name, values in fields.items():
        if len(values) != count:
            raise DataError(file, 0, f"{split}.{name}", f"has {len(values)} entries, image_index has {count}")
    return fields


AttributesById = dict[str, dict[str, tuple[str, ...]]]  # person id -> ontology attributes


def read_market_attributes(
    mat_path: str | Path, *, splits: Iterable[str] = MARKET_SPLITS, strict: bool = True
) -> AttributesById | tuple[AttributesById, ReadReport]:
    """Map each Market-1501 identity (``market1501:0002``) to its ontology attributes.

    Errors name the field as ``<split>.<attribute>`` and the identity's 1-based column as the
    line. Strict mode raises the first :class:`DataError` (missing field, unequal lengths, a
    code outside the attribute's range, an identity listed twice); lenient mode skips the
    identity or split at fault and returns ``(attributes_by_person, report)``. Fields other than
    the 27 attributes and ``image_index`` are ignored with a warning.
    """
    file = str(mat_path)
    splits = tuple(splits)
    unknown = [s for s in splits if s not in MARKET_SPLITS]
    if unknown:
        raise ValueError(
            f"unknown Market-1501 attribute split {unknown[0]!r}: must be one of {', '.join(MARKET_SPLITS)}"
        )
    mat = load_mat(mat_path, squeeze_me=True, struct_as_record=False)
    report = ReadReport(file)
    out: AttributesById = {}

    def fail(error: DataError) -> None:
        if strict:
            raise error
        report.add(error)

    root = mat.get("market_attribute")
    if root is None:
        fail(DataError(file, 0, "market_attribute", "missing variable"))
        return out if strict else (out, report)
    for split in splits:
        try:
            if not hasattr(root, split):
                raise DataError(file, 0, split, "missing field of market_attribute")
            fields = _split_fields(getattr(root, split), split, file)
        except DataError as error:
            fail(error)
            continue
        for extra in sorted(set(fields) - set(market1501_codes()) - {"image_index"}):
            report.warn(DataError(file, 0, f"{split}.{extra}", "unknown attribute field ignored"))
        for col, raw_pid in enumerate(fields["image_index"]):
            try:
                try:
                    local = _market_pid(raw_pid)
                except ValueError:
                    raise DataError(file, col + 1, f"{split}.image_index", f"not an identity id: {raw_pid!r}") from None
                labels = []
                for name, codes in market1501_codes().items():  # a fixed order, so conflicts resolve the same way
                    code = fields[name][col]
                    if not isinstance(code, (int, float, np.number)) or code not in codes:
                        raise DataError(
                            file, col + 1, f"{split}.{name}", f"code must be one of {list(codes)}, got {code!r}"
                        )
                    labels.append(f"{name}={int(code)}")
                pid = person_id(NAMESPACE, local)
                if pid in out:
                    raise DataError(file, col + 1, f"{split}.image_index", f"identity {local} listed twice")
                out[pid] = labels_to_attributes(labels, MARKET1501_LABELS)
            except DataError as error:
                fail(error)
    report.records_read = len(out)
    return out if strict else (out, report)


def parse_market_name(name: str) -> dict[str, int] | None:
    """Fields of a Market-1501 image name, or None when it does not follow the pattern.

    >>> parse_market_name("0002_c1s1_000451_03.jpg")
    {'pid': 2, 'cam': 1, 'seq': 1, 'frame': 451, 'box': 3}
    """
    match = MARKET_NAME.fullmatch(Path(name).name)
    return {k: int(v) for k, v in match.groupdict().items()} if match else None


def market_images(
    images: str | Path | Iterable[str | Path],
    attributes: Mapping[str, Attributes] | None = None,
    *,
    strict: bool = True,
) -> list[GalleryImage] | ReadResult[GalleryImage]:
    """Gallery images for Market-1501 files, with identity attributes attached when given.

    ``images`` is a folder (its ``*.jpg`` files, paths relative to it) or an iterable of paths
    (kept as given). The camera comes from the name (``market1501:c3``). Junk images (pid -1)
    are skipped with a warning; distractors (pid 0000) each get their own identity and no
    attributes; an identity missing from ``attributes`` is kept without attributes and warned
    about. A name off the pattern is a :class:`DataError` (raised when strict; lenient mode
    skips it and returns a :class:`ReadResult`).
    """
    if isinstance(images, (str, Path)):
        folder = Path(images)
        paths: list[str] = sorted(p.name for p in folder.iterdir() if p.suffix.lower() == ".jpg")
        report = ReadReport(str(folder))
    else:
        paths = [str(p) for p in images]
        report = ReadReport("<market images>")
    out: list[GalleryImage] = []
    for path in paths:
        fields = parse_market_name(path)
        if fields is None:
            error = DataError(path, 0, "file name", "expected <pid>_c<cam>s<seq>_<frame>_<n>.jpg")
            if strict:
                raise error
            report.add(error)
            continue
        if fields["pid"] < 0:
            report.warn(DataError(path, 0, "pid", "junk image (pid -1) skipped"))
            continue
        stem = Path(path).stem
        if fields["pid"] == 0:
            pid, attrs = person_id(NAMESPACE, "distractor-" + stem.split("_", 1)[1]), None
        else:
            pid = person_id(NAMESPACE, f"{fields['pid']:04d}")
            attrs = dict(attributes[pid]) if attributes is not None and pid in attributes else None
            if attributes is not None and attrs is None:
                report.warn(DataError(path, 0, "pid", f"no attributes for {pid}"))
        out.append(
            GalleryImage(
                path=path, person_id=pid, camera_id=person_id(NAMESPACE, f"c{fields['cam']}"), attributes=attrs
            )
        )
    report.records_read = len(out)
    return out if strict else ReadResult(out, report)
