"""The ontology as JSON schemas for constrained answers, and the validated parsing of answers.

A server that supports ``response_format: {"type": "json_schema"}`` (vLLM, llama.cpp's server,
Ollama, LM Studio, hosted APIs) constrains the model to the schema; one that does not gets the
schema in the prompt. Either way the answer is parsed and checked here with :func:`validate`, a
small validator for the subset of JSON Schema these schemas use (type, enum, const, properties,
required, additionalProperties, items, min/maxItems, minimum/maximum, min/maxLength, anyOf), so
nothing the model invents reaches a session.

Example:
    >>> schema = facts_schema(("gender", "carried"))
    >>> facts = parse_facts_answer('{"facts": [{"slot": "carried", "values": ["backpack"], "negated": true}]}', schema)
    >>> [(f.slot, f.values, f.negated) for f in facts]
    [('carried', ('backpack',), True)]
    >>> parse_facts_answer('{"facts": [{"slot": "gender", "values": ["backpack"], "negated": false}]}', schema)
    Traceback (most recent call last):
    ...
    minterpr.vlm.errors.VLMBadAnswer: $.facts[0]: matches none of the allowed forms
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import lru_cache
from typing import Any, Sequence

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.vlm.errors import VLMBadAnswer

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "number": (int, float),
    "integer": (int,),
    "null": (type(None),),
}
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)
# a terminal escape sequence, removed whole (CSI "ESC [ ... final", OSC "ESC ] ... BEL|ST", or ESC + one char):
# stripping ESC alone would leave "[2J" on screen
_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?", re.S)


def shown_text(text: str) -> str:
    """A model's text as it may be shown or stored: terminal escape sequences removed, every other
    control or format character (C0/C1 controls, bidi overrides and isolates, zero-width marks) a
    space, runs of white space one space. A model's answer is untrusted: it must not clear a terminal,
    fake a prompt or reverse the text around it.

    Example:
        >>> shown_text(chr(27) + "[2J" + chr(27) + "[HWhat colour" + chr(0x202E) + " was her top?" + chr(10))
        'What colour was her top?'
    """
    text = _ESCAPE.sub("", text)
    return " ".join("".join(" " if unicodedata.category(c) in ("Cc", "Cf") else c for c in text).split())


def _value_items(slot_name: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(ONTOLOGY.slot(slot_name).value_names)}


@lru_cache(maxsize=8)
def facts_schema(slots: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``{"facts": [{"slot", "values", "negated"}]}``, one allowed form per slot (its own values only).
    Built once per ``slots`` and shared: callers must not change it."""
    forms = [
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["slot", "values", "negated"],
            "properties": {
                "slot": {"type": "string", "const": name},
                "values": {"type": "array", "minItems": 1, "items": _value_items(name)},
                "negated": {"type": "boolean"},
            },
        }
        for name in (slots or ONTOLOGY.slot_names)
    ]
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["facts"],
        "properties": {"facts": {"type": "array", "maxItems": 32, "items": {"anyOf": forms}}},
    }


def answers_schema(slots: Sequence[str]) -> dict[str, Any]:
    """One property per slot: the values seen (``[]`` or left out = cannot tell); single-valued slots at most one.
    Built once per list of slots and shared: callers must not change it."""
    return _answers_schema(tuple(slots))


@lru_cache(maxsize=64)
def _answers_schema(slots: tuple[str, ...]) -> dict[str, Any]:
    properties = {
        name: {"type": "array", "items": _value_items(name), **({} if ONTOLOGY.slot(name).multi else {"maxItems": 1})}
        for name in slots
    }
    return {"type": "object", "additionalProperties": False, "properties": properties}  # a slot left out: unknown


@lru_cache(maxsize=1)
def question_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["question"],
        "properties": {"question": {"type": "string", "minLength": 3, "maxLength": 200}},
    }


@lru_cache(maxsize=16)
def scores_schema(k: int) -> dict[str, Any]:
    """``{"scores": [p_0, ..., p_{k-1}]}``: each candidate's probability of being the person."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["scores"],
        "properties": {
            "scores": {
                "type": "array",
                "minItems": k,
                "maxItems": k,
                "items": {"type": "number", "minimum": 0, "maximum": 1},
            }
        },
    }


# OpenAI's strict structured outputs take a subset of JSON Schema: these keywords only (the length, size and
# range limits are not all accepted), every object closed (additionalProperties false) with every property
# required, and an object at the root. The limits stay in the schema validate() checks answers against.
STRICT_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "description"}
)


def strict_form(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as strict mode takes it: the keywords outside :data:`STRICT_KEYWORDS` dropped and every
    object's properties all required (an answers schema's slot is then answered ``[]`` when unseen, which
    means the same as leaving it out). Answers are still validated against ``schema`` itself.

    Example:
        >>> strict_form(scores_schema(2))
        {'type': 'object', 'additionalProperties': False, 'required': ['scores'], 'properties': {'scores': {'type': 'array', 'items': {'type': 'number'}}}}
    """
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in STRICT_KEYWORDS:
            continue
        if key == "properties":
            value = {name: strict_form(item) for name, item in value.items()}
        elif key == "items":
            value = strict_form(value)
        elif key == "anyOf":
            value = [strict_form(form) for form in value]
        out[key] = value
    if out.get("type") == "object":
        out["additionalProperties"] = False
        out["required"] = list(out.get("properties", {}))
    return out


def strict_problems(schema: dict[str, Any], path: str = "$") -> list[str]:
    """Why ``schema`` is outside the strict-mode subset (``[]`` when inside): unknown keywords, an open
    object, a property not required, or no object at the root.

    Example:
        >>> strict_problems(question_schema())
        ['$.question: minLength is not in the strict subset', '$.question: maxLength is not in the strict subset']
        >>> strict_problems(strict_form(question_schema()))
        []
    """
    problems = []
    if path == "$" and (schema.get("type") != "object" or "anyOf" in schema):
        problems.append("$: the root must be an object (not anyOf)")
    problems += [f"{path}: {key} is not in the strict subset" for key in schema if key not in STRICT_KEYWORDS]
    if schema.get("type") == "object":
        if schema.get("additionalProperties") is not False:
            problems.append(f"{path}: additionalProperties must be false")
        missing = [name for name in schema.get("properties", {}) if name not in schema.get("required", ())]
        problems += [f"{path}.{name}: not required" for name in missing]
    for name, item in schema.get("properties", {}).items():
        problems += strict_problems(item, f"{path}.{name}")
    if "items" in schema:
        problems += strict_problems(schema["items"], f"{path}[]")
    for k, form in enumerate(schema.get("anyOf", ())):
        problems += strict_problems(form, f"{path}|{k}")
    return problems


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> None:
    """Raise VLMBadAnswer ``PATH: reason`` unless ``value`` satisfies ``schema`` (the subset above)."""
    if "anyOf" in schema:
        for form in schema["anyOf"]:
            try:
                validate(value, form, path)
                break
            except VLMBadAnswer:
                continue
        else:
            raise VLMBadAnswer(f"{path}: matches none of the allowed forms")
    kind = schema.get("type")
    if kind is not None:
        ok = isinstance(value, _TYPES[kind]) and not (kind in ("number", "integer") and isinstance(value, bool))
        if not ok:
            raise VLMBadAnswer(f"{path}: expected {kind}, got {type(value).__name__}")
    if "const" in schema and value != schema["const"]:
        raise VLMBadAnswer(f"{path}: expected {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        raise VLMBadAnswer(f"{path}: {str(value)[:40]!r} is not one of {', '.join(map(str, schema['enum']))}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < schema.get("minimum", value) or value > schema.get("maximum", value):
            raise VLMBadAnswer(f"{path}: {value} outside {schema.get('minimum')}..{schema.get('maximum')}")
    if isinstance(value, str) and not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value)):
        raise VLMBadAnswer(f"{path}: text of {len(value)} characters")
    if isinstance(value, list):
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
            raise VLMBadAnswer(
                f"{path}: {len(value)} items (expected {schema.get('minItems', 0)}..{schema.get('maxItems', 'any')})"
            )
        for k, item in enumerate(value):
            if "items" in schema:
                validate(item, schema["items"], f"{path}[{k}]")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                raise VLMBadAnswer(f"{path}.{name}: missing")
        for name, item in value.items():
            if name in properties:
                validate(item, properties[name], f"{path}.{name}")
            elif schema.get("additionalProperties", True) is False:
                raise VLMBadAnswer(f"{path}.{str(name)[:40]}: not an allowed field")


def parse_json(text: str) -> Any:
    """The JSON value of an answer; tolerates a Markdown code fence and prose around one object."""
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text.strip()
    try:
        return json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        start, end = body.find("{"), body.rfind("}")
        if 0 <= start < end:
            try:
                return json.loads(body[start : end + 1])
            except (json.JSONDecodeError, RecursionError):
                pass
    raise VLMBadAnswer(f"not JSON: {text[:60]!r}")


def parse_answer(text: str, schema: dict[str, Any]) -> Any:
    """Parse and validate; VLMBadAnswer names the first problem."""
    value = parse_json(text)
    validate(value, schema)
    return value


def parse_facts_answer(text: str, schema: dict[str, Any]) -> tuple[Fact, ...]:
    """The facts of a :func:`facts_schema` answer, single-valued slots' extra values refused."""
    return answer_facts(parse_answer(text, schema))


def answer_facts(answer: dict[str, Any]) -> tuple[Fact, ...]:
    """The facts of an answer already validated against :func:`facts_schema`."""
    facts = []
    for item in answer["facts"]:
        values = tuple(dict.fromkeys(item["values"]))
        if not item["negated"] and not ONTOLOGY.slot(item["slot"]).multi and len(values) > 1:
            raise VLMBadAnswer(f"slot {item['slot']!r} takes one value, got {list(values)}")
        facts.append(Fact(item["slot"], values, bool(item["negated"])))
    return tuple(dict.fromkeys(facts))


def answers_to_facts(answers: dict[str, list[str]]) -> tuple[Fact, ...]:
    """An :func:`answers_schema` answer as positive facts (empty lists, "cannot tell", dropped)."""
    return tuple(Fact(slot, tuple(dict.fromkeys(values))) for slot, values in answers.items() if values)
