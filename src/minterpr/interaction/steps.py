"""What a session answers after each turn: the ranking (:class:`Step`) and the system's next move.

A :class:`Step` ranks the whole gallery on the exact path; on a shortlist (large galleries, see
:mod:`~minterpr.interaction.shortlist`) it ranks only the shortlisted candidates, so
``len(step.ranking)`` may be smaller than the gallery: :meth:`Step.rank_of` says where an image
ranks (None beyond the shortlist) and :meth:`Step.gallery_scores` gives ``-inf`` to the images
left out.

Example:
    >>> import numpy as np
    >>> step = Step(np.array([2, 0]), np.array([0.9, 0.4]), None, None, gallery_size=4)
    >>> step.rank_of(0), step.rank_of(3)
    (1, None)
    >>> step.gallery_scores().tolist()
    [0.4, -inf, 0.9, -inf]
    >>> [round(float(m), 3) for m in step.match()]  # the page's match of each ranked image (T = 0.02)
    [1.0, 0.0]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from minterpr.interaction.explain import Explanation
from minterpr.interaction.policies import TEMPERATURE
from minterpr.interaction.match import match_probabilities
from minterpr.interaction.turn_inputs import gallery_position

__all__ = ["Action", "AskQuestion", "ShowReferences", "Step"]


@dataclass(frozen=True)
class AskQuestion:
    """The system asks about an attribute slot."""

    slot: str
    text: str
    gain: float | None = None  # expected information gain (nats) when the policy estimates it


@dataclass(frozen=True)
class ShowReferences:
    """The system shows gallery images and asks whether one is the person (or how they differ)."""

    indices: tuple[int, ...]  # gallery indices, the policy's preferred first
    text: str


Action = AskQuestion | ShowReferences


@dataclass
class Step:
    """The state after a turn: the ranking, its scores and the system's next move."""

    ranking: np.ndarray  # (K,) gallery indices, best first: K = N on the exact path, the shortlist's size on one
    scores: np.ndarray  # (K,) final scores in ranking order
    action: Action | None  # the next system move; None = nothing to ask (e.g. the person was confirmed)
    anchor: int | None  # gallery index of the anchor image used in re-ranking, if any
    _explain: Callable[[int], Explanation] = field(repr=False, compare=False, default=None)  # type: ignore[assignment]
    gallery_size: int | None = None  # N, images in the gallery; None = len(ranking) (the whole gallery ranked)
    # softmax temperature of the match the page shows (a model's fitted one, interaction/match.py)
    match_temperature: float = TEMPERATURE

    @property
    def num_images(self) -> int:
        """N, the gallery's size (``len(ranking)`` may be smaller on a shortlist)."""
        return len(self.ranking) if self.gallery_size is None else self.gallery_size

    def explain(self, k: int) -> Explanation:
        """Which facts so far the result at (0-based) rank ``k`` matches and contradicts."""
        k = gallery_position(k, len(self.ranking), "rank k")
        return self._explain(int(self.ranking[k]))

    def explain_image(self, gallery_index: int) -> Explanation:
        """The same for any gallery image, ranked or not."""
        return self._explain(gallery_position(gallery_index, self.num_images, "gallery_index"))

    def top(self, k: int) -> tuple[int, ...]:
        """The gallery indices of the ``k`` best results (what a history entry keeps)."""
        return tuple(int(i) for i in self.ranking[:k])

    @property
    def offered(self) -> tuple[int, ...]:
        """The gallery indices of the references this step shows (its next move); () for a question or nothing."""
        return tuple(self.action.indices) if isinstance(self.action, ShowReferences) else ()

    def rank_of(self, gallery_index: int) -> int | None:
        """0-based rank of a gallery image; None when it is beyond the shortlist."""
        found = np.flatnonzero(self.ranking == gallery_index)
        return int(found[0]) if len(found) else None

    def match(self) -> np.ndarray:
        """(K,) each ranked image's match probability, in ranking order (:func:`match_probabilities`
        at :attr:`match_temperature`): what the page shows and what a ruling-out is weighed by."""
        return match_probabilities(self.scores, self.match_temperature)

    def gallery_scores(self) -> np.ndarray:
        """(N,) the final scores in gallery order; ``-inf`` for images beyond the shortlist."""
        out = np.full(self.num_images, -np.inf, dtype=self.scores.dtype)
        out[self.ranking] = self.scores
        return out
