"""Hand labels of a real video: person boxes, identities across the video, witness descriptions.

A label file (``benchmarks/data/vtest_labels.json``; docs/benchmarks.md "Street video") is JSON,
no pixels::

    {"schema": "minterpr.street_labels/1",
     "video": {"name": "vtest.avi", "width": 768, "height": 576, "frames": 795, "fps": 10.0,
               "sha256": "<hex of the video file>", ...},
     "people": {"p01": {"description": "Man in a red jacket ...",          # optional: a witness's words
                        "attributes": {"upper_colour": ["red", "blue"]},   # optional: ontology slot -> values
                        "notes": "..."}, ...},                             # optional
     "frames": [{"frame": 0, "boxes": [{"person": "p01", "box": [x1, y1, x2, y2], "ignore": false}, ...]}, ...]}

Every person visible on a listed frame is boxed (a frame's list is exhaustive: a detection that
matches no box there is a false positive). A box is tight around the visible person, in the
video's pixels. ``ignore``: a person cut by the frame's border or mostly hidden — neither a miss
nor a false positive when a detector finds or skips them. ``attributes`` use the ontology's slots
and values (what the simulated witness answers and corrects from).

:func:`load_labels` checks all of it and raises one :class:`~minterpr.errors.DatasetError` naming
the file and the field (``frames[3].boxes[1].box``).

Example:
    >>> doc = {"schema": SCHEMA, "video": {"name": "v.avi", "width": 64, "height": 48, "frames": 5, "fps": 10.0},
    ...        "people": {"p1": {}}, "frames": [{"frame": 2, "boxes": [{"person": "p1", "box": [1, 2, 11, 30]}]}]}
    >>> labels = parse_labels(doc, "doc")
    >>> labels.frames[2][0].box, labels.box_count()
    ((1.0, 2.0, 11.0, 30.0), 1)
    >>> parse_labels({**doc, "people": {}}, "doc")
    Traceback (most recent call last):
    ...
    minterpr.errors.DatasetError: doc: frames[0].boxes[0].person: 'p1' is not in people
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from minterpr.errors import DatasetError

SCHEMA = "minterpr.street_labels/1"


@dataclass(frozen=True)
class LabelBox:
    """One labelled person on one frame."""

    person: str  # key of StreetLabels.people
    box: tuple[float, float, float, float]  # x1, y1, x2, y2 in the video's pixels
    ignore: bool = False  # cut by the border or mostly hidden: neither a miss nor a false positive


@dataclass(frozen=True)
class Person:
    """One identity of the video."""

    description: str | None = None  # a witness's description, own words; None: not described
    attributes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # ontology slot -> values
    notes: str = ""  # the labeller's remarks


@dataclass(frozen=True)
class StreetLabels:
    """A label file, checked (see the module doc)."""

    video: Mapping[str, Any]  # name, width, height, frames, fps, sha256, ...
    people: Mapping[str, Person]  # id -> person
    frames: Mapping[int, tuple[LabelBox, ...]]  # frame index -> every person on it

    def box_count(self, *, ignored: bool = False) -> int:
        """Boxes on all frames (``ignored``: the ignore boxes too)."""
        return sum(1 for boxes in self.frames.values() for b in boxes if ignored or not b.ignore)

    def described(self) -> list[str]:
        """Ids of the people with a description, in file order."""
        return [k for k, p in self.people.items() if p.description]


def _fail(source: str, where: str, message: str) -> DatasetError:
    return DatasetError(source, f"{where}: {message}")


def _number(value: Any, source: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(source, where, f"must be a number, got {value!r}")
    return float(value)


def _box(value: Any, source: str, where: str, width: float, height: float) -> tuple[float, float, float, float]:
    if not isinstance(value, list) or len(value) != 4:
        raise _fail(source, where, f"must be [x1, y1, x2, y2], got {value!r}")
    x1, y1, x2, y2 = (_number(v, source, where) for v in value)
    if not (0 <= x1 < x2 <= width and 0 <= y1 < y2 <= height):
        raise _fail(source, where, f"{value} must satisfy 0 <= x1 < x2 <= {width:g} and 0 <= y1 < y2 <= {height:g}")
    return x1, y1, x2, y2


def _person(value: Any, source: str, where: str) -> Person:
    from minterpr.language.ontology import ONTOLOGY

    if not isinstance(value, dict):
        raise _fail(source, where, f"must be an object, got {type(value).__name__}")
    unknown = set(value) - {"description", "attributes", "notes"}
    if unknown:
        raise _fail(source, where, f"unknown keys {sorted(unknown)} (allowed: description, attributes, notes)")
    text = value.get("description")
    if text is not None and (not isinstance(text, str) or not text.strip()):
        raise _fail(source, f"{where}.description", "must be a non-empty string")
    raw = value.get("attributes", {})
    if not isinstance(raw, dict):
        raise _fail(source, f"{where}.attributes", "must be an object of slot -> [values]")
    attributes = {}
    for slot, values in raw.items():
        if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
            raise _fail(source, f"{where}.attributes.{slot}", f"must be a non-empty list of values, got {values!r}")
        try:
            attributes.update(ONTOLOGY.validate({slot: tuple(values)}))
        except Exception as err:  # the ontology names the slot or value it refuses
            raise _fail(source, f"{where}.attributes.{slot}", str(err)) from None
    notes = value.get("notes", "")
    if not isinstance(notes, str):
        raise _fail(source, f"{where}.notes", "must be a string")
    return Person(text, attributes, notes)


def parse_labels(doc: Any, source: str = "labels") -> StreetLabels:
    """Check a label document (see the module doc); ``source`` names it in errors."""
    if not isinstance(doc, dict):
        raise DatasetError(source, "a label file must be a JSON object")
    if doc.get("schema") != SCHEMA:
        raise _fail(source, "schema", f"must be {SCHEMA!r}, got {doc.get('schema')!r}")
    video = doc.get("video")
    if not isinstance(video, dict):
        raise _fail(source, "video", "must be an object with name, width, height, frames, fps")
    for key in ("width", "height", "frames", "fps"):
        if _number(video.get(key), source, f"video.{key}") <= 0:
            raise _fail(source, f"video.{key}", "must be > 0")
    width, height, length = float(video["width"]), float(video["height"]), int(video["frames"])
    people_doc = doc.get("people")
    if not isinstance(people_doc, dict):
        raise _fail(source, "people", "must be an object of id -> person")
    people = {str(k): _person(v, source, f"people.{k}") for k, v in people_doc.items()}
    frames_doc = doc.get("frames")
    if not isinstance(frames_doc, list):
        raise _fail(source, "frames", "must be a list of {frame, boxes}")
    frames: dict[int, tuple[LabelBox, ...]] = {}
    for i, entry in enumerate(frames_doc):
        where = f"frames[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("boxes"), list):
            raise _fail(source, where, "must be an object with frame and a boxes list")
        frame = entry.get("frame")
        if isinstance(frame, bool) or not isinstance(frame, int) or not 0 <= frame < length:
            raise _fail(source, f"{where}.frame", f"must be an integer in [0, {length}), got {frame!r}")
        if frame in frames:
            raise _fail(source, f"{where}.frame", f"frame {frame} is listed twice")
        boxes, seen = [], set()
        for j, item in enumerate(entry["boxes"]):
            at = f"{where}.boxes[{j}]"
            if not isinstance(item, dict):
                raise _fail(source, at, "must be an object with person and box")
            person = item.get("person")
            if person not in people:
                raise _fail(source, f"{at}.person", f"{person!r} is not in people")
            if person in seen:
                raise _fail(source, f"{at}.person", f"{person!r} is boxed twice on frame {frame}")
            seen.add(person)
            ignore = item.get("ignore", False)
            if not isinstance(ignore, bool):
                raise _fail(source, f"{at}.ignore", f"must be true or false, got {ignore!r}")
            boxes.append(LabelBox(person, _box(item.get("box"), source, f"{at}.box", width, height), ignore))
        frames[frame] = tuple(boxes)
    return StreetLabels(dict(video), people, dict(sorted(frames.items())))


def load_labels(path: str | os.PathLike[str]) -> StreetLabels:
    """Read and check a label file (DatasetError naming the file and field otherwise)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(path, "label file not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DatasetError(path, f"not JSON: {err}") from None
    return parse_labels(doc, os.fspath(path))
