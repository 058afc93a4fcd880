"""A turn's model time is bounded by one deadline, shared by all its uses, whatever the endpoint does.

The client runs on an injected clock against an httpx transport that spends scripted time on that
clock (connecting, answering) and honours the timeouts each phase is given, as sockets do; so the
budget logic is checked exactly, without timing anything.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

import httpx
import numpy as np
import pytest

from support.helpers import random_attributes
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.session import Session
from minterpr.types import GalleryImage
from minterpr.vlm.assist import VLMAssistant
from minterpr.vlm.caption import caption_crop, question_groups
from minterpr.vlm.client import VLMClient
from minterpr.vlm.config import VLMConfig
from minterpr.vlm.errors import VLMTimeout
from minterpr.vlm.protocol import body_bytes, request_body
from minterpr.vlm.schema import answers_schema, facts_schema, scores_schema
from minterpr.vlm.testing import completion

DEADLINE = 1.0
USES = ("reading", "asking", "anchor", "rerank")
POORLY_READ = "hmm, someone in the drizzle, I think"


class Clock:
    """A monotonic clock that moves only when the endpoint or a backoff spends time."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


@dataclass(frozen=True)
class Scripted:
    connect_s: float = 0.0  # time to connect
    answer_s: float = 0.01  # time until the answer arrives
    status: int = 200
    failure: str | None = None  # "drop" (connection closed before the answer), "refused"


class Endpoint:
    """An httpx transport on ``clock``: each phase waits its scripted time or its timeout, the shorter."""

    def __init__(self, clock: Clock, answer: Scripted) -> None:
        self.clock, self.answer = clock, answer
        self.requests: list[dict[str, float]] = []  # per request: each phase's timeout and the time left then

    def _phase(self, timeouts, phase: str, seconds: float, error: type) -> None:
        limit = timeouts[phase]  # read when the phase starts, as httpcore does
        self.requests[-1][phase] = limit
        if seconds > limit:
            self.clock.now += limit
            raise error(f"scripted {phase} timeout")
        self.clock.now += seconds

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions["timeout"]
        self.requests.append({})
        a = self.answer
        if a.failure == "refused":
            self.clock.now += 0.001
            raise httpx.ConnectError("connection refused")
        self._phase(timeouts, "connect", a.connect_s, httpx.ConnectTimeout)
        self._phase(timeouts, "read", a.answer_s, httpx.ReadTimeout)
        if a.failure == "drop":
            raise httpx.RemoteProtocolError("server disconnected without sending a response")
        if a.status != 200:
            return httpx.Response(a.status, json={"error": {"message": "scripted"}})
        return httpx.Response(200, json=completion(_valid(json.loads(request.content))))

    def close(self) -> None:
        pass


def _valid(body) -> str:
    """A minimal valid answer to the request's schema (no facts, nothing seen, a question, even odds)."""
    fields = body["response_format"]["json_schema"]["schema"]["properties"]
    if "facts" in fields:
        return '{"facts": []}'
    if "question" in fields:
        return '{"question": "And what about that?"}'
    if "scores" in fields:
        images = [p for p in body["messages"][-1]["content"] if p["type"] == "image_url"]  # strict: no minItems
        return json.dumps({"scores": [0.5] * len(images)})
    return "{}"


def _client(answer: Scripted, **options) -> tuple[VLMClient, Clock, Endpoint]:
    clock = Clock()
    endpoint = Endpoint(clock, answer)
    config = VLMConfig(
        "http://vlm.test/v1",
        "m",
        uses=USES,
        turn_deadline_s=DEADLINE,
        timeout_s=DEADLINE,
        **{"backoff_s": 0.2, **options},
    )
    return VLMClient(config, transport=endpoint, clock=clock, sleep=clock.sleep), clock, endpoint


FAILURES = {
    "slow": Scripted(answer_s=30.0),
    "slow to connect, then slow": Scripted(connect_s=0.7, answer_s=30.0),
    "429 each time": Scripted(answer_s=0.3, status=429),
    "500 each time": Scripted(answer_s=0.05, status=500),
    "dropped": Scripted(answer_s=0.4, failure="drop"),
    "refused": Scripted(failure="refused"),
    "answering, but each use takes 0.4 s": Scripted(answer_s=0.4),
}


def test_connecting_and_reading_share_the_calls_deadline():
    """Each phase gets what is left when it starts: not a whole timeout each (0.7 s + 1 s before)."""
    client, clock, endpoint = _client(FAILURES["slow to connect, then slow"], max_retries=0)
    start = clock()
    with pytest.raises(VLMTimeout):
        client.ask("asking", "x", schema=answers_schema(["gender"]))
    assert clock() - start == pytest.approx(DEADLINE)
    assert endpoint.requests[0]["connect"] == pytest.approx(DEADLINE)
    assert endpoint.requests[0]["read"] == pytest.approx(DEADLINE - 0.7)


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_turns_uses_together_wait_at_most_one_deadline(failure):
    client, clock, endpoint = _client(FAILURES[failure])
    vlm = VLMAssistant(client.config, client)
    start = clock()
    vlm.begin_turn()
    vlm.read(POORLY_READ, None, ())
    vlm.phrase("upper_colour", {}, "What colour was the top?")
    vlm.anchor_facts(b"\xff\xd8anchor", ["gender", "hair_length"])
    vlm.judge(["a person"], [b"\xff\xd8one", b"\xff\xd8two"])
    assert clock() - start <= DEADLINE + 1e-9
    assert all(left <= DEADLINE + 1e-9 for request in endpoint.requests for left in request.values())
    assert all(wait <= DEADLINE for wait in clock.waits)
    assert vlm.turn_usage()["latency_s"] <= DEADLINE + 1e-6  # what the records (the audit) say it waited
    vlm.begin_turn()  # the next turn has a deadline of its own
    vlm.phrase("upper_colour", {}, "What colour was the top?")
    assert clock() - start <= 2 * DEADLINE + 1e-9


def test_a_session_turn_with_a_failing_endpoint_waits_one_deadline_and_ranks_as_without(tmp_path):
    rng = random.Random(3)
    images = []
    for i in range(12):
        (tmp_path / f"{i}.jpg").write_bytes(b"\xff\xd8" + rng.randbytes(64))
        images.append(GalleryImage(f"{i}.jpg", f"t:{i // 2}", attributes=random_attributes(rng, unknown_rate=0.0)))
    backend = AttributeBackend()
    index = backend.index_images(images, str(tmp_path))
    plain = Session(backend, index, seed=1)
    client, clock, _ = _client(FAILURES["slow"])
    assisted = Session(backend, index, seed=1, vlm=VLMAssistant(client.config, client))
    for say in (POORLY_READ, "she had a red top, I think, or maybe it was a scarf"):
        start = clock()
        step = assisted.describe(say)  # the first a description, the second a remark volunteered later
        assert clock() - start <= DEADLINE + 1e-9
        assert np.array_equal(step.ranking, plain.describe(say).ranking)


def test_a_crops_questions_share_one_deadline():
    client, clock, endpoint = _client(FAILURES["slow"])
    start = clock()
    attributes, failed = caption_crop(client, b"\xff\xd8crop")
    assert attributes == {} and failed == len(question_groups())
    assert clock() - start <= DEADLINE + 1e-9 and len(endpoint.requests) == 1  # the other parts not asked


@pytest.mark.parametrize("schema", [None, scores_schema(2), facts_schema()])
def test_the_spliced_body_is_the_plain_request(schema):
    client, _, _ = _client(Scripted())
    images = [b"\x89PNG\r\n\x1a\n" + bytes(range(256)), b"\xff\xd8\xff\xe0 jpeg"]
    parts = [client._image(data)[1] for data in images]
    prompt = 'A "quoted" witness: \u00e9t\u00e9, rouge\n'
    assert json.loads(body_bytes(client.config, prompt, parts, schema)) == request_body(
        client.config, prompt, images, schema
    )
    assert json.loads(body_bytes(client.config, prompt, parts, schema, strict=True)) == request_body(
        client.config, prompt, images, schema, strict=True
    )
