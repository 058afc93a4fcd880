"""How the VLM client's requests reach the wire: one connection pool per scheme that every client
borrows, and httpx timeouts that count down to one deadline, so a request's phases together never
wait past it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any, Callable, Iterator

_MIN_WAIT_S = 0.001  # a phase's shortest timeout: 0 would make the socket non-blocking (an error, not a timeout)


class Remaining(Mapping):
    """httpx's per-request ``timeout`` extension whose every phase (connect, read, write, pool) is
    what is left until ``until`` when the phase asks, so that connecting, sending and reading
    together never wait past it (a plain ``httpx.Timeout(left)`` gives each phase the whole ``left``).

    Example:
        >>> now = [10.0]
        >>> left = Remaining(12.5, lambda: now[0])
        >>> left["connect"], (now.__setitem__(0, 12.0), left["read"])[1], sorted(left)
        (2.5, 0.5, ['connect', 'pool', 'read', 'write'])
        >>> now[0] = 13.0; left["read"]
        0.001
    """

    PHASES = ("connect", "read", "write", "pool")

    def __init__(self, until: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.until, self.clock = until, clock

    def __getitem__(self, phase: str) -> float:
        if phase not in self.PHASES:
            raise KeyError(phase)
        return max(self.until - self.clock(), _MIN_WAIT_S)

    def __iter__(self) -> Iterator[str]:
        return iter(self.PHASES)

    def __len__(self) -> int:
        return len(self.PHASES)


class Borrowed:
    """A shared transport as one client sees it: closing the client leaves the pool to the others."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def handle_request(self, request: Any) -> Any:
        return self.inner.handle_request(request)

    def close(self) -> None:
        pass


_TRANSPORTS: dict[bool, Any] = {}
_TRANSPORTS_LOCK = threading.Lock()


def shared_transport(https: bool) -> Any:
    """The process's connection pool for https (certificates verified) or plain-http endpoints:
    every :class:`VLMClient` without a transport of its own borrows it, so sessions reuse kept-alive
    connections (a new one costs a connect, and for https a TLS context: ~0.5 s) and a session's
    client holds nothing to leak. httpcore's pool is thread-safe."""
    import httpx

    with _TRANSPORTS_LOCK:
        if https not in _TRANSPORTS:
            _TRANSPORTS[https] = httpx.HTTPTransport(verify=https)
        return _TRANSPORTS[https]
