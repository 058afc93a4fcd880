"""A ceiling for the appearance model: the gallery's appearance vectors drawn from its identities.

Benchmarks ask "how far would a better appearance model take this search?" by replacing each crop's
appearance vector with one that knows who it shows: a random unit vector per person (seeded), mixed
with the model's own vector by ``weight`` (1: identity alone, so one person's crops have cosine 1
and two people's about 0; 0: the model's vectors, renormalised). The attribute probabilities, the
embedding and the same-person calibration stay the model's, so the calibration turns those cosines
into probabilities as it would a better model's. Crops without a labelled person each carry an id of
their own and so count as a person of their own. A measurement tool only: no search path reads
identities; :mod:`minterpr.evaluation.label_reading` is its counterpart for the attributes.

Example:
    >>> from minterpr.types import GalleryImage
    >>> images = [GalleryImage(f"{i}.jpg", pid) for i, pid in enumerate(["x:1", "x:1", "x:2"])]
    >>> index = GalleryIndex(images, np.eye(3, 4, dtype=np.float32), appearance=np.eye(3, 8, dtype=np.float32))
    >>> vectors = appearance_from_identity(index).appearance
    >>> round(float(vectors[0] @ vectors[1]), 4)  # one person's two crops
    1.0
    >>> appearance_from_identity(index, weight=0.0).appearance[0].tolist() == index.appearance[0].tolist()
    True
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from minterpr.errors import InputError
from minterpr.index.gallery_index import GalleryIndex


def appearance_from_identity(index: GalleryIndex, *, weight: float = 1.0, seed: int = 0) -> GalleryIndex:
    """A copy of ``index`` whose appearance vectors are ``weight`` identity and ``1 - weight`` the
    model's, L2-normalised (module doc). The copy drops the appearance neighbour index
    (``appearance_vectors``), which holds the model's vectors, so comparisons scan the new ones."""
    if index.appearance is None:
        raise InputError("appearance_from_identity: the index has no appearance vectors to replace")
    if not 0.0 <= weight <= 1.0:
        raise InputError(f"appearance_from_identity: weight in [0, 1], got {weight}")
    model = index.appearance  # (N, A) L2-normalised
    people, person_of = np.unique(np.asarray(index.person_ids), return_inverse=True)
    identity = np.random.default_rng(seed).standard_normal((len(people), model.shape[1]))  # (P, A)
    identity /= np.linalg.norm(identity, axis=1, keepdims=True)
    mixed = weight * identity[person_of] + (1.0 - weight) * model  # (N, A)
    norms = np.linalg.norm(mixed, axis=1, keepdims=True)
    # a crop whose model vector is the exact opposite of its identity's at weight 0.5: keep the model's
    mixed = np.where(norms > 1e-6, mixed / np.maximum(norms, 1e-6), model)
    return replace(index, appearance=mixed.astype(np.float32), appearance_vectors=None)


def parse_identity_appearance(text: str) -> float:
    """A benchmark's ``--identity-appearance WEIGHT`` -> the weight in [0, 1].

    Example:
        >>> parse_identity_appearance("1"), parse_identity_appearance("0.5")
        (1.0, 0.5)
    """
    try:
        weight = float(text)
    except ValueError:
        raise InputError(f"--identity-appearance: expected a weight in [0, 1], e.g. 1 or 0.5, got {text!r}") from None
    if not 0.0 <= weight <= 1.0:
        raise InputError(f"--identity-appearance: a weight in [0, 1], got {text!r}")
    return weight
