"""ChatPedes (DiaNA, CVPR 2025) dialogue annotations: one JSON array of records.

A record is ``{"id": int, "file_path": str, "chats": ...}`` over CUHK-PEDES images. As the
released loader reads it, ``chats`` is either one dialogue or a list of dialogues, and a
dialogue is a list of *rounds*, each round ``[{"from": "gpt", ...}, {"from": "user", ...}]``:
the system's question, then the user's answer. Every round starts with ``gpt``, so round 0 is
an opening question ("Please describe the person you saw.") answered by the user's initial
description; rounds 1.. are the text Q&A turns. ChatPedes has no reference-image turns.

Accepted shapes of ``chats`` (told apart by nesting depth):

* ``[[gpt, user], [gpt, user], ...]``: one dialogue of rounds (the released shape);
* ``[[[gpt, user], ...], [[gpt, user], ...]]``: several dialogues of rounds, one sample each;
* ``[msg, msg, ...]``: one flat dialogue of messages, grouped into rounds by role.

Round 0 may also be ``[user]`` alone (a description with no opening question). The opening
question is kept in ``extra["opening_question"]`` unless it is :data:`DEFAULT_OPENING` (which
the writer puts back when the key is absent), so read -> write -> read gives equal samples.
Other record fields are kept in ``extra`` and written back. Problems name the real line where
the record starts (the array is parsed one record at a time), the field as a JSON path such as
``chats[1][0].from``, and the record's 1-based number in the reason.

Example:
    >>> import os, tempfile
    >>> from minterpr.types import Dialogue, QATurn, RetrievalSample
    >>> sample = RetrievalSample("CUHK01/0001.png", "chatpedes:1", Dialogue(
    ...     "a woman in a long white dress", (QATurn("Is she carrying anything?", "a brown handbag"),)))
    >>> path = os.path.join(tempfile.mkdtemp(), "test_reid.json")
    >>> write_chatpedes([sample], path)
    1
    >>> read_chatpedes(path) == [sample]
    True
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, Iterator

from minterpr.data.errors import DataError, ReadReport
from minterpr.data.formats.jsonl import (
    RECORD,
    ReadResult,
    atomic_writer,
    dumps_record,
    image_checker,
    iter_json_array,
    json_type,
    local_int_id,
    route,
    short,
)
from minterpr.data.formats.reading import sample_reader
from minterpr.types import Dialogue, QATurn, RetrievalSample, person_id

FIELDS = ("id", "file_path", "chats")
DEFAULT_NAMESPACE = "chatpedes"
DEFAULT_OPENING = "Please describe the person you saw."
OPENING_KEY = "opening_question"  # extra key holding a non-default opening question
ROLES = ("gpt", "user")

Fail = Callable[[str, str], DataError]  # (field, reason) -> the error for the current record


def _dialogues(chats: object, fail: Fail) -> list[list[list[tuple[str, object]]]]:
    """Split ``chats`` into dialogues of rounds of ``(json_path, message)``."""
    if not isinstance(chats, list) or not chats:
        raise fail("chats", f"expected a non-empty array (a dialogue or a list of dialogues), got {short(chats, 30)}")
    first = chats[0]
    if isinstance(first, dict):  # one flat dialogue
        return [_flat_rounds(chats, "chats", fail)]
    if not isinstance(first, list) or not first:
        raise fail("chats[0]", f"expected a round (array of messages) or a message, got {short(first, 30)}")
    if isinstance(first[0], dict):  # one dialogue of rounds
        return [_rounds(chats, "chats", fail)]
    return [_rounds(dialogue, f"chats[{d}]", fail) for d, dialogue in enumerate(chats)]


def _rounds(rounds: object, where: str, fail: Fail) -> list[list[tuple[str, object]]]:
    if not isinstance(rounds, list) or not rounds:
        raise fail(where, f"expected a non-empty array of rounds, got {short(rounds, 30)}")
    out = []
    for r, messages in enumerate(rounds):
        if not isinstance(messages, list) or not messages:
            raise fail(f"{where}[{r}]", f"expected a round: an array of messages, got {short(messages, 30)}")
        out.append([(f"{where}[{r}][{m}]", msg) for m, msg in enumerate(messages)])
    return out


def _flat_rounds(messages: list[object], where: str, fail: Fail) -> list[list[tuple[str, object]]]:
    """Group a flat message list into rounds: ``[user]`` first when it starts with the user."""
    items = [(f"{where}[{m}]", msg) for m, msg in enumerate(messages)]
    for path, msg in items:
        if not isinstance(msg, dict):
            raise fail(path, f"expected a message object, got {json_type(msg)}")
    start = 1 if items[0][1].get("from") == "user" else 0  # type: ignore[union-attr]
    rounds = [items[:1]] if start else []
    rounds += [items[k : k + 2] for k in range(start, len(items), 2)]
    return rounds


def _message(path: str, msg: object, fail: Fail) -> tuple[str, str]:
    if not isinstance(msg, dict):
        raise fail(path, f"expected a message object {{'from', 'value'}}, got {json_type(msg)}")
    for key in ("from", "value"):
        if key not in msg:
            raise fail(f"{path}.{key}", "required field is missing")
    unexpected = sorted(set(msg) - {"from", "value"})
    if unexpected:
        raise fail(path, f"unexpected key(s) {', '.join(map(repr, unexpected))}: a message has only 'from' and 'value'")
    role, value = msg["from"], msg["value"]
    if role not in ROLES:
        raise fail(f"{path}.from", f"expected 'gpt' or 'user', got {short(role)}")
    if not isinstance(value, str):
        raise fail(f"{path}.value", f"expected a string, got {json_type(value)}")
    if not value.strip():
        raise fail(f"{path}.value", "empty string")
    return role, value


def _dialogue(rounds: list[list[tuple[str, object]]], fail: Fail) -> tuple[Dialogue, str | None]:
    """Check the roles round by round and build the dialogue; returns it and the opening question."""
    texts: list[list[str]] = []
    for r, messages in enumerate(rounds):
        parsed = [_message(path, msg, fail) for path, msg in messages]
        roles = [role for role, _ in parsed]
        # Only round 0 may be the user's description alone.
        expected = ["user"] if r == 0 and roles == ["user"] else ["gpt", "user"]
        for (path, _), role, want in zip(messages, roles, expected):
            if role != want:
                raise fail(
                    f"{path}.from",
                    f"expected {want!r} (a round is the gpt question, then the user's answer), got {role!r}",
                )
        if len(messages) > len(expected):
            raise fail(
                messages[len(expected)][0],
                f"unexpected message: round {r} already has the gpt question and the user's answer",
            )
        if len(messages) < len(expected):
            raise fail(messages[-1][0], f"round {r} ends after the gpt question: the user's answer is missing")
        texts.append([value for _, value in parsed])
    opening = texts[0][0] if len(texts[0]) == 2 else None
    qa = tuple(QATurn(question, answer) for question, answer in texts[1:])
    return Dialogue(texts[0][-1], qa), opening


def parse_record(
    obj: object, file: str, line: int, number: int, namespace: str = DEFAULT_NAMESPACE
) -> list[RetrievalSample]:
    """Validate one record and map it to one sample per dialogue; raises DataError."""

    def fail(field: str, reason: str) -> DataError:
        return DataError(file, line, field, f"{reason} (record {number})")

    if not isinstance(obj, dict):
        raise fail(RECORD, f"expected a JSON object, got {json_type(obj)}")
    missing = [name for name in FIELDS if name not in obj]
    if missing:
        raise fail(missing[0], "required field is missing")
    if OPENING_KEY in obj:
        raise fail(OPENING_KEY, "reserved: minterpr keeps a dialogue's opening question under this name")
    pid, target = obj["id"], obj["file_path"]
    if not isinstance(pid, int) or isinstance(pid, bool):
        raise fail("id", f"expected an integer, got {json_type(pid)}")
    if not isinstance(target, str) or not target.strip():
        raise fail("file_path", f"expected a non-empty string, got {short(target, 30)}")
    extra = {key: value for key, value in obj.items() if key not in FIELDS}
    samples = []
    for rounds in _dialogues(obj["chats"], fail):
        dialogue, opening = _dialogue(rounds, fail)
        sample_extra = dict(extra)
        if opening is not None and opening != DEFAULT_OPENING:
            sample_extra[OPENING_KEY] = opening
        samples.append(RetrievalSample(target, person_id(namespace, pid), dialogue, sample_extra))
    return samples


def iter_chatpedes(
    path: str | os.PathLike[str],
    *,
    namespace: str = DEFAULT_NAMESPACE,
    report: ReadReport | None = None,
    image_root: str | os.PathLike[str] | None = None,
    check_images: bool = False,
    allow_outside_root: bool = False,
) -> Iterator[RetrievalSample]:
    """Yield the samples of a ChatPedes file, one per dialogue.

    Without ``report`` the first bad record raises :class:`DataError`; with one, bad records are
    recorded and skipped. ``check_images`` makes a missing ``file_path`` (under ``image_root``,
    default: the file's directory) an error of its record, as is one that leaves that root
    (unless ``allow_outside_root``).
    """
    file = str(path)
    checker = image_checker(path, image_root, check_images, allow_outside_root)
    for line, number, obj in iter_json_array(path, report):
        try:
            samples = parse_record(obj, file, line, number, namespace)
            why = checker.problem(samples[0].target_path) if checker is not None else None
            if why:
                raise DataError(file, line, "file_path", why)
        except DataError as exc:
            route(exc, report)
            continue
        if report is not None:
            report.records_read += len(samples)
        yield from samples


@sample_reader
def read_chatpedes(
    path, *, namespace=DEFAULT_NAMESPACE, strict=True, image_root=None, check_images=False, allow_outside_root=False
):
    """Read a ChatPedes file: a list of samples (strict, raises on the first bad record) or,
    with ``strict=False``, a :class:`ReadResult` ``(records, report)``."""
    options = dict(
        namespace=namespace, image_root=image_root, check_images=check_images, allow_outside_root=allow_outside_root
    )
    if strict:
        return list(iter_chatpedes(path, **options))
    report = ReadReport(str(path))
    samples = list(iter_chatpedes(path, report=report, **options))
    return ReadResult(samples, report)


def _rounds_of(sample: RetrievalSample) -> list[list[dict[str, str]]]:
    opening = sample.extra.get(OPENING_KEY, DEFAULT_OPENING)
    rounds = [[{"from": "gpt", "value": opening}, {"from": "user", "value": sample.dialogue.description}]]
    for qa in sample.dialogue.qa_turns:
        rounds.append([{"from": "gpt", "value": qa.question}, {"from": "user", "value": qa.answer}])
    return rounds


def _record_extra(sample: RetrievalSample) -> dict[str, object]:
    return {key: value for key, value in sample.extra.items() if key != OPENING_KEY}


def write_chatpedes(
    samples: Iterable[RetrievalSample], path: str | os.PathLike[str], *, namespace: str = DEFAULT_NAMESPACE
) -> int:
    """Write samples as a ChatPedes JSON array (one record per line, atomically); returns the
    number of dialogues written.

    Consecutive samples with the same target, person and record-level extras become one record
    with a list of dialogues; a lone one is written in the single-dialogue shape. Reference
    turns cannot be expressed in ChatPedes: a sample with any raises ValueError, as does any
    record the reader would reject.
    """
    groups: list[list[RetrievalSample]] = []
    for sample in samples:
        key = (sample.person_id, sample.target_path, _record_extra(sample))
        if groups and (groups[-1][0].person_id, groups[-1][0].target_path, _record_extra(groups[-1][0])) == key:
            groups[-1].append(sample)
        else:
            groups.append([sample])
    with atomic_writer(path) as f:
        f.write("[")
        for number, group in enumerate(groups, start=1):
            first = group[0]
            where = f"record {number} ({first.target_path!r})"
            if any(s.dialogue.reference_turns for s in group):
                raise ValueError(f"{where}: ChatPedes has no reference-image turns")
            try:
                pid = local_int_id(first.person_id, namespace)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
            extra = _record_extra(first)
            clash = [key for key in extra if key in FIELDS]
            if clash:
                raise ValueError(f"{where}: extra field(s) {clash} would overwrite ChatPedes fields")
            chats = _rounds_of(first) if len(group) == 1 else [_rounds_of(s) for s in group]
            record = {"id": pid, "file_path": first.target_path, "chats": chats, **extra}
            try:
                parse_record(record, str(path), number, number, namespace)
            except DataError as exc:
                raise ValueError(f"{where} is not valid ChatPedes: {exc.field}: {exc.reason}") from None
            f.write(("\n" if number == 1 else ",\n") + dumps_record(record, where))
        f.write("\n]\n")
    return sum(len(group) for group in groups)
