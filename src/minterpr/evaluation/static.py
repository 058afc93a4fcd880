"""Static (replayed) evaluation: recorded dialogues, ranked round by round against a gallery.

Round 0 is the description alone; round r adds the r-th recorded turn. Every round ranks the
whole gallery, giving per-round R@1/5/10, mAP, mINP, cumulative Hits@k and BRI
(:func:`~minterpr.evaluation.metrics.per_round_metrics`).

Dialogues of different lengths: a dialogue that has ended keeps its last query for the later
rounds (the user has nothing more to say; the ranking they see stays), so every round has
all queries and the rounds remain comparable. ``protocol["ended_dialogues"]`` records this.

Scores: the query-image cosine, plus (``scoring=ScoringConfig(attribute_weight=w)``) ``w`` times
the attribute log-likelihood of every fact parsed from the replayed turns so far (see
:mod:`minterpr.evaluation.scoring`); :func:`select_attribute_weight` picks ``w`` on a validation
split. A reference image the user rejected ("That's not the person.") is kept below every image
not rejected from that round on (``ScoringConfig.reject_references``, on by default; the rule a
session applies), so a replay never answers with an image the user has just turned down.
``protocol["scoring"]`` records the setting.

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
from minterpr.evaluation.scoring import DEFAULT_WEIGHT_GRID, FactScorer, ScoringConfig, combine
from minterpr.interaction.dialogue_acts import verdict
from minterpr.interaction.reranking import keep_rejected_below
from minterpr.types import GalleryImage, ReferenceTurn, RetrievalSample, Turn

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


def rejected_by_round(turns: Sequence[Turn], gallery_position: Mapping[str, int]) -> list[tuple[int, int]]:
    """(round, gallery index) of every reference image the user rejected in ``turns``.

    A reference turn at round r whose feedback's verdict is "not the person"
    (:func:`minterpr.interaction.dialogue_acts.verdict` is False) rejects its image from round r
    on; references outside the gallery are skipped.

    Example:
        >>> from minterpr.types import DescriptionTurn
        >>> turns = [DescriptionTurn("a man"), ReferenceTurn("b.jpg", "That's not him. No hat."),
        ...          ReferenceTurn("c.jpg", "Yes, that's him.")]
        >>> rejected_by_round(turns, {"a.jpg": 0, "b.jpg": 1, "c.jpg": 2})
        [(1, 1)]
    """
    out = []
    for r, turn in enumerate(turns):
        rejects = isinstance(turn, ReferenceTurn) and verdict(turn.feedback) is False
        if rejects and turn.reference_path in gallery_position:
            out.append((r, gallery_position[turn.reference_path]))
    return out


def _encode_all(backend: Any, dialogues: list[list[Turn]], index: Any) -> list[np.ndarray]:
    """One (R_i, D) query array per dialogue; batched when the backend can (``encode_dialogues``)."""
    batched = getattr(backend, "encode_dialogues", None)
    if callable(batched):
        return [np.asarray(q, np.float32) for q in batched(dialogues, index)]
    return [np.asarray(backend.encode_turns(turns, index), np.float32) for turns in dialogues]


class _Replay:
    """A gallery indexed once and every dialogue's per-round queries (and facts), ready to score."""

    def __init__(self, backend: Any, samples: Sequence[RetrievalSample], gallery_images: Sequence[GalleryImage],
                 image_root: str | os.PathLike[str] | None, max_rounds: int | None, description_only: bool,
                 progress: bool, index: Any = None, queries: Sequence[np.ndarray] | None = None) -> None:
        if not samples:
            raise ValueError("no dialogues to evaluate")
        if not gallery_images:
            raise ValueError("the gallery is empty")
        if max_rounds is not None and max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1 (round 0 is the description), got {max_rounds}")
        root = None if image_root is None else os.fspath(image_root)
        self.index = index if index is not None else backend.index_images(list(gallery_images), root, progress=progress)
        pid_of = {image.path: image.person_id for image in gallery_images}
        self.query_pids = [pid_of.get(s.target_path, s.person_id) for s in samples]
        self.gallery_pids = [image.person_id for image in gallery_images]
        self.lengths = [len(dialogue_turns(s, max_rounds)) for s in samples]  # rounds each dialogue really has
        self.turns = [dialogue_turns(s, max_rounds, description_only) for s in samples]
        position = {image.path: i for i, image in enumerate(gallery_images)}
        self.rejections = [rejected_by_round(turns, position) for turns in self.turns]
        if queries is not None and len(queries) != len(samples):
            raise ValueError(f"queries: one array per dialogue expected ({len(samples)}), got {len(queries)}")
        self.queries = (_encode_all(backend, self.turns, self.index) if queries is None
                        else [np.asarray(q, np.float32) for q in queries])
        self.num_rounds = max(self.lengths)
        self.gallery = np.asarray(self.index.embeddings, np.float32)
        self._scorer: FactScorer | None = None

    def _pick(self, q: np.ndarray, r: int, n: int) -> Any:  # an ended dialogue keeps its last round
        return q[min(r, len(q) - 1, n - 1)]

    def loglik(self, r: int, floor: float) -> np.ndarray:
        """(Q, G) attribute log-likelihood of each dialogue's facts up to round r."""
        probs = getattr(self.index, "attribute_probs", None)
        if probs is None:
            raise ValueError("attribute fusion needs a backend whose index has attribute_probs")
        if self._scorer is None or self._scorer.floor != floor:
            self._scorer = FactScorer(np.asarray(probs, np.float32), floor)
            self._facts = [self._scorer.rounds(t) for t in self.turns]  # (R_i, G) each
        return np.stack([self._pick(f, r, n) for f, n in zip(self._facts, self.lengths)])

    def round_scores(self, r: int, scoring: ScoringConfig) -> np.ndarray:
        """(Q, G) final scores of round r."""
        cosine = np.stack([self._pick(q, r, n) for q, n in zip(self.queries, self.lengths)]) @ self.gallery.T
        loglik = self.loglik(r, scoring.prob_floor) if scoring.attribute_weight > 0 else None
        scores = combine(cosine, loglik, scoring)
        if scoring.reject_references and any(self.rejections):
            rejected = np.zeros(scores.shape, bool)  # (Q, G)
            for i, (rejections, n) in enumerate(zip(self.rejections, self.lengths)):
                for round_, image in rejections:
                    rejected[i, image] |= round_ <= min(r, len(self.turns[i]) - 1, n - 1)
            scores = keep_rejected_below(scores, rejected)
        return scores

    def metrics(self, scoring: ScoringConfig) -> dict[str, Any]:
        return per_round_metrics((self.round_scores(r, scoring) for r in range(self.num_rounds)),
                                 self.query_pids, self.gallery_pids)


def evaluate_dialogues(backend: Any, samples: Sequence[RetrievalSample], gallery_images: Sequence[GalleryImage],
                       image_root: str | os.PathLike[str] | None, protocol: Mapping[str, Any] | None = None, *,
                       max_rounds: int | None = None, description_only: bool = False,
                       progress: bool = False, scoring: ScoringConfig | None = None) -> EvaluationReport:
    """Replay ``samples`` round by round with ``backend`` (a RetrievalBackend) against the gallery.

    ``max_rounds`` keeps rounds 0..max_rounds-1 (None = all). A target's identity is the
    gallery's person id of its image (the manifest is the truth), else the sample's.
    ``scoring`` (default: embedding cosine only) adds ``w · Σ log P(fact | image)`` over the
    facts of the replayed turns (:mod:`minterpr.evaluation.scoring`; needs ``attribute_probs``).
    ``protocol`` (dataset, split, model, ...) is recorded in the report with what this adds:
    ``num_queries``, ``num_gallery``, ``num_rounds``, ``ended_dialogues``, ``queries``, ``scoring``.
    """
    scoring = scoring or ScoringConfig()
    replay = _Replay(backend, samples, gallery_images, image_root, max_rounds, description_only, progress)
    result = replay.metrics(scoring)
    full = {**dict(protocol or {}), "num_queries": len(samples), "num_gallery": len(gallery_images),
            "num_rounds": replay.num_rounds, "max_rounds": max_rounds, "ended_dialogues": "keep_last_query",
            "queries": "description_only" if description_only else "dialogue", "scoring": scoring.to_dict()}
    return build_report(full, result)


def select_attribute_weight(backend: Any, samples: Sequence[RetrievalSample], gallery_images: Sequence[GalleryImage],
                            image_root: str | os.PathLike[str] | None,
                            grid: Sequence[float] = DEFAULT_WEIGHT_GRID, *, prob_floor: float = 0.02,
                            progress: bool = False, index: Any = None,
                            queries: Sequence[np.ndarray] | None = None) -> tuple[ScoringConfig, dict[float, float]]:
    """The ``attribute_weight`` of ``grid`` with the best R@1 after the last round (ties: mean R@1
    over rounds), and every candidate's R@1@last. Use a validation split, never the test split.

    The gallery is indexed and the dialogues encoded once; only the score sum changes per w.
    Outputs the caller already has skip that work: ``index`` (the gallery indexed by the same
    model) and ``queries`` (per dialogue, its (R_i, D) queries); with both, ``backend`` is unused.
    """
    replay = _Replay(backend, samples, gallery_images, image_root, None, False, progress, index, queries)
    tried: dict[float, float] = {}
    best_key, best = None, ScoringConfig(prob_floor=prob_floor)
    for w in grid:
        rounds = replay.metrics(ScoringConfig(float(w), prob_floor))["rounds"]
        tried[float(w)] = rounds[-1]["r1"]
        key = (rounds[-1]["r1"], float(np.mean([row["r1"] for row in rounds])))
        if best_key is None or key > best_key:
            best_key, best = key, ScoringConfig(float(w), prob_floor)
    return best, tried
