"""How well the reader reads corrective feedback: fact precision, recall and F1 on hand-labelled
utterances said while ruling out a shown image, scored separately for the facts about the person
sought (``target``) and those about the shown image (``shown``).

The labels (``tests/data/corrective_utterances.jsonl``, rules in ``tests/data/README.md``) were
written by reading each utterance, before the reader was changed. A line holds ``id``, ``kind``
(contrast, deixis, hedge, comparison, mixed), ``part`` (tune / heldout, as for the captions),
``text`` and the two fact lists in the caption labels' notation (``slot=a|b``, ``slot!=a``).
Scores count exact facts, as :func:`~minterpr.data.parser_eval.evaluate_parser` does.

Example:
    >>> from minterpr.data.parser_eval import parse_fact_label
    >>> item = LabelledUtterance("u1", "deixis", "tune", "his shoes were brown, these are blue",
    ...                          (parse_fact_label("footwear_colour=brown"),), (parse_fact_label("footwear_colour=blue"),))
    >>> scores = evaluate_feedback([item])
    >>> scores["target"].micro.recall, scores["shown"].micro.f1
    (1.0, 1.0)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from minterpr.data.errors import DataError
from minterpr.data.formats.jsonl import iter_json_lines
from minterpr.data.parser_eval import PARTS, ParserEvaluation, evaluate_parser, parse_fact_label
from minterpr.language.phrasing import Fact
from minterpr.language.feedback_reading import Reading, read_feedback

KINDS = ("contrast", "deixis", "hedge", "comparison", "mixed")  # what each utterance was written to test
SIDES = ("target", "shown")  # whom a fact is about: the person sought, the image shown
_FIELDS = {"id": str, "kind": str, "part": str, "text": str, "target": list, "shown": list}


@dataclass(frozen=True)
class LabelledUtterance:
    """One corrective utterance and the facts a careful reader finds in it."""

    id: str  # "u001"
    kind: str  # one of KINDS
    part: str  # one of PARTS
    text: str  # what the user typed while ruling out a shown image
    target: tuple[Fact, ...]  # facts about the person sought
    shown: tuple[Fact, ...]  # facts about the image shown
    line: int = 0  # line of the labels file (for messages)

    @property
    def facts(self) -> tuple[Fact, ...]:
        """The target's facts (the field :func:`evaluate_parser` scores)."""
        return self.target


def read_labelled_utterances(path: str | Path) -> list[LabelledUtterance]:
    """Read a labels file (JSON Lines); a bad record raises DataError naming file, line and field."""
    file = str(path)
    out: list[LabelledUtterance] = []
    for line, row in iter_json_lines(path, None):
        if not isinstance(row, dict):
            raise DataError(file, line, "<record>", "expected a JSON object")
        for name, kind in _FIELDS.items():
            if not isinstance(row.get(name), kind):
                raise DataError(file, line, name, f"missing or not a {kind.__name__}")
        for name, allowed in (("part", PARTS), ("kind", KINDS)):
            if row[name] not in allowed:
                raise DataError(file, line, name, f"{row[name]!r} is not one of {', '.join(allowed)}")
        sides = {}
        for side in SIDES:
            facts = []
            for k, text in enumerate(row[side]):
                try:
                    facts.append(parse_fact_label(text))
                except ValueError as exc:
                    raise DataError(file, line, f"{side}[{k}]", str(exc)) from None
            sides[side] = tuple(facts)
        out.append(
            LabelledUtterance(row["id"], row["kind"], row["part"], row["text"], sides["target"], sides["shown"], line)
        )
    return out


def evaluate_feedback(
    items: Sequence[LabelledUtterance], *, read: Callable[[str], Reading] = read_feedback
) -> dict[str, ParserEvaluation]:
    """Scores of ``read`` on each side: {"target": ..., "shown": ...} (each text read once)."""
    readings = {item.text: read(item.text) for item in items}
    texts = [item.text for item in items]
    shown_items = [dataclasses.replace(item, target=item.shown) for item in items]
    return {
        "target": evaluate_parser(items, texts, parse=lambda t: readings[t].target),
        "shown": evaluate_parser(shown_items, texts, parse=lambda t: readings[t].shown),
    }
