"""The chat-completions request and answer as bytes and JSON: what :mod:`~minterpr.vlm.client` sends and reads.

A request is ``{"model", "max_tokens", "temperature", "messages", "response_format"?}``: a system
message, then the user's text and each image as a data URL; with a schema, ``response_format`` is
``{"type": "json_schema", "json_schema": {"name", "strict"?, "schema"}}`` (the strict-mode form with
``"strict": true``, :func:`~minterpr.vlm.schema.strict_form`). :func:`body_bytes` splices the body from
pieces encoded once (each image's content part, a schema's JSON) and must equal :func:`request_body`.

Example:
    >>> from minterpr.vlm.config import VLMConfig
    >>> config = VLMConfig("http://127.0.0.1:9/v1", "m")
    >>> request_body(config, "hi", [], None)["messages"][1]
    {'role': 'user', 'content': [{'type': 'text', 'text': 'hi'}]}
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import OrderedDict
from typing import Any, Sequence

from minterpr.vlm.config import VLMConfig
from minterpr.vlm.errors import VLMBadAnswer, VLMRefused
from minterpr.vlm.schema import shown_text, strict_form

_SYSTEM = (
    "You describe pedestrians in images for a person-retrieval system. Answer only with JSON that "
    "follows the schema you are given; use [] or omit what you cannot tell. Never guess identities."
)
_SYSTEM_JSON = json.dumps({"role": "system", "content": _SYSTEM}, ensure_ascii=False)
_SCHEMA_MEMO = 64  # schemas whose JSON is kept (held, so their ids stay theirs)


def image_data_url(data: bytes, mime: str = "image/jpeg") -> str:
    """Image bytes as a data URL, as the protocol carries them.

    Example:
        >>> image_data_url(b"\\xff\\xd8")
        'data:image/jpeg;base64,/9g='
    """
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def image_mime(data: bytes) -> str:
    return "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"


_SCHEMAS: OrderedDict[int, tuple[dict[str, Any], str, str, str]] = OrderedDict()
_SCHEMAS_LOCK = threading.Lock()


def schema_texts(schema: dict[str, Any]) -> tuple[str, str, str]:
    """(sorted JSON for the cache key, JSON for the body, JSON of its strict-mode form for the body) of a
    schema, once per schema object."""
    with _SCHEMAS_LOCK:
        held = _SCHEMAS.get(id(schema))
        if held is not None and held[0] is schema:
            _SCHEMAS.move_to_end(id(schema))
            return held[1], held[2], held[3]
    texts = (
        json.dumps(schema, sort_keys=True),
        json.dumps(schema, ensure_ascii=False),
        json.dumps(strict_form(schema), ensure_ascii=False),
    )
    with _SCHEMAS_LOCK:
        _SCHEMAS[id(schema)] = (schema, *texts)
        while len(_SCHEMAS) > _SCHEMA_MEMO:
            _SCHEMAS.popitem(last=False)
    return texts


def retry_after_s(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds (delta-seconds or an HTTP date); None when absent or unreadable.

    Example:
        >>> retry_after_s("3"), retry_after_s(None), retry_after_s("soon"), retry_after_s("Thu, 01 Jan 1970 00:00:00 GMT")
        (3.0, None, None, 0.0)
    """
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def request_body(
    config: VLMConfig, prompt: str, images: Sequence[bytes], schema: dict[str, Any] | None, *, strict: bool = False
) -> dict[str, Any]:
    """The chat-completions request, as a plain dict (the reference :func:`body_bytes` must equal); ``strict``:
    the schema in its strict-mode form with ``"strict": true`` (:func:`~minterpr.vlm.schema.strict_form`)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
    content += [{"type": "image_url", "image_url": {"url": image_data_url(data, image_mime(data))}} for data in images]
    body: dict[str, Any] = {
        "model": config.model,
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
        "messages": [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": content}],
    }
    if schema is not None:
        form = {
            "name": "answer",
            **({"strict": True} if strict else {}),
            "schema": strict_form(schema) if strict else schema,
        }
        body["response_format"] = {"type": "json_schema", "json_schema": form}
    return body


def body_bytes(
    config: VLMConfig, prompt: str, image_parts: Sequence[str], schema: dict[str, Any] | None, *, strict: bool = False
) -> bytes:
    """:func:`request_body` as UTF-8 JSON, spliced from pieces encoded once (each image's content part,
    the schema's JSON) instead of encoding their long strings again on every call.

    Example:
        >>> config = VLMConfig("http://127.0.0.1:9/v1", "m")
        >>> json.loads(body_bytes(config, "hi", [], None)) == request_body(config, "hi", [], None)
        True
    """
    settings = json.dumps(
        {"model": config.model, "max_tokens": config.max_tokens, "temperature": config.temperature}, ensure_ascii=False
    )[:-1]  # without its closing brace
    user = json.dumps({"type": "text", "text": prompt}, ensure_ascii=False) + "".join("," + p for p in image_parts)
    texts = None if schema is None else schema_texts(schema)
    answer = (
        ""
        if texts is None
        else (
            ',"response_format":{"type":"json_schema","json_schema":{"name":"answer",'
            + ('"strict":true,' if strict else "")
            + f'"schema":{texts[2] if strict else texts[1]}}}}}'
        )
    )
    return f'{settings},"messages":[{_SYSTEM_JSON},{{"role":"user","content":[{user}]}}]{answer}}}'.encode("utf-8")


def prompt_with_schema(prompt: str, schema: dict[str, Any]) -> str:
    return f"{prompt}\nAnswer with one JSON object and nothing else, following this JSON schema:\n{json.dumps(schema)}"


def message_text(data: Any, tokens: list[int]) -> str:
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
        raise VLMRefused(f"the model declined: {shown_text(str(message.get('refusal') or 'content filter'))[:80]}")
    text = message.get("content")
    if not isinstance(text, str) or not text.strip():
        raise VLMBadAnswer("the answer has no text")
    return text
