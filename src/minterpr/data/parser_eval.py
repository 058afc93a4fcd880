"""How well the text parser reads real people's words: fact precision, recall and F1 against
hand-labelled captions.

A labelled caption is a *reference* to a caption of a caption dataset (the file name, the
image path, the caption's index, a SHA-256 of its text) plus the facts a person read in it,
written as ``slot=value`` (one of several values: ``slot=a|b``; absence: ``slot!=value``). The
caption text itself is never stored with the labels: :func:`caption_texts` reads it from the
dataset and refuses a text whose hash differs. ``tests/data/README.md`` describes the labelling
rules and :func:`draw_sample` the seeded draw of the labelled CUHK-PEDES captions.

A parsed fact counts as right when a labelled fact of the same caption has the same slot, the
same set of values and the same polarity; scores are micro-averaged over facts, overall and
per slot.

Example:
    >>> label = LabelledCaption("x.json", "a.jpg", "c:1", 0, "", "random", "tune",
    ...                         (parse_fact_label("gender=female"), parse_fact_label("carried!=backpack")))
    >>> result = evaluate_parser([label], ["A woman in a red top, no backpack."])
    >>> result.micro.precision, result.micro.recall
    (0.6666666666666666, 1.0)
    >>> [format_fact(f) for f in result.items[0].spurious]
    ['upper_colour=red']
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from minterpr.data.errors import DataError
from minterpr.data.formats.captions import read_caption_dataset
from minterpr.data.formats.jsonl import iter_json_lines
from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.language.text_parser import parse_facts

PARTS = ("tune", "heldout")  # tune: looked at while improving the parser; heldout: only scored
_FIELDS = {
    "file": str,
    "path": str,
    "person_id": str,
    "caption": int,
    "sha256": str,
    "drawn": str,
    "part": str,
    "facts": list,
}
_FACT = re.compile(r"^([a-z_]+)(!?=)([a-z_]+(?:\|[a-z_]+)*)$")


@dataclass(frozen=True)
class LabelledCaption:
    """A reference to one caption of a caption dataset and the facts a person read in it."""

    file: str  # caption file name inside the captions directory ("test_reid_no_images.json")
    path: str  # the record's image path, as in the file
    person_id: str  # the record's namespaced identity (a check, not a key)
    caption: int  # index of the caption in the record's caption list
    sha256: str  # SHA-256 of the caption text (UTF-8), to detect a changed file
    drawn: str  # the draw bucket it came from (see draw_sample)
    part: str  # "tune" or "heldout"
    facts: tuple[Fact, ...]  # the facts it states about the person sought
    line: int = 0  # line of the labels file (for messages)


def parse_fact_label(text: str) -> Fact:
    """``"upper_colour=black|grey"`` -> Fact; ``"!="`` marks absence. ValueError names the fault.

    >>> parse_fact_label("carried!=backpack")
    Fact(slot='carried', values=('backpack',), negated=True)
    """
    match = _FACT.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not slot=value[|value...] or slot!=value")
    slot_name, op, values = match.groups()
    try:
        slot = ONTOLOGY.slot(slot_name)
        names = tuple(sorted(set(values.split("|"))))
        for name in names:
            slot.value(name)
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from None
    return Fact(slot_name, names, op == "!=")


def format_fact(fact: Fact) -> str:
    """The label form of a fact: ``slot=a|b`` or ``slot!=a``."""
    return f"{fact.slot}{'!=' if fact.negated else '='}{'|'.join(sorted(fact.values))}"


def read_labelled_captions(path: str | Path) -> list[LabelledCaption]:
    """Read a labels file (JSON Lines); a bad record raises DataError naming file, line and field."""
    file = str(path)
    out: list[LabelledCaption] = []
    for line, row in iter_json_lines(path, None):
        if not isinstance(row, dict):
            raise DataError(file, line, "<record>", "expected a JSON object")
        for name, kind in _FIELDS.items():
            if not isinstance(row.get(name), kind) or isinstance(row.get(name), bool):
                raise DataError(file, line, name, f"missing or not a {kind.__name__}")
        if row["part"] not in PARTS:
            raise DataError(file, line, "part", f"{row['part']!r} is not one of {', '.join(PARTS)}")
        if not re.fullmatch(r"[0-9a-f]{64}", row["sha256"]):
            raise DataError(file, line, "sha256", "expected 64 lower-case hex digits")
        facts = []
        for k, text in enumerate(row["facts"]):
            try:
                facts.append(parse_fact_label(text))
            except ValueError as exc:
                raise DataError(file, line, f"facts[{k}]", str(exc)) from None
        out.append(
            LabelledCaption(
                row["file"],
                row["path"],
                row["person_id"],
                row["caption"],
                row["sha256"],
                row["drawn"],
                row["part"],
                tuple(facts),
                line,
            )
        )
    return out


def caption_texts(
    labels: Sequence[LabelledCaption], captions_dir: str | Path, *, labels_file: str = "labels"
) -> list[str]:
    """The caption text of each label, read from ``captions_dir``; DataError when a caption is
    missing or its SHA-256 differs from the label's (the labels no longer describe it)."""
    records: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {}
    texts = []
    for label in labels:
        if label.file not in records:
            file = Path(captions_dir) / label.file
            if not file.is_file():
                raise DataError(labels_file, label.line, "file", f"no caption file {file}")
            records[label.file] = {
                r.path: (r.person_id, r.captions) for r in read_caption_dataset(file, format="cuhk-pedes")
            }
        found = records[label.file].get(label.path)
        if found is None or label.caption >= len(found[1]) or found[0] != label.person_id:
            raise DataError(
                labels_file,
                label.line,
                "path",
                f"{label.file} has no caption {label.caption} of {label.path} for {label.person_id}",
            )
        text = found[1][label.caption]
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != label.sha256:
            raise DataError(
                labels_file,
                label.line,
                "sha256",
                f"caption {label.caption} of {label.path} in "
                f"{label.file} has changed: its SHA-256 differs from the label's",
            )
        texts.append(text)
    return texts


@dataclass
class FactScores:
    """Counts of facts: right (parsed and labelled), parsed, labelled."""

    right: int = 0
    parsed: int = 0
    labelled: int = 0

    @property
    def precision(self) -> float:
        return self.right / self.parsed if self.parsed else 1.0

    @property
    def recall(self) -> float:
        return self.right / self.labelled if self.labelled else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass(frozen=True)
class ItemResult:
    """One caption's comparison: the labelled facts the parser missed and those it made up."""

    label: LabelledCaption
    missed: tuple[Fact, ...]
    spurious: tuple[Fact, ...]


@dataclass
class ParserEvaluation:
    """Micro scores over all facts, per slot, and each caption's errors."""

    micro: FactScores = field(default_factory=FactScores)
    per_slot: dict[str, FactScores] = field(default_factory=dict)
    items: list[ItemResult] = field(default_factory=list)


def _key(fact: Fact) -> tuple[str, frozenset[str], bool]:
    return fact.slot, frozenset(fact.values), fact.negated


def evaluate_parser(
    labels: Sequence[LabelledCaption], texts: Sequence[str], *, parse: Callable[[str], Iterable[Fact]] = parse_facts
) -> ParserEvaluation:
    """Compare ``parse(text)`` with each label's facts (see the module doc for what counts)."""
    if len(labels) != len(texts):
        raise ValueError(f"{len(labels)} labels but {len(texts)} texts")
    result = ParserEvaluation()
    for label, text in zip(labels, texts):
        gold = {_key(f): f for f in label.facts}
        parsed = {_key(f): f for f in parse(text)}
        for keys, attribute in ((gold, "labelled"), (parsed, "parsed"), (gold.keys() & parsed.keys(), "right")):
            for slot, _, _ in keys:
                for scores in (result.micro, result.per_slot.setdefault(slot, FactScores())):
                    setattr(scores, attribute, getattr(scores, attribute) + 1)
        result.items.append(
            ItemResult(
                label,
                tuple(gold[k] for k in gold.keys() - parsed.keys()),
                tuple(parsed[k] for k in parsed.keys() - gold.keys()),
            )
        )
    result.per_slot = {s: result.per_slot[s] for s in ONTOLOGY.slot_names if s in result.per_slot}
    return result


# The labelled CUHK-PEDES sample: hard buckets first (absence, several people, hedged colours,
# unusual garment names; each a pattern over the lower-cased caption), then uniform draws. One
# caption per record; within a bucket, every fifth draw is held out.
CUHK_FILES = ("val_reid_no_images.json", "test_reid_no_images.json")
DRAW_BUCKETS: tuple[tuple[str, str | None, int], ...] = (
    ("absence", r"\b(?:no|not|without|nothing|neither|nor)\b|n't\b", 30),
    (
        "several_people",
        r"\b(?:another|others?|two (?:men|women|people|persons|girls|boys|ladies)|both of them|"
        r"next to (?:a|an|another)|walking with|behind (?:him|her)|in front of (?:him|her)|holding hands|"
        r"with (?:a|her|his) (?:friend|child|son|daughter|companion|baby|kid|boyfriend|girlfriend|husband|wife))\b",
        30,
    ),
    (
        "hedged_colour",
        r"\b(?:(?:redd|blu|green|gr[ae]y|brown|pink|purpl|yellow|orang|whit|black|tan)ish|off[- ]white|navy|"
        r"khaki|beige|tan|maroon|burgundy|teal|turquoise|olive|cream|mustard|lavender|peach|salmon|charcoal|"
        r"(?:light|dark|pale|bright)[- ]?(?:colou?red|blue|gr[ae]y|brown|green|pink|red|purple|yellow|orange))\b",
        30,
    ),
    (
        "garment_names",
        r"\b(?:cardigan|hoodie|sweatshirt|blouse|capris?|leggings|khakis|sweatpants|tank top|vest|parka|"
        r"windbreaker|overalls|romper|tote|satchel|purse|clutch|flip[- ]?flops|heels|loafers|boots|sandals|"
        r"jumpsuit|blazer|poncho|trench|fleece|jersey|pullover|culottes|tights|messenger|briefcase|"
        r"luggage|suitcase|umbrella|stroller|headband|beanie|scarf)\b",
        30,
    ),
    ("random", None, 130),
)


def draw_sample(captions_dir: str | Path, *, seed: int = 12) -> list[tuple[LabelledCaption, str]]:
    """The seeded draw of captions to label: (reference without facts, caption text) pairs.

    Reproduces the references of ``tests/data/cuhk_pedes_caption_facts.jsonl`` from the
    CUHK-PEDES val and test files (the texts are for the labeller, never for the repository).
    """
    rows = [
        (name, record)
        for name in CUHK_FILES
        for record in read_caption_dataset(Path(captions_dir) / name, format="cuhk-pedes")
    ]
    rng = random.Random(seed)
    order = list(range(len(rows)))
    rng.shuffle(order)
    used: set[int] = set()
    out: list[tuple[LabelledCaption, str]] = []
    for bucket, pattern, count in DRAW_BUCKETS:
        drawn = 0
        for r in order:
            if drawn == count:
                break
            name, record = rows[r]
            indices = [
                i
                for i, c in enumerate(record.captions)
                if c.strip() and (pattern is None or re.search(pattern, c.lower()))
            ]
            if r in used or not indices:
                continue
            k = indices[rng.randrange(len(indices))]
            used.add(r)
            text = record.captions[k]
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            part = "heldout" if drawn % 5 == 4 else "tune"
            out.append((LabelledCaption(name, record.path, record.person_id, k, digest, bucket, part, ()), text))
            drawn += 1
    return out


# ------------------------------------------------------------------------------ style
_GROUPS = {
    "gender": "person",
    "age": "person",
    "hair_length": "hair",
    "hair_colour": "hair",
    "upper_type": "upper",
    "upper_colour": "upper",
    "upper_pattern": "upper",
    "sleeve_length": "upper",
    "upper_style": "upper",
    "neckline": "upper",
    "lower_type": "lower",
    "lower_colour": "lower",
    "lower_pattern": "lower",
    "lower_length": "lower",
    "lower_style": "lower",
    "footwear_type": "feet",
    "footwear_colour": "feet",
    "carried": "carried",
    "headwear": "head items",
    "accessories": "head items",
}
_ORDER_PAIRS = (("person", "upper"), ("hair", "upper"), ("upper", "lower"), ("lower", "feet"), ("upper", "carried"))
_WORD = re.compile(r"[a-z]+")


def caption_vocabulary(texts: Iterable[str], *, min_count: int = 2) -> set[str]:
    """Lower-case words that occur at least ``min_count`` times in ``texts``."""
    counts: dict[str, int] = {}
    for text in texts:
        for word in _WORD.findall(text.lower()):
            counts[word] = counts.get(word, 0) + 1
    return {w for w, n in counts.items() if n >= min_count}


def style_statistics(texts: Sequence[str], vocabulary: set[str] | None = None) -> dict[str, float]:
    """How a set of descriptions reads: length in words (mean, 10/50/90th percentiles), sentences,
    parsed facts and slots per text, the share of words found in ``vocabulary`` (real captions'
    words), and the order of mentions (share of texts that name the person first; for each pair of
    body parts named together, the share that names the first one first).

    >>> stats = style_statistics(["A man in a red shirt and blue jeans.", "Black shoes. A woman."])
    >>> stats["words_mean"], stats["person_first"], stats["upper<lower"]
    (6.5, 0.5, 1.0)
    """
    lengths = sorted(len(t.split()) for t in texts)
    if not lengths:
        raise ValueError("no texts")
    out = {"texts": float(len(texts)), "words_mean": sum(lengths) / len(lengths)}
    for q in (10, 50, 90):
        out[f"words_p{q}"] = float(lengths[min(len(lengths) - 1, len(lengths) * q // 100)])
    out["sentences_mean"] = sum(max(1, len(re.findall(r"[.!?]+(?:\s|$)", t))) for t in texts) / len(texts)
    facts = [parse_facts(t) for t in texts]
    out["facts_mean"] = sum(len(f) for f in facts) / len(texts)
    out["slots_mean"] = sum(len({x.slot for x in f}) for f in facts) / len(texts)
    if vocabulary is not None:
        words = [w for t in texts for w in _WORD.findall(t.lower())]
        out["in_vocabulary"] = sum(w in vocabulary for w in words) / max(1, len(words))
    orders = [list(dict.fromkeys(_GROUPS[x.slot] for x in f)) for f in facts]
    out["person_first"] = sum(o[:1] == ["person"] for o in orders) / len(texts)
    for first, second in _ORDER_PAIRS:
        both = [o for o in orders if first in o and second in o]
        out[f"{first}<{second}"] = (
            sum(o.index(first) < o.index(second) for o in both) / len(both) if both else float("nan")
        )
    return out
