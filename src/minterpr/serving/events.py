"""A session's event log and what it replays to.

Each move of a stored session is one event ``(seq, kind, payload)``. A turn's payload holds the
:class:`~minterpr.interaction.history.HistoryEntry` the session recorded for it (the turn and the
facts parsed from it) and the gallery positions it named; ``withdraw`` removes one fact of a turn;
``undo`` removes the last turn, or, recorded as ``{"action": "withdraw"}``, the last withdrawal;
``export`` changes nothing. :func:`fold` reduces the log to the conversation it leaves, and
:func:`replay` rebuilds that conversation as a fresh :class:`~minterpr.interaction.session.Session`
from the recorded facts — the plain reference the service's in-memory sessions are checked
against (they must rank exactly as their replay).

Uploaded example images are named in the payload by file name (``"upload"``) and found in the
session's upload folder when replayed, so a moved data folder replays too.

Example:
    >>> from minterpr.language.phrasing import Fact
    >>> from minterpr.types import DescriptionTurn
    >>> entry = HistoryEntry(DescriptionTurn("a man"), (Fact("gender", ("male",)),), ())
    >>> log = [Event(1, "describe", turn_payload(entry)), Event(2, "describe", turn_payload(entry)),
    ...        Event(3, "undo", {}), Event(4, "export", {})]
    >>> [(e.seq, h.turn.text) for h, e in fold(log, uploads=None)]
    [(1, 'a man')]
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from minterpr.errors import InputError, TurnError
from minterpr.language.phrasing import Fact
from minterpr.interaction.history import MODEL_USES, HistoryEntry, ModelFact
from minterpr.types import ExampleTurn

TURN_KINDS = ("describe", "answer", "feedback", "example", "confirm")  # events that add a turn
CONFIRM_TEXT = "Yes, this is the person."  # the feedback text a confirmation records
# the Session keywords a stored session may record (anything else in its options is ignored)
SESSION_OPTIONS = ("seed", "question_policy", "reference_policy", "num_references", "max_text_chars", "shortlist")


@dataclass(frozen=True)
class Event:
    """One stored move."""

    seq: int
    kind: str
    payload: Mapping[str, Any]
    user: str = ""
    time: float = 0.0


def turn_payload(entry: HistoryEntry, **extra: Any) -> dict[str, Any]:
    """The payload of a turn event: the recorded entry (without its top results) and ``extra``."""
    data = entry.to_dict()
    data["top"] = []  # recomputed by a replay; not part of what the user said
    return {"entry": data, **extra}


def fold(events: Iterable[Event], uploads: str | os.PathLike[str] | None) -> list[tuple[HistoryEntry, Event]]:
    """The turns the log leaves, oldest first, each with the event that made it; InputError for a
    log that is not a session's (an unknown kind, an undo with nothing to undo, a malformed entry)."""
    stack: list[tuple[HistoryEntry, Event]] = []
    withdrawals: list[tuple[int, HistoryEntry]] = []  # (turn, its entry before) of each withdrawal not undone
    for event in events:
        if event.kind in TURN_KINDS:
            try:
                entry = HistoryEntry.from_dict(event.payload["entry"])
            except (KeyError, TypeError) as err:
                raise InputError(f"event {event.seq}: no recorded entry ({err})") from None
            upload = event.payload.get("upload")
            if upload is not None:
                if uploads is None or not isinstance(upload, str) or Path(upload).name != upload:
                    raise InputError(f"event {event.seq}: an uploaded image {upload!r} without an upload folder")
                entry = entry._replace(turn=ExampleTurn(os.fspath(Path(uploads) / upload)))
            stack.append((entry, event))
        elif event.kind == "undo" and event.payload.get("action") == "withdraw":
            if not withdrawals or withdrawals[-1][0] >= len(stack):
                raise InputError(f"event {event.seq}: undo of a withdrawal with none to undo")
            k, before = withdrawals.pop()
            stack[k] = (before, stack[k][1])
        elif event.kind == "undo":
            if not stack:
                raise InputError(f"event {event.seq}: undo with no turn to undo")
            stack.pop()
        elif event.kind == "withdraw":
            k, named = withdrawn(event, len(stack))
            entry, made = stack[k]
            fact = recorded_fact(entry.facts, named)
            if fact is None:
                raise InputError(f"event {event.seq}: turn {k} recorded no fact {named!r}")
            withdrawals.append((k, entry))
            stack[k] = (entry._replace(facts=tuple(f for f in entry.facts if f != fact)), made)
        elif event.kind != "export":
            raise InputError(f"event {event.seq}: unknown kind {event.kind!r}")
    return stack


def last_action(events: Iterable[Event]) -> str | None:
    """What an undo now takes back: ``"withdraw"`` (a fact removal) or ``"turn"``; None when nothing is left.
    An undo recorded with ``{"action": "withdraw"}`` took back the last withdrawal; a plain one, the last turn.

    Example:
        >>> log = [Event(1, "describe", {}), Event(2, "withdraw", {}), Event(3, "undo", {"action": "withdraw"})]
        >>> last_action(log[:2]), last_action(log), last_action(log + [Event(4, "undo", {})])
        ('withdraw', 'turn', None)
    """
    actions: list[str] = []
    for event in events:
        if event.kind in TURN_KINDS or event.kind == "withdraw":
            actions.append("turn" if event.kind in TURN_KINDS else "withdraw")
        elif event.kind == "undo" and actions:
            kind = "withdraw" if event.payload.get("action") == "withdraw" else "turn"
            k = max(j for j in range(len(actions)) if actions[j] == kind) if kind in actions else len(actions) - 1
            actions.pop(k)
    return actions[-1] if actions else None


def withdraw_payload(turn: int, fact: Fact) -> dict[str, Any]:
    """The payload of a ``withdraw`` event: the turn (0-based) and the fact withdrawn from it (a model's
    fact with its use as a 4th item, as a recorded entry writes it).

    Example:
        >>> withdraw_payload(0, ModelFact("carried", ("umbrella",)))
        {'turn': 0, 'fact': ['carried', ['umbrella'], False, 'reading']}
    """
    use = (
        ([fact.use, fact.image] if fact.use == "anchor" and fact.image else [fact.use])
        if isinstance(fact, ModelFact)
        else []
    )  # an anchor reading with the image it was seen on
    return {"turn": int(turn), "fact": [fact.slot, list(fact.values), bool(fact.negated), *use]}


def recorded_fact(facts: Iterable[Fact], fact: Fact) -> Fact | None:
    """The fact of a turn's ``facts`` a withdrawal names: equal to it, else (a withdrawal recorded without
    the fact's source, before model facts carried theirs) the one with its slot, values and negation.

    Example:
        >>> said = (Fact("gender", ("male",)), ModelFact("carried", ("umbrella",)))
        >>> recorded_fact(said, Fact("carried", ("umbrella",)))
        ModelFact(slot='carried', values=('umbrella',), negated=False, use='reading')
    """
    facts = tuple(facts)
    if fact in facts:
        return fact
    same = (fact.slot, fact.values, fact.negated)
    return next((f for f in facts if (f.slot, f.values, f.negated) == same), None)


def withdrawn(event: Event, turns: int) -> tuple[int, Fact]:
    """(turn, fact) of a ``withdraw`` event; InputError naming the event when it is malformed."""
    try:
        turn, item = event.payload["turn"], event.payload["fact"]
        slot, values, negated, *use = item
        if len(use) > 2 or (use and use[0] not in MODEL_USES) or (len(use) == 2 and use[0] != "anchor"):
            raise ValueError(
                f"a fact is [slot, [values], negated] (+ {' or '.join(MODEL_USES)}, + the image for "
                f"anchor), got {item!r}"
            )
        fact = Fact(str(slot), tuple(str(v) for v in values), bool(negated))
        if use:
            fact = ModelFact(fact.slot, fact.values, fact.negated, use[0], str(use[1]) if len(use) == 2 else "")
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"event {event.seq}: a malformed withdraw ({err})") from None
    if isinstance(turn, bool) or not isinstance(turn, int) or not 0 <= turn < turns:
        raise InputError(f"event {event.seq}: withdraw names turn {turn!r} of {turns}")
    return turn, fact


def session_options(
    options: Mapping[str, Any], reranking: Any, evidence: Any = None, match_temperature: float | None = None
) -> dict[str, Any]:
    """Session keywords of a stored session: its recorded options, the run's scoring (``reranking``),
    evidence policy (``evidence``, how its explanations mark facts) and match temperature (None: the
    default), and external example images allowed (the service names them itself: uploads it
    stored, never a caller's path)."""
    from minterpr.interaction.shortlist import ShortlistConfig

    chosen = {k: v for k, v in options.items() if k in SESSION_OPTIONS}
    # the shortlist a session was started with; a session stored before the record existed ran the
    # cosine shortlist, which is what an empty record reads as: replays rank as the session did
    chosen["shortlist"] = ShortlistConfig.from_dict(options.get("shortlist") or {})
    if match_temperature is not None:  # the model's, not the session's record: it follows the model served
        chosen["match_temperature"] = match_temperature
    return {**chosen, "reranking": reranking, "evidence": evidence, "allow_external_images": True}


def replay(
    events: Iterable[Event],
    backend: Any,
    index: Any,
    options: Mapping[str, Any],
    reranking: Any,
    uploads: str | os.PathLike[str] | None,
    evidence: Any = None,
    match_temperature: float | None = None,
) -> Any:
    """A fresh Session over ``backend`` and ``index`` rebuilt from the log (recorded facts, not
    re-parsed); TurnError names the event that could not be replayed (an image removed since, ...)."""
    from minterpr.interaction.session import Session

    turns = fold(events, uploads)
    session = Session(backend, index, **session_options(options, reranking, evidence, match_temperature))
    for entry, event in turns:
        try:
            session.add(
                entry.turn, facts=entry.facts, shown=entry.shown, model_scores=event.payload.get("model_scores", ())
            )
        except TurnError as err:
            raise TurnError(f"event {event.seq} ({event.kind}): {err}") from err
    return session
