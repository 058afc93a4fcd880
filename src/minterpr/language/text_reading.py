"""The words and small grammars behind :mod:`minterpr.language.text_parser`: tokens, the phrase
lexicon (the ontology's phrases plus ``READING_PHRASES``), colour terms ("navy blue", "greyish",
"light coloured", "olive or dark brown"), which noun a colour or length word describes, and
where a second person enters a sentence. The word lists they run on are in
:mod:`minterpr.language.sentence_words`.

Example:
    >>> read_tokens("A light-blue T-shirt")
    ['a', 'light', 'blue', 't', 'shirt']
    >>> colour_expr(read_tokens("pale pink or lilac mini-skirt"), 0)
    (4, [('pink', 'purple')])
    >>> noun_kind(read_tokens("red stripes along the sleeve"), 1), noun_kind(read_tokens("red and white striped shirt"), 3)
    ('pattern', 'upper')
"""

from __future__ import annotations

import re
from functools import lru_cache

from minterpr.language.ontology import ONTOLOGY, VAGUE_COLOURS
from minterpr.language.phrasing import Fact
from minterpr.language.reading_words import COLOUR_SHADES, COLOUR_SUFFIXES, READING_COLOURS, READING_PHRASES
from minterpr.language.sentence_words import (
    DETERMINERS,
    GARMENT_PARTS,
    GENDER_WORDS,
    HEAD_STOPS,
    IGNORED,
    INTRODUCERS,
    NON_GARMENT,
    NOTHING,
    PART_NOUNS,
    PEOPLE,
    PRONOUNS,
)

_ISH = re.compile(
    r"^(redd|blu|blue|green|gr[ae]y|brown|pink|purpl|purple|yellow|orang|orange|whit|white|black|tan)e?ish$"
)
_ISH_STEM = {
    "redd": "red",
    "blu": "blue",
    "gray": "grey",
    "purpl": "purple",
    "orang": "orange",
    "whit": "white",
    "tan": "brown",
}
_TOKEN = re.compile(r"n't|[a-z]+|\d+|[,:/&]")  # "n't" first, or "was n't" reads "was n t"
_COMPARATIVES = {"lighter": "light", "darker": "dark", "brighter": "bright"}


def read_tokens(text: str) -> list[str]:
    """Lower-case words; hyphens split words ("t-shirt" reads "t shirt"), "n't" and "/" are tokens."""
    text = text.lower().replace("’", "'").replace("n't", " n't").replace("'s ", " ").replace("'s", "")
    return ["and" if t == "&" else t for t in _TOKEN.findall(text)]


def phrase_key(phrase: str) -> tuple[str, ...]:
    return tuple(read_tokens(phrase))


@lru_cache(maxsize=1)
def lexicon() -> dict[tuple[str, ...], list[tuple[str, tuple[str, ...]]]]:
    """phrase tokens -> [(slot, values)] for every non-colour phrase (longest match wins); [] = read, no fact."""
    table: dict[tuple[str, ...], dict[str, list[str]]] = {phrase_key(p): {} for p in NOTHING}
    for slot in ONTOLOGY.slots:
        if slot.name.endswith("_colour"):
            continue
        for value in slot.values:
            phrases = [p for p in value.phrases if p not in IGNORED]
            phrases += list(
                READING_PHRASES.get((slot.name, value.name), ()) + PRONOUNS.get((slot.name, value.name), ())
            )
            for phrase in phrases:
                table.setdefault(phrase_key(phrase), {}).setdefault(slot.name, []).append(value.name)
    for key, slots in table.items():  # "young man" also says "man"
        if slots and "gender" not in slots and len(key) > 1 and key[-1] in GENDER_WORDS:
            slots["gender"] = [GENDER_WORDS[key[-1]]]
    return {k: [(s, tuple(sorted(set(v)))) for s, v in slots.items()] for k, slots in table.items()}


@lru_cache(maxsize=1)
def colour_bases() -> dict[tuple[str, ...], tuple[str, ...]]:
    """Colour words (garment and hair phrases, reading words) -> the colours they name."""
    words: dict[tuple[str, ...], set[str]] = {}
    for slot in ("upper_colour", "hair_colour"):
        for value in ONTOLOGY.slot(slot).values:
            for phrase in value.phrases:
                words.setdefault(phrase_key(phrase), set()).add(value.name)
    for word, meaning in READING_COLOURS.items():
        words.setdefault(phrase_key(word), set()).update(meaning)
    words[("gray",)] = {"grey"}
    words.pop(("dyed",), None)
    return {k: tuple(sorted(v)) for k, v in words.items() if v}


@lru_cache(maxsize=1)
def part_nouns() -> dict[tuple[str, ...], str]:
    """Garment noun tokens -> body part: the generic nouns plus every garment-type phrase."""
    nouns = {phrase_key(w): part for part, words in PART_NOUNS.items() for w in words}
    for slot, part in (("upper_type", "upper"), ("lower_type", "lower"), ("footwear_type", "feet")):
        for value in ONTOLOGY.slot(slot).values:
            for phrase in value.phrases + READING_PHRASES.get((slot, value.name), ()):
                nouns.setdefault(phrase_key(phrase), part)
    nouns.pop(phrase_key("regular shoes"), None)
    return nouns


def longest(table: dict, tokens: list[str], i: int, longest: int = 5) -> tuple[str, ...] | None:
    for n in range(longest, 0, -1):
        key = tuple(tokens[i : i + n])
        if len(key) == n and key in table:
            return key
    return None


def part_at(tokens: list[str], i: int) -> tuple[str | None, int]:
    """(kind, length) of a noun at token i: a body part ('upper', 'lower', 'feet', 'head', 'both'), 'item'
    (bags, hats, belts: not a garment), 'person', 'pattern', or (None, 0) for none."""
    if i >= len(tokens):
        return None, 0
    key = longest(part_nouns(), tokens, i)
    match = longest(lexicon(), tokens, i)
    if match is not None and (key is None or len(match) > len(key)):
        slots = {s for s, _ in lexicon()[match]}
        for kinds, kind in (
            ({"carried", "headwear", "accessories"}, "item"),
            ({"gender", "age"}, "person"),
            ({"upper_pattern", "lower_pattern"}, "pattern"),
            ({"hair_length"}, "head"),
            ({"sleeve_length"}, "sleeve"),
        ):
            if slots & kinds:
                return kind, len(match)
        if not slots:
            return None, len(match)  # read, says nothing ("slip on")
    if key is not None:
        return part_nouns()[key], len(key)
    if tokens[i] == "stripe" and part_at(tokens, i + 1)[0] in ("upper", "lower"):
        return "pattern", 1  # "a stripe shirt" is a striped shirt; "a stripe down the side" is not
    return ("item", 1) if tokens[i] in NON_GARMENT else (None, 0)


def colour_term(tokens: list[str], i: int) -> tuple[int, tuple[str, ...]] | None:
    """(end, colours) of one colour term at i: "navy blue", "light coloured", "greyish", "greenish blue".
    Colours are () for "multi-coloured" (read, no fact)."""
    bases = colour_bases()
    k = i
    while k < len(tokens) and (tokens[k] in COLOUR_SHADES or tokens[k] in _COMPARATIVES):
        k += 1
    values: tuple[str, ...] | None = None
    end = k
    for start in (k, i):
        key = longest(bases, tokens, start, 3)
        ish = _ISH.match(tokens[start]) if start < len(tokens) else None
        if key is not None:
            values, end = bases[key], start + len(key)
        elif ish is not None:
            stem = ish.group(1)
            values, end = (_ISH_STEM.get(stem, stem),), start + 1
            nxt = longest(bases, tokens, end, 3)
            if nxt is not None:  # "greenish blue": either
                values, end = tuple(sorted(set(values) | set(bases[nxt]))), end + len(nxt)
        if values is not None:
            break
    if values is None:
        vague = [j for j in range(i, k) if _COMPARATIVES.get(tokens[j], tokens[j]) in VAGUE_COLOURS]
        if vague:  # "dark coloured", "dark hot pants", "a lighter coloured shirt"
            values, end = VAGUE_COLOURS[_COMPARATIVES.get(tokens[vague[0]], tokens[vague[0]])], vague[0] + 1
        elif (
            k > i
            and longest(lexicon(), tokens, i) is None
            and (k == len(tokens) or tokens[k] in COLOUR_SUFFIXES or part_at(tokens, k)[0] in GARMENT_PARTS)
        ):
            values, end = (), k  # "neon shoes", "medium coloured": a shade that names no colour
        elif k < len(tokens) and tokens[k] in (
            "multicolored",
            "multicoloured",
            "colorful",
            "colourful",
            "multi",
            "rainbow",
        ):
            values, end = (), k + 1
        else:
            return None
    while end < len(tokens) and tokens[end] in COLOUR_SUFFIXES:
        end += 1
    return end, tuple(sorted(values))


def colour_expr(tokens: list[str], i: int) -> tuple[int, list[tuple[str, ...]]] | None:
    """Colour terms joined by 'and', '/', a list comma or nothing (several colours) or by 'or' (one of
    them): (end, one group of colours per fact)."""
    term = colour_term(tokens, i)
    if term is None:
        return None
    end, values = term
    groups = [values]
    while end < len(tokens):
        sep = tokens[end] in ("and", "/", ",", "or", "to")
        nxt = colour_term(tokens, end + sep)
        if (
            nxt is None
            or tokens[end] == ","
            and tokens[nxt[0] : nxt[0] + 1] not in (["and"], [","], ["or"])
            or tokens[end] == "to"
            and len(tokens) > end + 1
            and tokens[end + 1] in COLOUR_SHADES
        ):
            break
        if tokens[end] == "or":
            groups[-1] = tuple(sorted(set(groups[-1]) | set(nxt[1])))
        else:
            groups.append(nxt[1])
        end = nxt[0]
    return end, [g for g in groups if g]


def noun_kind(tokens: list[str], start: int) -> str | None:
    """Kind of the noun (see _part_at) a colour or pattern word describes; None when none follows."""
    j, modifier = start, None
    while (
        j < len(tokens)
        and j - start < 6
        and (
            tokens[j] not in HEAD_STOPS
            or tokens[j] == ","
            and j + 1 < len(tokens)
            and tokens[j + 1] not in HEAD_STOPS
            and not colour_term(tokens, j + 1)
            and part_at(tokens, j + 1)[0] in (None, "sleeve", "pattern")
        )
    ):
        part, n = part_at(tokens, j)
        if part is not None and part not in ("pattern", "sleeve"):
            return part
        term = colour_term(tokens, j) if part is None else None
        modifier = modifier or part
        j = term[0] if term is not None else j + max(n, 1)
    # "red stripes along the sleeve": a pattern's colour; "blue, short-sleeved": a top's
    return "upper" if modifier == "sleeve" else modifier


def skirt_length(tokens: list[str], i: int) -> str | None:
    """'short, deep green skirt': the length said before a bare 'skirt' at i, if any."""
    for j in range(i - 1, max(-1, i - 6), -1):
        if tokens[j] in ("short", "mini"):
            return "short_skirt"
        if tokens[j] in ("long", "maxi", "ankle", "floor"):
            return "long_skirt"
        if tokens[j] in HEAD_STOPS and tokens[j] != ",":
            return None
    return None


def length_facts(tokens: list[str], i: int, negated: bool) -> list[Fact]:
    """'long, dark hair', 'long black pants', 'his hair is short': a length word and the noun it describes."""
    word = {"longer": "long", "shorter": "short"}.get(tokens[i], tokens[i])
    for j in range(i + 1, min(len(tokens), i + 6)):
        if tokens[j] in HEAD_STOPS and tokens[j] != ",":
            break
        if tokens[j] in ("hair", "haired", "haircut"):
            return [Fact("hair_length", (word,), negated)]
        if tokens[i] == "long" and tokens[j] in ("pants", "trousers", "slacks", "leggings", "jeans", "sweatpants"):
            return [Fact("lower_length", ("long",), negated)]
        if part_at(tokens, j)[0] is not None:
            return []
    back = tokens[max(0, i - 6) : i]
    if "hair" in back and ":" not in back and any(t in ("is", "was", "are") for t in back[back.index("hair") :]):
        return [Fact("hair_length", (word,), negated)]
    return []


def age_phrase(tokens: list[str], i: int) -> tuple[str, ...] | None:
    """'young slim lady', 'little asian boy': an age word a few words before its person noun."""
    if tokens[i] not in ("young", "little", "old", "older"):
        return None
    for j in range(i + 1, min(len(tokens), i + 4)):
        if tokens[j] in HEAD_STOPS:
            return None
        if tokens[j] in GENDER_WORDS:
            key = (tokens[i], tokens[j])
            return key if key in lexicon() else None
    return None


def other_person(tokens: list[str], i: int) -> str | None:
    """'next to a woman', 'with her friend', 'another man': another person starts at i (their gender, or '')."""
    intro = next((len(p) for p in INTRODUCERS if tuple(tokens[i : i + len(p)]) == p), 0)
    if tokens[i] in ("another", "other"):
        intro = 1
    elif intro and tokens[i + intro : i + intro + 1] in (["someone"], ["somebody"]):
        return ""
    elif not intro or tokens[i + intro : i + intro + 1] == [] or tokens[i + intro] not in DETERMINERS:
        return None
    for j in range(i + intro, min(len(tokens), i + intro + 4)):
        match = longest(lexicon(), tokens, j)
        if match is not None and len(match) > 1 and not {s for s, _ in lexicon()[match]} & {"gender", "age"}:
            return None  # "with a baby buggy" is an item
        if tokens[j] in PEOPLE:
            return GENDER_WORDS.get(tokens[j], "")
    return None
