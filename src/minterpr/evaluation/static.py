"""Static (replayed) evaluation: recorded dialogues, ranked round by round against a gallery.

Round 0 is the description alone; round r adds the r-th recorded turn. Every round ranks the
whole gallery, giving per-round R@1/5/10, mAP, mINP, cumulative Hits@k and BRI
(:func:`~minterpr.evaluation.dialogue_metrics.per_round_metrics`).

Dialogues of different lengths: a dialogue that has ended keeps its last round's scores for the
later rounds (the user has nothing more to say; the ranking they see stays), so every round has
all queries and the rounds remain comparable. ``protocol["ended_dialogues"]`` records this.

Scores: each round is scored exactly as a :class:`~minterpr.interaction.session.Session` fed the
same turns would score it — one scoring path,
:func:`~minterpr.interaction.reranking.rerank_rows`, with one configuration
(:class:`~minterpr.interaction.reranking.RerankConfig`, the sessions' one): the
query-image cosine, plus ``w`` times the attribute log-likelihood of the distinct facts parsed
from the replayed turns so far (:func:`~minterpr.language.dialogue_acts.turn_facts`), with the
user's judgements of the reference images so far (the latest
:func:`~minterpr.language.dialogue_acts.verdict` per image, as ``Session.judgements``): a
rejected image and its near-duplicates lose a penalty and the rejected image ranks below every
image not rejected, a confirmed one becomes the anchor and ranks first, and a confident top-1
anchors the rest. :func:`~minterpr.evaluation.weight_selection.select_attribute_weight` picks ``w`` on a validation split and the model stores the chosen configuration (checkpoint extra
``"scoring"``: ``RerankConfig.to_dict()``, read back by ``RerankConfig.from_dict``, which also
reads the older ``{"attribute_weight", "prob_floor", "reject_references"}`` form; a model that
stores none gets the defaults). ``protocol["scoring"]`` records the whole configuration;
:func:`round_log_likelihoods` is the attribute term of one dialogue's rounds, as a session adds it.

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
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from minterpr.errors import InputError
from minterpr.evaluation.dialogue_metrics import per_round_metrics
from minterpr.evaluation.report import EvaluationReport, build_report
from minterpr.interaction.fact_likelihoods import FactLikelihoods
from minterpr.interaction.reranking import RerankConfig, rerank_rows
from minterpr.interaction.similarities import Similarities
from minterpr.language.dialogue_acts import round_judgements, turn_facts
from minterpr.language.evidence import PROB_FLOOR, stated_log_likelihood
from minterpr.language.phrasing import Fact
from minterpr.types import GalleryImage, RetrievalSample, Turn

UNLABELLED_NAMESPACE = "unlabelled"  # person-id namespace of gallery images whose identity is unknown
_DENSE_SIMILARITIES = 4096  # galleries up to this size keep image-image similarities in one matrix


def round_log_likelihoods(
    turns: Sequence[Turn], attribute_probs: np.ndarray, prob_floor: float = PROB_FLOOR
) -> np.ndarray:
    """(R, N) float64: row r = Σ log P(fact | image) over the distinct facts of turns[0..r]
    (each turn read with :func:`~minterpr.language.dialogue_acts.turn_facts`), the attribute
    term :func:`~minterpr.interaction.reranking.rerank` adds after round r.

    Example:
        >>> from minterpr.language.ontology import ONTOLOGY
        >>> from minterpr.types import DescriptionTurn
        >>> probs = np.full((2, len(ONTOLOGY.flat_labels())), 0.1, np.float32)
        >>> probs[1, ONTOLOGY.flat_labels().index(("upper_colour", "red"))] = 0.9  # image 1 looks red on top
        >>> ll = round_log_likelihoods([DescriptionTurn("a man in a red shirt")], probs)  # (R, N)
        >>> int(np.argmax(ll[0]))
        1
    """
    scorer = FactLikelihoods(attribute_probs, prob_floor)
    out = np.zeros((len(turns), len(scorer.probs)), np.float64)
    facts: list[Fact] = []
    for r, turn in enumerate(turns):
        facts.extend(turn_facts(turn))
        out[r] = scorer.total(facts)
    return out


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


def dialogue_turns(
    sample: RetrievalSample, max_rounds: int | None = None, description_only: bool = False
) -> list[Turn]:
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


class DialogueReplay:
    """A gallery indexed once and every dialogue's per-round queries, facts and judgements, ready to score."""

    def __init__(
        self,
        backend: Any,
        samples: Sequence[RetrievalSample],
        gallery_images: Sequence[GalleryImage],
        image_root: str | os.PathLike[str] | None,
        max_rounds: int | None,
        description_only: bool,
        progress: bool,
        index: Any = None,
        queries: Sequence[np.ndarray] | None = None,
        read_facts: Callable[[Turn], Sequence[Fact]] | None = None,
    ) -> None:
        if not samples:
            raise InputError("no dialogues to evaluate")
        if not gallery_images:
            raise InputError("the gallery is empty")
        if max_rounds is not None and max_rounds < 1:
            raise InputError(f"max_rounds must be >= 1 (round 0 is the description), got {max_rounds}")
        root = None if image_root is None else os.fspath(image_root)
        if index is None:
            index = backend.index_images(list(gallery_images), root, progress=progress)
        self.index = index.require_complete("a static evaluation")  # rows must match gallery_images
        pid_of = {image.path: image.person_id for image in gallery_images}
        self.query_pids = [pid_of.get(s.target_path, s.person_id) for s in samples]
        self.gallery_pids = [image.person_id for image in gallery_images]
        self.num_rounds = max(len(dialogue_turns(s, max_rounds)) for s in samples)  # rounds dialogues really have
        self.turns = [dialogue_turns(s, max_rounds, description_only) for s in samples]
        if queries is not None and len(queries) != len(samples):
            raise InputError(f"queries: one array per dialogue expected ({len(samples)}), got {len(queries)}")
        self.queries = (
            _encode_all(backend, self.turns, self.index)
            if queries is None
            else [np.asarray(q, np.float32) for q in queries]
        )
        for i, (q, turns) in enumerate(zip(self.queries, self.turns)):
            if q.ndim != 2 or len(q) < len(turns):
                raise InputError(f"queries[{i}]: one row per replayed turn expected ({len(turns)}), got {q.shape}")
        self.gallery = np.asarray(self.index.embeddings, np.float32)
        position: dict[str, int] = {}
        for i, image in enumerate(gallery_images):
            position.setdefault(image.path, i)
        index_of = getattr(self.index, "index_of", None) or position.get  # the lookup a session uses
        self.judgements = [round_judgements(turns, index_of) for turns in self.turns]
        # per dialogue and round: gallery position -> what the user said of that shown image so far
        # (a session's image_facts), evidence about the image that outranks the model's
        self.stated = [_stated_by_round(turns, index_of) for turns in self.turns]
        # every distinct fact once; per dialogue and round, the ids of the facts first stated then
        self.facts: dict[Fact, int] = {}
        self.new_facts: list[list[list[int]]] = []
        for turns in self.turns:
            seen: set[int] = set()
            per_round = []
            for turn in turns:
                facts = turn_facts(turn) if read_facts is None else (*turn_facts(turn), *read_facts(turn))
                ids = [self.facts.setdefault(f, len(self.facts)) for f in facts]
                new = [j for j in dict.fromkeys(ids) if j not in seen]
                seen.update(new)
                per_round.append(new)
            self.new_facts.append(per_round)
        self.fact_list = list(self.facts)  # fact id -> fact (ids number them in order of insertion)
        # shared by every round and every config; one N x N matrix when it is small (<= 64 MB)
        self.similarities = Similarities(self.index, dense=len(self.gallery) <= _DENSE_SIMILARITIES)
        self._fact_matrix: tuple[float, np.ndarray] | None = None
        self.cache_cosines = False  # keep each round's (A, G) backend scores (for repeated scoring)
        self._cosines: dict[int, np.ndarray] = {}

    @property
    def attribute_probs(self) -> np.ndarray | None:
        return getattr(self.index, "attribute_probs", None)

    def fact_matrix(self, floor: float) -> np.ndarray:
        """(F, G) float64: log P(fact | image) of every distinct fact (rows as ``self.facts`` numbers them)."""
        if self._fact_matrix is None or self._fact_matrix[0] != floor:
            scorer = FactLikelihoods(np.asarray(self.attribute_probs), floor)
            matrix = np.zeros((len(self.facts), len(self.gallery)), np.float64)
            for fact, j in self.facts.items():
                matrix[j] = scorer.fact(fact)
            self._fact_matrix = (floor, matrix)
        return self._fact_matrix[1]

    def round_scores(self, reranking: RerankConfig) -> Iterator[np.ndarray]:
        """(Q, G) final scores of rounds 0, 1, ...: ``rerank_rows`` on the dialogues still talking."""
        lengths = np.array([len(t) for t in self.turns])
        use_facts = reranking.attributes and self.attribute_probs is not None and len(self.facts) > 0
        matrix = self.fact_matrix(reranking.prob_floor) if use_facts else None
        loglik = np.zeros((len(self.turns), len(self.gallery)), np.float64) if use_facts else None
        scores = np.zeros((len(self.turns), len(self.gallery)), np.float64)
        for r in range(self.num_rounds):
            active = np.flatnonzero(r < lengths)  # an ended dialogue keeps its last scores
            if len(active):
                if loglik is not None:
                    self._add_facts(loglik, matrix, active, r)
                cosine = self.cosine(r, active)
                scores = scores.copy()  # the previous round's array may still be in use
                terms = None if loglik is None else self._with_stated(loglik, active, r, reranking.prob_floor)
                scores[active], _ = rerank_rows(
                    cosine, self.index, terms, [self.judgements[i][r] for i in active], reranking, self.similarities
                )
            yield scores

    def _with_stated(self, loglik: np.ndarray, active: np.ndarray, r: int, floor: float) -> np.ndarray:
        """(A, G) the active dialogues' attribute terms, each image the user described judged by their
        words as a session judges it (:func:`stated_log_likelihood`); the running sums stay as they are."""
        terms = loglik[active]
        for row, i in enumerate(active.tolist()):
            said = self.stated[i][r]
            if said:
                facts = [self.fact_list[k] for j in range(r + 1) for k in self.new_facts[i][j]]
                terms[row] = stated_log_likelihood(terms[row], facts, said, np.asarray(self.attribute_probs), floor)
        return terms

    def cosine(self, r: int, active: np.ndarray) -> np.ndarray:
        """(A, G) the backend's scores of round r's queries of the ``active`` dialogues.

        Query by query with ``index.scores`` as a session computes them (a batched product
        rounds differently in the last bit); kept when ``cache_cosines`` (they do not depend on
        the scoring, so a weight search computes them once)."""
        if r in self._cosines:
            return self._cosines[r]
        scores = getattr(self.index, "scores", None)
        if callable(scores):
            cosine = np.stack([scores(self.queries[i][r]) for i in active.tolist()])
        else:  # a minimal index (embeddings only)
            cosine = np.stack([self.gallery @ self.queries[i][r] for i in active.tolist()])
        if self.cache_cosines:
            self._cosines[r] = cosine
        return cosine

    def _add_facts(self, loglik: np.ndarray, matrix: np.ndarray, active: np.ndarray, r: int) -> None:
        """Add round r's new facts to each active dialogue's running sum, in order of mention
        (the order ``FactLikelihoods.total`` adds them in a session: the same float64 sums)."""
        by_position: list[tuple[list[int], list[int]]] = []
        for i in active.tolist():
            for k, j in enumerate(self.new_facts[i][r]):
                if k == len(by_position):
                    by_position.append(([], []))
                by_position[k][0].append(i)
                by_position[k][1].append(j)
        for rows, ids in by_position:  # each dialogue appears once per position
            loglik[rows] += matrix[ids]

    def metrics(
        self, reranking: RerankConfig, observe: Callable[[int, np.ndarray], None] | None = None
    ) -> dict[str, Any]:
        rounds = self.round_scores(reranking)
        return per_round_metrics(
            rounds if observe is None else _observed(rounds, observe), self.query_pids, self.gallery_pids
        )


def _stated_by_round(turns: Sequence[Turn], index_of: Callable[[str], int | None]) -> list[dict[int, tuple[Fact, ...]]]:
    """Per round: gallery position -> the facts said of that shown image so far (oldest first)."""
    from minterpr.language.dialogue_acts import turn_reading
    from minterpr.types import ReferenceTurn

    out, said = [], {}
    for turn in turns:
        if isinstance(turn, ReferenceTurn):
            shown = turn_reading(turn).shown
            i = index_of(turn.reference_path) if shown else None
            if i is not None:
                said = {**said, i: said.get(i, ()) + tuple(shown)}
        out.append(said)
    return out


def _observed(rounds: Iterator[np.ndarray], observe: Callable[[int, np.ndarray], None]) -> Iterator[np.ndarray]:
    """``rounds`` unchanged, shown to ``observe(round, scores)`` on the way (a counter, not
    enumerate(): its cached tuple would keep the previous round's scores alive)."""
    r = -1
    for scores in rounds:
        r += 1
        observe(r, scores)
        yield scores


def replay_scores(
    backend: Any,
    samples: Sequence[RetrievalSample],
    gallery_images: Sequence[GalleryImage],
    image_root: str | os.PathLike[str] | None = None,
    *,
    reranking: RerankConfig | None = None,
    max_rounds: int | None = None,
    description_only: bool = False,
) -> list[np.ndarray]:
    """The (Q, G) final scores of every replayed round (what :func:`evaluate_dialogues` ranks),
    float64, gallery order: row q of round r is what a ``Session`` fed the first r + 1 turns of
    dialogue q would score (an ended dialogue keeps its last row). Keeps every round in memory.
    """
    replay = DialogueReplay(backend, samples, gallery_images, image_root, max_rounds, description_only, False)
    return list(replay.round_scores(RerankConfig() if reranking is None else reranking))


def evaluate_dialogues(
    backend: Any,
    samples: Sequence[RetrievalSample],
    gallery_images: Sequence[GalleryImage],
    image_root: str | os.PathLike[str] | None,
    protocol: Mapping[str, Any] | None = None,
    *,
    max_rounds: int | None = None,
    description_only: bool = False,
    progress: bool = False,
    reranking: RerankConfig | None = None,
    observe: Callable[[int, np.ndarray], None] | None = None,
    read_facts: Callable[[Turn], Sequence[Fact]] | None = None,
    index: Any = None,
) -> EvaluationReport:
    """Replay ``samples`` round by round with ``backend`` (a RetrievalBackend) against the gallery.

    ``max_rounds`` keeps rounds 0..max_rounds-1 (None = all). A target's identity is the
    gallery's person id of its image (the manifest is the truth), else the sample's.
    ``reranking`` (default: ``RerankConfig()``, the sessions' defaults) says how rounds are scored
    (see the module doc); the attribute term needs an index with ``attribute_probs``, else it is
    skipped, as in a session (``protocol["attribute_evidence"]`` says whether it applied).
    ``protocol`` (dataset, split, model, ...) is recorded in the report with what this adds:
    ``num_queries``, ``num_gallery``, ``num_rounds``, ``ended_dialogues``, ``queries``, ``scoring``,
    ``attribute_evidence``. ``observe(round, scores)``, when given, sees each round's (Q, G) final
    scores before they are scored and must not change them (e.g. a
    :class:`~minterpr.evaluation.picture_recorders.RankRecorder` keeping a few queries' rankings).
    ``read_facts(turn)``, when given, adds facts to the rule reader's (a VLM's reading, minterpr.vlm).
    ``index``, when given, is the gallery already indexed by ``backend`` (one row per ``gallery_images``,
    in order), e.g. with MTG captions' evidence (:func:`minterpr.vlm.caption.use_captions`).
    """
    reranking = RerankConfig() if reranking is None else reranking
    if not isinstance(reranking, RerankConfig):
        raise InputError(f"reranking must be a RerankConfig, got {type(reranking).__name__}")
    replay = DialogueReplay(
        backend,
        samples,
        gallery_images,
        image_root,
        max_rounds,
        description_only,
        progress,
        index,
        read_facts=read_facts,
    )
    result = replay.metrics(reranking, observe)
    full = {
        **dict(protocol or {}),
        "num_queries": len(samples),
        "num_gallery": len(gallery_images),
        "num_rounds": replay.num_rounds,
        "max_rounds": max_rounds,
        "ended_dialogues": "keep_last_query",
        "queries": "description_only" if description_only else "dialogue",
        "scoring": reranking.to_dict(),
        "attribute_evidence": reranking.attributes and replay.attribute_probs is not None,
    }
    return build_report(full, result)
