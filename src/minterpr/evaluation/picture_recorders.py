"""What a picture of an evaluation needs, recorded while the evaluation runs (read, never changed).

:class:`RankRecorder` takes a static replay's (Q, G) scores round by round
(:func:`~minterpr.evaluation.static.evaluate_dialogues`'s ``observe``), :class:`SessionRecorder` a
simulation's sessions (:func:`~minterpr.evaluation.online.simulate`'s ``observe``), and
:func:`session_views` a live session's history (``minterpr chat --show``); each gives the
:class:`~minterpr.evaluation.pictures.RoundView` rows that
:func:`~minterpr.evaluation.pictures.write_ranked_strip` draws.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from minterpr.errors import InputError
from minterpr.evaluation.pictures import RoundView
from minterpr.language.dialogue_acts import round_judgements
from minterpr.types import DescriptionTurn, ExampleTurn, QATurn, ReferenceTurn


def turn_text(turn: Any) -> str:
    """The words of one turn, as a row's query text.

    >>> turn_text(QATurn("Any bag?", "A red backpack."))
    'Q: Any bag? A: A red backpack.'
    """
    if isinstance(turn, DescriptionTurn):
        return turn.text
    if isinstance(turn, QATurn):
        return f"Q: {turn.question} A: {turn.answer}"
    if isinstance(turn, ReferenceTurn):
        return f"[shown {os.path.basename(turn.reference_path)}] {turn.feedback}"
    if isinstance(turn, ExampleTurn):
        return f"[example image {os.path.basename(turn.image_path)}]"
    return str(turn)


def _shown(turn: Any, index_of: Any) -> int | None:
    """Gallery index of the image a turn judged (a shown reference) or searched by (an example)."""
    path = getattr(turn, "reference_path", None) or getattr(turn, "image_path", None)
    return None if path is None else index_of(path)


def sample_queries(total: int, n: int, seed: int = 0) -> list[int]:
    """``n`` of the query positions ``0..total-1`` (all when ``n >= total``), drawn with ``seed``, sorted.

    >>> sample_queries(10, 3, seed=0) == sample_queries(10, 3, seed=0), sample_queries(2, 5)
    (True, [0, 1])
    """
    if n < 0:
        raise InputError(f"the number of pictures must be >= 0, got {n}")
    if n >= total:
        return list(range(total))
    return sorted(np.random.default_rng(seed).choice(total, size=n, replace=False).tolist())


def _top(scores: np.ndarray, k: int, target: int | None) -> tuple[tuple[int, ...], tuple[float, ...], int | None]:
    """Top-k of one score row under the metrics' tie rule (stable descending), and the target's rank."""
    order = np.argsort(-scores, kind="stable")[:k]
    rank = None
    if target is not None:
        value = scores[target]
        rank = int(np.count_nonzero(scores > value) + np.count_nonzero(scores[:target] == value))
    return tuple(int(i) for i in order), tuple(float(scores[i]) for i in order), rank


class RankRecorder:
    """Keeps, for a few queries of a static replay, every round's top-k and the target's rank.

    Pass it as ``evaluate_dialogues(..., observe=recorder)``: it is called with each round's
    (Q, G) scores and only reads them. ``targets[j]``: the gallery index of ``queries[j]``'s
    target image (None when it is not in the gallery).
    """

    def __init__(self, queries: Sequence[int], targets: Sequence[int | None], top_k: int) -> None:
        if len(queries) != len(targets):
            raise InputError("RankRecorder: one target per query")
        self.queries, self.targets, self.top_k = list(queries), list(targets), top_k
        self.rounds: dict[int, list[tuple[tuple[int, ...], tuple[float, ...], int | None]]] = {q: [] for q in queries}

    def __call__(self, round_number: int, scores: np.ndarray) -> None:
        for q, target in zip(self.queries, self.targets):
            self.rounds[q].append(_top(np.asarray(scores[q]), self.top_k, target))

    def views(self, query: int, turns: Sequence[Any], index_of: Any) -> list[RoundView]:
        """The rows of ``query``: one per turn it really has (``turns``, as replayed);
        ``index_of``: gallery path -> position (for the judged references)."""
        judged = round_judgements(list(turns), index_of)
        return [
            RoundView(turn_text(turn), ranking, scores, judged[r], rank, _shown(turn, index_of))
            for r, (turn, (ranking, scores, rank)) in enumerate(zip(turns, self.rounds[query]))
        ]


class SessionRecorder:
    """Keeps, for a few targets of a simulation, every round's ranking as the session showed it.

    Pass it as ``simulate(..., observe=recorder)``: it is called after each round with the
    sessions and only reads them. ``targets[j]``: the gallery index of ``queries[j]``'s target.
    """

    def __init__(self, queries: Sequence[int], targets: Sequence[int | None], top_k: int) -> None:
        if len(queries) != len(targets):
            raise InputError("SessionRecorder: one target per query")
        self.queries, self.targets, self.top_k = list(queries), list(targets), top_k
        self.rows: dict[int, list[RoundView]] = {q: [] for q in queries}
        self._turns: dict[int, int] = {q: 0 for q in queries}

    def __call__(self, round_number: int, sessions: Sequence[Any]) -> None:
        for q, target in zip(self.queries, self.targets):
            session, step = sessions[q], sessions[q].step
            history = session.history
            new = len(history) > self._turns[q]
            text = turn_text(history[-1].turn) if new else ""
            shown = _shown(history[-1].turn, session.index.index_of) if new else None
            self._turns[q] = len(history)
            rank = step.rank_of(target) if target is not None else None
            self.rows[q].append(
                RoundView(
                    text,
                    tuple(int(i) for i in step.ranking[: self.top_k]),
                    tuple(float(s) for s in step.scores[: self.top_k]),
                    dict(session.judgements),
                    rank,
                    shown,
                )
            )


def session_views(session: Any, top_k: int = 8) -> list[RoundView]:
    """One row per turn of a live session, from its history (the top results kept after each
    turn; scores for the current turn only)."""
    history = session.history
    judged = round_judgements([entry.turn for entry in history], session.index.index_of)
    index_of = session.index.index_of
    rows = [
        RoundView(turn_text(entry.turn), tuple(entry.top[:top_k]), None, judged[r], shown=_shown(entry.turn, index_of))
        for r, entry in enumerate(history)
    ]
    step = session.step
    if rows and step is not None:
        rows[-1] = RoundView(
            rows[-1].text,
            tuple(int(i) for i in step.ranking[:top_k]),
            tuple(float(s) for s in step.scores[:top_k]),
            judged[-1],
            shown=rows[-1].shown,
        )
    return rows
