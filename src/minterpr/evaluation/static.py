"""Static (replayed) evaluation: recorded dialogues, ranked round by round against a gallery.

Round 0 is the description alone; round r adds the r-th recorded turn. Every round ranks the
whole gallery, giving per-round R@1/5/10, mAP, mINP, cumulative Hits@k and BRI
(:func:`~minterpr.evaluation.metrics.per_round_metrics`).

Dialogues of different lengths: a dialogue that has ended keeps its last query for the later
rounds (the user has nothing more to say; the ranking they see stays), so every round has
all queries and the rounds remain comparable. ``protocol["ended_dialogues"]`` records this.

``description_only=True`` is the single-shot baseline protocol: every round uses the
description alone (a text-to-image model that ignores the conversation), so its curve is flat
and the gap to the dialogue curve is what interaction adds.

Example:
    >>> import numpy as np
    >>> from minterpr.index.gallery_index import GalleryIndex
    >>> from minterpr.types import Dialogue, GalleryImage, QATurn, RetrievalSample
    >>> class Toy:  # a backend: images embed by their first letter, turns by their last word
    ...     def index_images(self, images, root=None, *, progress=False):
    ...         e = np.array([[1.0, 0.0] if i.path[0] == "a" else [0.0, 1.0] for i in images], np.float32)
    ...         return GalleryIndex(list(images), e, root=root)
    ...     def encode_turns(self, turns, index):
    ...         words = [getattr(t, "text", getattr(t, "answer", "")).split()[-1] for t in turns]
    ...         return np.array([[1.0, 0.0] if w == "a" else [0.0, 1.0] for w in words], np.float32)
    >>> gallery = [GalleryImage("a.jpg", "x:1"), GalleryImage("b.jpg", "x:2")]
    >>> sample = RetrievalSample("a.jpg", "x:1", Dialogue("person b", (QATurn("which?", "a"),)))
    >>> report = evaluate_dialogues(Toy(), [sample], gallery, None, {"dataset": "toy"})
    >>> [row["r1"] for row in report.rounds], report.protocol["num_queries"]
    ([0.0, 100.0], 1)
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.evaluation.metrics import per_round_metrics
from minterpr.evaluation.report import EvaluationReport, build_report
from minterpr.types import GalleryImage, RetrievalSample, Turn

UNLABELLED_NAMESPACE = "unlabelled"  # person-id namespace of gallery images whose identity is unknown


def gallery_from_samples(samples: Sequence[RetrievalSample]) -> list[GalleryImage]:
    """A gallery without a manifest: every target and reference image of ``samples``.

    Targets carry their sample's person id; a reference image that is nobody's target gets a
    unique ``"unlabelled:<path>"`` id, so it is a distractor that never counts as a match.

    Example:
        >>> from minterpr.types import Dialogue, ReferenceTurn
        >>> s = RetrievalSample("a.jpg", "x:1", Dialogue("d", (), (ReferenceTurn("b.jpg", "no"),)))
        >>> [(g.path, g.person_id) for g in gallery_from_samples([s])]
        [('a.jpg', 'x:1'), ('b.jpg', 'unlabelled:b.jpg')]
    """
    pid_of: dict[str, str] = {}
    for s in samples:
        pid_of.setdefault(s.target_path, s.person_id)
    for s in samples:
        for ref in s.dialogue.reference_turns:
            pid_of.setdefault(ref.reference_path, f"{UNLABELLED_NAMESPACE}:{ref.reference_path}")
    return [GalleryImage(path, pid) for path, pid in pid_of.items()]


def dialogue_turns(sample: RetrievalSample, max_rounds: int | None = None,
                   description_only: bool = False) -> list[Turn]:
    """The turns replayed for ``sample``: all (or the first ``max_rounds``), or the description alone."""
    turns = list(sample.dialogue.turns())
    if max_rounds is not None:
        turns = turns[:max_rounds]
    return turns[:1] if description_only else turns


def _encode_all(backend: Any, dialogues: list[list[Turn]], index: Any) -> list[np.ndarray]:
    """One (R_i, D) query array per dialogue; batched when the backend can (``encode_dialogues``)."""
    batched = getattr(backend, "encode_dialogues", None)
    if callable(batched):
        return [np.asarray(q, np.float32) for q in batched(dialogues, index)]
    return [np.asarray(backend.encode_turns(turns, index), np.float32) for turns in dialogues]


def evaluate_dialogues(backend: Any, samples: Sequence[RetrievalSample], gallery_images: Sequence[GalleryImage],
                       image_root: str | os.PathLike[str] | None, protocol: Mapping[str, Any] | None = None, *,
                       max_rounds: int | None = None, description_only: bool = False,
                       progress: bool = False) -> EvaluationReport:
    """Replay ``samples`` round by round with ``backend`` (a RetrievalBackend) against the gallery.

    ``max_rounds`` keeps rounds 0..max_rounds-1 (None = all). A target's identity is the
    gallery's person id of its image (the manifest is the truth), else the sample's.
    ``protocol`` (dataset, split, model, ...) is recorded in the report with what this adds:
    ``num_queries``, ``num_gallery``, ``num_rounds``, ``ended_dialogues``, ``queries``.
    """
    if not samples:
        raise ValueError("no dialogues to evaluate")
    if not gallery_images:
        raise ValueError("the gallery is empty")
    if max_rounds is not None and max_rounds < 1:
        raise ValueError(f"max_rounds must be >= 1 (round 0 is the description), got {max_rounds}")
    root = None if image_root is None else os.fspath(image_root)
    index = backend.index_images(list(gallery_images), root, progress=progress)
    pid_of = {image.path: image.person_id for image in gallery_images}
    query_pids = [pid_of.get(s.target_path, s.person_id) for s in samples]
    lengths = [len(dialogue_turns(s, max_rounds)) for s in samples]  # rounds each dialogue really has
    queries = _encode_all(backend, [dialogue_turns(s, max_rounds, description_only) for s in samples], index)
    num_rounds = max(lengths)
    gallery = np.asarray(index.embeddings, np.float32)

    def round_queries(r: int) -> np.ndarray:  # (Q, D): an ended dialogue keeps its last query
        return np.stack([q[min(r, len(q) - 1, n - 1)] for q, n in zip(queries, lengths)])

    result = per_round_metrics(((round_queries(r), gallery) for r in range(num_rounds)),
                               query_pids, [image.person_id for image in gallery_images])
    full = {**dict(protocol or {}), "num_queries": len(samples), "num_gallery": len(gallery_images),
            "num_rounds": num_rounds, "max_rounds": max_rounds, "ended_dialogues": "keep_last_query",
            "queries": "description_only" if description_only else "dialogue"}
    return build_report(full, result)
