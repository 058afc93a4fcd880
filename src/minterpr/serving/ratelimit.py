"""In-process token buckets: a burst allowed at once, then a steady rate.

One :class:`RateLimiter` holds a bucket per key (a user, a client address and username); a
request takes a token or is refused with the seconds until one is back. Buckets that are full
again are forgotten, so the table stays as small as the set of busy keys.

Example:
    >>> from minterpr.serving.settings import RateSpec
    >>> clock = [0.0]
    >>> limiter = RateLimiter(RateSpec(rate_per_s=1.0, burst=2), clock=lambda: clock[0])
    >>> [limiter.take("ana") for _ in range(3)]
    [0.0, 0.0, 1.0]
    >>> clock[0] = 1.0
    >>> limiter.take("ana"), limiter.take("bo")
    (0.0, 0.0)
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from minterpr.serving.settings import RateSpec

_SWEEP_EVERY = 1024  # takes between two sweeps of full buckets


class RateLimiter:
    """Token buckets by key, safe to share between threads."""

    def __init__(self, spec: RateSpec, clock: Callable[[], float] = time.monotonic) -> None:
        self.spec = spec
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, time of last update)
        self._lock = threading.Lock()
        self._takes = 0
        self.refused = 0  # takes refused so far (the service's metrics report it)

    def take(self, key: str) -> float:
        """Take one token for ``key``: 0.0 when granted, else the seconds until one is available."""
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.get(key, (float(self.spec.burst), now))
            tokens = min(float(self.spec.burst), tokens + (now - last) * self.spec.rate_per_s)
            self._takes += 1
            if self._takes % _SWEEP_EVERY == 0:
                self._sweep(now)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            self.refused += 1
            return (1.0 - tokens) / self.spec.rate_per_s

    def _sweep(self, now: float) -> None:
        full = [
            key
            for key, (tokens, last) in self._buckets.items()
            if tokens + (now - last) * self.spec.rate_per_s >= self.spec.burst
        ]
        for key in full:
            del self._buckets[key]
