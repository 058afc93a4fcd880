"""MInterPEDES JSON Lines: multi-turn dialogues with text and reference-image turns.

One JSON object per line with the fields

* ``file_path`` (string): the target image, relative to the image root;
* ``id`` (integer): the person id, namespaced on reading (``"minterpedes:12"``);
* ``t_conversation_length`` / ``i_conversation_length`` (integers >= 0): text / image turns;
* ``conversations``: ``1 + 2*t + 2*i`` messages ``{"from": "human"|"gpt", "value": str}``:
  the human's description, then ``t`` text pairs (gpt question, human answer), then ``i`` image
  pairs (gpt ``"<image>"``, human feedback on that reference image);
* ``image``: the ``i`` reference image paths, in turn order.

Choices:

* Unknown top-level fields are not errors: MInterPEDES variants carry extras. They are kept in
  :attr:`RetrievalSample.extra` and written back after the canonical fields.
* Blank lines are skipped (they keep their line numbers); see :mod:`.jsonl`.
* Each bad record gives one :class:`DataError` (the first problem found in it).
* Split-level check: the released data has two dialogues per target image, so every
  ``file_path`` that does not occur exactly twice is a warning (lenient reads only, added to
  the report once the file has been read), never a failure: synthetic files may have one.
* Integer ids must be real integers (``true`` is not an id) and values non-empty after strip.

Example:
    >>> import os, tempfile
    >>> from minterpr.types import Dialogue, QATurn, ReferenceTurn, RetrievalSample
    >>> sample = RetrievalSample("cam_a/001.jpg", "minterpedes:7", Dialogue(
    ...     "a man in a red jacket", (QATurn("Any bag?", "a black backpack"),),
    ...     (ReferenceTurn("cam_b/002.jpg", "his jacket is darker"),)))
    >>> path = os.path.join(tempfile.mkdtemp(), "test.jsonl")
    >>> write_minterpedes([sample], path)
    1
    >>> read_minterpedes(path) == [sample]
    True
    >>> samples, report = read_minterpedes(path, strict=False)
    >>> report.warnings[0].reason[:40]
    "target image 'cam_a/001.jpg' occurs 1 ti"
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, Iterator

from minterpr.data.errors import DataError, ReadReport
from minterpr.data.formats.jsonl import (
    RECORD,
    ImageChecker,
    ReadResult,
    atomic_writer,
    dumps_record,
    image_checker,
    iter_json_lines,
    json_type,
    local_int_id,
    short,
)
from minterpr.data.formats.reading import sample_reader
from minterpr.types import Dialogue, QATurn, ReferenceTurn, RetrievalSample, person_id

FIELDS = ("file_path", "id", "t_conversation_length", "i_conversation_length", "conversations", "image")
IMAGE_TOKEN = "<image>"  # the gpt message of an image turn
DEFAULT_NAMESPACE = "minterpedes"
PAIRS_PER_TARGET = 2  # dialogues per target image in the released splits

Fail = Callable[[str, str], DataError]  # (field, reason) -> the error for the current record


def parse_record(obj: object, file: str, line: int, namespace: str = DEFAULT_NAMESPACE) -> RetrievalSample:
    """Validate one parsed JSON value and map it to a sample; raises DataError naming the field."""

    def fail(field: str, reason: str) -> DataError:
        return DataError(file, line, field, reason)

    if not isinstance(obj, dict):
        raise fail(RECORD, f"expected a JSON object, got {json_type(obj)}")
    missing = [name for name in FIELDS if name not in obj]
    if missing:
        also = f" (also missing: {', '.join(missing[1:])})" if len(missing) > 1 else ""
        raise fail(missing[0], f"required field is missing{also}")
    file_path = _text(obj["file_path"], "file_path", fail)
    pid = _integer(obj["id"], "id", fail, minimum=None)
    t = _integer(obj["t_conversation_length"], "t_conversation_length", fail, minimum=0)
    i = _integer(obj["i_conversation_length"], "i_conversation_length", fail, minimum=0)
    conversations, images = obj["conversations"], obj["image"]
    if not isinstance(conversations, list):
        raise fail("conversations", f"expected an array of messages, got {json_type(conversations)}")
    if not isinstance(images, list):
        raise fail("image", f"expected an array of image paths, got {json_type(images)}")
    expected = 1 + 2 * t + 2 * i
    if len(conversations) != expected:
        raise fail(
            "conversations",
            f"expected 1 + 2*t + 2*i = {expected} messages (t_conversation_length={t}, "
            f"i_conversation_length={i}), got {len(conversations)}",
        )
    if len(images) != i:
        raise fail("image", f"expected i_conversation_length={i} reference images, got {len(images)}")

    values = [_message(msg, k, t, i, fail) for k, msg in enumerate(conversations)]
    refs = [_text(path, f"image[{k}]", fail) for k, path in enumerate(images)]
    qa = tuple(QATurn(values[2 * k + 1], values[2 * k + 2]) for k in range(t))
    feedback = values[1 + 2 * t + 1 :: 2]  # the human message after each "<image>"
    ref_turns = tuple(ReferenceTurn(path, text) for path, text in zip(refs, feedback))
    extra = {key: value for key, value in obj.items() if key not in FIELDS}
    return RetrievalSample(
        target_path=file_path,
        person_id=person_id(namespace, pid),
        dialogue=Dialogue(values[0], qa, ref_turns),
        extra=extra,
    )


def _message(msg: object, k: int, t: int, i: int, fail: Fail) -> str:
    """Check message ``k``: role by position, non-empty value, ``<image>`` exactly where due."""
    where = f"conversations[{k}]"
    if not isinstance(msg, dict):
        raise fail(where, f"expected a message object {{'from', 'value'}}, got {json_type(msg)}")
    if len(msg) != 2 or "from" not in msg or "value" not in msg:  # cheap test first: this runs per message
        for key in ("from", "value"):
            if key not in msg:
                raise fail(f"{where}.{key}", "required field is missing")
        unexpected = sorted(set(msg) - {"from", "value"})
        raise fail(
            where, f"unexpected key(s) {', '.join(map(repr, unexpected))}: a message has only 'from' and 'value'"
        )
    if k == 0:
        role, what = "human", "the description"
    elif k % 2:
        role, what = "gpt", "a question" if (k - 1) // 2 < t else "the '<image>' of an image turn"
    else:
        role, what = "human", "an answer" if (k - 1) // 2 < t else "feedback on a reference image"
    if msg["from"] != role:
        raise fail(f"{where}.from", f"expected {role!r} ({what}), got {short(msg['from'])}")
    value = _text(msg["value"], f"{where}.value", fail)
    if role == "gpt":
        turn = (k - 1) // 2  # 0-based pair index
        if turn >= t and value != IMAGE_TOKEN:
            raise fail(
                f"{where}.value",
                f"image turn {turn - t + 1} of {i}: the gpt message must be exactly "
                f"{IMAGE_TOKEN!r}, got {short(value)}",
            )
        if turn < t and value.strip() == IMAGE_TOKEN:
            raise fail(
                f"{where}.value",
                f"text turn {turn + 1} of {t} holds {IMAGE_TOKEN!r}: image turns "
                f"must be the last i_conversation_length={i} pairs",
            )
    return value


def _text(value: object, field: str, fail: Fail) -> str:
    if not isinstance(value, str):
        raise fail(field, f"expected a string, got {json_type(value)}")
    if not value.strip():
        raise fail(field, "empty string")
    return value


def _integer(value: object, field: str, fail: Fail, minimum: int | None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):  # JSON true/false parse as bool, an int subclass
        raise fail(field, f"expected an integer, got {json_type(value)}")
    if minimum is not None and value < minimum:
        raise fail(field, f"must be >= {minimum}, got {value}")
    return value


def _check_images(sample: RetrievalSample, checker: ImageChecker, file: str, line: int) -> None:
    why = checker.problem(sample.target_path)
    if why:
        raise DataError(file, line, "file_path", why)
    for k, turn in enumerate(sample.dialogue.reference_turns):
        why = checker.problem(turn.reference_path)
        if why:
            raise DataError(file, line, f"image[{k}]", why)


def iter_minterpedes(
    path: str | os.PathLike[str],
    *,
    namespace: str = DEFAULT_NAMESPACE,
    report: ReadReport | None = None,
    image_root: str | os.PathLike[str] | None = None,
    check_images: bool = False,
    allow_outside_root: bool = False,
) -> Iterator[RetrievalSample]:
    """Stream the samples of a MInterPEDES file, one line at a time (bounded memory).

    Without ``report`` the first bad record raises :class:`DataError`. With one, bad records are
    recorded and skipped, and once the last line is read the target images that do not occur
    exactly twice are added as warnings. ``check_images`` makes a missing target or reference
    image (under ``image_root``, default: the file's directory) an error of its record, as is
    an image path that leaves that root (unless ``allow_outside_root``).
    """
    file = str(path)
    checker = image_checker(path, image_root, check_images, allow_outside_root)
    target_lines: dict[str, list[int]] = {}  # file_path -> lines where it occurs (lenient only)
    for line, obj in iter_json_lines(path, report):
        if report is not None and isinstance(obj, dict):
            target = obj.get("file_path")
            if isinstance(target, str) and target.strip():
                target_lines.setdefault(target, []).append(line)
        try:
            sample = parse_record(obj, file, line, namespace)
            if checker is not None:
                _check_images(sample, checker, file, line)
        except DataError as exc:
            if report is None:
                raise
            report.add(exc)
            continue
        if report is not None:
            report.records_read += 1
        yield sample
    if report is not None:
        for target, lines in target_lines.items():
            if len(lines) != PAIRS_PER_TARGET:
                report.warn(DataError(file, lines[0], "file_path", _pair_warning(target, lines)))


def _pair_warning(target: str, lines: list[int]) -> str:
    shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
    times = "time" if len(lines) == 1 else "times"
    return (
        f"target image {short(target)} occurs {len(lines)} {times} (line{'s' if len(lines) > 1 else ''} {shown}); "
        f"MInterPEDES has exactly {PAIRS_PER_TARGET} dialogues per target image"
    )


@sample_reader
def read_minterpedes(
    path, *, namespace=DEFAULT_NAMESPACE, strict=True, image_root=None, check_images=False, allow_outside_root=False
):
    """Read a whole MInterPEDES file.

    ``strict=True`` (default) returns the list of samples and raises :class:`DataError` on the
    first bad record. ``strict=False`` returns a :class:`ReadResult` ``(records, report)``: the
    good samples and a report of every skipped record and every warning.
    """
    options = dict(
        namespace=namespace, image_root=image_root, check_images=check_images, allow_outside_root=allow_outside_root
    )
    if strict:
        return list(iter_minterpedes(path, **options))
    report = ReadReport(str(path))
    samples = list(iter_minterpedes(path, report=report, **options))
    return ReadResult(samples, report)


def to_record(sample: RetrievalSample, namespace: str = DEFAULT_NAMESPACE) -> dict[str, object]:
    """The MInterPEDES record of a sample: canonical fields in order, then the extras."""
    dialogue = sample.dialogue
    conversations: list[dict[str, str]] = [{"from": "human", "value": dialogue.description}]
    for qa in dialogue.qa_turns:
        conversations += [{"from": "gpt", "value": qa.question}, {"from": "human", "value": qa.answer}]
    for ref in dialogue.reference_turns:
        conversations += [{"from": "gpt", "value": IMAGE_TOKEN}, {"from": "human", "value": ref.feedback}]
    record: dict[str, object] = {
        "file_path": sample.target_path,
        "id": local_int_id(sample.person_id, namespace),
        "t_conversation_length": len(dialogue.qa_turns),
        "i_conversation_length": len(dialogue.reference_turns),
        "conversations": conversations,
        "image": [ref.reference_path for ref in dialogue.reference_turns],
    }
    clash = [key for key in sample.extra if key in record]
    if clash:
        raise ValueError(f"extra field(s) {clash} would overwrite MInterPEDES fields")
    record.update(sample.extra)
    return record


def write_minterpedes(
    samples: Iterable[RetrievalSample], path: str | os.PathLike[str], *, namespace: str = DEFAULT_NAMESPACE
) -> int:
    """Write samples as MInterPEDES JSON Lines (UTF-8, atomically); returns the number written.

    Every record is checked with the reader's own validation first, so whatever this writes
    reads back equal; a sample that could not (empty text, a question that is ``"<image>"``,
    a person id outside ``namespace`` or not an integer) raises ValueError naming it.
    """
    count = 0
    with atomic_writer(path) as f:
        for count, sample in enumerate(samples, start=1):
            where = f"sample {count} ({sample.target_path!r})"
            try:
                record = to_record(sample, namespace)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
            try:
                parse_record(record, str(path), count, namespace)
            except DataError as exc:
                raise ValueError(f"{where} is not valid MInterPEDES: {exc.field}: {exc.reason}") from None
            f.write(dumps_record(record, where))
            f.write("\n")
    return count
