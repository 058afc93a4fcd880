"""When to ask and when to show: a schedule of moves per round, or ``auto``, which compares the two.

* Schedules (:func:`make_schedule`): a fixed pattern of ``"question"`` / ``"reference"`` moves
  per round (the last repeats), a named preset of :data:`SCHEDULES`, or ``"auto"``.
* ``auto`` weighs the references the policies propose (:mod:`~minterpr.interaction.policies`) by
  the candidate mass of the people they show (:func:`shown_person_mass`) and the information their
  answer carries (:func:`reference_information`), against the question's expected information gain.

Example:
    >>> make_schedule("questions_then_references").kind(4)
    'reference'
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Sequence

import numpy as np

from minterpr.errors import InputError
from minterpr.interaction.policies import (
    PolicyContext,
    candidate_distribution,
    compared_vectors,
    entropy,
)


# Named schedules: the move of rounds 1, 2, ...; the last entry repeats.
SCHEDULES: dict[str, tuple[str, ...]] = {
    "questions": ("question",),
    "references": ("reference",),
    "alternate": ("question", "reference"),
    "questions_then_references": ("question", "question", "question", "reference"),
}


@dataclass(frozen=True)
class Schedule:
    """Which move comes at each round: a fixed pattern, or ``auto`` (decided from the candidates)."""

    pattern: tuple[str, ...] = ()  # moves of rounds 1, 2, ... (last repeats); empty = auto
    # auto: show references when the people shown hold at least this much candidate mass (the
    # user will likely recognise one); below it, the move with more expected information wins
    # (a question policy that estimates no gain, e.g. fixed or random, then always asks)
    confident: float = 0.35
    # auto: once the user has said of a shown image that they cannot tell ("could be", "maybe"), they
    # are not assumed to recognise the person: ask the question policy's question while one is open
    # (chosen on PETA val with the text-only witness: docs/benchmarks.md, "A user who cannot tell")
    ask_when_unsure: bool = True

    @property
    def auto(self) -> bool:
        return not self.pattern

    def kind(self, round_number: int) -> str:
        """'question' or 'reference' for round ``round_number`` (1 = the first move after the description)."""
        if self.auto:
            raise InputError("an auto schedule decides from the candidates, not the round number")
        return self.pattern[min(round_number, len(self.pattern)) - 1]

    def describe(self) -> str | list[str]:
        """For records: the pattern, or ``"auto"`` with any setting that differs from its default.

        >>> Schedule().describe(), Schedule(confident=0.5).describe(), Schedule(("question",)).describe()
        ('auto', 'auto(confident=0.5)', ['question'])
        """
        if not self.auto:
            return list(self.pattern)
        changed = [f"{f.name}={getattr(self, f.name)}" for f in fields(self)[1:] if getattr(self, f.name) != f.default]
        return f"auto({', '.join(changed)})" if changed else "auto"


def make_schedule(schedule: str | Sequence[str] | Schedule) -> Schedule:
    """A :class:`Schedule` from ``"auto"``, a preset name of :data:`SCHEDULES`, or a sequence of moves."""
    if isinstance(schedule, Schedule):
        return schedule
    if isinstance(schedule, str):
        if schedule == "auto":
            return Schedule()
        if schedule not in SCHEDULES:
            raise InputError(
                f"unknown schedule {schedule!r}: must be 'auto', one of {', '.join(SCHEDULES)}, "
                "or a sequence of 'question' / 'reference'"
            )
        return Schedule(SCHEDULES[schedule])
    pattern = tuple(schedule)
    bad = [m for m in pattern if m not in ("question", "reference")]
    if not pattern or bad:
        raise InputError(f"a schedule is a non-empty sequence of 'question' / 'reference', got {list(pattern)}")
    return Schedule(pattern)


def _shown_answer(
    ctx: PolicyContext, shown: Sequence[int], top_k: int, temperature: float | None, duplicate_threshold: float
) -> np.ndarray:
    """(S + 1,) P(the person is the one of shown image j), last entry P(none of them)."""
    top, weights = candidate_distribution(ctx, top_k, temperature)
    vectors, threshold = compared_vectors(ctx.index, duplicate_threshold)
    similar = vectors[top] @ vectors[list(shown)].T > threshold  # (K, S)
    owner = np.where(similar.any(axis=1), similar.argmax(axis=1), len(shown))  # (K,) shown image, or "none"
    return np.bincount(owner, weights=weights, minlength=len(shown) + 1)


def shown_person_mass(
    ctx: PolicyContext,
    shown: Sequence[int],
    top_k: int = 50,
    temperature: float | None = None,
    duplicate_threshold: float = 0.9,
) -> float:
    """Candidate mass of the people in ``shown`` (images and their near-duplicates): P(a hit)."""
    if not len(shown):
        return 0.0
    return float(1.0 - _shown_answer(ctx, shown, top_k, temperature, duplicate_threshold)[-1])


def reference_information(
    ctx: PolicyContext,
    shown: Sequence[int],
    top_k: int = 50,
    temperature: float | None = None,
    duplicate_threshold: float = 0.9,
) -> float:
    """Expected information (nats) of showing ``shown`` to a user who recognises the person.

    The answer is "it is the person of image j" or "none of them": its entropy, with P(j) the
    candidate mass of image j's near-duplicates (each candidate counted for the first image it
    resembles). Corrective feedback adds more, so this is a lower bound comparable with a
    question's expected information gain.
    """
    if not len(shown):
        return 0.0
    return float(entropy(_shown_answer(ctx, shown, top_k, temperature, duplicate_threshold)))
