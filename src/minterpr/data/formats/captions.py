"""Readers for text-based person search caption datasets (one image, a few descriptions).

Supported formats (all a JSON array of objects, one object per image):

* ``cuhk-pedes`` — CUHK-PEDES ``reid_raw.json``: ``file_path`` (str), ``id`` (int), ``split``
  (train/val/test), ``captions`` (list of str), optional ``processed_tokens`` (list of token
  lists, one per caption).
* ``icfg-pedes`` — ICFG-PEDES json: the same fields (its splits are train/test).
* ``rstpreid`` — RSTPReid ``data_captions.json``: ``img_path`` instead of ``file_path``; ``id``,
  ``split``, ``captions``.
* ``tbps`` — TBPS-CLIP / RaSa style ``{split}_reid.json``: ``file_path``, ``id``, ``captions``,
  optional ``captions_bt`` (back-translated captions, one per caption) and optional ``split``;
  when ``split`` is absent it comes from the file name (``test_reid.json`` -> test), else from
  the ``split`` argument. These files exist for each of the three datasets above, so the person
  id namespace is taken from the file name or the two folders above it (``CUHK-PEDES/ann/test_reid.json``
  -> ``cuhk-pedes``; likewise ``icfg`` and ``rstp``), else ``tbps``.

``format="auto"`` looks at the first record: ``img_path`` -> rstpreid; no ``split`` -> tbps;
``icfg`` in the file name or an ICFG-style path (``test/0953/...``) -> icfg-pedes; otherwise
cuhk-pedes (a TBPS file whose rows carry ``split`` reads the same either way).

Errors name the record by its 1-based position in the JSON array, reported as the ``line`` of
the :class:`DataError` (these files are usually written on a single line, so the record number
is the useful coordinate).

Example:
    >>> records = read_caption_dataset("reid_raw.json", split="test")  # doctest: +SKIP
    >>> records[0].person_id, len(records[0].captions)                 # doctest: +SKIP
    ('cuhk-pedes:11005', 2)
    >>> samples = captions_to_samples(records)  # one round-0 sample per caption  # doctest: +SKIP
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from minterpr.data.errors import DataError, ReadReport
from minterpr.data.formats.jsonl import RECORD, ReadResult, image_checker, iter_json_array, json_type, short
from minterpr.data.stats import summary, word_count
from minterpr.types import Dialogue, RetrievalSample, person_id

CAPTION_FORMATS = ("cuhk-pedes", "icfg-pedes", "rstpreid", "tbps")
SPLITS = ("train", "val", "test")
# Field that holds the image path, per format.
_PATH_FIELD = {"cuhk-pedes": "file_path", "icfg-pedes": "file_path", "rstpreid": "img_path", "tbps": "file_path"}
# ICFG-PEDES paths look like "test/0953/0953_010_05_0303afternoon_1622_0.jpg".
_ICFG_PATH = re.compile(r"^(train|test)/\d+/")
_TBPS_NAME = re.compile(r"^(train|val|test)_reid\.json$")
# Path words that name the dataset behind a TBPS-style file, checked in this order.
_TBPS_NAMESPACES = (("icfg", "icfg-pedes"), ("rstp", "rstpreid"), ("cuhk", "cuhk-pedes"))


@dataclass(frozen=True)
class CaptionRecord:
    """One image of a caption dataset and the descriptions written for it."""

    path: str  # image path as written in the file, relative to the dataset's image root
    person_id: str  # namespaced identity ("cuhk-pedes:11005")
    split: str  # "train", "val" or "test"
    captions: tuple[str, ...]  # the descriptions, verbatim (may hold stray newlines)


def detect_caption_format(path: str | Path, rows: Sequence[object]) -> str:
    """Guess the caption format from the first record's fields, then from the file name.

    >>> detect_caption_format("data_captions.json", [{"img_path": "a.jpg"}])
    'rstpreid'
    >>> detect_caption_format("test_reid.json", [{"file_path": "a.jpg", "id": 1, "captions": ["x"]}])
    'tbps'
    """
    name = Path(path).name.lower()
    first = next((r for r in rows if isinstance(r, dict)), None)
    if first is None:  # nothing to look at: fall back on the name alone
        if "icfg" in name:
            return "icfg-pedes"
        if "rstp" in name or name == "data_captions.json":
            return "rstpreid"
        if _TBPS_NAME.match(name):
            return "tbps"
        return "cuhk-pedes"
    if "img_path" in first:
        return "rstpreid"
    if "split" not in first:
        return "tbps"
    file_path = first.get("file_path")
    if "icfg" in name or (isinstance(file_path, str) and _ICFG_PATH.match(file_path)):
        return "icfg-pedes"
    return "cuhk-pedes"


def _default_namespace(fmt: str, path: Path) -> str:
    if fmt != "tbps":
        return fmt
    # Only the file name and the two folders above it: the dataset's own folder is one of them.
    text = "/".join(path.resolve().parts[-3:]).lower()
    for word, namespace in _TBPS_NAMESPACES:
        if word in text:
            return namespace
    return "tbps"


def _check_str_list(value: object, what: str) -> str | None:
    """Why ``value`` is not a non-empty list of non-empty strings (None when it is)."""
    if not isinstance(value, list):
        return f"expected a list of {what}, got {json_type(value)}"
    if not value:
        return f"expected a non-empty list of {what}"
    for i, item in enumerate(value):
        if not isinstance(item, str):
            return f"item {i} is {json_type(item)}, expected a string"
        if not item.strip():
            return f"item {i} is empty"
    return None


def _parse_record(
    row: object,
    number: int,
    file: str,
    fmt: str,
    namespace: str,
    name_split: str | None,
    default_split: str | None,
    report: ReadReport,
) -> CaptionRecord:
    """Validate one JSON object; raise DataError for what makes it unusable, warn for the rest."""
    if not isinstance(row, dict):
        raise DataError(file, number, RECORD, f"expected an object, got {json_type(row)}")
    path_field = _PATH_FIELD[fmt]
    for name in (path_field, "id", "captions"):
        if name not in row:
            raise DataError(file, number, name, f"missing field (format {fmt!r})")
    img = row[path_field]
    if not isinstance(img, str) or not img.strip():
        raise DataError(file, number, path_field, f"expected a non-empty string, got {short(img)}")
    pid = row["id"]
    if isinstance(pid, bool) or not isinstance(pid, (int, str)) or (isinstance(pid, str) and not pid.strip()):
        raise DataError(file, number, "id", f"expected an integer or a non-empty string, got {short(pid)}")
    why = _check_str_list(row["captions"], "captions")
    if why:
        raise DataError(file, number, "captions", why)
    captions = tuple(row["captions"])
    if "split" in row:
        split = row["split"]
        if split not in SPLITS:
            raise DataError(file, number, "split", f"must be one of {', '.join(SPLITS)}, got {short(split)}")
    elif fmt == "tbps" and (name_split or default_split):
        split = name_split or default_split
    else:
        raise DataError(file, number, "split", "missing field (and the file name names no split)")
    # Optional companions of the captions: unused here, so a mismatch is only worth a warning.
    for extra in ("processed_tokens", "captions_bt"):
        if extra in row and (not isinstance(row[extra], list) or len(row[extra]) != len(captions)):
            report.warn(DataError(file, number, extra, f"expected a list of {len(captions)} items (one per caption)"))
    return CaptionRecord(path=img, person_id=person_id(namespace, pid), split=split, captions=captions)


def read_caption_dataset(
    path: str | Path,
    *,
    format: str = "auto",
    split: str | None = None,
    strict: bool = True,
    image_root: str | Path | None = None,
    check_images: bool = False,
    namespace: str | None = None,
    allow_outside_root: bool = False,
) -> list[CaptionRecord] | ReadResult[CaptionRecord]:
    """Read a caption dataset file into :class:`CaptionRecord` objects.

    ``format`` is one of ``"auto"``, ``"cuhk-pedes"``, ``"icfg-pedes"``, ``"rstpreid"``, ``"tbps"``
    (see the module docstring); ``split`` keeps only that split (for ``tbps`` files without a
    ``split`` field it also names the split of every row when the file name does not).
    ``check_images`` rejects records whose image is missing under ``image_root`` (default: the
    file's own directory), and those whose path leaves that root (unless ``allow_outside_root``).
    ``namespace`` overrides the person-id namespace (default: the format's name).

    Strict mode raises the first :class:`DataError` (``line`` = 1-based record number); lenient
    mode (``strict=False``) skips bad records and returns a :class:`ReadResult` that unpacks as
    ``records, report``.

    >>> import json, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "reid_raw.json")
    >>> _ = open(p, "w").write(json.dumps([{"file_path": "a/1.jpg", "id": 7, "split": "test",
    ...                                      "captions": ["A man in a red coat."]}]))
    >>> read_caption_dataset(p)[0]
    CaptionRecord(path='a/1.jpg', person_id='cuhk-pedes:7', split='test', captions=('A man in a red coat.',))
    """
    path = Path(path)
    file = str(path)
    if format != "auto" and format not in CAPTION_FORMATS:
        raise ValueError(f"unknown caption format {format!r}: must be one of auto, {', '.join(CAPTION_FORMATS)}")
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: must be one of {', '.join(SPLITS)}")
    checker = image_checker(path, image_root, check_images, allow_outside_root)
    report = ReadReport(file)

    def fail(error: DataError) -> None:
        if strict:
            raise error
        report.add(error)

    numbered = list(iter_json_array(path, None if strict else report))  # safe parsing: see .safejson
    rows = [value for _, _, value in numbered]
    fmt = detect_caption_format(path, rows) if format == "auto" else format
    namespace = namespace or _default_namespace(fmt, path)
    name_match = _TBPS_NAME.match(path.name.lower())
    name_split = name_match.group(1) if name_match else None

    records: list[CaptionRecord] = []
    seen: dict[str, tuple[int, str]] = {}  # image path -> (record number, person id) of its first record
    for _, number, row in numbered:
        try:
            record = _parse_record(row, number, file, fmt, namespace, name_split, split, report)
            if record.path in seen:
                first, first_pid = seen[record.path]
                if first_pid != record.person_id:
                    raise DataError(
                        file, number, _PATH_FIELD[fmt], f"image already given to {first_pid} by record {first}"
                    )
                report.warn(DataError(file, number, _PATH_FIELD[fmt], f"image repeats record {first}"))
            why = checker.problem(record.path) if checker is not None else None
            if why:
                raise DataError(file, number, _PATH_FIELD[fmt], why)
        except DataError as error:
            fail(error)
            continue
        seen.setdefault(record.path, (number, record.person_id))
        if split is None or record.split == split:
            records.append(record)
    report.records_read = len(records)
    return records if strict else ReadResult(records, report)


def captions_to_samples(records: Iterable[CaptionRecord]) -> list[RetrievalSample]:
    """One round-0 retrieval sample per caption (the dialogue is the description alone).

    ``extra`` keeps the record's split and the caption's index within its record.

    >>> r = CaptionRecord("a.jpg", "cuhk-pedes:1", "test", ("a man", "a tall man"))
    >>> [s.dialogue.description for s in captions_to_samples([r])]
    ['a man', 'a tall man']
    """
    return [
        RetrievalSample(
            target_path=r.path,
            person_id=r.person_id,
            dialogue=Dialogue(description=caption),
            extra={"split": r.split, "caption_index": i},
        )
        for r in records
        for i, caption in enumerate(r.captions)
    ]


def caption_stats(records: Sequence[CaptionRecord]) -> dict[str, object]:
    """Counts and lengths of a caption dataset, in the dict style of :mod:`minterpr.data.stats`.

    Caption lengths are in whitespace-separated words; summaries are ``{min, mean, median,
    max}`` (None when there are no records).

    >>> caption_stats([CaptionRecord("a.jpg", "x:1", "test", ("a man", "a tall man"))])["caption_words"]
    {'min': 2, 'mean': 2.5, 'median': 2.5, 'max': 3}
    """
    return {
        "records": len(records),
        "identities": len({r.person_id for r in records}),
        "captions": sum(len(r.captions) for r in records),
        "splits": dict(sorted(Counter(r.split for r in records).items())),
        "captions_per_record": summary([len(r.captions) for r in records]),
        "caption_words": summary([word_count(c) for r in records for c in r.captions]),
    }
