"""Why an image ranks where it does: which facts of the conversation it matches or contradicts.

A fact is judged against the image's ground-truth attributes when the backend sees them (the
oracle attribute backend), otherwise against the index's predicted attribute probabilities
with a 0.5 threshold; a fact neither can judge is "unknown".

Example:
    >>> import numpy as np
    >>> from minterpr.language.phrasing import Fact
    >>> from minterpr.index.gallery_index import GalleryIndex
    >>> from minterpr.types import GalleryImage
    >>> image = GalleryImage("a.jpg", "x:1", attributes={"upper_colour": ("red",), "carried": ("backpack",)})
    >>> index = GalleryIndex([image], np.ones((1, 2), dtype=np.float32))
    >>> e = explain_image(index, 0, [Fact("upper_colour", ("red",)), Fact("carried", ("backpack",), negated=True)],
    ...                   use_ground_truth=True)
    >>> e.summary()
    'matches: top colour: red | contradicts: carried items: not backpack'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.index.gallery_index import GalleryIndex

_COLUMN = {label: j for j, label in enumerate(ONTOLOGY.flat_labels())}


def describe_fact(fact: Fact) -> str:
    """'top colour: red', 'carried items: not backpack', 'age: child/young'."""
    values = "/".join(v.replace("_", " ") for v in fact.values)
    return f"{ONTOLOGY.slot(fact.slot).label}: {'not ' if fact.negated else ''}{values}"


@dataclass(frozen=True)
class Explanation:
    """How one gallery image relates to the facts so far."""

    index: int  # gallery index of the image
    path: str  # its path
    matched: tuple[Fact, ...]  # facts that hold for it
    contradicted: tuple[Fact, ...]  # facts that do not
    unknown: tuple[Fact, ...]  # facts nothing can judge for it
    source: str  # "ground_truth" or "predicted" (attribute_probs >= threshold) or "none"
    by_user: tuple[Fact, ...] = ()  # of the facts above, those judged by what the user said of this image

    def summary(self) -> str:
        parts = []
        if self.matched:
            parts.append("matches: " + ", ".join(describe_fact(f) for f in self.matched))
        if self.contradicted:
            parts.append("contradicts: " + ", ".join(describe_fact(f) for f in self.contradicted))
        return " | ".join(parts) or "no known attributes to compare"


def _predicted_holds(fact: Fact, probs: np.ndarray, threshold: float) -> bool:
    present = any(probs[_COLUMN[(fact.slot, v)]] >= threshold for v in fact.values)
    return not present if fact.negated else present


def _stated_holds(fact: Fact, stated: Sequence[Fact]) -> bool | None:
    """``fact`` judged by what the user said of the image ("these are blue"); None when they said nothing of its slot."""
    said = [f for f in stated if f.slot == fact.slot]
    present_values = {v for f in said if not f.negated for v in f.values}
    absent_values = {v for f in said if f.negated for v in f.values}
    if present_values:
        present = bool(set(fact.values) & present_values)
    elif absent_values and set(fact.values) <= absent_values:
        present = False
    else:
        return None
    return not present if fact.negated else present


def explain_image(index: GalleryIndex, i: int, facts: Sequence[Fact], *, use_ground_truth: bool = False,
                  threshold: float = 0.5, stated: Sequence[Fact] = ()) -> Explanation:
    """Sort ``facts`` (duplicates dropped) into matched / contradicted / unknown for gallery image ``i``.

    ``stated``: what the user said of this image when it was shown ("these are blue"); it judges the
    facts of its slots before the labels or the model do (the user looked at the image).

    >>> from minterpr.types import GalleryImage
    >>> index = GalleryIndex([GalleryImage("a.jpg", "x:1")], np.ones((1, 2), dtype=np.float32))
    >>> e = explain_image(index, 0, [Fact("footwear_colour", ("brown",))], stated=[Fact("footwear_colour", ("blue",))])
    >>> e.summary(), len(e.by_user)
    ('contradicts: shoe colour: brown', 1)
    """
    image = index.images[i]
    matched, contradicted, unknown, by_user = [], [], [], []
    truth = image.attributes if use_ground_truth else None
    source = "ground_truth" if truth is not None else ("predicted" if index.attribute_probs is not None else "none")
    for fact in dict.fromkeys(facts):
        said = _stated_holds(fact, stated)
        if said is not None:
            holds = said
            by_user.append(fact)
        elif truth is not None:
            holds = fact.holds(truth)
        elif index.attribute_probs is not None:
            holds = _predicted_holds(fact, index.attribute_probs[i], threshold)
        else:
            holds = None
        (unknown if holds is None else matched if holds else contradicted).append(fact)
    return Explanation(i, image.path, tuple(matched), tuple(contradicted), tuple(unknown), source, tuple(by_user))
