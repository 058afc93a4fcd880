"""The VLM client against a scripted local server: success, bad answers, refusals, deadlines, retries."""

import json
import time

import pytest

from minterpr.errors import InputError
from minterpr.vlm.client import VLMClient
from minterpr.vlm.config import VLMConfig
from minterpr.vlm.errors import VLMBadAnswer, VLMBudgetExceeded, VLMRefused, VLMTimeout, VLMUnavailable
from minterpr.vlm.schema import answers_schema, facts_schema, parse_facts_answer
from minterpr.vlm.testing import ScriptedServer, drop, raw, reply, status

SCHEMA = {
    "type": "object",
    "required": ["question"],
    "properties": {"question": {"type": "string"}},
    "additionalProperties": False,
}
GOOD = '{"question": "What was she carrying?"}'


def client(server, **options):
    options.setdefault("backoff_s", 0.01)
    return VLMClient(VLMConfig(server.url, "m", **options))


def test_success_sends_the_protocol_with_images_and_schema():
    with ScriptedServer([reply(GOOD)]) as server:
        c = client(server)
        assert c.ask("asking", "Phrase it.", images=[b"\x89PNG...."], schema=SCHEMA) == {
            "question": "What was she carrying?"
        }
    body = server.requests[0]["body"]
    assert server.requests[0]["path"] == "/v1/chat/completions"
    assert body["model"] == "m" and body["response_format"]["json_schema"]["schema"] == SCHEMA
    image = body["messages"][1]["content"][1]
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/png;base64,")
    assert c.usage()["calls"] == 1 and c.usage()["prompt_tokens"] == 50


@pytest.mark.parametrize(
    "answer, error",
    [
        (reply("not json at all"), VLMBadAnswer),
        (reply('{"question": 3}'), VLMBadAnswer),  # schema violation
        (reply('{"question": "x", "extra": 1}'), VLMBadAnswer),
        (reply(None, refusal="I can't help with identifying people."), VLMRefused),
        (reply("", finish_reason="content_filter"), VLMRefused),
        (raw(b"<html>proxy error</html>"), VLMBadAnswer),  # the HTTP body itself is not JSON
        (raw(b'{"no": "choices"}'), VLMBadAnswer),
        (status(401), VLMUnavailable),  # not retried
    ],
)
def test_unusable_answers_raise_a_vlm_error_and_are_recorded(answer, error):
    with ScriptedServer([answer]) as server:
        c = client(server)
        with pytest.raises(error):
            c.ask("reading", "Read it.", schema=SCHEMA)
    assert len(server.requests) == 1 and c.calls[-1].outcome == error.__name__


def test_a_fenced_answer_is_read():
    with ScriptedServer([reply("Sure:\n```json\n" + GOOD + "\n```")]) as server:
        assert client(server).ask("asking", "x", schema=SCHEMA)["question"].startswith("What")


@pytest.mark.parametrize("failures", [[status(429)], [status(500), status(503)], [drop()], [drop(), status(502)]])
def test_429_5xx_and_dropped_connections_are_retried_then_succeed(failures):
    with ScriptedServer([*failures, reply(GOOD)]) as server:
        c = client(server)
        assert c.ask("asking", "x", schema=SCHEMA)["question"]
    assert len(server.requests) == len(failures) + 1 and c.calls[-1].attempts == len(failures) + 1


def test_retries_are_bounded():
    with ScriptedServer([status(500)], repeat=True) as server:
        c = client(server, max_retries=2)
        with pytest.raises(VLMUnavailable, match="3 tries"):
            c.ask("asking", "x", schema=SCHEMA)
    assert len(server.requests) == 3


def test_backoff_doubles():
    with ScriptedServer([status(429), status(429), reply(GOOD)]) as server:
        c = client(server, backoff_s=0.5)
        waits = []
        c._sleep = waits.append
        c.ask("asking", "x", schema=SCHEMA)
    assert waits == [0.5, 1.0]


def test_a_slow_answer_past_the_deadline_times_out_at_the_deadline():
    with ScriptedServer([reply(GOOD, delay_s=3.0)]) as server:
        c = client(server, turn_deadline_s=0.3)
        start = time.monotonic()
        with pytest.raises(VLMTimeout):
            c.ask("asking", "x", schema=SCHEMA)
        assert time.monotonic() - start < 0.3 + 0.25


def test_no_retry_sleeps_past_the_deadline():
    with ScriptedServer([status(503)], repeat=True) as server:
        c = client(server, turn_deadline_s=0.2, backoff_s=0.5)
        start = time.monotonic()
        with pytest.raises(VLMTimeout):
            c.ask("asking", "x", schema=SCHEMA)
        assert time.monotonic() - start < 0.2


def test_a_server_refusing_response_format_is_asked_with_the_schema_in_the_prompt():
    with ScriptedServer([status(400), status(400), reply(GOOD), reply(GOOD)]) as server:
        c = client(server)
        c.ask("asking", "x", schema=SCHEMA)
        c.ask("asking", "y", schema=SCHEMA)
    bodies = [r["body"] for r in server.requests]  # refused in strict mode, then without it: no schema field
    assert [b["response_format"]["json_schema"].get("strict") for b in bodies[:2]] == [True, None]
    assert all("response_format" not in b for b in bodies[2:])
    assert "JSON schema" in bodies[2]["messages"][1]["content"][0]["text"]


def test_the_cache_answers_repeats_in_memory_and_on_disk(tmp_path):
    path = str(tmp_path / "cache.json")
    with ScriptedServer([reply(GOOD)]) as server:
        c = client(server, cache_path=path)
        first = c.ask("asking", "x", images=[b"img"], schema=SCHEMA)
        assert c.ask("asking", "x", images=[b"img"], schema=SCHEMA) == first
        again = client(server, cache_path=path)  # a new run reads the file
        assert again.ask("asking", "x", images=[b"img"], schema=SCHEMA) == first
    assert len(server.requests) == 1 and [r.outcome for r in c.calls] == ["ok", "cached"]


def test_a_broken_cache_file_is_named(tmp_path):
    path = tmp_path / "cache.json"
    path.write_text("[1, 2")
    with pytest.raises(InputError, match="cache.json: not a VLM answer cache"):
        VLMClient(VLMConfig("http://127.0.0.1:9/v1", "m", cache_path=str(path)))


def test_the_budget_stops_calls():
    with ScriptedServer([reply(GOOD)], repeat=True) as server:
        c = client(server, max_calls=2)
        c.ask("asking", "a", schema=SCHEMA)
        c.ask("asking", "b", schema=SCHEMA)
        with pytest.raises(VLMBudgetExceeded):
            c.ask("asking", "c", schema=SCHEMA)
        tokens = client(server, max_total_tokens=60)
        tokens.ask("asking", "a", schema=SCHEMA)  # 60 tokens spent
        with pytest.raises(VLMBudgetExceeded, match="tokens"):
            tokens.ask("asking", "b", schema=SCHEMA)
    assert len(server.requests) == 3


def test_the_key_is_sent_from_its_variable_and_never_recorded(monkeypatch):
    monkeypatch.setenv("MY_VLM_KEY", "sk-secret-123")
    with ScriptedServer([reply(GOOD)]) as server:
        c = client(server, key_env="MY_VLM_KEY")
        c.ask("asking", "x", schema=SCHEMA)
    assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-secret-123"
    record = json.dumps([r.to_dict() for r in c.calls]) + json.dumps(c.config.to_dict()) + repr(c.config)
    assert "sk-secret" not in record and "MY_VLM_KEY" in record


def test_an_unset_key_variable_is_named(monkeypatch):
    """Commands check the variable at start (tests/test_vlm_endpoint_commands.py); unset later, a call fails
    as an unreachable endpoint does (the use falls back) and names it."""
    monkeypatch.delenv("MISSING_KEY", raising=False)
    with ScriptedServer([reply(GOOD)]) as server:
        with pytest.raises(VLMUnavailable, match="MISSING_KEY is not set"):
            client(server, key_env="MISSING_KEY").ask("asking", "x")


def test_config_errors_name_the_field():
    with pytest.raises(InputError, match="url"):
        VLMConfig("localhost:8000", "m")
    with pytest.raises(InputError, match="key_env"):
        VLMConfig("http://x/v1", "m", key_env="sk=abc")
    with pytest.raises(InputError, match="max_calls"):
        VLMConfig("http://x/v1", "m", max_calls=-1)


def test_schemas_refuse_values_of_another_slot_and_multiple_values_of_a_single_slot():
    schema = facts_schema()
    with pytest.raises(VLMBadAnswer, match="takes one value"):
        parse_facts_answer('{"facts": [{"slot": "gender", "values": ["male", "female"], "negated": false}]}', schema)
    answers = answers_schema(["gender", "carried"])
    assert answers["properties"]["gender"]["maxItems"] == 1 and "maxItems" not in answers["properties"]["carried"]


def test_without_httpx_one_line_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "httpx", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'minterpr\[vlm\]' -c constraints.txt"):
        VLMClient(VLMConfig("http://127.0.0.1:9/v1", "m"))


def test_the_dry_run_endpoint_serves_valid_answers_from_the_command_line():
    """``python -m minterpr.vlm.testing``: the endpoint docs/vlm.md's dry run points the commands at."""
    import subprocess
    import sys

    import httpx

    process = subprocess.Popen(
        [sys.executable, "-m", "minterpr.vlm.testing", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        line = process.stdout.readline()
        url = line.split(" at ")[1].split()[0]
        body = {
            "model": "m",
            "messages": [],
            "response_format": {
                "json_schema": {"schema": {"type": "object", "properties": {"question": {"type": "string"}}}}
            },
        }
        answer = httpx.post(url + "/chat/completions", json=body, timeout=10).json()
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    assert json.loads(answer["choices"][0]["message"]["content"]) == {"question": "And what about that?"}
