"""Corrections: a later fact that takes back an earlier one replaces it.

"a pink top" then "red, not pink" leaves one colour for the top: the later "not pink" *replaces*
the earlier "pink" (it is no longer evidence), and "red" stands. A fact is replaced by any later
fact of the same slot that shares a value and says the opposite (a denial of what was affirmed, or
an affirmation of what was denied: "no hat" then "she did wear a hat"). Nothing is deleted: the
conversation keeps every fact as said, the session scores only the active ones, and the page shows
the replaced ones struck through (a replaced fact comes back when the fact that replaced it is
withdrawn).

Example:
    >>> from minterpr.language.phrasing import Fact
    >>> said = [Fact("upper_colour", ("pink",)), Fact("upper_colour", ("red",)), Fact("upper_colour", ("pink",), True)]
    >>> replaced_by(said)
    [2, None, None]
    >>> [f.values for f in active(said) if not f.negated]
    [('red',)]
"""

from __future__ import annotations

from typing import Sequence

from minterpr.language.phrasing import Fact


def replaced_by(facts: Sequence[Fact]) -> list[int | None]:
    """For each fact (in the order said), the position of the first later fact that replaces it, or None."""
    out: list[int | None] = []
    for k, fact in enumerate(facts):
        values = set(fact.values)
        out.append(
            next(
                (
                    j
                    for j in range(k + 1, len(facts))
                    if facts[j].slot == fact.slot and facts[j].negated != fact.negated and values & set(facts[j].values)
                ),
                None,
            )
        )
    return out


def active(facts: Sequence[Fact]) -> tuple[Fact, ...]:
    """The facts no later fact replaces, in the order said."""
    return tuple(f for f, later in zip(facts, replaced_by(facts)) if later is None)


def last_colour_slot(facts: Sequence[Fact], denied: Sequence[str] = ()) -> str | None:
    """The colour slot a colour said without a garment word is about: the slot that last affirmed one of
    the ``denied`` colours ("a pink top and black trousers", then "red, not pink": the top), else the
    colour slot spoken of last; None when no colour was spoken of.

    Example:
        >>> said = [Fact("upper_colour", ("pink",)), Fact("lower_colour", ("black",)), Fact("carried", ("backpack",))]
        >>> last_colour_slot(said), last_colour_slot(said, denied=["pink"])
        ('lower_colour', 'upper_colour')
    """
    colours = [f for f in reversed(facts) if f.slot.endswith("_colour")]
    named = next((f.slot for f in colours if not f.negated and set(denied) & set(f.values)), None)
    return named or next((f.slot for f in colours), None)
