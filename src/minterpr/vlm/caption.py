"""MTG at ingestion: each gallery crop asked the ontology's questions, answers rebuilt into a caption.

For each crop, the model is asked a few turns of questions, one per body part (whole person, head,
upper body, lower body, feet: the slots of :data:`~minterpr.language.ontology.ONTOLOGY` grouped by
``body_part``), each answer constrained to that group's slots and values. The answers are
validated (:func:`~minterpr.language.ontology.Ontology.validate`) and rebuilt into a caption
(:func:`~minterpr.language.captions.caption_description`, seeded by the crop's path, so a rerun
writes the same text) and per-slot evidence (``{slot: {value: weight}}``, as the text parser's
:func:`~minterpr.language.text_parser.facts_to_evidence`). Records go to a JSONL file, one line per
crop, appended a batch at a time and flushed: a run stopped at any point resumes where it stopped
(the crops already in the file are skipped, a half-written last line is dropped). A crop whose
every question failed gets no record, so a resumed run asks it again. The report says what was
done and what it cost (calls, tokens, seconds). :func:`with_caption_evidence` gives a search the
stored evidence beside the image model's, and :func:`use_captions` is the one switch every search
goes through (``simulate``, ``eval`` and ``chat`` with ``--vlm-captions FILE|STORE``; ``serve
--vlm-captions`` for each gallery store that holds its own :data:`CAPTIONS_FILE`).

Example (a scripted endpoint that sees a man in black, one answer per turn):
    >>> import json, tempfile, os
    >>> from minterpr.types import GalleryImage
    >>> from minterpr.vlm.testing import ScriptedServer, reply
    >>> folder = tempfile.mkdtemp(); open(os.path.join(folder, "a.jpg"), "wb").write(b"jpeg")
    4
    >>> [group for group, _ in question_groups()]
    ['whole', 'head', 'upper', 'lower', 'feet']
    >>> seen = [reply(json.dumps(a)) for a in ({"gender": ["male"]}, {}, {"upper_colour": ["black"]}, {}, {})]
    >>> with ScriptedServer(seen) as server:
    ...     client = VLMClient(VLMConfig(server.url, "m", uses=("caption",)))
    ...     report = caption_gallery([GalleryImage("a.jpg", "p1")], folder, client, os.path.join(folder, "mtg.jsonl"))
    >>> report["captioned"], report["failed"]
    (1, 0)
    >>> record = read_captions(os.path.join(folder, "mtg.jsonl"))["a.jpg"]
    >>> record["attributes"]["gender"], record["caption"]
    (['male'], 'The man is wearing a black top.')
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.language.text_parser import facts_to_evidence
from minterpr.language.captions import caption_description
from minterpr.errors import InputError
from minterpr.index.gallery_index import GalleryIndex
from minterpr.index.store.gallery_store import CAPTIONS as CAPTIONS_FILE  # a store's own captions file
from minterpr.types import GalleryImage
from minterpr.vlm.assist import read_image
from minterpr.vlm.client import VLMClient
from minterpr.vlm.config import VLMConfig
from minterpr.vlm.errors import VLMBudgetExceeded, VLMError, VLMUnavailable
from minterpr.vlm.schema import answers_schema

CAPTION_FORMAT = "minterpr-vlm-captions/1"  # the "format" of every record line
_PARTS = ("whole", "head", "upper", "lower", "feet")


def question_groups() -> list[tuple[str, list[str]]]:
    """(body part, its slots) in asking order: the few turns each crop is asked."""
    return [
        (part, [s.name for s in ONTOLOGY.slots if s.body_part == part])
        for part in _PARTS
        if any(s.body_part == part for s in ONTOLOGY.slots)
    ]


def caption_crop(client: VLMClient, image: bytes) -> tuple[dict[str, tuple[str, ...]], int]:
    """(validated attributes, how many of the turns failed) for one crop. Its questions share one
    deadline (``turn_deadline_s``, as a session's turn), and after the endpoint fails (unreachable,
    timed out) the crop's remaining parts are not asked: a failing endpoint costs a crop its deadline once."""
    attributes: dict[str, tuple[str, ...]] = {}
    failed = 0
    groups = question_groups()
    deadline = client.clock() + client.config.turn_deadline_s
    for k, (part, slots) in enumerate(groups):
        prompt = (
            f"Look at the {'person as a whole' if part == 'whole' else part + ' of the person'} in this "
            "image. For each slot of the schema, list the values you can see ([] when you cannot tell)."
        )
        try:
            answer = client.ask("caption", prompt, images=[image], schema=answers_schema(slots), deadline=deadline)
            attributes.update(ONTOLOGY.validate({k: tuple(v) for k, v in answer.items() if v}))
        except VLMBudgetExceeded:
            raise
        except VLMUnavailable:  # the endpoint failed: this part and the rest unknown
            failed += len(groups) - k
            break
        except (VLMError, ValueError):  # a bad answer or values the ontology refuses: that part unknown
            failed += 1
    return attributes, failed


def crop_record(path: str, attributes: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """The stored record of one crop: caption, attributes, per-slot evidence."""
    seed = int(hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:8], 16)
    caption = (
        caption_description(attributes, random.Random(seed), vague_rate=0.0, slots=list(attributes)).text
        if attributes
        else ""
    )
    facts = [Fact(slot, values) for slot, values in attributes.items()]
    return {
        "format": CAPTION_FORMAT,
        "path": path,
        "caption": caption,
        "attributes": {k: list(v) for k, v in attributes.items()},
        "evidence": facts_to_evidence(facts),
    }


def read_captions(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """path -> record of a caption file (a broken last line, from a stopped run, is ignored)."""
    name = os.fspath(path)
    if not os.path.exists(name):
        return {}
    records: dict[str, dict[str, Any]] = {}
    with open(name, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number >= len(lines) - 1:  # the last line: a run stopped while writing it
                break
            raise InputError(f"{name}:{number}: not JSON; not a caption file (remove it to start again)") from None
        if (
            not isinstance(record, dict)
            or record.get("format") != CAPTION_FORMAT
            or not isinstance(record.get("path"), str)
        ):
            raise InputError(f"{name}:{number}: format: not a {CAPTION_FORMAT} record")
        records[record["path"]] = record
    return records


def caption_gallery(
    images: Sequence[GalleryImage],
    root: str | None,
    client: VLMClient,
    out_path: str | os.PathLike[str],
    *,
    batch_size: int = 16,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_crop: Callable[[dict[str, Any]], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    give_up_after: int | None = None,
) -> dict[str, Any]:
    """Caption every crop not yet in ``out_path`` (see the module doc); returns the report
    ``{"captioned", "skipped", "nothing_seen", "failed", "unreadable", "stopped", "usage", "seconds"}``
    (``nothing_seen``: crops the model answered with nothing seen; recorded, not counted as captioned).

    ``progress(done, total)`` is called after each batch is written (crops of this run); ``on_crop(report)``
    after each crop is asked (the counts so far; a service job's live progress); ``cancel()`` is read
    before each crop: when true, the crops asked so far are written and ``stopped`` is ``"cancelled"``.
    ``give_up_after``: stop once that many crops in a row got no usable answer (the endpoint is down or
    answers nonsense; ``stopped`` says so) rather than spend every crop's deadline on it."""
    if batch_size < 1:
        raise InputError(f"batch_size must be >= 1, got {batch_size}")
    if give_up_after is not None and give_up_after < 1:
        raise InputError(f"give_up_after must be >= 1, got {give_up_after}")
    start = time.monotonic()
    done = read_captions(out_path)
    todo = [image for image in images if image.path not in done][:limit]
    report: dict[str, Any] = {
        "captioned": 0,
        "skipped": len(images) - len(todo) if limit is None else len(done),
        "nothing_seen": 0,
        "failed": 0,
        "unreadable": 0,
        "stopped": None,
    }
    in_a_row = 0  # crops in a row without a usable answer
    _drop_broken_tail(os.fspath(out_path))
    with open(out_path, "a", encoding="utf-8") as out:
        for first in range(0, len(todo), batch_size):
            lines = []
            try:
                for image in todo[first : first + batch_size]:
                    if cancel is not None and cancel():
                        report["stopped"] = "cancelled"
                        break
                    data = read_image(root, image.path)
                    if data is None:
                        report["unreadable"] += 1
                    else:
                        attributes, failed = caption_crop(client, data)
                        if failed == len(question_groups()):
                            report["failed"] += 1
                            in_a_row += 1
                        else:  # recorded either way (a resumed run does not ask again); counted apart
                            lines.append(json.dumps(crop_record(image.path, attributes), ensure_ascii=True))
                            report["captioned" if attributes else "nothing_seen"] += 1
                            in_a_row = 0
                    if on_crop is not None:
                        on_crop(dict(report))
                    if give_up_after is not None and in_a_row >= give_up_after:
                        report["stopped"] = (
                            f"the endpoint gave no usable answer for {in_a_row} crops in a row "
                            f"(unreachable, failing or answering nonsense)"
                        )
                        break
            except VLMBudgetExceeded as err:
                report["stopped"] = str(err)
            out.write("".join(line + "\n" for line in lines))
            out.flush()
            os.fsync(out.fileno())
            if progress is not None:
                progress(min(first + batch_size, len(todo)), len(todo))
            if report["stopped"]:
                break
    report["usage"] = client.usage()
    report["seconds"] = round(time.monotonic() - start, 3)
    return report


def with_caption_evidence(
    index: GalleryIndex, captions: Mapping[str, Mapping[str, Any]], weight: float = 0.5
) -> GalleryIndex:
    """A copy of ``index`` whose attribute probabilities blend the image model's with the captions':
    ``(1 - weight) * p + weight * seen`` for each slot a crop's record names (seen: 1 for the values the
    model saw; 0 for the other values of a single-valued slot; a multi-valued slot's other values keep
    ``p``). Without the image model's probabilities the blend starts from 0.5. Crops without a record
    keep theirs. The copy has no fused index (its evidence would be stale); ``vectors`` stay.

    Example:
        >>> import numpy as np
        >>> index = GalleryIndex([GalleryImage("a.jpg", "x:1"), GalleryImage("b.jpg", "x:2")], np.eye(2))
        >>> captioned = with_caption_evidence(index, {"b.jpg": crop_record("b.jpg", {"gender": ("female",)})})
        >>> columns = ONTOLOGY.slot_columns()["gender"]  # male, female
        >>> captioned.attribute_probs[:, columns].tolist()
        [[0.5, 0.5], [0.25, 0.75]]
    """
    if not 0.0 <= weight <= 1.0:
        raise InputError(f"caption weight must be within 0..1, got {weight}")
    labels = ONTOLOGY.flat_labels()
    column = {label: j for j, label in enumerate(labels)}
    probs = (
        np.full((len(index), len(labels)), 0.5, dtype=np.float32)
        if index.attribute_probs is None
        else np.array(index.attribute_probs, dtype=np.float32, copy=True)
    )
    for i, image in enumerate(index.images):
        record = captions.get(image.path)
        if record is None:
            continue
        for slot_name, values in record.get("attributes", {}).items():
            slot = ONTOLOGY.slot(slot_name)
            for value in slot.value_names:
                seen = 1.0 if value in values else 0.0 if not slot.multi else None
                if seen is not None:
                    j = column[(slot_name, value)]
                    probs[i, j] = (1 - weight) * probs[i, j] + weight * seen
    return dataclasses.replace(index, attribute_probs=probs, fused=None)


def captions_file(source: str | os.PathLike[str]) -> str | None:
    """The captions file ``source`` names: itself, or a gallery store folder's :data:`CAPTIONS_FILE`
    (None when the store has none: it was not captioned). InputError for a file that is not there.

    Example:
        >>> import tempfile
        >>> captions_file(tempfile.mkdtemp()) is None
        True
    """
    name = os.fspath(source)
    if os.path.isdir(name):
        own = os.path.join(name, CAPTIONS_FILE)
        return own if os.path.isfile(own) else None
    if not os.path.isfile(name):
        raise InputError(f"{name}: no such captions file (write one with `minterpr vlm caption`)")
    return name


def use_captions(
    index: GalleryIndex, source: str | os.PathLike[str] | None, weight: float = 0.5
) -> tuple[GalleryIndex, dict[str, Any]]:
    """The index a search runs on with the MTG switch (``--vlm-captions``), and what to record of it.

    ``source``: a captions file, a gallery store folder (its own :data:`CAPTIONS_FILE`), or None (the
    switch off). Returns ``(index, record)``: :func:`with_caption_evidence` of the records whose path the
    index holds, and ``{"vlm_captions", "vlm_caption_weight", "vlm_captioned"}`` (source, weight, crops
    blended) for a report's protocol. With the switch off, a store without captions or no record
    matching a crop, ``index`` itself comes back (today's behaviour, its fused index kept) and the
    record is ``{}`` (switch off or nothing to read) or says 0 crops.

    Example:
        >>> import numpy as np, tempfile
        >>> index = GalleryIndex([GalleryImage("a.jpg", "x:1")], np.eye(1, dtype=np.float32))
        >>> use_captions(index, None) == (index, {})
        True
        >>> path = os.path.join(tempfile.mkdtemp(), "mtg.jsonl")
        >>> _ = open(path, "w").write(json.dumps(crop_record("a.jpg", {"gender": ("male",)})) + "\\n")
        >>> captioned, record = use_captions(index, path, 0.5)
        >>> record["vlm_captioned"], captioned.attribute_probs[0, ONTOLOGY.slot_columns()["gender"]].tolist()
        (1, [0.75, 0.25])
    """
    if not 0.0 <= weight <= 1.0:
        raise InputError(f"caption weight must be within 0..1, got {weight}")
    path = None if source is None else captions_file(source)
    if path is None:
        return index, {}
    records = read_captions(path)
    matched = {
        image.path: records[image.path]
        for image in index.images
        if image.path in records and records[image.path].get("attributes")
    }  # nothing seen: no evidence
    record = {"vlm_captions": os.fspath(source), "vlm_caption_weight": weight, "vlm_captioned": len(matched)}
    return (with_caption_evidence(index, matched, weight) if matched else index), record


def _drop_broken_tail(path: str) -> None:
    """Cut a half-written last line (a run stopped mid-write) so appending starts on a fresh line."""
    if not os.path.exists(path):
        return
    with open(path, "rb+") as f:
        data = f.read()
        if data and not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)


__all__ = [
    "CAPTIONS_FILE",
    "VLMConfig",
    "caption_crop",
    "caption_gallery",
    "captions_file",
    "crop_record",
    "question_groups",
    "read_captions",
    "use_captions",
    "with_caption_evidence",
]
