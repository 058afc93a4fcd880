"""Text to facts: a rule-based reader of descriptions, answers and corrective feedback.

It finds the ontology's phrases (and the words people use for them, ``READING_PHRASES``) in
free text, attaches colour words to the garment they describe, and tracks negation ("no
backpack", "red, not white", "rather than a skirt"), so that what a user says can be compared
with what the model believes about images. Beyond the synthesiser's language it reads how people
write captions (CUHK-PEDES; figures in docs/language.md): shaded and hedged colours ("navy
blue", "greyish", "light coloured", "olive or dark brown"), garments, bags and shoes by many
names, statements of absence ("is not holding anything", "no sleeves"), and a second person in
the same sentence ("walking beside a lady in a green dress": her dress is not the target's).

Example:
    >>> [(f.slot, f.values, f.negated) for f in parse_facts("A woman in a red top, no backpack.")]
    [('gender', ('female',), False), ('upper_colour', ('red',), False), ('carried', ('backpack',), True)]
    >>> [(f.slot, f.values) for f in parse_facts("A man walking beside a lady in a pink dress, he has short hair.")]
    [('gender', ('male',)), ('hair_length', ('short',))]
    >>> [(f.slot, f.values) for f in parse_facts("Navy-blue shorts, a greyish tee and an olive or dark brown cap.")]
    [('lower_colour', ('blue',)), ('lower_type', ('shorts',)), ('upper_colour', ('grey',)), ('upper_type', ('tshirt',)), ('headwear', ('hat',))]
"""

from __future__ import annotations

import re
from functools import lru_cache

from minterpr.language.ontology import COLOURS, DARK_HAIR, ONTOLOGY, VAGUE_COLOURS
from minterpr.language.phrasing import Fact
from minterpr.language.reading_words import READING_PHRASES
from minterpr.language.sentence_words import (
    BACK,
    COLOUR_SLOT,
    FILLERS,
    GARMENT_PARTS,
    HELD,
    HOLDING,
    NEGATORS,
    NOTHING,
    PRONOUN_GENDER,
    RESETS,
    SLOT_PART,
)
from minterpr.language.text_reading import (
    age_phrase,
    colour_expr,
    colour_term,
    length_facts,
    lexicon,
    longest,
    noun_kind,
    other_person,
    part_at,
    phrase_key,
    read_tokens,
    skirt_length,
)


def parse_facts(text: str, *, context_slot: str | None = None, colour_slot: str | None = None) -> list[Fact]:
    """Facts a text asserts about the person sought.

    ``context_slot`` is the slot a question asked about: it gives bare answers ("navy",
    "nothing", "long") their meaning. ``colour_slot`` is the colour slot the conversation last spoke
    of: a colour said without a garment word goes to it ("it was red, not pink" after "a pink top"),
    and nothing else changes (a session passes it; alone, such a colour names no garment).

    Example:
        >>> [(f.slot, f.values, f.negated) for f in parse_facts("red, not pink", colour_slot="upper_colour")]
        [('upper_colour', ('red',), False), ('upper_colour', ('pink',), True)]
    """
    facts: list[Fact] = []
    people: dict[str, str] = {}  # "target": the target's gender once known; "other": another person's
    for clause in re.split(r"[.;!?]", text):
        tokens = read_tokens(clause)
        other = people.get("other")
        if (
            tokens[:1] in (["he"], ["she"])
            and other == PRONOUN_GENDER[tokens[0]]
            and people.get("target", other) != other
        ):
            continue  # a sentence about the other person
        facts.extend(parse_clause(tokens, context_slot, people, colour_slot))
        target = [f.values[0] for f in facts if f.slot == "gender" and not f.negated and len(f.values) == 1]
        if target:
            people.setdefault("target", target[0])
    return list(dict.fromkeys(facts))


def _emit_colours(facts: list[Fact], part: str, groups: list[tuple[str, ...]], negated: bool) -> None:
    for part_name in ("upper", "lower") if part == "both" else (part,):
        for values in groups:
            values = DARK_HAIR if part_name == "head" and values == tuple(sorted(VAGUE_COLOURS["dark"])) else values
            facts.append(Fact(COLOUR_SLOT[part_name], values, negated))


def _colour_facts(
    facts: list[Fact],
    tokens: list[str],
    i: int,
    groups: list[tuple[str, ...]],
    end: int,
    negated: bool,
    last_part: str | None,
    context_slot: str | None,
    colour_slot: str | None = None,
) -> str | None:
    """The colour facts of a colour expression tokens[i:end]; returns the garment part they went to."""
    if i and tokens[i - 1] == "as":
        return None  # "not as red as her bag": a comparison
    part = noun_kind(tokens, end)
    if part == "pattern":  # "a red shirt with white stripes": the stripes are the garment's
        part = last_part if last_part in ("upper", "lower") else "item"
    if part is None and i >= 2 and tokens[i - 1] in ("is", "was") and tokens[i - 2] in PRONOUN_GENDER:
        part = "item"  # "he is tan": the person, not a garment
    if part is None and tokens[max(0, i - 2) : i] in (["dressed", "in"], ["all", "in"]):
        part = "both"
    if part is None:
        part = last_part or (SLOT_PART[context_slot] if context_slot and context_slot.endswith("_colour") else None)
    if part is None and colour_slot in SLOT_PART and colour_slot.endswith("_colour"):
        part = SLOT_PART[colour_slot]  # "it was red, not pink": the garment last spoken of
    if part in (None, "item", "person", "pattern"):
        return None
    _emit_colours(facts, part, groups, negated)
    return part


def parse_clause(
    tokens: list[str], context_slot: str | None, people: dict[str, str], colour_slot: str | None = None
) -> list[Fact]:
    table = lexicon()
    facts: list[Fact] = []
    negated = False
    last_part = SLOT_PART.get(context_slot or "")
    other = False  # inside a phrase about another person
    holding = any(t in HOLDING for t in tokens)
    alternative = (-1, 0)  # (end token, first fact) of the last phrase read
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if other:  # until the sentence turns back to the target
            other = token not in (",", "while") and not (
                token == "and" and tokens[i + 1 : i + 2] and tokens[i + 1] in BACK
            )
            i += 1
            continue
        who = other_person(tokens, i)
        if who is not None:
            other = True
            if who:
                people.setdefault("other", who)
            continue
        if token in RESETS:
            negated = False
            i += 1
            continue
        match = longest(table, tokens, i)
        leading = match in _leading() and len(longest(table, tokens, i + 1) or ()) < len(match)
        if token in NEGATORS and not leading:
            if token == "no" and i == 0 and len(tokens) > 1 and tokens[1] == ",":
                i += 1
                continue
            j = i + 1
            if tokens[j : j + 1] in (["think"], ["believe"]):  # "I don't think he had a bag": what follows is denied
                j += 1
                while j < len(tokens) and tokens[j] in _SUBJECTS:
                    j += 1
            elif _interjection(tokens, i):
                i += 1
                continue
            while j < len(tokens) and tokens[j] in FILLERS:
                j += 1
            if tokens[j : j + 1] in (["anything"], ["nothing"]) and {"carrying", "holding"} & set(tokens[i:j]):
                facts.append(Fact("carried", ("nothing",)))
                i = j + 1
                continue
            negated = j < len(tokens) and (
                longest(table, tokens, j) is not None
                or colour_term(tokens, j) is not None
                or tokens[j] in ("long", "short")
            )
            i += 1
            continue
        if token in ("longer", "shorter") and tokens[i + 1 : i + 2] != ["than"]:
            facts.extend(length_facts(tokens, i, negated))  # "his hair was longer" (but "longer than that" compares)
        if token in ("long", "short"):
            lengths = length_facts(tokens, i, negated)
            if not lengths and negated and facts and facts[-1].slot in ("hair_length", "sleeve_length"):
                lengths = [Fact(facts[-1].slot, (token,), True)]  # "long hair rather than short": the same slot
            facts.extend(lengths)
        colours = colour_expr(tokens, i)
        if colours is not None and _compared(tokens, i):
            i = colours[0]  # "her hair was darker", "lighter than these": relative to another, no colour
            continue
        if colours is not None and (match is None or colours[0] > i + len(match)):
            end, groups = colours
            last_part = (
                _colour_facts(facts, tokens, i, groups, end, negated, last_part, context_slot, colour_slot) or last_part
            )
            i = end
            continue
        if match is None:
            part, n = part_at(tokens, i)
            age = age_phrase(tokens, i)
            if age is not None or part == "pattern":  # "young asian man", "a stripe shirt"
                _lexicon_facts(facts, tokens, i, age or ("stripes",), negated, context_slot, last_part)
            if token in HELD and holding:
                facts.append(Fact("carried", ("other",)))
            if part not in (None, "person"):
                last_part = "upper" if part == "sleeve" else part
            elif token == "plain" and noun_kind(tokens, i + 1) in ("upper", "lower"):
                facts.append(Fact(f"{noun_kind(tokens, i + 1)}_pattern", ("plain",), negated))
            i += max(n, 1)
            continue
        if match in (("bag",), ("bags",)) and tokens[i - 1 : i] == ["the"] and any(f.slot == "carried" for f in facts):
            i += 1  # "the bag" again: already said
            continue
        before = len(facts)
        _lexicon_facts(facts, tokens, i, match, negated, context_slot, last_part)
        if i and tokens[i - 1] == "or" and alternative[0] == i - 1:  # "a jacket or sweater": one of them
            facts[alternative[1] :] = _merged(facts[alternative[1] : before], facts[before:])
        alternative = (i + len(match), before)
        part, _ = part_at(tokens, i)
        last_part = {"sleeve": "upper", None: last_part, "person": last_part, "pattern": last_part}.get(part, part)
        i += len(match)
        if part in ("upper", "lower", "feet", "item") and tokens[i : i + 1] not in (["or"], ["nor"]):
            negated = False  # "without glasses in a dress": the negation ends with its noun
    if context_slot and not facts:
        facts.extend(_bare_answer(tokens, context_slot))
    if context_slot and not facts and any(t in ("nothing", "none", "anything") for t in tokens):
        slot = ONTOLOGY.slot(context_slot)
        none = [v.name for v in slot.values if v.excludes_others]
        if none:
            facts.append(Fact(context_slot, tuple(none)))
    return facts


# Words after a negator that make it a verdict on the shown image, not a denial of what follows
# ("not him", "no, she had ...", "not this one", "no the trousers were white").
_VERDICT_WORDS = {"him", "he", "she", "them", "they", "it", "i", "this", "that", "these"}
_SUBJECTS = {"he", "she", "they", "it", "i", "had", "have", "has", "was", "were", "wear", "wore"}


def _compared(tokens: list[str], i: int) -> bool:
    """Is the colour at i a bare comparative ("was darker", "lighter than these")?"""
    if tokens[i] not in ("darker", "lighter", "brighter") or colour_term(tokens, i + 1) is not None:
        return False
    return tokens[i - 1 : i] in (["was"], ["were"], ["is"], ["are"], ["bit"], ["much"]) or tokens[i + 1 : i + 2] == [
        "than"
    ]


def _interjection(tokens: list[str], i: int) -> bool:
    """Is the negator at i a verdict ("not him", "no she had", "no the ...") rather than a denial?"""
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    if nxt in _VERDICT_WORDS:
        return True
    if nxt == "her":  # "not her" alone, not "without her glasses"
        return i + 2 == len(tokens) or tokens[i + 2] in (",", "and", "but", "she")
    return tokens[i] == "no" and nxt == "the"


def _merged(first: list[Fact], second: list[Fact]) -> list[Fact]:
    """Facts of 'X or Y': one fact per slot with the values of both."""
    out = list(first)
    for fact in second:
        k = next((n for n, f in enumerate(out) if f.slot == fact.slot and f.negated == fact.negated), None)
        if k is None:
            out.append(fact)
        else:
            out[k] = Fact(fact.slot, tuple(sorted(set(out[k].values) | set(fact.values))), fact.negated)
    return out


@lru_cache(maxsize=1)
def _leading() -> frozenset[tuple[str, ...]]:
    """Phrases that start with a negator but are read as a whole ("no sleeves", "nothing in her hands"); the
    ontology's own "no bag"/"no hat" read as a negated item."""
    reading = {phrase_key(p) for phrases in READING_PHRASES.values() for p in phrases} | {
        phrase_key(p) for p in NOTHING
    }
    out = set()
    for key, slots in lexicon().items():
        if (
            len(key) > 1
            and key[0] in NEGATORS
            and (key in reading or not any(ONTOLOGY.slot(s).value(v).excludes_others for s, vs in slots for v in vs))
        ):
            out.add(key)
    return frozenset(out)


def _lexicon_facts(
    facts: list[Fact],
    tokens: list[str],
    i: int,
    match: tuple[str, ...],
    negated: bool,
    context_slot: str | None,
    last_part: str | None,
) -> None:
    """The facts of the lexicon phrase ``match`` found at token i."""
    for slot, values in lexicon()[match]:
        if slot in ("headwear", "accessories", "carried") and any(
            ONTOLOGY.slot(slot).value(v).excludes_others for v in values
        ):
            if context_slot not in (None, slot) or (context_slot is None and slot != "carried"):
                continue  # "nothing" answers the question asked, not every slot
        if slot in ("upper_pattern", "lower_pattern"):
            after = i + len(match)  # "a shirt with a logo": the garment before; "a plaid top": the one after
            noun = tokens[i - 1 : i] in (["a"], ["an"], ["with"]) and part_at(tokens, after)[0] not in GARMENT_PARTS
            part = (None if noun else noun_kind(tokens, after)) or last_part
            if part not in ("upper", "lower"):
                continue  # stripes on shoes, a design on a bag
            slot = f"{part}_pattern"
            values = tuple(v for v in values if v in ONTOLOGY.slot(slot).value_names)
        if slot == "lower_type" and values == ("long_skirt", "short_skirt"):
            values = (skirt_length(tokens, i),) if skirt_length(tokens, i) else values
        if slot == "gender" and len(match) == 1 and match[0] in ("he", "his", "him", "she", "her", "hers"):
            negated_here = False  # pronouns are never negated: "not her" still means a woman was sought
        else:
            negated_here = negated
        if values:
            facts.append(Fact(slot, values, negated_here))


def _bare_answer(tokens: list[str], slot_name: str) -> list[Fact]:
    """'Long.' answering 'Were her trousers long or short?': the asked slot's own words."""
    slot = ONTOLOGY.slot(slot_name)
    found: dict[str, bool] = {}  # value -> negated (a negator right before the phrase)
    for value in slot.values:
        for phrase in value.phrases:
            words = phrase_key(phrase)
            starts = [i for i in range(len(tokens)) if tuple(tokens[i : i + len(words)]) == words]
            if starts:
                found[value.name] = starts[0] > 0 and tokens[starts[0] - 1] in NEGATORS
                break
    if len(found) != 1 or slot_name.endswith("_colour"):
        return []
    ((value, negated),) = found.items()
    return [Fact(slot_name, (value,), negated)]


def facts_to_evidence(facts: list[Fact]) -> dict[str, dict[str, float]]:
    """Collapse facts into per-slot value weights: +1 spread over a fact's values, -1 if negated.

    The last word wins for a slot's positive claims, as a user's correction overrides.
    """
    evidence: dict[str, dict[str, float]] = {}
    for fact in facts:
        weights = evidence.setdefault(fact.slot, {})
        for value in fact.values:
            weights[value] = weights.get(value, 0.0) + (-1.0 if fact.negated else 1.0 / len(fact.values))
    return evidence


__all__ = ["parse_facts", "facts_to_evidence", "COLOURS"]
