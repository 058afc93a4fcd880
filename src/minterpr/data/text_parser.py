"""Text to facts: a rule-based reader of descriptions, answers and corrective feedback.

It finds the ontology's phrases (and their synonyms) in free text, attaches colour words to the
garment they describe, and tracks negation ("no backpack", "red, not white", "rather than a
skirt"), so that what a user says can be compared with what the model believes about images.
It reads the synthesiser's language exactly and real captions (CUHK-PEDES) reasonably.

Example:
    >>> [(f.slot, f.values, f.negated) for f in parse_facts("A woman in a red top, no backpack.")]
    [('gender', ('female',), False), ('upper_colour', ('red',), False), ('carried', ('backpack',), True)]
"""
from __future__ import annotations

import re
from functools import lru_cache

from minterpr.data.ontology import COLOURS, ONTOLOGY, VAGUE_COLOURS
from minterpr.data.phrasing import Fact

# Nouns that only say which garment a colour belongs to; they assert no type.
_PART_NOUNS = {
    "upper": ("top", "upper garment", "upper body", "shirt", "t-shirt", "tee", "jacket", "coat", "sweater", "hoodie",
              "blouse", "blazer", "vest", "tank top", "jumper", "pullover", "windbreaker", "polo", "suit"),
    "lower": ("bottoms", "lower garment", "trousers", "pants", "jeans", "shorts", "skirt", "slacks", "leggings",
              "capri pants", "lower body", "lower clothes", "dress", "miniskirt", "maxi skirt", "hot pants"),
    "feet": ("shoes", "sneakers", "trainers", "boots", "sandals", "footwear", "heels", "flats", "tights", "stockings"),
    "head": ("hair",),
}
_COLOUR_SLOT = {"upper": "upper_colour", "lower": "lower_colour", "feet": "footwear_colour", "head": "hair_colour"}
_SLOT_PART = {"upper_colour": "upper", "lower_colour": "lower", "footwear_colour": "feet", "hair_colour": "head",
              "upper_pattern": "upper", "lower_pattern": "lower"}
# Phrases too generic or too ambiguous to assert a value by themselves.
_IGNORED = {"top", "upper garment", "shoes", "regular shoes", "long", "short", "young", "an object", "print", "plain", "adult", "old", "casual", "formal", "smart", "male", "female", "suit"}
_EXTRA = {  # common real-caption words the ontology's phrases do not list
    ("gender", "male"): ("boy", "he", "his", "him"), ("gender", "female"): ("she", "her", "hers", "women"),
    ("age", "senior"): ("elderly",), ("lower_type", "trousers"): ("pants", "slacks"),
    ("carried", "backpack"): ("back pack", "backpacks"),
    ("carried", "messenger_bag"): ("bag", "shoulder bag", "cross body bag", "crossbody bag"),
    ("footwear_type", "sneakers"): ("tennis shoes", "sports shoes"),
    ("lower_type", "short_skirt"): ("skirt",), ("lower_type", "long_skirt"): ("skirt",),
    ("upper_pattern", "thin_stripes"): ("stripes", "striped"), ("upper_pattern", "thick_stripes"): ("stripes", "striped"),
}
# Nouns a colour word may describe that are not garments: the colour is then not a garment's.
_NON_GARMENT = {"belt", "bag", "bags", "backpack", "back", "hat", "cap", "umbrella", "object", "objects", "hood",
                "scarf", "purse", "handbag", "suitcase", "folder", "box", "phone", "cup", "bottle", "headphones",
                "glasses", "sunglasses", "watch", "necklace", "stripe", "stripes", "logo", "design", "car", "bike"}
_NEGATORS = {"no", "not", "without", "never", "n't", "nothing", "neither", "nor", "rather"}
_CONTRAST = ("rather than", "instead of", "not", "but not")
_TOKEN = re.compile(r"[a-z]+(?:-[a-z]+)*|n't|[.,;:!?]")


@lru_cache(maxsize=1)
def _lexicon() -> dict[tuple[str, ...], list[tuple[str, tuple[str, ...]]]]:
    """phrase tokens -> [(slot, values)] for every non-colour slot phrase (longest match wins)."""
    table: dict[tuple[str, ...], dict[str, list[str]]] = {}
    for slot in ONTOLOGY.slots:
        if slot.name.endswith("_colour"):
            continue
        for value in slot.values:
            for phrase in value.phrases + _EXTRA.get((slot.name, value.name), ()):
                if phrase in _IGNORED or not phrase:
                    continue
                key = tuple(_TOKEN.findall(phrase.lower()))
                table.setdefault(key, {}).setdefault(slot.name, []).append(value.name)
    return {k: [(s, tuple(sorted(set(v)))) for s, v in slots.items()] for k, slots in table.items()}


@lru_cache(maxsize=1)
def _colour_words() -> dict[tuple[str, ...], tuple[str, ...]]:
    words: dict[tuple[str, ...], set[str]] = {}
    for slot in ("upper_colour", "hair_colour"):
        for value in ONTOLOGY.slot(slot).values:
            for phrase in value.phrases:
                words.setdefault(tuple(_TOKEN.findall(phrase.lower())), set()).add(value.name)
    for word, meaning in VAGUE_COLOURS.items():
        words[(word,)] = set(meaning)
    words[("gray",)] = {"grey"}
    words[("dyed",)] = set()
    return {k: tuple(sorted(v)) for k, v in words.items() if v}


@lru_cache(maxsize=1)
def _part_nouns() -> dict[str, tuple[str, ...]]:
    """Generic garment nouns plus every phrase of the garment-type slots."""
    nouns = {part: list(words) for part, words in _PART_NOUNS.items()}
    for slot, part in (("upper_type", "upper"), ("lower_type", "lower"), ("footwear_type", "feet")):
        for value in ONTOLOGY.slot(slot).values:
            nouns[part].extend(p for p in value.phrases if p not in ("regular shoes",))
    # Longest first, so "suit trousers" is not read as the upper "suit".
    return {part: tuple(sorted(set(words), key=lambda w: -len(w.split()))) for part, words in nouns.items()}


def _part_at(tokens: list[str], i: int) -> str | None:
    """The body part named by a garment noun starting at token i, if any."""
    best: tuple[int, str] | None = None
    for part, nouns in _part_nouns().items():
        for noun in nouns:
            n = _TOKEN.findall(noun.lower())
            if tokens[i:i + len(n)] == n and (best is None or len(n) > best[0]):
                best = (len(n), part)
    return best[1] if best else None


def _part_of(tokens: list[str], start: int, stop: int) -> str | None:
    """The body part of the first garment noun in tokens[start:stop]."""
    for i in range(start, stop):
        part = _part_at(tokens[:stop], i)
        if part is not None:
            return part
    return None


_BOUNDARIES = {",", "and", "but", "rather", "than", "not", "no", "was", "were", "is", "are", "with", "had", "has"}


def _phrase_end(tokens: list[str], start: int, limit: int = 5) -> int:
    """End of the noun phrase a colour word opens: 'red and white striped t-shirt' but not
    'red, not pink and the hair'."""
    colours = _colour_words()
    end = start
    while end < len(tokens) and end - start < limit:
        token = tokens[end]
        if token in _BOUNDARIES and not (token == "and" and end + 1 < len(tokens) and (tokens[end + 1],) in colours):
            break
        end += 1
    return end


def _length_fact(tokens: list[str], i: int, negated: bool) -> Fact | None:
    """'long blue skirt', 'short grey hair': a length word a few words before its noun."""
    window = tokens[i + 1:_phrase_end(tokens, i + 1, limit=3)]
    if "hair" in window and window[:1] != ["hair"]:  # "long hair" itself is a lexicon phrase
        return Fact("hair_length", (tokens[i],), negated)
    if "skirt" in window and window[:1] != ["skirt"]:
        return Fact("lower_type", ("long_skirt" if tokens[i] == "long" else "short_skirt",), negated)
    return None


def parse_facts(text: str, *, context_slot: str | None = None) -> list[Fact]:
    """Facts a text asserts about the person sought.

    ``context_slot`` is the slot a question asked about: it gives bare answers ("navy",
    "nothing", "long") their meaning.
    """
    facts: list[Fact] = []
    for clause in re.split(r"[.;!?]", text.lower()):
        tokens = _TOKEN.findall(clause.replace("’", "'").replace("wasn't", "was n't").replace("didn't", "did n't"))
        facts.extend(_parse_clause(tokens, context_slot))
    return list(dict.fromkeys(facts))


def _parse_clause(tokens: list[str], context_slot: str | None) -> list[Fact]:
    lexicon, colours = _lexicon(), _colour_words()
    facts: list[Fact] = []
    negated = False
    last_part = _SLOT_PART.get(context_slot or "")
    pending_colours: list[tuple[tuple[str, ...], bool]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in (",", "and", "but", "though", "also", "with"):
            negated = False
            i += 1
            continue
        if token in _NEGATORS and not (token == "no" and i == 0 and len(tokens) > 1 and tokens[1] == ","):
            negated = not (token == "not" and i + 1 < len(tokens) and tokens[i + 1] in ("sure",))
            i += 1
            continue
        if token in ("long", "short"):
            length_fact = _length_fact(tokens, i, negated)
            if length_fact is not None:
                facts.append(length_fact)
        noun_part = _part_at(tokens, i)
        if noun_part is not None:
            last_part = noun_part
        match = None
        for length in (4, 3, 2, 1):
            key = tuple(tokens[i:i + length])
            if len(key) == length and (key in colours or key in lexicon):
                match = key
                break
        if match is None:
            i += 1
            continue
        if match in colours and match not in lexicon:
            following = tokens[i + len(match):_phrase_end(tokens, i + len(match))]
            if following and following[0] in _NON_GARMENT or (following[:1] == ["and"] and
                                                             following[2:3] and following[2] in _NON_GARMENT):
                i += len(match)
                continue
            # A colour word belongs to the next garment noun in the clause, else the last one.
            part = _part_of(tokens, i + len(match), _phrase_end(tokens, i + len(match))) or last_part
            if part is None and context_slot and context_slot.endswith("_colour"):
                part = _SLOT_PART[context_slot]
            if part is not None:
                facts.append(Fact(_COLOUR_SLOT[part], colours[match], negated))
                last_part = part
            i += len(match)
            continue
        for slot, values in lexicon[match]:
            if slot in ("headwear", "accessories", "carried") and any(ONTOLOGY.slot(slot).value(v).excludes_others
                                                                   for v in values):
                if context_slot not in (None, slot) or (context_slot is None and slot != "carried"):
                    continue  # "nothing" answers the question asked, not every slot
            if slot in ("upper_pattern", "lower_pattern"):
                part = _part_of(tokens, i + len(match), _phrase_end(tokens, i + len(match))) or last_part or "upper"
                slot = "lower_pattern" if part == "lower" else "upper_pattern"
                values = tuple(v for v in values if v in ONTOLOGY.slot(slot).value_names)
            if slot == "gender" and len(match) == 1 and match[0] in ("he", "his", "him", "she", "her", "hers"):
                negated_here = False  # pronouns are never negated: "not her" still means a woman was sought
            else:
                negated_here = negated
            if values:
                facts.append(Fact(slot, values, negated_here))
        part = _part_of(list(match), 0, len(match))
        last_part = part or last_part
        i += len(match)
    if context_slot and not facts:
        facts.extend(_bare_answer(tokens, context_slot))
    if context_slot and not facts and any(t in ("nothing", "none", "anything") for t in tokens):
        slot = ONTOLOGY.slot(context_slot)
        none = [v.name for v in slot.values if v.excludes_others]
        if none:
            facts.append(Fact(context_slot, tuple(none)))
    return facts


def _bare_answer(tokens: list[str], slot_name: str) -> list[Fact]:
    """'Long.' answering 'Were her trousers long or short?': the asked slot's own words."""
    slot = ONTOLOGY.slot(slot_name)
    found: dict[str, bool] = {}  # value -> negated (a negator right before the phrase)
    for value in slot.values:
        for phrase in value.phrases:
            words = _TOKEN.findall(phrase.lower())
            starts = [i for i in range(len(tokens)) if tokens[i:i + len(words)] == words]
            if starts:
                found[value.name] = starts[0] > 0 and tokens[starts[0] - 1] in _NEGATORS
                break
    if len(found) != 1 or slot_name.endswith("_colour"):
        return []
    (value, negated), = found.items()
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
