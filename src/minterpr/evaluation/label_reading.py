"""A ceiling for the attribute model: the gallery read through its own labels.

Benchmarks ask "how far would a better attribute model take this search?" by replacing the model's
attribute probabilities with the labels: a labelled (slot, value) reads ``confidence`` where the
image has it and ``1 - confidence`` where it does not; unlabelled slots keep the model's reading,
and so does everything else the model computes (the embedding, the appearance vectors). With
``errors`` a share of the (person, slot) pairs is read as one other value of the slot, the same on
every crop of that person, as a model misreads one outfit on every crop of it. A measurement tool
only: no search path reads labels.

Example:
    >>> from minterpr.types import GalleryImage
    >>> images = [GalleryImage("a.jpg", "x:1", attributes={"gender": ("male",)}), GalleryImage("b.jpg", "x:2")]
    >>> probs = np.full((2, len(ONTOLOGY.flat_labels())), 0.5, np.float32)  # a model's reading
    >>> index = GalleryIndex(images, np.eye(2, 4, dtype=np.float32), probs)
    >>> read = read_from_labels(index, confidence=0.9)
    >>> [round(float(p), 2) for p in read.attribute_probs[0, :2]]  # gender: male, female
    [0.9, 0.1]
    >>> bool((read.attribute_probs[1] == index.attribute_probs[1]).all())  # no labels: the model's
    True
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import numpy as np

from minterpr.errors import InputError
from minterpr.index.gallery_index import GalleryIndex
from minterpr.language.ontology import ONTOLOGY
from minterpr.types import Attributes


RANGE = "confidence in (0.5, 1] and errors in [0, 1]"  # what a reading may be, in its errors' words


def _in_range(confidence: float, errors: float) -> bool:
    return 0.5 < confidence <= 1.0 and 0.0 <= errors <= 1.0


def label_truth(index: GalleryIndex, attributes: Mapping[str, Attributes] | None = None) -> np.ndarray:
    """(N, L) 1 / 0 where an image's slot is labelled (has / lacks the value), NaN where it is not;
    columns are :meth:`~minterpr.language.ontology.Ontology.flat_labels`. ``attributes``: labels by
    person id, for galleries whose images carry none (a video's crops); default: each image's own."""
    labels = ONTOLOGY.flat_labels()
    truth = np.full((len(index.images), len(labels)), np.nan, np.float32)
    for row, image in enumerate(index.images):
        known = image.attributes if attributes is None else attributes.get(image.person_id)
        for column, (slot, value) in enumerate(labels):
            if known and known.get(slot):
                truth[row, column] = 1.0 if value in known[slot] else 0.0
    return truth


def misread(truth: np.ndarray, person_ids: np.ndarray, errors: float, seed: int = 0) -> np.ndarray:
    """``truth`` with a share ``errors`` of its labelled (person, slot) pairs read as one other value
    of the slot, drawn once per person so that all their crops agree (seeded)."""
    out = truth.copy()
    if errors <= 0:
        return out
    rng = np.random.default_rng(seed)
    people, person_of = np.unique(person_ids, return_inverse=True)
    for columns in ONTOLOGY.slot_columns().values():
        flipped = rng.random(len(people)) < errors  # (P,) this slot misread for the person
        pick = rng.random(len(people))  # (P,) which wrong value, the same for every crop
        for row in np.flatnonzero(np.isfinite(out[:, columns[0]]) & flipped[person_of]):
            wrong = [c for c in columns if out[row, c] < 0.5]
            if wrong:
                out[row, columns] = 0.0
                out[row, wrong[int(pick[person_of[row]] * len(wrong))]] = 1.0
    return out


def read_from_labels(
    index: GalleryIndex,
    *,
    confidence: float = 0.9,
    errors: float = 0.0,
    seed: int = 0,
    attributes: Mapping[str, Attributes] | None = None,
) -> GalleryIndex:
    """A copy of ``index`` whose attribute probabilities come from the labels (module doc)."""
    if index.attribute_probs is None:
        raise InputError("read_from_labels: the index has no attribute probabilities to replace")
    if not _in_range(confidence, errors):
        raise InputError(f"read_from_labels: {RANGE}, got {confidence}, {errors}")
    truth = misread(label_truth(index, attributes), index.person_ids, errors, seed)
    probs = index.attribute_probs.copy()
    known = np.isfinite(truth)
    probs[known] = np.where(truth[known] > 0.5, confidence, 1.0 - confidence)
    out = replace(index, attribute_probs=probs.astype(index.attribute_probs.dtype))
    out.vectors, out.fused = index.vectors, None  # the embedding's ANN index still holds; fused vectors change
    return out


def parse_label_reading(text: str) -> tuple[float, float]:
    """``"CONFIDENCE[:ERRORS]"`` (a benchmark's ``--label-reading``) -> (confidence, errors).

    Example:
        >>> parse_label_reading("0.9"), parse_label_reading("0.9:0.25")
        ((0.9, 0.0), (0.9, 0.25))
    """
    head, _, tail = text.partition(":")
    try:
        confidence, errors = float(head), float(tail) if tail else 0.0
    except ValueError:
        raise InputError(f"--label-reading: expected CONFIDENCE[:ERRORS], e.g. 0.9 or 0.9:0.25, got {text!r}") from None
    if not _in_range(confidence, errors):
        raise InputError(f"--label-reading: {RANGE}, got {text!r}")
    return confidence, errors
