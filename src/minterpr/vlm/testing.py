"""A small local server speaking the chat-completions protocol, its answers scripted (tests, benchmarks).

:class:`ScriptedServer` listens on 127.0.0.1 (a free port) in a thread and answers each request
with the next item of its script: :func:`reply` (a completion, optionally late or a refusal),
:func:`status` (an HTTP error such as 429 or 500), :func:`raw` (any body, e.g. not JSON),
:func:`drop` (the connection closed mid-answer), or a function of the request's JSON body
returning one of those (an answer that depends on the question, e.g. :func:`valid_answer`, or
:class:`Sighted`, which knows each image's true attributes and answers as a model that sees them,
optionally wrong on a share of its readings). ``repeat=True`` answers every request past the
end with the last item. It records each request's JSON body and headers (``server.requests``),
so tests can check what the client sent. The client under test is the one users run.

``python -m minterpr.vlm.testing [--port 8765]`` serves :func:`valid_answer` to every request until
interrupted (it prints the base URL): a dry run of an evaluation's commands (docs/vlm.md) before
a real endpoint is paid for, whose rankings must equal those without a model (it sees nothing).

Example:
    >>> import httpx
    >>> with ScriptedServer([status(503), reply("hi")]) as server:
    ...     codes = [httpx.post(server.url + "/chat/completions", json={}).status_code for _ in range(2)]
    >>> codes, len(server.requests)
    ([503, 200], 2)
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Mapping, Sequence, Union


@dataclass(frozen=True)
class Answer:
    """One scripted answer."""

    status: int = 200  # HTTP status
    body: bytes = b""  # the HTTP body as sent
    delay_s: float = 0.0  # wait before answering
    drop: bool = False  # close the connection after a partial status line instead of answering
    headers: tuple[tuple[str, str], ...] = ()  # further response headers (e.g. ("Retry-After", "2"))


def completion(
    content: str | None,
    *,
    refusal: str | None = None,
    finish_reason: str = "stop",
    prompt_tokens: int = 50,
    completion_tokens: int = 10,
) -> dict[str, Any]:
    """A chat-completion body (what an OpenAI-compatible server returns)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal is not None:
        message["refusal"] = refusal
    return {
        "id": "scripted",
        "object": "chat.completion",
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def reply(content: str | None, *, delay_s: float = 0.0, **fields: Any) -> Answer:
    """A completion whose message says ``content`` (``refusal=``, ``finish_reason=`` as in the protocol)."""
    return Answer(200, json.dumps(completion(content, **fields)).encode("utf-8"), delay_s)


def status(code: int, *, delay_s: float = 0.0, retry_after: str | None = None) -> Answer:
    """An HTTP error answer (429 rate limited, 500 server error, 400 bad request, ...), with a Retry-After."""
    return Answer(
        code,
        json.dumps({"error": {"message": f"scripted {code}"}}).encode("utf-8"),
        delay_s,
        headers=(("Retry-After", retry_after),) if retry_after is not None else (),
    )


Script = Union[Answer, Callable[[Any], Answer]]


def valid_answer(body: Any, *, delay_s: float = 0.0) -> Answer:
    """A minimal answer that satisfies the request's schema: no facts, nothing seen, a question, even odds.

    Example:
        >>> from minterpr.vlm.schema import scores_schema
        >>> body = {"response_format": {"json_schema": {"schema": scores_schema(2)}}}
        >>> json.loads(json.loads(valid_answer(body).body)["choices"][0]["message"]["content"])
        {'scores': [0.5, 0.5]}
    """
    schema = ((body or {}).get("response_format") or {}).get("json_schema", {}).get("schema", {})
    fields = schema.get("properties", {})
    if "facts" in fields:
        content: Any = {"facts": []}
    elif "question" in fields:
        content = {"question": "And what about that?"}
    elif "scores" in fields:  # one per image sent (a strict-mode schema has no minItems to read it from)
        parts = ((body or {}).get("messages") or [{}])[-1].get("content", [])
        images = (
            sum(isinstance(p, dict) and p.get("type") == "image_url" for p in parts) if isinstance(parts, list) else 0
        )
        content = {"scores": [0.5] * (images or fields["scores"].get("minItems", 1))}
    else:
        content = {}
    return reply(json.dumps(content), delay_s=delay_s)


_TEMPLATE = re.compile(r"like: (['\"])(.*?)\1\. Known so far")


class Sighted:
    """Answers as a model that sees each image's true attributes (``truth``: sha256 of the image bytes ->
    attributes), each (image, slot) reading wrong with probability ``wrong`` (a fixed draw per image and
    slot, so the same image reads the same every time): the anchor and caption uses get the readings,
    rerank P(the person) = the share of the conversation's facts (rule-read) that hold by the readings
    (0.5 with none), asking the template back, reading no facts (it cannot read better than the rule
    reader it would use). A measure of the plumbing, not of any real model (docs/vlm.md).

    Example:
        >>> from minterpr.vlm.schema import answers_schema
        >>> seer = Sighted({hashlib.sha256(b"img").hexdigest(): {"gender": ("female",)}})
        >>> body = {"messages": [{}, {"content": [{"type": "text", "text": "?"},
        ...         {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,aW1n"}}]}],
        ...         "response_format": {"json_schema": {"schema": answers_schema(["gender", "carried"])}}}
        >>> json.loads(json.loads(seer(body).body)["choices"][0]["message"]["content"])
        {'gender': ['female'], 'carried': []}
    """

    def __init__(self, truth: Mapping[str, Mapping[str, Sequence[str]]], wrong: float = 0.0, seed: int = 0) -> None:
        self.truth = truth  # sha256 hex of an image's bytes -> its attributes (slot -> values)
        self.wrong = wrong  # share of (image, slot) readings replaced by another value of the slot
        self.seed = seed  # the draw of which readings are wrong

    def reading(self, digest: str, slot: str) -> list[str]:
        from minterpr.language.ontology import ONTOLOGY

        values = [v for v in (self.truth.get(digest) or {}).get(slot, ()) if v in ONTOLOGY.slot(slot).value_names]
        rng = random.Random(f"{self.seed}:{digest}:{slot}")
        if values and rng.random() < self.wrong:
            others = [v for v in ONTOLOGY.slot(slot).value_names if v not in values]
            values = [rng.choice(others)] if others else values
        return values if ONTOLOGY.slot(slot).multi else values[:1]

    def __call__(self, body: Any) -> Answer:
        from minterpr.language.ontology import ONTOLOGY

        schema = ((body or {}).get("response_format") or {}).get("json_schema", {}).get("schema", {})
        fields = schema.get("properties", {})
        parts = (body or {}).get("messages", [{}, {}])[-1].get("content", [])
        text = next((p.get("text", "") for p in parts if p.get("type") == "text"), "")
        digests = [
            hashlib.sha256(base64.b64decode(p["image_url"]["url"].split(",", 1)[1])).hexdigest()
            for p in parts
            if p.get("type") == "image_url"
        ]
        if "facts" in fields:
            content: Any = {"facts": []}
        elif "question" in fields:
            found = _TEMPLATE.search(text)
            content = {"question": found.group(2) if found else "And what about that?"}
        elif "scores" in fields:
            facts = [f for line in text.splitlines() if line.startswith("- ") for f in _line_facts(line[2:])]
            scores = []
            for digest in digests:
                seen = {slot: tuple(self.reading(digest, slot)) for slot in ONTOLOGY.slot_names}
                held = [f.holds(seen) for f in facts]
                known = [h for h in held if h is not None]
                scores.append(sum(known) / len(known) if known else 0.5)
            content = {"scores": scores}
        else:
            content = {slot: self.reading(digests[0], slot) if digests else [] for slot in fields}
        return reply(json.dumps(content))


def _line_facts(line: str) -> tuple[Any, ...]:
    """The rule reader's facts of one conversation line of a rerank prompt (an answer read with its question)."""
    import ast

    from minterpr.language.dialogue_acts import parse_cached, question_slot

    asked = re.fullmatch(r"(?:Asked (.*), the witness|Shown another person, the witness) said (.*)", line)
    if asked is None:
        return parse_cached(line, None)
    try:
        said = str(ast.literal_eval(asked.group(2)))
        slot = question_slot(str(ast.literal_eval(asked.group(1)))) if asked.group(1) else None
    except (ValueError, SyntaxError):
        return ()
    return parse_cached(said, slot) if asked.group(1) else ()  # feedback is about another person


def raw(body: bytes, code: int = 200) -> Answer:
    return Answer(code, body)


def drop() -> Answer:
    return Answer(drop=True)


class ScriptedServer:
    """Answers chat-completion requests from a script; a context manager (starts and stops the thread)."""

    def __init__(self, script: Sequence[Script], *, repeat: bool = False, port: int = 0) -> None:
        self.script = list(script)
        self.repeat = repeat  # past the script's end: the last answer again (else HTTP 500 "script exhausted")
        self.requests: list[dict[str, Any]] = []  # {"path", "headers", "body"} per request received
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())  # port 0: a free one
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.01,), name="scripted-vlm", daemon=True
        )  # a short poll: stopping takes 10 ms, not 0.5 s

    @property
    def url(self) -> str:
        """The base URL to configure (``http://127.0.0.1:PORT/v1``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()  # slow answers stop waiting
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _next(self, request: dict[str, Any]) -> Script:
        with self._lock:
            self.requests.append(request)
            k = len(self.requests) - 1
            if k < len(self.script):
                return self.script[k]
            if self.repeat and self.script:
                return self.script[-1]
        return status(500)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else headers and body wait on the client's delayed ACK (40 ms)

            def log_message(self, *args: Any) -> None:  # quiet: tests read outcomes, not logs
                pass

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(size)
                try:
                    body = json.loads(data) if data else None
                except json.JSONDecodeError:
                    body = None
                answer = outer._next({"path": self.path, "headers": dict(self.headers), "body": body})
                if callable(answer):
                    answer = answer(body)
                if answer.delay_s and outer._closing.wait(answer.delay_s):
                    return
                try:
                    if answer.drop:
                        self.wfile.write(b'HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{"choi')
                        self.wfile.flush()
                        self.close_connection = True
                        return
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer.body)))
                    for name, value in answer.headers:
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(answer.body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (its deadline)
                    self.close_connection = True

        return Handler


def main(argv: Sequence[str] | None = None) -> int:
    """Serve :func:`valid_answer` on 127.0.0.1 until interrupted (the dry run of docs/vlm.md)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m minterpr.vlm.testing",
        description="A local endpoint that answers every question with nothing seen.",
    )
    parser.add_argument("--port", type=int, default=8765, help="the port on 127.0.0.1 (default 8765; 0: a free one)")
    args = parser.parse_args(argv)
    with ScriptedServer([valid_answer], repeat=True, port=args.port) as server:
        print(f"serving scripted answers at {server.url} (Ctrl-C to stop)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
