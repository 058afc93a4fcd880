"""A client for the OpenAI-compatible chat-completions protocol, with images, deadlines and a budget.

``POST {url}/chat/completions`` with ``{"model", "messages", "max_tokens", "temperature"}``; images
go in the user message as ``{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,..."}}``.
With a schema, ``response_format: {"type": "json_schema", ...}`` constrains the answer where the
server supports it; a server that refuses the field (HTTP 400/422) is asked again with the schema
in the prompt, and that is remembered. Either way the answer is validated
(:func:`~minterpr.vlm.schema.parse_answer`).

Why ``httpx`` and not the ``openai`` package: the service's extra already installs it (one fewer
dependency: the ``vlm`` extra adds nothing to ``serve``), it is synchronous without an event loop,
and it lets this module own the deadline: every request's timeout is the smaller of the call's
timeout and what is left of the turn's deadline, the answer is read in chunks checked against
that deadline, and retries (429, 5xx, connection errors) with exponential backoff never sleep
past it. The ``openai`` client's own retries and timeouts would have to be switched off to get
the same control, and its schema helpers assume OpenAI's own server.

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

import base64
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from minterpr.errors import InputError
from minterpr.fileio import atomic_write_text
from minterpr.vlm.config import VLMConfig
from minterpr.vlm.errors import VLMBadAnswer, VLMBudgetExceeded, VLMError, VLMRefused, VLMTimeout, VLMUnavailable
from minterpr.vlm.schema import parse_answer

INSTALL_HINT = "the VLM backend needs httpx: pip install 'minterpr[vlm]' -c constraints.txt"
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_MAX_ANSWER_BYTES = 4 * 2**20  # a chat answer is a few kilobytes
_SYSTEM = ("You describe pedestrians in images for a person-retrieval system. Answer only with JSON that "
           "follows the schema you are given; use [] or omit what you cannot tell. Never guess identities.")


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


def image_data_url(data: bytes, mime: str = "image/jpeg") -> str:
    """Image bytes as a data URL, as the protocol carries them.

    Example:
        >>> image_data_url(b"\\xff\\xd8")
        'data:image/jpeg;base64,/9g='
    """
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _mime(data: bytes) -> str:
    return "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"


class VLMClient:
    """Chat completions against ``config.url``; one client per session (the budget is its own)."""

    def __init__(self, config: VLMConfig, *, transport: Any = None, cache: dict[str, Any] | None = None) -> None:
        """``cache``: a dict shared by several clients (an evaluation's sessions, each with its own budget)."""
        try:
            import httpx
        except ImportError as err:
            raise ImportError(INSTALL_HINT) from err
        self._httpx = httpx
        self.config = config
        self.endpoint = config.url.rstrip("/") + "/chat/completions"
        self.calls: list[CallRecord] = []  # every call, in order
        self._schema_supported = config.json_schema
        self._cache: dict[str, Any] = cache if cache is not None else {}
        if config.cache_path and not self._cache:
            self._cache.update(_read_cache(config.cache_path))
        # plain http (a local server) needs no certificates: loading them costs ~0.5 s per session
        verify = True if self.endpoint.startswith("https://") else False
        self._http = httpx.Client(transport=transport, follow_redirects=False, verify=verify)
        self._sleep = time.sleep

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "VLMClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- accounting --------------------------------------------------------------------------
    def usage(self) -> dict[str, Any]:
        """Calls (sent, cached, failed), tokens and latency so far."""
        sent = [c for c in self.calls if c.attempts]
        return {"calls": len(sent), "cached": sum(c.outcome == "cached" for c in self.calls),
                "failed": sum(c.outcome not in ("ok", "cached") for c in self.calls),
                "prompt_tokens": sum(c.prompt_tokens for c in self.calls),
                "completion_tokens": sum(c.completion_tokens for c in self.calls),
                "latency_s": round(sum(c.latency_s for c in self.calls), 6)}

    def _budget_left(self) -> None:
        used = self.usage()
        if used["calls"] >= self.config.max_calls:
            raise VLMBudgetExceeded(f"the session's {self.config.max_calls} model calls are spent")
        if used["prompt_tokens"] + used["completion_tokens"] >= self.config.max_total_tokens:
            raise VLMBudgetExceeded(f"the session's {self.config.max_total_tokens:,} model tokens are spent")

    # ----- the call -----------------------------------------------------------------------------
    def ask(self, purpose: str, prompt: str, *, images: Sequence[bytes] = (), schema: dict[str, Any] | None = None,
            deadline: float | None = None) -> Any:
        """The answer to ``prompt`` about ``images``: the validated JSON value with a ``schema``, else the
        text. ``deadline`` is a ``time.monotonic()`` instant no wait goes past. Raises VLMError."""
        start = time.monotonic()
        deadline = start + self.config.turn_deadline_s if deadline is None else deadline
        key = _cache_key(self.config.model, prompt, schema, images)
        if key in self._cache:
            self.calls.append(CallRecord(purpose, self.endpoint, self.config.model, "cached", 0.0))
            return self._cache[key]
        tokens = [0, 0, 0]  # prompt, completion, attempts
        try:
            self._budget_left()
            text = self._complete(prompt, images, schema, deadline, tokens)
            value = text if schema is None else parse_answer(text, schema)
        except VLMError as err:
            self._record(purpose, type(err).__name__, start, tokens)
            raise
        self._record(purpose, "ok", start, tokens)
        self._remember(key, value)
        return value

    def _record(self, purpose: str, outcome: str, start: float, tokens: list[int]) -> None:
        self.calls.append(CallRecord(purpose, self.endpoint, self.config.model, outcome,
                                     round(time.monotonic() - start, 6), tokens[0], tokens[1], tokens[2]))

    def _remember(self, key: str, value: Any) -> None:
        self._cache[key] = value
        if self.config.cache_path:
            atomic_write_text(self.config.cache_path, json.dumps(self._cache, ensure_ascii=True) + "\n")

    def _complete(self, prompt: str, images: Sequence[bytes], schema: dict[str, Any] | None, deadline: float,
                  tokens: list[int]) -> str:
        if schema is not None and not self._schema_supported:
            prompt = _with_schema(prompt, schema)
        body = _body(self.config, prompt, images, schema if self._schema_supported else None)
        attempt = 0
        while True:
            try:
                status, data = self._post(body, deadline, tokens)
            except VLMTimeout:
                raise
            except VLMUnavailable:
                status, data = None, None
            if status in (400, 422) and "response_format" in body:  # this server does not take schemas
                self._schema_supported = False
                body = _body(self.config, _with_schema(prompt, schema or {}), images, None)
                continue
            if status == 200:
                return _message_text(data, tokens)
            if status is not None and status not in _RETRY_STATUS:
                raise VLMUnavailable(f"HTTP {status} from {self.endpoint}")
            if attempt >= self.config.max_retries:
                raise VLMUnavailable(f"{self.endpoint}: no answer after {attempt + 1} tries"
                                     + (f" (last: HTTP {status})" if status else " (connection failed)"))
            wait = self.config.backoff_s * 2 ** attempt
            if time.monotonic() + wait >= deadline:
                raise VLMTimeout(f"{self.endpoint}: the turn's deadline leaves no time to retry")
            self._sleep(wait)
            attempt += 1

    def _post(self, body: dict[str, Any], deadline: float, tokens: list[int]) -> tuple[int, Any]:
        """One request: (status, parsed JSON or None). VLMTimeout past the deadline, VLMUnavailable when
        the connection fails or drops."""
        left = min(self.config.timeout_s, deadline - time.monotonic())
        if left <= 0:
            raise VLMTimeout(f"{self.endpoint}: past the turn's deadline")
        headers = {"Content-Type": "application/json"}
        key = self.config.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        httpx = self._httpx
        tokens[2] += 1
        stop = time.monotonic() + left
        try:
            with self._http.stream("POST", self.endpoint, json=body, headers=headers, timeout=httpx.Timeout(left)) as r:
                chunks, size = [], 0
                for chunk in r.iter_bytes():  # each read waits at most `left`; the total is checked here
                    chunks.append(chunk)
                    size += len(chunk)
                    if time.monotonic() > stop:
                        raise VLMTimeout(f"{self.endpoint}: the answer was still arriving at the deadline")
                    if size > _MAX_ANSWER_BYTES:
                        raise VLMBadAnswer(f"{self.endpoint}: answer larger than {_MAX_ANSWER_BYTES // 2**20} MiB")
                status = r.status_code
        except httpx.TimeoutException as err:
            raise VLMTimeout(f"{self.endpoint}: no answer within {left:.2f} s") from err
        except (httpx.TransportError, httpx.StreamError) as err:  # refused, reset, dropped mid-answer
            raise VLMUnavailable(f"{self.endpoint}: {type(err).__name__}") from err
        if status != 200:
            return status, None
        try:
            return status, json.loads(b"".join(chunks))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
            raise VLMBadAnswer(f"{self.endpoint}: the HTTP body is not JSON") from err


def _body(config: VLMConfig, prompt: str, images: Sequence[bytes], schema: dict[str, Any] | None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
    content += [{"type": "image_url", "image_url": {"url": image_data_url(data, _mime(data))}} for data in images]
    body: dict[str, Any] = {"model": config.model, "max_tokens": config.max_tokens, "temperature": config.temperature,
                            "messages": [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": content}]}
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    return body


def _with_schema(prompt: str, schema: dict[str, Any]) -> str:
    return f"{prompt}\nAnswer with one JSON object and nothing else, following this JSON schema:\n{json.dumps(schema)}"


def _message_text(data: Any, tokens: list[int]) -> str:
    """The first choice's text; VLMRefused for a refusal or a filtered answer, VLMBadAnswer otherwise."""
    try:
        usage = data.get("usage") or {}
        tokens[0] += int(usage.get("prompt_tokens") or 0)
        tokens[1] += int(usage.get("completion_tokens") or 0)
        choice = data["choices"][0]
        message = choice["message"]
    except (AttributeError, KeyError, IndexError, TypeError, ValueError) as err:
        raise VLMBadAnswer("the answer is not a chat completion (no choices[0].message)") from err
    if message.get("refusal") or choice.get("finish_reason") == "content_filter":
        raise VLMRefused(f"the model declined: {str(message.get('refusal') or 'content filter')[:80]}")
    text = message.get("content")
    if not isinstance(text, str) or not text.strip():
        raise VLMBadAnswer("the answer has no text")
    return text


def _cache_key(model: str, prompt: str, schema: dict[str, Any] | None, images: Sequence[bytes]) -> str:
    parts = [model, prompt, json.dumps(schema, sort_keys=True), *(hashlib.sha256(d).hexdigest() for d in images)]
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
