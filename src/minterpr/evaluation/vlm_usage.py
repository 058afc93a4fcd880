"""What a vision-language model cost an evaluation: calls, tokens, latency and fallbacks per turn.

:func:`vlm_sessions` gives each simulated session its own :class:`~minterpr.vlm.assist.VLMAssistant`
(its own budget; one answer cache shared by all, so a repeated question is asked once);
:class:`TurnUsage` collects each turn's :meth:`~minterpr.vlm.assist.VLMAssistant.turn_usage` and
sums them per round for the report.

Example:
    >>> usage = TurnUsage()
    >>> usage.add(0, {"calls": 2, "cached": 0, "fallbacks": 1, "tokens": 120, "latency_s": 0.5})
    >>> usage.add(0, {"calls": 0, "cached": 1, "fallbacks": 0, "tokens": 0, "latency_s": 0.0})
    >>> usage.summary()["per_turn"]
    {'calls': 1.0, 'cached': 0.5, 'fallbacks': 0.5, 'tokens': 60.0, 'latency_s': 0.25, 'discarded': 0.0, 'skipped': 0.0}
"""

from __future__ import annotations

from typing import Any, Mapping

from minterpr.vlm.assist import VLMAssistant
from minterpr.vlm.client import VLMClient
from minterpr.vlm.config import VLMConfig

# discarded: the model's questions refused; skipped: turns that did not ask a failing endpoint (backing off)
_KEYS = ("calls", "cached", "fallbacks", "tokens", "latency_s", "discarded", "skipped")


def vlm_sessions(config: VLMConfig | None, count: int) -> list[VLMAssistant | None]:
    """One assistant per session (None each without a config)."""
    if config is None:
        return [None] * count
    cache: dict[str, Any] = {}
    return [VLMAssistant(config, VLMClient(config, cache=cache)) for _ in range(count)]


class TurnUsage:
    """Per round: the summed usage of every session's turn in that round."""

    def __init__(self) -> None:
        self.rounds: list[dict[str, float]] = []

    def add(self, round_: int, usage: Mapping[str, Any]) -> None:
        while len(self.rounds) <= round_:
            self.rounds.append({"turns": 0, **{k: 0 for k in _KEYS}})
        row = self.rounds[round_]
        row["turns"] += 1
        for key in _KEYS:
            row[key] += usage.get(key, 0)

    def summary(self) -> dict[str, Any]:
        """{"turns", "total": {...}, "per_turn": {...means...}, "per_round": [{...means...}]}."""
        turns = sum(r["turns"] for r in self.rounds)
        total = {k: sum(r[k] for r in self.rounds) for k in _KEYS}
        mean = {k: round(total[k] / turns, 6) if turns else 0.0 for k in _KEYS}
        per_round = [{k: round(r[k] / r["turns"], 6) if r["turns"] else 0.0 for k in _KEYS} for r in self.rounds]
        return {"turns": turns, "total": total, "per_turn": mean, "per_round": per_round}
