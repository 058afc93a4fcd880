"""Choosing the attribute-evidence weight ``w`` on a validation split by replaying its dialogues.

:func:`select_attribute_weight` indexes the gallery and encodes the dialogues once
(:mod:`minterpr.evaluation.static`'s replay), then scores every ``w`` of the grid; the model stores
the chosen :class:`~minterpr.interaction.reranking.RerankConfig` (checkpoint extra ``"scoring"``).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from minterpr.errors import InputError
from minterpr.evaluation.static import DialogueReplay
from minterpr.interaction.reranking import RerankConfig
from minterpr.types import GalleryImage, RetrievalSample

DEFAULT_WEIGHT_GRID = (0.0, 0.02, 0.05, 0.1, 0.2, 0.4)  # w candidates tried on the validation split
_CACHE_COSINES = 2**27  # a weight search keeps every round's query scores up to this many (512 MB float32)


def select_attribute_weight(
    backend: Any,
    samples: Sequence[RetrievalSample],
    gallery_images: Sequence[GalleryImage],
    image_root: str | os.PathLike[str] | None,
    grid: Sequence[float] = DEFAULT_WEIGHT_GRID,
    *,
    prob_floor: float | None = None,
    progress: bool = False,
    index: Any = None,
    queries: Sequence[np.ndarray] | None = None,
    reranking: RerankConfig | None = None,
) -> tuple[RerankConfig, dict[float, float]]:
    """The ``attribute_weight`` of ``grid`` with the best R@1 after the last round (ties: mean R@1
    over rounds), and every candidate's R@1@last. Use a validation split, never the test split.

    Every candidate is ``reranking`` (default: ``RerankConfig()``; ``prob_floor`` overrides its floor)
    with the attributes on and that weight; the other terms stay as ``reranking`` has them, so the
    weight is chosen for the scoring sessions and ``evaluate_dialogues`` apply. Returns that
    whole config (store its ``to_dict()``).

    The gallery is indexed and the dialogues encoded once; only the scores change per w.
    Outputs the caller already has skip that work: ``index`` (the gallery indexed by the same
    model) and ``queries`` (per dialogue, its (R_i, D) queries); with both, ``backend`` is unused.
    """
    base = RerankConfig() if reranking is None else reranking
    if prob_floor is not None:
        base = base.with_(prob_floor=prob_floor)
    if not grid:
        raise InputError("grid: at least one attribute weight to try")
    replay = DialogueReplay(backend, samples, gallery_images, image_root, None, False, progress, index, queries)
    if replay.attribute_probs is None:
        raise InputError("choosing an attribute weight needs a backend whose index has attribute_probs")
    replay.cache_cosines = len(grid) > 1 and len(samples) * len(replay.gallery) * replay.num_rounds <= _CACHE_COSINES
    tried: dict[float, float] = {}
    best_key, best = None, base
    for w in grid:
        candidate = base.with_(attributes=True, attribute_weight=float(w))
        rounds = replay.metrics(candidate)["rounds"]
        tried[float(w)] = rounds[-1]["r1"]
        key = (rounds[-1]["r1"], float(np.mean([row["r1"] for row in rounds])))
        if best_key is None or key > best_key:
            best_key, best = key, candidate
    return best, tried
