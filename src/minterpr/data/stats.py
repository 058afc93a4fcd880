"""Dataset statistics as plain dicts (JSON-ready) and a readable text rendering.

``dialogue_stats`` works on any iterable of :class:`RetrievalSample` (MInterPEDES, ChatPedes,
caption datasets turned into round-0 samples), ``gallery_stats`` on :class:`GalleryImage`
(manifests, attribute datasets). Both consume their input once, so a streaming reader can
feed them without holding the records. ``format_stats`` renders any such dict: int-keyed
dicts as histograms, ``{min, mean, median, max}`` dicts on one line, other dicts as blocks.

Example:
    >>> from minterpr.types import Dialogue, QATurn, RetrievalSample
    >>> stats = dialogue_stats([RetrievalSample("a.jpg", "x:1", Dialogue("a tall man", (QATurn("Bag?", "none"),)))])
    >>> stats["text_turns"], stats["description_words"]["max"]
    ({1: 1}, 3)
    >>> print(format_stats({"images": 2, "views": {"front": 2}, "per_id": {"min": 1, "mean": 1.5}}))
    images  2
    views
      front  2
    per_id  min 1  mean 1.50
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Iterable, Mapping, Sequence

from minterpr.language.ontology import ONTOLOGY
from minterpr.types import GalleryImage, RetrievalSample

_SUMMARY_KEYS = ("min", "mean", "median", "max")


def summary(values: Sequence[float]) -> dict[str, float] | None:
    """``{min, mean, median, max}`` of the values (mean rounded to 2 places); None when empty."""
    if not values:
        return None
    return {
        "min": min(values),
        "mean": round(statistics.fmean(values), 2),
        "median": statistics.median(values),
        "max": max(values),
    }


def histogram(values: Iterable[int]) -> dict[int, int]:
    """Count of each value, keys in increasing order."""
    return dict(sorted(Counter(values).items()))


def word_count(text: str) -> int:
    return len(text.split())


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 2) if values else None


def dialogue_stats(samples: Iterable[RetrievalSample]) -> dict[str, object]:
    """Counts and length statistics of dialogues (one pass over ``samples``).

    Keys: dialogues, identities, target_images; histograms text_turns, image_turns, rounds
    (per dialogue); summaries rounds_per_dialogue and description_words; the mean word count
    of questions, answers and reference feedback (None when there are none).
    """
    identities: set[str] = set()
    targets: set[str] = set()
    t_counts: list[int] = []
    i_counts: list[int] = []
    description_words: list[int] = []
    question_words: list[int] = []
    answer_words: list[int] = []
    feedback_words: list[int] = []
    for sample in samples:
        dialogue = sample.dialogue
        identities.add(sample.person_id)
        targets.add(sample.target_path)
        t_counts.append(len(dialogue.qa_turns))
        i_counts.append(len(dialogue.reference_turns))
        description_words.append(word_count(dialogue.description))
        for qa in dialogue.qa_turns:
            question_words.append(word_count(qa.question))
            answer_words.append(word_count(qa.answer))
        feedback_words.extend(word_count(ref.feedback) for ref in dialogue.reference_turns)
    rounds = [1 + t + i for t, i in zip(t_counts, i_counts)]
    return {
        "dialogues": len(rounds),
        "identities": len(identities),
        "target_images": len(targets),
        "text_turns": histogram(t_counts),
        "image_turns": histogram(i_counts),
        "rounds": histogram(rounds),
        "rounds_per_dialogue": summary(rounds),
        "description_words": summary(description_words),
        "question_words_mean": _mean(question_words),
        "answer_words_mean": _mean(answer_words),
        "feedback_words_mean": _mean(feedback_words),
    }


def gallery_stats(images: Iterable[GalleryImage]) -> dict[str, object]:
    """Counts of a gallery (one pass): images, identities, cameras, images per identity, views,
    and per ontology slot the fraction of images whose attributes label that slot."""
    per_identity: Counter[str] = Counter()
    cameras: set[str] = set()
    views: Counter[str] = Counter()
    slots: Counter[str] = Counter()
    without_camera = with_attributes = 0
    for image in images:
        per_identity[image.person_id] += 1
        if image.camera_id is None:
            without_camera += 1
        else:
            cameras.add(image.camera_id)
        views[image.view if image.view is not None else "unknown"] += 1
        if image.attributes is not None:
            with_attributes += 1
            slots.update(image.attributes.keys())
    n = sum(per_identity.values())
    extra_slots = sorted(set(slots) - set(ONTOLOGY.slot_names))  # only from unvalidated input
    return {
        "images": n,
        "identities": len(per_identity),
        "cameras": len(cameras),
        "images_without_camera": without_camera,
        "images_per_identity": summary(list(per_identity.values())),
        "views": dict(sorted(views.items())),
        "images_with_attributes": with_attributes,
        "attribute_coverage": {
            slot: round(slots[slot] / n, 4) if n else 0.0 for slot in (*ONTOLOGY.slot_names, *extra_slots)
        },
    }


def _is_histogram(value: Mapping[object, object]) -> bool:
    # JSON turns int keys into digit strings: accept both so loaded stats render the same.
    return bool(value) and all(isinstance(k, int) or (isinstance(k, str) and k.isdigit()) for k in value)


def _scalar(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() else f"{value:.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def format_stats(stats: Mapping[str, object], title: str | None = None, indent: int = 0) -> str:
    """Render a stats dict as aligned ``name  value`` lines (nested dicts indented)."""
    lines = [title] if title else []
    pad = " " * (indent + (2 if title else 0))
    width = max((len(str(key)) for key in stats), default=0)
    for key, value in stats.items():
        name = f"{pad}{str(key):<{width}}"
        if isinstance(value, Mapping) and value and set(value) <= set(_SUMMARY_KEYS):
            lines.append(f"{name}  " + "  ".join(f"{k} {_scalar(v)}" for k, v in value.items()))
        elif isinstance(value, Mapping) and _is_histogram(value):
            lines.append(f"{name}  " + "  ".join(f"{k}: {_scalar(v)}" for k, v in value.items()))
        elif isinstance(value, Mapping) and value:
            lines.append(f"{pad}{key}")
            lines.append(format_stats(value, indent=len(pad) + 2))
        else:
            lines.append(f"{name}  {_scalar(value if not isinstance(value, Mapping) else None)}".rstrip())
    return "\n".join(lines)
