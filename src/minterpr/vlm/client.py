"""A client for the OpenAI-compatible chat-completions protocol, with images, deadlines and a budget.

``POST {url}/chat/completions`` with ``{"model", "messages", "max_tokens", "temperature"}``; images
go in the user message as ``{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,..."}}``.
With a schema, ``response_format: {"type": "json_schema", ...}`` constrains the answer where the
server supports it; a server that refuses the field (HTTP 400/422) is asked again with the schema
in the prompt, and that is remembered. Either way the answer is validated
(:func:`~minterpr.vlm.schema.parse_answer`).

Why ``httpx`` and not the ``openai`` package: the service's extra already installs it (one fewer
dependency: the ``vlm`` extra adds nothing to ``serve``), it is synchronous without an event loop,
and it lets this module own the deadline: a request's timeouts (waiting for a pooled connection,
connecting, sending, reading the headers, reading the body) are each read when that phase starts,
as what is left before the call's end (its timeout or the turn's deadline, the sooner), so the
phases together never wait past it; the answer is read in chunks checked against it, and retries
(429, 5xx, connection errors) with exponential backoff never sleep past it. The ``openai``
client's own retries and timeouts would have to be switched off to get the same control, and its
schema helpers assume OpenAI's own server.

What a call costs beyond the server's answer is kept small: every client of a process borrows one
connection pool per scheme (:func:`~minterpr.vlm.transport.shared_transport`: keep-alive across calls
*and* sessions, no new connection or TLS context per session); an image's hash and base64 form are
computed once (a few dozen images memoised per client), a schema's JSON once per schema object (the
builders of :mod:`~minterpr.vlm.schema` return shared ones), and the request body is spliced from those
pieces (:func:`~minterpr.vlm.protocol.body_bytes`, checked against the plain
:func:`~minterpr.vlm.protocol.request_body` by the tests).

Every call (cache hits included) is recorded as a :class:`CallRecord`: purpose, endpoint, model,
outcome, latency, tokens; never the key (sent as ``Authorization: Bearer`` and read from the
environment variable the configuration names, at each request). A response cache keyed by
(model, prompt, schema, image hashes) answers repeated questions without a call; with
``cache_path`` it persists in one JSON file (written atomically after each new answer).

Example (a scripted local server; see :mod:`~minterpr.vlm.testing`):
    >>> from minterpr.vlm.testing import ScriptedServer, reply
    >>> with ScriptedServer([reply('{"question": "What colour was her top?"}')]) as server:
    ...     client = VLMClient(VLMConfig(server.url, "test-model"))
    ...     client.ask("asking", "Phrase a question.", schema={"type": "object"})
    {'question': 'What colour was her top?'}
    >>> [(c.purpose, c.outcome) for c in client.calls]
    [('asking', 'ok')]
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

from minterpr.errors import InputError
from minterpr.fileio import atomic_write_text
from minterpr.vlm.config import VLMConfig
from minterpr.vlm.errors import VLMBadAnswer, VLMBudgetExceeded, VLMError, VLMTimeout, VLMUnavailable
from minterpr.vlm.protocol import (
    body_bytes,
    image_data_url,
    image_mime,
    message_text,
    prompt_with_schema,
    retry_after_s,
    schema_texts,
)
from minterpr.vlm.schema import parse_answer
from minterpr.vlm.transport import Borrowed, Remaining, shared_transport

INSTALL_HINT = "the VLM backend needs httpx: pip install 'minterpr[vlm]' -c constraints.txt"
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_MAX_ANSWER_BYTES = 4 * 2**20  # a chat answer is a few kilobytes
_IMAGE_MEMO = 64  # images whose hash and base64 a client keeps (a turn's rerank candidates and anchor)


@dataclass(frozen=True)
class CallRecord:
    """One call, for the audit log and the cost report (never the key)."""

    purpose: str  # the use that asked ("reading", "asking", "anchor", "rerank", "caption")
    endpoint: str  # the URL asked
    model: str
    outcome: str  # "ok", "cached", or the failure's class ("VLMTimeout", "VLMBadAnswer", ...)
    latency_s: float  # wall time of the call, retries included
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0  # HTTP requests sent (0 for a cache hit or a call refused by the budget)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class VLMClient:
    """Chat completions against ``config.url``; one client per session (the budget is its own)."""

    def __init__(
        self,
        config: VLMConfig,
        *,
        transport: Any = None,
        cache: dict[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``cache``: a dict shared by several clients (an evaluation's sessions, each with its own budget);
        ``transport``: an httpx transport (default: the process's
        :func:`~minterpr.vlm.transport.shared_transport`); ``clock`` and ``sleep``: the monotonic clock
        deadlines are read on and the backoff's wait (tests inject them)."""
        try:
            import httpx
        except ImportError as err:
            raise ImportError(INSTALL_HINT) from err
        self._httpx = httpx
        self.config = config
        self.endpoint = config.url.rstrip("/") + "/chat/completions"
        self._url = httpx.URL(self.endpoint)  # parsed once, not per request
        self.calls: list[CallRecord] = []  # every call, in order
        self._sent = self._tokens = 0  # requests that reached the wire, tokens spent: the budget's counters
        self._schema_supported = config.json_schema
        self._strict = config.strict  # sent "strict": true until a server refuses it
        self._cache: dict[str, Any] = cache if cache is not None else {}
        if config.cache_path and not self._cache:
            self._cache.update(_read_cache(config.cache_path))
        if transport is None:
            transport = Borrowed(shared_transport(self.endpoint.startswith("https://")))
        self._http = httpx.Client(transport=transport, follow_redirects=False)
        self._images: OrderedDict[bytes, tuple[str, str]] = OrderedDict()  # bytes -> (sha256, body part)
        self._clock = clock
        self._sleep = sleep

    @property
    def clock(self) -> Callable[[], float]:
        return self._clock

    def close(self) -> None:
        self._http.close()  # a borrowed pool stays open for the other clients

    def __enter__(self) -> "VLMClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- accounting --------------------------------------------------------------------------
    def usage(self) -> dict[str, Any]:
        """Calls (sent, cached, failed), tokens and latency so far."""
        sent = [c for c in self.calls if c.attempts]
        return {
            "calls": len(sent),
            "cached": sum(c.outcome == "cached" for c in self.calls),
            "failed": sum(c.outcome not in ("ok", "cached") for c in self.calls),
            "prompt_tokens": sum(c.prompt_tokens for c in self.calls),
            "completion_tokens": sum(c.completion_tokens for c in self.calls),
            "latency_s": round(sum(c.latency_s for c in self.calls), 6),
        }

    def _budget_left(self) -> None:
        if self._sent >= self.config.max_calls:
            raise VLMBudgetExceeded(f"the session's {self.config.max_calls} model calls are spent")
        if self._tokens >= self.config.max_total_tokens:
            raise VLMBudgetExceeded(f"the session's {self.config.max_total_tokens:,} model tokens are spent")

    # ----- the call -----------------------------------------------------------------------------
    def ask(
        self,
        purpose: str,
        prompt: str,
        *,
        images: Sequence[bytes] = (),
        schema: dict[str, Any] | None = None,
        deadline: float | None = None,
    ) -> Any:
        """The answer to ``prompt`` about ``images``: the validated JSON value with a ``schema``, else the
        text. ``deadline`` is an instant on :attr:`clock` no wait goes past. Raises VLMError."""
        start = self._clock()
        deadline = start + self.config.turn_deadline_s if deadline is None else deadline
        parts = [self._image(data) for data in images]
        key = _cache_key(
            self.config.model,
            prompt,
            None if schema is None else schema_texts(schema)[0],
            [digest for digest, _ in parts],
        )
        if key in self._cache:
            self.calls.append(CallRecord(purpose, self.endpoint, self.config.model, "cached", 0.0))
            return self._cache[key]
        tokens = [0, 0, 0]  # prompt, completion, attempts
        try:
            self._budget_left()
            text = self._complete(prompt, [part for _, part in parts], schema, deadline, tokens)
            value = text if schema is None else parse_answer(text, schema)
        except VLMError as err:
            self._record(purpose, type(err).__name__, start, tokens)
            raise
        self._record(purpose, "ok", start, tokens)
        self._remember(key, value)
        return value

    def _image(self, data: bytes) -> tuple[str, str]:
        """(sha256 hex, the JSON of its image_url content part) of an image, memoised."""
        held = self._images.get(data)
        if held is None:
            url = image_data_url(data, image_mime(data))
            held = (hashlib.sha256(data).hexdigest(), json.dumps({"type": "image_url", "image_url": {"url": url}}))
            self._images[data] = held
            if len(self._images) > _IMAGE_MEMO:
                self._images.popitem(last=False)
        else:
            self._images.move_to_end(data)
        return held

    def _record(self, purpose: str, outcome: str, start: float, tokens: list[int]) -> None:
        self.calls.append(
            CallRecord(
                purpose,
                self.endpoint,
                self.config.model,
                outcome,
                round(self._clock() - start, 6),
                tokens[0],
                tokens[1],
                tokens[2],
            )
        )
        self._sent += tokens[2] > 0
        self._tokens += tokens[0] + tokens[1]

    def _remember(self, key: str, value: Any) -> None:
        self._cache[key] = value
        if self.config.cache_path:
            atomic_write_text(self.config.cache_path, json.dumps(self._cache, ensure_ascii=True) + "\n")

    def _complete(
        self, prompt: str, image_parts: Sequence[str], schema: dict[str, Any] | None, deadline: float, tokens: list[int]
    ) -> str:
        if schema is not None and not self._schema_supported:
            prompt = prompt_with_schema(prompt, schema)
        content = body_bytes(
            self.config, prompt, image_parts, schema if self._schema_supported else None, strict=self._strict
        )
        constrained = schema is not None and self._schema_supported
        self._key()  # an unset variable fails the call at once, not after retries
        attempt = 0
        while True:
            try:
                status, data = self._post(content, deadline, tokens)
            except VLMTimeout:
                raise
            except VLMUnavailable:
                status, data = None, None
            if status in (400, 422) and constrained and self._strict:  # this server does not take strict mode
                self._strict = False
                content = body_bytes(self.config, prompt, image_parts, schema, strict=False)
                continue
            if status in (400, 422) and constrained:  # this server does not take schemas
                self._schema_supported = constrained = False
                content = body_bytes(self.config, prompt_with_schema(prompt, schema or {}), image_parts, None)
                continue
            if status == 200:
                return message_text(data, tokens)
            if status is not None and status not in _RETRY_STATUS:
                raise VLMUnavailable(f"HTTP {status} from {self.endpoint}")
            if attempt >= self.config.max_retries:
                raise VLMUnavailable(
                    f"{self.endpoint}: no answer after {attempt + 1} tries"
                    + (f" (last: HTTP {status})" if status else " (connection failed)")
                )
            wait = self.config.backoff_s * 2**attempt
            asked = data if status is not None else None  # the server's Retry-After: honoured, never shortened
            if asked is not None and asked > wait:
                wait = asked
                if self._clock() + wait >= deadline:
                    raise VLMUnavailable(
                        f"{self.endpoint}: HTTP {status} asks to retry in {asked:g} s, past the turn's deadline"
                    )
            if self._clock() + wait >= deadline:
                raise VLMTimeout(f"{self.endpoint}: the turn's deadline leaves no time to retry")
            self._sleep(wait)
            attempt += 1

    def _key(self) -> str | None:
        """The API key from its variable now; VLMUnavailable naming the variable when it is unset (commands
        check it at start; unset since, the call fails and its use falls back)."""
        try:
            return self.config.api_key()
        except InputError as err:
            raise VLMUnavailable(str(err)) from None

    def _post(self, content: bytes, deadline: float, tokens: list[int]) -> tuple[int, Any]:
        """One request: (200, parsed JSON), or (status, the seconds its Retry-After asks to wait or None).
        VLMTimeout past the deadline, VLMUnavailable when the connection fails or drops."""
        now = self._clock()
        stop = min(now + self.config.timeout_s, deadline)  # this request's end: every wait inside it ends here
        if stop <= now:
            raise VLMTimeout(f"{self.endpoint}: past the turn's deadline")
        headers = {"Content-Type": "application/json"}
        key = self._key()  # read now, never kept
        if key:
            headers["Authorization"] = f"Bearer {key}"
        httpx = self._httpx
        tokens[2] += 1
        try:
            with self._http.stream(
                "POST",
                self._url,
                content=content,
                headers=headers,
                extensions={"timeout": Remaining(stop, self._clock)},
            ) as r:
                chunks, size = [], 0
                for chunk in r.iter_bytes():  # each read waits at most until `stop`; checked between reads too
                    chunks.append(chunk)
                    size += len(chunk)
                    if self._clock() > stop:
                        raise VLMTimeout(f"{self.endpoint}: the answer was still arriving at the deadline")
                    if size > _MAX_ANSWER_BYTES:
                        raise VLMBadAnswer(f"{self.endpoint}: answer larger than {_MAX_ANSWER_BYTES // 2**20} MiB")
                status, retry_after = r.status_code, r.headers.get("retry-after")
        except httpx.TimeoutException as err:
            raise VLMTimeout(f"{self.endpoint}: no answer within {stop - now:.2f} s") from err
        except (httpx.TransportError, httpx.StreamError) as err:  # refused, reset, dropped mid-answer
            raise VLMUnavailable(f"{self.endpoint}: {type(err).__name__}") from err
        if status != 200:  # the data of an error answer: how long the server asks to wait (None: it did not say)
            return status, retry_after_s(retry_after)
        try:
            return status, json.loads(b"".join(chunks))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
            raise VLMBadAnswer(f"{self.endpoint}: the HTTP body is not JSON") from err


def _cache_key(model: str, prompt: str, schema_text: str | None, image_digests: Sequence[str]) -> str:
    """The answer cache's key: (model, prompt, the schema's sorted JSON, each image's sha256)."""
    parts = [model, prompt, "null" if schema_text is None else schema_text, *image_digests]
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


def _read_cache(path: str) -> dict[str, Any]:
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: not a VLM answer cache ({err}); remove it to start a new one") from err
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a VLM answer cache (expected a JSON object); remove it to start a new one")
    return data
