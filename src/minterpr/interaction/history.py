"""A session's history as plain JSON: one entry per turn, saved atomically, read back with checks.

A :class:`HistoryEntry` is what a session records for each turn: the turn, the facts it
asserted and the top results after it. :func:`write_history` saves a list of entries as

    {"format": "minterpr-session-history", "version": 1, "session": {...settings...},
     "turns": [{"type": "description", "text": ..., "facts": [[slot, [values], negated]], "top": [...],
                "shown": [...], "understood": true}, ...]}

through :mod:`minterpr.fileio` (the file is complete or absent, never half written), and
:func:`read_history` reads it back; every problem raises :class:`~minterpr.data.errors.DataError`
``FILE:0: turns[K].FIELD: reason`` (not line-based: the entry and field name the spot).
:meth:`Session.replay <minterpr.interaction.session.Session.replay>` rebuilds the session.

Example:
    >>> import tempfile, os
    >>> from minterpr.types import DescriptionTurn
    >>> path = os.path.join(tempfile.mkdtemp(), "chat.json")
    >>> entry = HistoryEntry(DescriptionTurn("a woman"), (Fact("gender", ("female",)),), (1, 2))
    >>> _ = write_history(path, [entry])
    >>> read_history(path) == [entry]
    True
    >>> HistoryEntry.from_dict({"type": "qa", "question": "Hair?"})
    Traceback (most recent call last):
    ...
    minterpr.errors.InputError: history entry: answer: missing
"""

from __future__ import annotations

import json
import os
import reprlib
from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple, Sequence

from minterpr.data.errors import DataError
from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.errors import InputError
from minterpr.fileio import atomic_write_text
from minterpr.language.dialogue_acts import understood
from minterpr.types import DescriptionTurn, ExampleTurn, QATurn, ReferenceTurn, Turn

HISTORY_FORMAT = "minterpr-session-history"
HISTORY_VERSION = 1
MAX_HISTORY_BYTES = 64 * 1024 * 1024  # a long conversation is a few hundred kilobytes
_KINDS: dict[str, type] = {
    "description": DescriptionTurn,
    "qa": QATurn,
    "reference": ReferenceTurn,
    "example": ExampleTurn,
}
_FIELDS = {
    "description": ("text",),
    "qa": ("question", "answer"),
    "reference": ("reference_path", "feedback"),
    "example": ("image_path",),
}
_NAMES = {cls: name for name, cls in _KINDS.items()}


class _Bad(Exception):
    """One problem in an entry: the field at fault and why."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(field, reason)
        self.field, self.reason = field, reason


@dataclass(frozen=True)
class ModelFact(Fact):
    """A fact a vision-language model contributed (minterpr.vlm); its source shows as "vlm"."""

    use: str = "reading"  # "reading" (the user's words, read by the model) or "anchor" (seen on the anchor image)
    # use "anchor": the gallery path of the image it was seen on. Such a fact is evidence about that image,
    # and about the person sought only once the user confirms that image (interaction/vlm_turn.py)
    image: str = field(default="", repr=False)


MODEL_USES = ("reading", "anchor")


def fact_source(fact: Fact) -> str:
    """Where a fact came from: "vlm" (the model) or "rule" (the rule reader), for the page and the chat.

    Example:
        >>> fact_source(Fact("gender", ("male",))), fact_source(ModelFact("gender", ("male",)))
        ('rule', 'vlm')
    """
    return "vlm" if isinstance(fact, ModelFact) else "rule"


def describe_said(fact: Fact) -> str:
    """A turn's fact as the page's chips and the chat show it: a model's marked as such (read in the
    user's words, or seen by the model on the anchor image, which nobody said).

    Example:
        >>> describe_said(Fact("gender", ("male",))), describe_said(ModelFact("upper_colour", ("red",)))
        ('gender: male', 'top colour: red (read by the model)')
        >>> describe_said(ModelFact("gender", ("male",), use="anchor"))
        'gender: male (seen by the model in the anchor image)'
    """
    from minterpr.interaction.explain import describe_fact

    if fact_source(fact) != "vlm":
        return describe_fact(fact)
    seen = getattr(fact, "use", "reading") == "anchor"
    return describe_fact(fact) + (" (seen by the model in the anchor image)" if seen else " (read by the model)")


def said_facts(history: Sequence["HistoryEntry"]) -> list[tuple[int, Fact]]:
    """Every fact the conversation recorded, as (turn, fact) in order: what a user may withdraw
    (``Session.withdraw_fact(turn, fact)``; the chat's ``:facts`` numbers them from 1).

    Example:
        >>> from minterpr.types import DescriptionTurn
        >>> said_facts([HistoryEntry(DescriptionTurn("a man"), (Fact("gender", ("male",)),), ()),
        ...             HistoryEntry(DescriptionTurn("hmm"), (ModelFact("carried", ("umbrella",)),), ())])
        [(0, Fact(slot='gender', values=('male',), negated=False)), (1, ModelFact(slot='carried', values=('umbrella',), negated=False, use='reading'))]
    """
    return [(k, fact) for k, entry in enumerate(history) for fact in entry.facts]


class HistoryEntry(NamedTuple):
    """One turn of a session: what the user said, what it asserted, and the top results after it."""

    turn: Turn
    facts: tuple[Fact, ...]  # about the person sought
    top: tuple[int, ...]  # gallery indices of the best results after this turn
    shown: tuple[Fact, ...] = ()  # feedback only: facts said of the image shown ("these are blue"), not the target's
    # gallery indices of the references the system showed after this turn (its next move); later steps
    # offer other images first, as the user has seen these (interaction/policies.py)
    offered: tuple[int, ...] = ()

    @property
    def understood(self) -> bool:
        """Did the system take anything from the turn? (see :func:`~minterpr.language.dialogue_acts.understood`)"""
        return understood(self.turn, self.facts, self.shown)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: {"type", turn fields..., "facts": [[slot, [values], negated]], "top": [...], "shown": [...]
        (the shown image's facts, same form), "offered": [...] (the references shown next), "understood":
        bool (derived, for the page; ignored when read)}."""
        data: dict[str, Any] = {"type": _NAMES[type(self.turn)], **self.turn.__dict__}
        data["facts"] = [
            [f.slot, list(f.values), f.negated, *_model_items(f)] for f in self.facts
        ]  # a model's fact carries its use (and anchor image) as 4th (5th) items
        data["top"] = list(self.top)
        data["shown"] = [[f.slot, list(f.values), f.negated] for f in self.shown]
        data["offered"] = list(self.offered)
        data["understood"] = self.understood
        return data

    @classmethod
    def from_dict(cls, data: Any) -> "HistoryEntry":
        """Inverse of :meth:`to_dict`; InputError ``history entry: FIELD: reason`` for bad input."""
        try:
            return _parse_entry(data)
        except _Bad as bad:
            raise InputError(f"history entry: {bad.field}: {bad.reason}") from None


def _model_items(fact: Fact) -> list[str]:
    """A model's fact's use, and for the anchor use the image it was seen on (the 4th and 5th items)."""
    if not isinstance(fact, ModelFact):
        return []
    return [fact.use, fact.image] if fact.use == "anchor" and fact.image else [fact.use]


def _parse_fact(item: Any, k: int) -> Fact:
    where = f"facts[{k}]"
    if (
        not isinstance(item, (list, tuple))
        or len(item) not in (3, 4, 5)
        or (len(item) >= 4 and item[3] not in MODEL_USES)
        or (len(item) == 5 and (item[3] != "anchor" or not isinstance(item[4], str)))
    ):
        raise _Bad(
            where,
            f"expected [slot, [values], negated] (+ reading|anchor for a model's fact, + the image "
            f"path for anchor), got {_short(item)}",
        )
    slot, values, negated = item[:3]
    if not isinstance(slot, str) or slot not in ONTOLOGY.slot_names:
        raise _Bad(where, f"unknown slot {_short(slot)}")
    known = ONTOLOGY.slot(slot).value_names
    valid = isinstance(values, (list, tuple)) and values and all(isinstance(v, str) and v in known for v in values)
    if not valid:
        raise _Bad(
            where, f"values of slot {slot!r} must be a non-empty list of {', '.join(known)}; got {_short(values)}"
        )
    if not isinstance(negated, bool):
        raise _Bad(where, f"negated must be true or false, got {_short(negated)}")
    if len(item) == 3:
        return Fact(slot, tuple(values), negated)
    return ModelFact(slot, tuple(values), negated, item[3], item[4] if len(item) == 5 else "")


def _parse_entry(data: Any) -> HistoryEntry:
    if not isinstance(data, Mapping):
        raise _Bad("<entry>", f"expected an object, got {type(data).__name__}")
    kind = data.get("type")
    if kind not in _KINDS:
        raise _Bad("type", f"expected one of {', '.join(_KINDS)}, got {_short(kind)}")
    names = _FIELDS[kind]
    unknown = sorted(set(data) - {"type", "facts", "top", "shown", "offered", "understood", *names})
    if unknown:
        raise _Bad(
            unknown[0],
            f"unknown field for a {kind} turn (expected {', '.join(names)}, facts, top, shown, offered, understood)",
        )
    for name in (*names, "facts", "top"):
        if name not in data:
            raise _Bad(name, "missing")
    for name in names:
        if not isinstance(data[name], str):
            raise _Bad(name, f"expected a string, got {type(data[name]).__name__}")
    if not isinstance(data["facts"], list):
        raise _Bad("facts", f"expected a list, got {type(data['facts']).__name__}")
    facts = tuple(_parse_fact(item, k) for k, item in enumerate(data["facts"]))
    shown_items = data.get("shown", [])  # absent in histories written before shown-image facts were kept
    if not isinstance(shown_items, list):
        raise _Bad("shown", f"expected a list, got {type(shown_items).__name__}")
    try:
        shown = tuple(_parse_fact(item, k) for k, item in enumerate(shown_items))
    except _Bad as bad:
        raise _Bad(f"shown{bad.field[len('facts') :]}", bad.reason) from None
    if "understood" in data and not isinstance(data["understood"], bool):
        raise _Bad("understood", f"expected true or false, got {_short(data['understood'])}")
    top = _indices("top", data["top"])
    offered = _indices("offered", data.get("offered", []))  # absent in histories written before it was kept
    return HistoryEntry(_KINDS[kind](**{name: data[name] for name in names}), facts, top, shown, offered)


def _indices(name: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value):
        raise _Bad(name, f"expected a list of gallery indices (integers >= 0), got {_short(value)}")
    return tuple(value)


def _short(value: Any) -> str:
    return reprlib.repr(value)  # bounded in length and depth, whatever the file holds


def write_history(
    path: str | os.PathLike[str], history: Sequence[HistoryEntry], session: Mapping[str, Any] | None = None
) -> str:
    """Save ``history`` (and the session's settings, for the record) atomically; returns the path."""
    document = {
        "format": HISTORY_FORMAT,
        "version": HISTORY_VERSION,
        "session": dict(session or {}),
        "turns": [entry.to_dict() for entry in history],
    }
    # ensure_ascii: a path kept with surrogate escapes (undecodable bytes) still writes as JSON
    atomic_write_text(path, json.dumps(document, indent=1, ensure_ascii=True) + "\n")
    return os.fspath(path)


def read_history(path: str | os.PathLike[str]) -> list[HistoryEntry]:
    """The entries saved by :func:`write_history`; DataError ``FILE:LINE: FIELD: reason`` otherwise."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            raw = f.read(MAX_HISTORY_BYTES + 1)
    except OSError as err:
        raise DataError(name, 0, "<file>", f"cannot read: {err.strerror or err}") from err
    if len(raw) > MAX_HISTORY_BYTES:
        raise DataError(name, 0, "<file>", f"larger than {MAX_HISTORY_BYTES // 2**20} MiB; not a session history")
    try:
        document = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise DataError(name, raw.count(b"\n", 0, err.start) + 1, "<file>", "not UTF-8 text") from None
    except json.JSONDecodeError as err:
        raise DataError(name, err.lineno, "<file>", f"not JSON: {err.msg}") from None
    except RecursionError:
        raise DataError(name, 0, "<file>", "JSON nested too deeply") from None
    if not isinstance(document, dict) or document.get("format") != HISTORY_FORMAT:
        raise DataError(name, 0, "format", f'not a session history (expected "format": "{HISTORY_FORMAT}")')
    if document.get("version") != HISTORY_VERSION:
        raise DataError(
            name,
            0,
            "version",
            f"unsupported version {_short(document.get('version'))} (this minterpr reads version {HISTORY_VERSION})",
        )
    turns = document.get("turns")
    if not isinstance(turns, list):
        raise DataError(name, 0, "turns", "expected a list of turns")
    entries = []
    for k, item in enumerate(turns):
        try:
            entries.append(_parse_entry(item))
        except _Bad as bad:
            raise DataError(name, 0, f"turns[{k}].{bad.field}", bad.reason) from None
    return entries
