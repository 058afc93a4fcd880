"""What a user configures to plug in a vision-language model, and the registry of its uses.

A :class:`VLMConfig` names the endpoint (any OpenAI-compatible ``/v1`` base URL), the model and
the *name* of the environment variable that holds the API key (the key itself is read when a
request is sent and never stored, logged or written to a record). ``uses`` switches each use on
separately (:data:`VLM_USES`); the deadlines and the budget bound what one turn and one session
may spend.

Example:
    >>> config = VLMConfig("http://127.0.0.1:11434/v1", "qwen2.5vl", uses=parse_uses("reading,asking"))
    >>> config.uses, config.enabled("rerank")
    (('reading', 'asking'), False)
    >>> parse_uses("reading,telepathy")
    Traceback (most recent call last):
    ...
    minterpr.registry.RegistryError: unknown VLM use 'telepathy': must be one of anchor, asking, caption, reading, rerank
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from typing import Any

from minterpr.errors import InputError
from minterpr.registry import Registry

_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")  # an environment variable's name, as shells take it

# Each use: its name -> a one-line description (docs/vlm.md says more). The session and the
# ingestion check names against this registry, so a typo fails with the list of valid names.
VLM_USES: Registry[str] = Registry("VLM use")
for _name, _what in (
    ("reading", "map poorly read utterances to ontology facts (merged with the rule reader's)"),
    ("asking", "phrase the question the information-gain policy chose"),
    ("anchor", "answer the open questions about the anchor image before re-ranking (CTGI's MTI)"),
    ("rerank", "judge the top-K candidates against the conversation, combined with the scores"),
    ("caption", "ask each gallery crop the ontology's questions at ingestion (CTGI's MTG)"),
):
    VLM_USES.register(_name)(lambda _w=_what: _w)


def parse_uses(text: str | None) -> tuple[str, ...]:
    """``"reading,asking"`` -> ``("reading", "asking")``; RegistryError names an unknown use."""
    names = tuple(dict.fromkeys(part.strip() for part in (text or "").split(",") if part.strip()))
    for name in names:
        VLM_USES.get(name)
    return names


@dataclass(frozen=True)
class VLMConfig:
    """An OpenAI-compatible chat-completions endpoint and how much a session may ask of it."""

    url: str  # base URL ending in /v1 (Ollama http://localhost:11434/v1, vLLM http://localhost:8000/v1)
    model: str  # the model name the server knows ("qwen2.5vl:7b", "llava-hf/llava-1.5-7b-hf")
    key_env: str | None = None  # NAME of the environment variable holding the API key (None: no key sent)
    uses: tuple[str, ...] = ()  # the uses switched on (VLM_USES); none = the client is idle
    timeout_s: float = 10.0  # longest wait for one HTTP answer
    turn_deadline_s: float = 10.0  # longest a turn waits for the model, all its calls and retries together
    max_retries: int = 2  # further tries after a 429, a 5xx or a connection error
    backoff_s: float = 0.2  # wait before the first retry, doubled before each next one (within the deadline)
    max_calls: int = 500  # calls per session (cache hits are free); beyond it every use falls back
    max_total_tokens: int = 500_000  # prompt + completion tokens per session, the same way
    max_tokens: int = 300  # longest answer asked for, in tokens
    temperature: float = 0.0  # 0: the most repeatable answers
    json_schema: bool = (
        True  # send response_format json_schema; False (or a server that refuses it): prompt + validation
    )
    # with it, "strict": true and the schema in strict mode's subset (OpenAI; others ignore or refuse it: a server
    # answering 400/422 is asked again without, and that is remembered); answers are validated in full either way
    strict: bool = True
    cache_path: str | None = None  # a JSON file keeping answers across runs (None: in memory only)
    rerank_k: int = 5  # candidates the rerank use judges per turn
    rerank_weight: float = 1.0  # weight of the judgement's log-odds added to a candidate's score
    read_words_per_fact: float = 6.0  # the reading use calls the model when more words than this per rule fact
    skip_turns: int = 3  # after a turn the endpoint failed (unreachable, timed out): the next N turns do not ask it

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
            raise InputError(f"VLM url must start with http:// or https://, got {self.url!r}")
        if not isinstance(self.model, str) or not self.model.strip():
            raise InputError("VLM model must be a non-empty model name")
        if self.key_env is not None and (not isinstance(self.key_env, str) or not _VARIABLE.fullmatch(self.key_env)):
            # never echoed: a value that is no variable name is likely the key itself
            raise InputError(
                "VLM key_env must be the NAME of an environment variable (letters, digits and _, "
                "e.g. OPENAI_API_KEY), not the key itself; export the key and pass its variable's name"
            )
        object.__setattr__(self, "uses", parse_uses(",".join(self.uses)))
        for name in ("timeout_s", "turn_deadline_s", "backoff_s", "read_words_per_fact"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise InputError(f"VLM {name} must be a number >= 0, got {value!r}")
        for name in ("max_retries", "max_calls", "max_total_tokens", "max_tokens", "rerank_k", "skip_turns"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(f"VLM {name} must be an int >= 0, got {value!r}")

    def enabled(self, use: str) -> bool:
        """Is ``use`` switched on? (KeyError-free: an unknown name raises RegistryError.)"""
        VLM_USES.get(use)
        return use in self.uses

    def api_key(self) -> str | None:
        """The key, read from the environment now (never kept); InputError when the variable is unset."""
        if self.key_env is None:
            return None
        key = os.environ.get(self.key_env)
        if not key:
            raise InputError(f"the VLM API key variable {self.key_env} is not set (export it, or drop --vlm-key-env)")
        return key

    def to_dict(self) -> dict[str, Any]:
        """The settings for records: the key's variable name, never the key."""
        return asdict(self)
