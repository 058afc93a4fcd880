"""The system's moves: which question to ask, which reference images to show, and when to do which.

* Question policies (:data:`QUESTION_POLICIES`): ``info_gain`` asks the slot whose answer best
  splits the current candidates (expected entropy reduction of the candidate distribution),
  ``fixed`` asks in salience order, ``random`` asks any open slot. None asks a slot already
  known (any fact on it so far) or already asked.
* Reference policies (:data:`REFERENCE_POLICIES`): ``top1`` shows the best result, ``topk``
  the k best, ``diverse`` picks varied high-ranked images by maximal marginal relevance (as
  PlugIR shows candidates), ``uncertain`` shows the images near the decision boundary, whose
  comparison with the person best splits the candidates. None shows an image already judged.
* Which images show the same person (near-duplicates, the people a reference move shows): the
  appearance vectors above a same-person probability of 0.5 when the gallery has them with their
  calibration (``index.appearance``, ``index.same_person``), else the embeddings above the policy's
  ``duplicate_threshold`` cosine (:func:`compared_vectors`).
* When to ask and when to show (schedules): :mod:`~minterpr.interaction.schedule`.

Example:
    >>> sorted(QUESTION_POLICIES.names()), sorted(REFERENCE_POLICIES.names())
    (['fixed', 'info_gain', 'random'], ['diverse', 'top1', 'topk', 'uncertain'])
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.language.utterances import ASKABLE_SLOTS
from minterpr.index.gallery_index import GalleryIndex
from minterpr.language.evidence import SLOT_COLUMNS
from minterpr.registry import Registry
from minterpr.errors import InputError


# Softmax temperature turning final scores into a candidate distribution. 0.02 is the usual
# contrastive temperature of text-image person retrieval (IRRA); on the attribute backend it is
# calibrated: candidates it gives mass p are the person about p of the time.
TEMPERATURE = 0.02


def policy_temperature(value: str | float, fitted: float) -> float:
    """The policies' temperature given as a positive number or ``"fitted"`` (``fitted``: a model's
    fitted match temperature, :meth:`~minterpr.interaction.fitted.RunExtras.match_temperature`);
    InputError naming both forms otherwise.

    >>> policy_temperature("fitted", 0.215), policy_temperature("0.05", 0.215), policy_temperature(0.1, 0.2)
    (0.215, 0.05, 0.1)
    """
    if isinstance(value, str) and value.strip().lower() == "fitted":
        return float(fitted)
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, bool) or not 0 < number < float("inf"):
        raise InputError(f"policy temperature must be a positive number or 'fitted', got {value!r}")
    return number


@dataclass
class PolicyContext:
    """What a policy sees of the conversation after a turn."""

    index: GalleryIndex
    scores: np.ndarray  # (N,) final scores, gallery order
    ranking: np.ndarray  # (N,) gallery indices, best first
    facts: Sequence[Fact]  # every fact parsed so far
    asked_slots: frozenset[str]  # slots already asked (answered or not)
    judged: frozenset[int]  # gallery indices the user has judged
    rng: random.Random  # the session's generator (random choices stay reproducible)
    # softmax temperature of the candidate distribution the policies weigh moves by (the session's
    # policy_temperature): a policy's own temperature, when set, overrides it
    temperature: float = TEMPERATURE
    # gallery indices shown as references in earlier moves: the user has seen them, and one they passed
    # over also stands in for its look-alikes (near-duplicates are not shown beside it), so references
    # come from the images not yet shown while any are left (_unjudged)
    seen: frozenset[int] = frozenset()

    @property
    def known_slots(self) -> frozenset[str]:
        return frozenset(f.slot for f in self.facts)

    def open_slots(self) -> list[str]:
        """Askable slots, salience order, neither known nor asked."""
        closed = self.known_slots | self.asked_slots
        return [s for s in ASKABLE_SLOTS if s not in closed]


def candidate_distribution(
    ctx: PolicyContext, top_k: int = 50, temperature: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The top-k candidates (K,) and their weights softmax(score / T) (K,), summing to 1; T is
    ``temperature``, or the context's when None."""
    top = ctx.ranking[:top_k]
    logits = ctx.scores[top] / (ctx.temperature if temperature is None else temperature)
    weights = np.exp(logits - logits.max())
    return top, weights / weights.sum()


def entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=axis)


def answer_distribution(probs: np.ndarray, slot: str) -> np.ndarray:
    """(K, V) predicted answer per candidate from (K, L) label probabilities.

    Single-valued slots: the slot's probabilities normalised. Multi-valued slots: the most
    likely value, one-hot (the answer a user gives first).
    """
    p = probs[:, SLOT_COLUMNS[slot]].astype(np.float64)  # (K, V)
    if ONTOLOGY.slot(slot).multi:
        return np.eye(p.shape[1])[np.argmax(p, axis=1)]
    total = p.sum(axis=1, keepdims=True)
    return np.where(total > 0, p / np.where(total > 0, total, 1.0), 1.0 / p.shape[1])


def expected_information_gain(weights: np.ndarray, answers: np.ndarray) -> float:
    """I(candidate; answer) = H(candidates) - E_answer H(candidates | answer), in nats.

    ``weights`` (K,) candidate probabilities, ``answers`` (K, V) P(answer | candidate).
    """
    marginal = weights @ answers  # (V,)
    return float(entropy(marginal) - weights @ entropy(answers))


@dataclass(frozen=True)
class QuestionChoice:
    """A slot to ask and, when the policy estimates it, the expected information gain (nats)."""

    slot: str
    gain: float | None = None


class QuestionPolicy(Protocol):
    name: str

    def choose(self, ctx: PolicyContext) -> QuestionChoice | None:
        """The slot to ask next, or None when nothing is left to ask."""
        ...


class ReferencePolicy(Protocol):
    name: str

    def choose(self, ctx: PolicyContext, k: int) -> list[int]:
        """Up to k gallery indices to show, none already judged."""
        ...


QUESTION_POLICIES: Registry[QuestionPolicy] = Registry("question policy")
REFERENCE_POLICIES: Registry[ReferencePolicy] = Registry("reference policy")


@dataclass
class FixedQuestions:
    """Ask the open slots in salience order (SALIENCE: gender, top colour, ...)."""

    name: str = "fixed"

    def choose(self, ctx: PolicyContext) -> QuestionChoice | None:
        slots = ctx.open_slots()
        return QuestionChoice(slots[0]) if slots else None


@dataclass
class RandomQuestions:
    """Ask any open slot, uniformly (the session's generator makes it reproducible)."""

    name: str = "random"

    def choose(self, ctx: PolicyContext) -> QuestionChoice | None:
        slots = ctx.open_slots()
        return QuestionChoice(ctx.rng.choice(slots)) if slots else None


@dataclass
class InfoGainQuestions:
    """Ask the open slot with the largest expected information gain over the top candidates."""

    name: str = "info_gain"
    top_k: int = 50  # candidates considered
    temperature: float | None = None  # softmax temperature of the candidate distribution; None: the context's

    def choose(self, ctx: PolicyContext) -> QuestionChoice | None:
        slots = ctx.open_slots()
        if not slots:
            return None
        if ctx.index.attribute_probs is None:  # nothing to predict answers with: salience order
            return QuestionChoice(slots[0])
        top, weights = candidate_distribution(ctx, self.top_k, self.temperature)
        probs = ctx.index.attribute_probs[top]  # (K, L)
        gains = [expected_information_gain(weights, answer_distribution(probs, s)) for s in slots]
        best = int(np.argmax(gains))  # first of equals: salience breaks ties
        return QuestionChoice(slots[best], gains[best])


@QUESTION_POLICIES.register("fixed")
def _fixed() -> QuestionPolicy:
    return FixedQuestions()


@QUESTION_POLICIES.register("random")
def _random() -> QuestionPolicy:
    return RandomQuestions()


@QUESTION_POLICIES.register("info_gain")
def _info_gain(top_k: int = 50, temperature: float | None = None) -> QuestionPolicy:
    return InfoGainQuestions(top_k=top_k, temperature=temperature)


def compared_vectors(index: GalleryIndex, duplicate_threshold: float) -> tuple[np.ndarray, float]:
    """(vectors, cosine threshold) by which two images count as the same person: the appearance vectors
    and the cosine at same-person probability 0.5 when ``index`` has them calibrated, else the embeddings
    and ``duplicate_threshold`` (as :class:`~minterpr.interaction.similarities.Similarities` decides).

    >>> index = GalleryIndex([], np.zeros((0, 2), np.float32))
    >>> compared_vectors(index, 0.9)[1]
    0.9
    """
    calibration = index.same_person if index.appearance is not None else None
    if calibration is None:
        return index.embeddings, duplicate_threshold
    if calibration.scale <= 0:
        return index.compared_appearance(), float("inf")
    return index.compared_appearance(), -calibration.bias / calibration.scale  # logit(0.5) = 0


def _unjudged(ctx: PolicyContext, pool: int) -> np.ndarray:
    """The best ``pool`` images not yet judged: those not yet shown first, best first, then those shown
    before (:attr:`PolicyContext.seen`). Without it a passed-over image at the top would be shown every
    turn and keep its look-alikes, the person among them maybe, off the screen (docs/benchmarks.md).

    >>> ctx = PolicyContext(None, np.zeros(5), np.array([3, 1, 4, 0, 2]), (), frozenset(), frozenset({1}),
    ...                     random.Random(0), seen=frozenset({3}))
    >>> _unjudged(ctx, 3).tolist(), _unjudged(ctx, 5).tolist()
    ([4, 0, 2], [4, 0, 2, 3])
    """
    ranking = ctx.ranking[~np.isin(ctx.ranking, list(ctx.judged))] if ctx.judged else ctx.ranking
    if ctx.seen:
        seen = np.isin(ranking, list(ctx.seen))
        ranking = np.concatenate([ranking[~seen], ranking[seen]])
    return ranking[:pool]


@dataclass
class TopReferences:
    """Show the best unjudged results in rank order (``limit`` of them at most: top1 shows one)."""

    name: str = "topk"
    limit: int | None = None  # cap on the number shown, whatever the session asks for

    def choose(self, ctx: PolicyContext, k: int) -> list[int]:
        return [int(i) for i in _unjudged(ctx, k if self.limit is None else min(k, self.limit))]


@dataclass
class DiverseReferences:
    """Maximal marginal relevance over the top ``pool``: relevant, but unlike what is already picked."""

    name: str = "diverse"
    pool: int = 20  # how deep in the ranking candidates are drawn from
    trade_off: float = 0.7  # weight of relevance against dissimilarity to the images already picked
    duplicate_threshold: float = (
        0.9  # a near-duplicate of a picked image (same person) comes only when nothing else is left
    )

    def choose(self, ctx: PolicyContext, k: int) -> list[int]:
        pool = _unjudged(ctx, self.pool)
        if len(pool) == 0:
            return []
        s = ctx.scores[pool]
        relevance = (s - s.min()) / max(s.max() - s.min(), 1e-12)  # (P,) in [0, 1]
        vectors, threshold = compared_vectors(ctx.index, self.duplicate_threshold)
        emb = vectors[pool]
        similarity = emb @ emb.T  # (P, P)
        seen = np.isin(pool, list(ctx.seen))  # (P,) shown in an earlier move (after the others: _unjudged)
        picked = [0]
        while len(picked) < min(k, len(pool)):
            redundancy = similarity[:, picked].max(axis=1)
            value = self.trade_off * relevance - (1.0 - self.trade_off) * redundancy
            value[redundancy > threshold] -= 2.0  # below any non-duplicate (values lie in [-1, 1])
            value[seen] -= 4.0  # shown before: below any duplicate, only when nothing else is left
            value[picked] = -np.inf
            picked.append(int(np.argmax(value)))
        return [int(pool[j]) for j in picked]


def predicted_labels(probs: np.ndarray) -> np.ndarray:
    """(K, S) most likely value index per askable slot from (K, L) label probabilities."""
    return np.stack([np.argmax(probs[:, SLOT_COLUMNS[s]], axis=1) for s in ASKABLE_SLOTS], axis=1)


def comparison_entropy(weights: np.ndarray, labels: np.ndarray, same: np.ndarray, j: int) -> float:
    """Entropy (nats) of the outcome of comparing the person with candidate j.

    Each candidate c would answer "it is this one" (``same[c, j]``) or name the slots where it
    differs from j; candidates with the same answer stay indistinguishable. ``weights`` (K,),
    ``labels`` (K, S) predicted values, ``same`` (K, K) near-duplicate matrix.
    """
    differs = labels != labels[j]  # (K, S)
    outcome = np.concatenate([same[:, j : j + 1], differs], axis=1)  # (K, 1 + S)
    outcome[same[:, j], 1:] = False  # "that's her" says nothing else
    _, group = np.unique(outcome, axis=0, return_inverse=True)
    return float(entropy(np.bincount(group.ravel(), weights=weights)))


@dataclass
class UncertainReferences:
    """Show the images whose comparison with the person best splits the candidates.

    Near the decision boundary between the top candidates, an image is informative whatever the
    answer: "it is this one", or the differences the user names (as the candidates' predicted
    attributes would give them) divide the candidate distribution into even parts. Images are
    ranked by that expected information (:func:`comparison_entropy`), near-duplicates of a picked
    image skipped. Without attribute predictions only the yes/no part counts.
    """

    name: str = "uncertain"
    top_k: int = 50  # candidates considered
    pool: int = 20  # images considered for showing (the best unjudged ones)
    temperature: float | None = None  # softmax temperature of the candidate distribution; None: the context's
    duplicate_threshold: float = 0.9  # cosine above which two images are the same person

    def choose(self, ctx: PolicyContext, k: int) -> list[int]:
        top, weights = candidate_distribution(ctx, self.top_k, self.temperature)
        pool = [int(i) for i in _unjudged(ctx, self.pool)]
        if not pool:
            return []
        candidates = np.concatenate([top, [i for i in pool if i not in set(top.tolist())]]).astype(int)
        weights = np.concatenate([weights, np.zeros(len(candidates) - len(top))])
        vectors, threshold = compared_vectors(ctx.index, self.duplicate_threshold)
        emb = vectors[candidates]
        same = emb @ emb.T > threshold  # (C, C)
        probs = ctx.index.attribute_probs
        labels = predicted_labels(probs[candidates]) if probs is not None else np.zeros((len(candidates), 0), int)
        position = {int(c): n for n, c in enumerate(candidates)}
        info = [comparison_entropy(weights, labels, same, position[i]) for i in pool]
        picked: list[int] = []
        # rounded: float noise (BLAS kernels differ with memory layout) must not reorder near-duplicates'
        # equal information; ties go to the better ranked image
        later = np.isin(pool, list(ctx.seen))  # shown in an earlier move: only when nothing else is left
        for n in np.lexsort((-np.round(np.asarray(info), 9), later)):
            j = position[pool[n]]
            if not any(same[j, position[q]] for q in picked):
                picked.append(pool[n])
            if len(picked) == k:
                break
        return picked


@REFERENCE_POLICIES.register("top1")
def _top1() -> ReferencePolicy:
    return TopReferences(name="top1", limit=1)


@REFERENCE_POLICIES.register("topk")
def _topk() -> ReferencePolicy:
    return TopReferences()


@REFERENCE_POLICIES.register("diverse")
def _diverse(pool: int = 20, trade_off: float = 0.7, duplicate_threshold: float = 0.9) -> ReferencePolicy:
    return DiverseReferences(pool=pool, trade_off=trade_off, duplicate_threshold=duplicate_threshold)


@REFERENCE_POLICIES.register("uncertain")
def _uncertain(
    top_k: int = 50, pool: int = 20, temperature: float | None = None, duplicate_threshold: float = 0.9
) -> ReferencePolicy:
    return UncertainReferences(top_k=top_k, pool=pool, temperature=temperature, duplicate_threshold=duplicate_threshold)
