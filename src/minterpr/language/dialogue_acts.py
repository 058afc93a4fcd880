"""What a turn means: the facts it asserts, the slot a question asks, whether feedback says "match".

Sessions, the attribute backend and the simulators read turns the same way through these
functions, so a recorded conversation replays to the same facts.

Example:
    >>> question_slot("What colour were her shoes?")
    'footwear_colour'
    >>> verdict("Yes, that's her."), verdict("No, that's not her."), verdict("Maybe, I can't tell.")
    (True, False, None)
    >>> [f.slot for f in turn_facts(QATurn("What colour were her shoes?", "White."))]
    ['footwear_colour']
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable, Sequence

from minterpr.language.feedback_reading import Reading, read_feedback
from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.language.text_parser import parse_facts
from minterpr.types import DescriptionTurn, ExampleTurn, QATurn, ReferenceTurn, Turn

_PRONOUN_SETS = (
    {"pronoun": "he", "possessive": "his", "object": "him"},
    {"pronoun": "she", "possessive": "her", "object": "her"},
    {"pronoun": "they", "possessive": "their", "object": "them"},
)
# Keyword rules for questions not written from the ontology's templates (recorded LLM questions),
# tried in order: the first rule whose words all occur names the slot.
_KEYWORD_RULES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("hair", "colo"), "hair_colour"),
    (("hair",), "hair_length"),
    (("bald",), "hair_length"),
    (("shoe", "colo"), "footwear_colour"),
    (("footwear", "colo"), "footwear_colour"),
    (("trouser", "colo"), "lower_colour"),
    (("pants", "colo"), "lower_colour"),
    (("skirt", "colo"), "lower_colour"),
    (("lower", "colo"), "lower_colour"),
    (("colo",), "upper_colour"),
    (("sleeve",), "sleeve_length"),
    (("pattern",), "upper_pattern"),
    (("logo",), "upper_pattern"),
    (("stripe",), "upper_pattern"),
    (("shoe",), "footwear_type"),
    (("footwear",), "footwear_type"),
    (("carry",), "carried"),
    (("handbag",), "carried"),
    (("backpack",), "carried"),
    (("carrying",), "carried"),
    (("bag",), "carried"),
    (("holding",), "carried"),
    (("hat",), "headwear"),
    (("head",), "headwear"),
    (("glasses",), "accessories"),
    (("accessor",), "accessories"),
    (("scarf",), "accessories"),
    (("old",), "age"),
    (("age",), "age"),
    (("man or",), "gender"),
    (("male",), "gender"),
    (("gender",), "gender"),
    (("trouser",), "lower_type"),
    (("skirt",), "lower_type"),
    (("legs",), "lower_type"),
    (("pants",), "lower_type"),
    (("on top",), "upper_type"),
    (("jacket",), "upper_type"),
    (("shirt",), "upper_type"),
    (("top",), "upper_type"),
)
_NEGATION = re.compile(r"\b(no|not|nope|n't|isn't|wasn't|wrong|never)\b|n't\b")
_AFFIRMATIVE = re.compile(
    r"^\s*(yes|yep|yeah|correct|exactly|found (him|her|them))\b"
    r"|\b(that'?s|that is|this is|it'?s|it is)\s+(definitely\s+)?(her|him|them|the (one|person|man|woman|guy|lady))\b"
    r"|\bthis one\b|\bthat one\b|\bmatch(es)?\b"
)
_WEAK_AFFIRMATIVE = re.compile(r"this one|that one|match(es)?")
# Hedges: the user cannot tell, so the image is neither ruled out nor confirmed ("hmm, could be", "it might be
# her", "hard to say", "I don't know"); a leading "no" still rules it out ("no, it might be her coat but ...").
_UNDECIDED = re.compile(
    r"^\s*(maybe|perhaps|possibly|probably|could be|might be)\b"
    r"|\b(not sure|unsure|can'?t tell|cannot tell|can'?t say|cannot say|hard to (say|tell)|no idea"
    r"|don'?t know|do not know|dunno|(could|might|may) be (her|him|them|it|the (one|person)))\b"
    r"|^\s*((hmm+|um+|er+|well|oh|ok|it|i think|i guess),?\s+)+(maybe|perhaps|possibly|could be|might be)\b"
)
_DENIED_FIRST = re.compile(
    r"^\s*((no|nope|nah)\b(?!\s+idea)|not (her|him|them|this one|that one)\b"
    r"|(that|this)('?s| is) not (her|him|them)\b)"
)


@lru_cache(maxsize=1)
def _template_slots() -> dict[str, str]:
    """Every ontology question template, filled with every pronoun set -> its slot."""
    table: dict[str, str] = {}
    for slot in ONTOLOGY.slots:
        for template in slot.questions:
            for pronouns in _PRONOUN_SETS:
                text = template.format(**pronouns).replace("was they", "were they").replace("Was they", "Were they")
                table[_normalise(text[:1].upper() + text[1:])] = slot.name
    return table


def _normalise(text: str) -> str:
    return " ".join(text.lower().replace("’", "'").split())


def question_slot(question: str) -> str | None:
    """The slot a question asks about: exact for minterpr's own questions, by keywords otherwise (each
    keyword starts a word: "What did she have on her head?" is about headwear, "What was that?" is not).

    Example:
        >>> question_slot("And what about that bag?"), question_slot("What was that, then?")
        ('carried', None)
    """
    text = _normalise(question)
    exact = _template_slots().get(text)
    if exact is not None:
        return exact
    for words, slot in _KEYWORD_RULES:
        if all(_starts_word(word, text) for word in words):
            return slot
    return None


@lru_cache(maxsize=None)
def _keyword(word: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![a-z']){re.escape(word)}")


def _starts_word(word: str, text: str) -> bool:
    """Does ``word`` start a word of ``text``? ("hat" in "a hat" or "hats", not in "what" or "that";
    "colo" in "colour" and "color")."""
    return _keyword(word).search(text) is not None


def verdict(feedback: str) -> bool | None:
    """What feedback on a shown image says: True = it is the person ("Yes, that's her."),
    None = undecided ("Maybe, I can't tell."), False = it is not (anything else: corrections).

    Any negation before the affirmation ("No, that's not her", "not this one") means no, and so
    does one after a mere pointer ("this one is not her").

    Example:
        >>> verdict("Yes, that's her."), verdict("this one is not her"), verdict("Maybe."), verdict("that one")
        (True, False, None, True)
        >>> verdict("could be, I can't tell"), verdict("hmm, could be"), verdict("hard to say"), verdict("no, not sure why")
        (None, None, None, False)
    """
    text = _normalise(feedback)
    first_clause = re.split(r"[.;!?]", text, maxsplit=1)[0]
    if _UNDECIDED.search(first_clause) and not _DENIED_FIRST.search(first_clause):
        return None
    found = _AFFIRMATIVE.search(first_clause)
    if found is None:
        return False
    if _NEGATION.search(first_clause[: found.end()]) is not None:
        return False
    # "this one" / "that one" / "match" only point at the image: what follows decides
    # ("this one is not her"); a plain "yes" or "that's her" is not undone by "no doubt" after it
    weak = _WEAK_AFFIRMATIVE.fullmatch(found.group(0).strip()) is not None
    return not (weak and _NEGATION.search(first_clause[found.end() :]) is not None)


def is_match(feedback: str) -> bool:
    """Does feedback on a shown image say it *is* the person sought? (see :func:`verdict`)"""
    return verdict(feedback) is True


@lru_cache(maxsize=4096)
def parse_cached(text: str, context_slot: str | None, colour_slot: str | None = None) -> tuple[Fact, ...]:
    """parse_facts, memoised: a session re-reads its whole conversation every turn."""
    return tuple(parse_facts(text, context_slot=context_slot, colour_slot=colour_slot))


@lru_cache(maxsize=4096)
def _feedback_cached(text: str, colour_slot: str | None) -> Reading:
    return read_feedback(text, colour_slot)


def turn_reading(turn: Turn, context_slot: str | None = None, colour_slot: str | None = None) -> Reading:
    """What a turn says about the person sought and, for feedback, about the image shown
    (:func:`~minterpr.language.feedback_reading.read_feedback`); an answer is read in the light of its question.

    ``context_slot`` overrides the slot found from the question text (a session knows what it asked);
    ``colour_slot`` is the colour slot the conversation last spoke of, for a description's or feedback's
    colours said without a garment word ("it was red, not pink").

    Example:
        >>> r = turn_reading(ReferenceTurn("b.jpg", "his shoes were light brown, these are blue"))
        >>> [f.values for f in r.target if f.slot == "footwear_colour"], [f.values for f in r.shown]
        ([('brown',)], [('blue',)])
    """
    if isinstance(turn, DescriptionTurn):
        return Reading(parse_cached(turn.text, None, colour_slot))
    if isinstance(turn, QATurn):
        return Reading(parse_cached(turn.answer, context_slot or question_slot(turn.question)))
    if isinstance(turn, ReferenceTurn):
        return _feedback_cached(turn.feedback, colour_slot)
    if isinstance(turn, ExampleTurn):
        return Reading(())
    raise TypeError(
        f"not a turn: {type(turn).__name__} (expected DescriptionTurn, QATurn, ReferenceTurn or ExampleTurn)"
    )


def turn_facts(turn: Turn, context_slot: str | None = None) -> tuple[Fact, ...]:
    """Facts a turn asserts about the person sought (:func:`turn_reading`'s target facts)."""
    return turn_reading(turn, context_slot).target


def understood(turn: Turn, facts: Sequence[Fact], shown: Sequence[Fact] = ()) -> bool:
    """Did the system take anything from a turn? An example image always; a text when it gave facts,
    and feedback also when it says yes, no or maybe ("No." rejects the image: understood).

    Example:
        >>> understood(ReferenceTurn("b.jpg", "No."), ()), understood(DescriptionTurn("qwerty uiop"), ())
        (True, False)
    """
    if isinstance(turn, ExampleTurn) or facts or shown:
        return True
    if isinstance(turn, ReferenceTurn):
        text = _normalise(turn.feedback)
        return any(p.search(text) for p in (_NEGATION, _AFFIRMATIVE, _UNDECIDED))
    return False


def known_attributes(facts: tuple[Fact, ...] | list[Fact]) -> dict[str, tuple[str, ...]]:
    """Positive claims so far, last one per slot (what the system believes; used for pronouns)."""
    return {f.slot: f.values for f in facts if not f.negated}


def round_judgements(turns: Sequence[Turn], index_of: Callable[[str], int | None]) -> list[dict[int, bool | None]]:
    """Per round r, the user's judgements after turns[0..r]: gallery index -> latest verdict.

    The one rule of judgements, for sessions (``Session.judgements``: the last round) and static
    replays (every round): a reference turn's feedback judges its image (:func:`verdict`: True =
    the person, False = not,
    None = unsure), a later turn on the same image replaces the verdict (and moves it last),
    and references outside the gallery (``index_of`` gives None) are skipped.

    Example:
        >>> from minterpr.types import DescriptionTurn
        >>> turns = [DescriptionTurn("a man"), ReferenceTurn("b.jpg", "That's not him. No hat."),
        ...          ReferenceTurn("c.jpg", "Yes, that's him.")]
        >>> round_judgements(turns, {"a.jpg": 0, "b.jpg": 1, "c.jpg": 2}.get)
        [{}, {1: False}, {1: False, 2: True}]
    """
    out: list[dict[int, bool | None]] = []
    judged: dict[int, bool | None] = {}
    for turn in turns:
        if isinstance(turn, ReferenceTurn):
            i = index_of(turn.reference_path)
            if i is not None:
                judged = dict(judged)
                judged.pop(i, None)  # re-insert: the latest verdict is last
                judged[i] = verdict(turn.feedback)
        out.append(judged)
    return out
