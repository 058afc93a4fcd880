"""Feedback on a shown image, read apart: what is said of the person sought and what of the image shown.

When a user rules out a result they speak of two people: the one they saw ("his shoes were light
brown") and the one on the screen ("these are blue"). :func:`read_feedback` splits each sentence
into clauses (at commas, "but", "while", and "and" before a new subject) and gives each clause an
owner (rules in docs/language.md, "Corrective feedback"):

* the **shown image** when the clause opens with a pointing word ("these", "those", "this one",
  "that guy", "this one's jacket", "that's a woman"), or, without a past-tense verb or a word for
  the user's own memory, says "here" / "in this one", has a present-tense pronoun subject ("she's
  got", "he's wearing") or a possessive one with "is" / "are" ("his shoes are blue");
* the **target** when it has a past-tense verb ("was", "had", "wore", "didn't") or names the user's
  memory ("mine", "my guy", "I saw", "I'm looking for", "should be");
* otherwise the owner of the clause before it (a sentence starts with the target).

Facts of shown clauses are the shown image's, never the target's, and imply nothing about the
target. Two exceptions, both stated by the user: a target clause that only denies ("this one has a
backpack, he didn't", "mine had none") denies the shown clause's items for the target, and a clause
without a garment noun takes the garment of the clause before it ("his shoes were brown, these are
blue": the shown shoes are blue). Text without any shown clause is read exactly as
:func:`~minterpr.language.text_parser.parse_facts` reads it.

Example:
    >>> r = read_feedback("his shoes were light brown, these are blue")
    >>> [(f.slot, f.values) for f in r.target], [(f.slot, f.values) for f in r.shown]
    ([('gender', ('male',)), ('footwear_colour', ('brown',))], [('footwear_colour', ('blue',))])
    >>> [(f.slot, f.values, f.negated) for f in read_feedback("this one has a backpack, he didn't").target]
    [('gender', ('male',), False), ('carried', ('backpack',), True)]
    >>> read_feedback("asdf qwerty")
    Reading(target=(), shown=())
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from minterpr.language.phrasing import Fact
from minterpr.language.sentence_words import COLOUR_SLOT
from minterpr.language.text_parser import parse_clause, parse_facts
from minterpr.language.text_reading import read_tokens


@dataclass(frozen=True)
class Reading:
    """What feedback on a shown image says: facts about the person sought and about the image shown."""

    target: tuple[Fact, ...]  # facts about the person sought (what parse_facts returns for plain text)
    shown: tuple[Fact, ...] = ()  # facts said of the shown image ("these are blue", "this one has a backpack")


_SENTENCES = re.compile(r"[.;!?]")
_DASH = re.compile(
    r"\s+[-\u2013\u2014]+\s+|\s*[\u2013\u2014]\s*"
)  # a spaced hyphen, an en or em dash (not "navy-blue")
_BREAKS = {",", "but", "while", "whereas", "though", ":", "/"}
_NEW_SUBJECT = {
    "he",
    "she",
    "they",
    "his",
    "her",
    "hers",
    "mine",
    "my",
    "this",
    "that",
    "these",
    "those",
    "here",
    "the",
    "it",
    "i",
}  # "and" before one of these starts a clause
_LEAD = {
    "no",
    "nope",
    "nah",
    "not",
    "and",
    "but",
    "so",
    "well",
    "hmm",
    "i",
    "think",
    "guess",
    "maybe",
    "ok",
    "oh",
    "because",
    "also",
    "though",
    "plus",
}  # skipped before a clause's pointing word
_POINT_NEXT = {"was", "were", "had", "did"}  # "that was ...", "this had ..." point at nothing
_PAST = {"was", "were", "had", "wore", "did", "didnt", "wasnt", "werent", "should", "mine", "my", "saw", "after"}
_PRESENT = {
    "is",
    "are",
    "has",
    "have",
    "wearing",
    "got",
    "carrying",
    "holding",
    "looks",
    "wears",
    "carries",
    "in",
    "does",
    "doesnt",
}
_DENIALS = {"n't", "didnt", "wasnt", "werent", "doesnt", "neither", "none", "not", "no", "nothing"}
_PART = {
    "upper": ("upper_colour", "upper_type", "upper_pattern", "sleeve_length"),
    "lower": ("lower_colour", "lower_type", "lower_pattern", "lower_length"),
    "feet": ("footwear_colour", "footwear_type"),
    "head": ("hair_colour", "hair_length"),
}
_SLOT_PART = {slot: part for part, slots in _PART.items() for slot in slots}


def read_feedback(text: str, colour_slot: str | None = None) -> Reading:
    """Feedback on a shown image, read apart: what is said of the target and of the image shown.

    ``colour_slot``: the colour slot the conversation last spoke of, for the target's colours said
    without a garment word (:func:`~minterpr.language.text_parser.parse_facts`).

    Example (a dash between the two people, as people type it):
        >>> r = read_feedback("not him, that's a man in a brown jacket - she had a blue coat with a white hood")
        >>> [(f.slot, f.values) for f in r.target if f.slot != "gender"], [f.values for f in r.shown]
        ([('upper_colour', ('blue',)), ('upper_type', ('jacket',)), ('upper_colour', ('white',))], [('male',), ('brown',), ('jacket',)])
    """
    text = _DASH.sub(", ", text)  # "... and jeans - she had ...": a dash separates clauses as a comma does
    sentences = [read_tokens(s) for s in _SENTENCES.split(text)]
    clauses = [_owned_clauses(tokens) for tokens in sentences]
    if not any(owner == "shown" for sentence in clauses for owner, _ in sentence):
        return Reading(tuple(parse_facts(text, colour_slot=colour_slot)))
    target: list[Fact] = []
    shown: list[Fact] = []
    people: dict[str, str] = {}
    previous: tuple[str, list[Fact]] | None = None  # the last clause's owner and facts
    pronoun: list[Fact] = []  # the gender a bare verdict's pronoun gave ("not him")
    for sentence in clauses:
        for owner, tokens in _runs(sentence):
            facts = parse_clause(tokens, None, people, colour_slot if owner == "target" else None)
            said = [f for f in facts if f.slot != "gender"]
            if not said and previous is not None:
                if owner == "target" and previous[0] == "shown" and _DENIALS & set(tokens):
                    # "this one has a backpack, he didn't": the shown items, denied for the target
                    facts += [
                        Fact(f.slot, f.values, True)
                        for f in previous[1]
                        if not f.negated and f.slot not in ("gender", "age")
                    ]
                else:  # "his shoes were brown, these are blue": the garment of the clause before
                    slot = _colour_slot(previous[1])
                    if slot is not None:
                        facts = parse_clause(tokens, slot, people) or facts
                    facts += _bare_length(tokens, previous[1])
            (shown if owner == "shown" else target).extend(facts)
            if owner == "target" and _bare_verdict(tokens):
                pronoun.extend(facts)
            previous = (owner, facts) if facts else previous
    # "not him, that's a man ... - she had a blue coat": the verdict's pronoun was the one on the screen's
    stated = {f.values for f in target if f.slot == "gender" and not f.negated and f not in pronoun}
    target = [f for f in target if not (f in pronoun and f.slot == "gender" and stated - {f.values})]
    return Reading(tuple(dict.fromkeys(target)), tuple(dict.fromkeys(shown)))


def _colour_slot(facts: list[Fact]) -> str | None:
    """The colour slot of the garment the last of ``facts`` is about (None for bags, gender, ...)."""
    for fact in reversed(facts):
        part = _SLOT_PART.get(fact.slot)
        if part is not None:
            return COLOUR_SLOT[part]
    return None


def _bare_length(tokens: list[str], before: list[Fact]) -> list[Fact]:
    """'this one has short sleeves, hers were long': a bare length word takes the length slot said before."""
    words = [t for t in tokens if t in ("long", "short")]
    lengths = [
        f
        for f in before
        if f.slot in ("hair_length", "sleeve_length")
        or f.slot == "lower_type"
        and set(f.values) <= {"long_skirt", "short_skirt"}
    ]
    if len(words) != 1 or not lengths:
        return []
    slot = lengths[-1].slot
    return [Fact(slot, (f"{words[0]}_skirt" if slot == "lower_type" else words[0],))]


def _clauses(tokens: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for k, token in enumerate(tokens):
        if token in _BREAKS or token == "and" and tokens[k + 1 : k + 2] and tokens[k + 1] in _NEW_SUBJECT:
            out.append([] if token in (",", ":", "/") else [token])
        else:
            out[-1].append(token)
    return [c for c in out if c]


def _owner(tokens: list[str], previous: str) -> str:
    k = 0
    while k < len(tokens) - 1 and tokens[k] in _LEAD:
        k += 1
    head, nxt = tokens[k], (tokens[k + 1] if k + 1 < len(tokens) else None)
    if _verdict(tokens[k:]):
        return "target"
    if head in ("these", "those") or head in ("this", "that") and nxt is not None and nxt not in _POINT_NEXT:
        return "shown"
    words = set(tokens)
    if words & _PAST or "looking" in words and "for" in words:
        return "target"
    if "here" in words or any(tokens[j : j + 2] == ["in", "this"] for j in range(len(tokens))):
        return "shown"
    if head in ("he", "she", "they") and nxt in _PRESENT or head in ("his", "her", "their") and words & {"is", "are"}:
        return "shown"  # "she's got a bag", "his shoes are blue": the one on the screen, now
    return previous


def _bare_verdict(tokens: list[str]) -> bool:
    """'not him', 'no, not her': a verdict alone, its pronoun the shown person's."""
    words = [t for t in tokens if t not in _LEAD and t != ","]
    return (
        len(words) == 1 and words[0] in ("him", "her", "them", "it") and any(t in ("not", "no", "nope") for t in tokens)
    )


def _verdict(tokens: list[str]) -> bool:
    """'that's not him', 'this is not the person', 'this one isn't her': a verdict, said of the target."""
    if tokens[:1] not in (["this"], ["that"]):
        return False
    for j in range(1, min(4, len(tokens))):
        if tokens[j] in ("not", "n't"):
            return tokens[j + 1 : j + 2] in (["him"], ["her"], ["them"], ["the"], ["my"], ["it"], ["who"], [])
    return False


def _owned_clauses(tokens: list[str]) -> list[tuple[str, list[str]]]:
    """Each clause of a sentence with its owner: "target" or "shown"."""
    out = []
    owner = "target"
    for clause in _clauses(tokens):
        owner = _owner(clause, owner)
        out.append((owner, clause))
    return out


def _runs(clauses: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """Neighbouring clauses of one owner joined again (read together, as parse_facts would)."""
    out: list[tuple[str, list[str]]] = []
    for owner, tokens in clauses:
        if out and out[-1][0] == owner:
            out[-1] = (owner, out[-1][1] + [","] + tokens)
        else:
            out.append((owner, tokens))
    return out
