"""The uses a session makes of a vision-language model, each with its fallback.

A :class:`VLMAssistant` wraps one :class:`~minterpr.vlm.client.VLMClient` (one budget, one cache)
and the switched-on uses of its :class:`~minterpr.vlm.config.VLMConfig`. A session calls
:meth:`~VLMAssistant.begin_turn` at the start of each turn: every call of that turn shares one
deadline (``turn_deadline_s``), and after the endpoint fails (unreachable, timed out) the turn
makes no further call, so a failing endpoint costs at most its deadline once per turn. Each use
returns what the rule-based path would have done when the model is off, fails or answers nonsense:

- :meth:`read` (``reading``): facts for an utterance the rule reader read poorly (:func:`poorly_read`),
  under the ontology's schema; ``()`` on any failure;
- :meth:`phrase` (``asking``): the question about the slot the policy chose, phrased by the model;
  the template when the model's question is not about that slot or suggests an answer;
- :meth:`anchor_facts` (``anchor``, CTGI's MTI): the model's answers to the open slots about the
  anchor image; ``()`` on failure;
- :meth:`judge` (``rerank``): each candidate's probability of being the person; ``None`` on failure.

Example (a scripted endpoint answering one reading):
    >>> from minterpr.language.phrasing import Fact
    >>> from minterpr.vlm.testing import ScriptedServer, reply
    >>> answer = '{"facts": [{"slot": "carried", "values": ["umbrella"], "negated": false}]}'
    >>> with ScriptedServer([reply(answer)]) as server:
    ...     vlm = VLMAssistant(VLMConfig(server.url, "m", uses=("reading",)))
    ...     vlm.begin_turn()
    ...     vlm.read("she had a brolly, I think, in the drizzle", None, ())
    (Fact(slot='carried', values=('umbrella',), negated=False),)
    >>> vlm.turn_usage()["calls"]
    1
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.language.sentence_words import FILLERS, NEGATORS, RESETS
from minterpr.language.text_reading import read_tokens
from minterpr.vlm.client import VLMClient
from minterpr.vlm.config import VLMConfig
from minterpr.vlm.errors import VLMError, VLMTimeout, VLMUnavailable
from minterpr.vlm.schema import (
    answer_facts,
    answers_schema,
    answers_to_facts,
    facts_schema,
    question_schema,
    scores_schema,
    shown_text,
)

_STOP = FILLERS | NEGATORS | RESETS | {"i", "it", "and", "of", "in", "with", "think", "she", "he", "they", "that"}
# words of a bare verdict on a shown image ("Not this one.", "Yes, that's her.", "Maybe."): nothing for the model to read
_VERDICT = {
    "this",
    "one",
    "these",
    "ones",
    "not",
    "no",
    "nope",
    "yes",
    "yeah",
    "yep",
    "her",
    "him",
    "them",
    "is",
    "was",
    "s",
    "it's",
    "that's",
    "the",
    "person",
    "maybe",
    "either",
    "none",
    "neither",
    "of",
    "those",
}
_P_CLIP = 0.02  # judgements are clipped to [2 %, 98 %] before their log-odds (|logit| <= 3.9)


def poorly_read(text: str, facts: Sequence[Fact], words_per_fact: float) -> bool:
    """Did the rule reader read ``text`` poorly? No facts, contradictory facts (one slot given two
    disjoint single values, or a value both asserted and denied), or more content words per fact
    than ``words_per_fact``.

    Example:
        >>> poorly_read("a man", [Fact("gender", ("male",))], 6.0), poorly_read("hmm, a brolly", [], 6.0)
        (False, True)
        >>> poorly_read("Not this one.", [], 6.0), poorly_read("No, that's not her.", [], 6.0)
        (False, False)
    """
    if (
        not facts
    ):  # read poorly, unless there is nothing to read (a bare verdict, such as the simulators' "Not this one.")
        return any(t.isalpha() and t not in _STOP and t not in _VERDICT for t in read_tokens(text))
    said: dict[tuple[str, str], bool] = {}
    single: dict[str, set[str]] = {}
    for f in facts:
        for v in f.values:
            if said.setdefault((f.slot, v), f.negated) != f.negated:
                return True
        if not f.negated and len(f.values) == 1 and not ONTOLOGY.slot(f.slot).multi:
            single.setdefault(f.slot, set()).add(f.values[0])
    if any(len(values) > 1 for values in single.values()):
        return True
    words = [t for t in read_tokens(text) if t.isalpha() and t not in _STOP]
    return len(words) / len(facts) > words_per_fact


@lru_cache(maxsize=None)
def _value_words(slot: str) -> tuple[str, ...]:
    """The slot's values' canonical phrases as " token token " strings (tokenising costs ~0.1 ms a phrase)."""
    return tuple(f" {' '.join(read_tokens(v.phrases[0]))} " for v in ONTOLOGY.slot(slot).values)


def _named(slot: str, question: str) -> frozenset[int]:
    """The slot's values (by position) whose canonical phrase ``question`` says, as whole words."""
    words = f" {' '.join(read_tokens(question))} "
    return frozenset(k for k, phrase in enumerate(_value_words(slot)) if phrase in words)


@lru_cache(maxsize=None)
def _slot_nouns(slot: str) -> frozenset[int]:
    """Values the slot's own questions name alone ("What kind of shoes ...": its noun), which ask and do not suggest."""
    pronouns = {"pronoun": "she", "possessive": "her", "object": "her"}
    alone = [_named(slot, template.format(**pronouns)) for template in ONTOLOGY.slot(slot).questions]
    return frozenset(k for named in alone if len(named) == 1 for k in named)


def leading(slot: str, question: str) -> bool:
    """Does ``question`` suggest an answer (name one of the slot's values)? Such phrasings are refused.
    Whole words only; the slot's own noun ("shoes", "top") is no suggestion, and alternatives joined by
    "or" ("a man or a woman", "long or short") are offered, not suggested.

    Example:
        >>> leading("upper_colour", "Was her top red?"), leading("upper_colour", "What colour was her top?")
        (True, False)
        >>> leading("gender", "Was it a man or a woman?"), leading("footwear_type", "What kind of shoes was she wearing?")
        (False, False)
    """
    named = _named(slot, question)
    if len(named) >= 2 and " or " in f" {' '.join(read_tokens(question))} ":
        return False
    return bool(named - _slot_nouns(slot))


class VLMAssistant:
    """The uses of one model for one session (see the module doc)."""

    def __init__(self, config: VLMConfig, client: VLMClient | None = None) -> None:
        self.config = config
        self.client = client if client is not None else VLMClient(config)
        self._deadline: float | None = None
        self._failed = False  # the endpoint failed this turn: no further call until the next one
        self._mark = 0  # len(client.calls) when the turn began
        self.discarded = 0  # questions the model phrased that were refused (leading, or not about the slot)
        self._skip = 0  # turns left that do not ask the endpoint (it failed; config.skip_turns)
        self._skipped = False  # this turn does not ask it
        # one line for the user about this turn: the endpoint failed, or is not being asked ("" when all is well)
        self.notice = ""
        self._discarded_mark = 0  # self.discarded when the turn began

    def enabled(self, use: str) -> bool:
        return self.config.enabled(use)

    def begin_turn(self) -> None:
        """Start a turn's clock: its calls share one deadline."""
        self._deadline = self.client.clock() + self.config.turn_deadline_s
        self._mark = len(self.client.calls)
        self._discarded_mark = self.discarded
        self._skipped = self._failed = self._skip > 0  # backing off: no call this turn
        self.notice = ""
        if self._skipped:
            self._skip -= 1
            self.notice = (
                f"the model at {self.config.url} failed recently; searching without it "
                f"({'this turn' if not self._skip else f'this turn and {self._skip} more'})"
            )

    def turn_usage(self) -> dict[str, Any]:
        """Calls, tokens, latency, fallbacks and discarded questions of the current turn (every call record, for
        audits)."""
        calls = self.client.calls[self._mark :]
        return {
            "calls": sum(c.attempts > 0 for c in calls),
            "cached": sum(c.outcome == "cached" for c in calls),
            "fallbacks": sum(c.outcome not in ("ok", "cached") for c in calls),
            "discarded": self.discarded - self._discarded_mark,
            "skipped": int(self._skipped),
            "notice": self.notice,
            "tokens": sum(c.prompt_tokens + c.completion_tokens for c in calls),
            "latency_s": round(sum(c.latency_s for c in calls), 6),
            "records": [c.to_dict() for c in calls],
        }

    def _ask(self, use: str, prompt: str, schema: dict[str, Any], images: Sequence[bytes] = ()) -> Any:
        """The validated answer, or None (the fallback) on any VLMError."""
        if self._failed or not self.enabled(use):
            return None
        if self._deadline is None:
            self.begin_turn()
        try:
            return self.client.ask(use, prompt, images=images, schema=schema, deadline=self._deadline)
        except VLMUnavailable as err:
            self._failed = True  # the turn makes no further call, and the next skip_turns turns none either
            self._skip = self.config.skip_turns
            waited = isinstance(err, VLMTimeout)
            self.notice = (
                f"the model at {self.config.url} "
                + ("did not answer in time" if waited else "failed")
                + f" ({str(err)[:120]}); searching without it"
                + (f" for the next {self._skip} turns" if self._skip else "")
            )
            return None
        except VLMError:
            return None

    # ----- the uses ------------------------------------------------------------------------------
    def read(self, text: str, context_slot: str | None, rule_facts: Sequence[Fact]) -> tuple[Fact, ...]:
        """The model's facts for a poorly read utterance, less those the rule reader already has."""
        if not self.enabled("reading") or not poorly_read(text, rule_facts, self.config.read_words_per_fact):
            return ()
        context = f" It answers a question about the {ONTOLOGY.slot(context_slot).label}." if context_slot else ""
        prompt = (
            f"A witness says this about the person they are looking for: {text!r}.{context} List the facts "
            "it states about that person (not about anyone else they mention), negated=true for what the "
            "person did not have. Use only the slots and values of the schema; leave out what is not said."
        )
        schema = facts_schema()
        answer = self._ask("reading", prompt, schema)
        if answer is None:
            return ()
        try:
            facts = answer_facts(answer)
        except VLMError:
            return ()
        return tuple(f for f in facts if f not in rule_facts)

    def phrase(
        self,
        slot: str,
        known: Mapping[str, Sequence[str]],
        template: str,
        accept: Callable[[str], bool] = lambda text: True,
    ) -> str:
        """The question about ``slot`` in the model's words; ``template`` unless ``accept(question)`` holds
        and the question suggests no answer."""
        if not self.enabled("asking"):
            return template
        known_text = "; ".join(f"{ONTOLOGY.slot(s).label}: {', '.join(v)}" for s, v in known.items()) or "nothing yet"
        prompt = (
            f"You help a witness describe a person. Ask them, in one short natural sentence, about the "
            f"{ONTOLOGY.slot(slot).label} only, like: {template!r}. Known so far: {known_text}. "
            "Do not suggest an answer."
        )
        answer = self._ask("asking", prompt, question_schema())
        text = shown_text(str(answer["question"])) if isinstance(answer, dict) else ""  # untrusted: no escapes
        if not text:
            return template
        if leading(slot, text) or not accept(text):
            self.discarded += 1  # counted and reported (turn_usage, the evaluation's report)
            return template
        return text

    def anchor_facts(self, image: bytes, open_slots: Sequence[str]) -> tuple[Fact, ...]:
        """The model's answers to ``open_slots`` about the anchor image (what it cannot tell left out)."""
        if not self.enabled("anchor") or not open_slots:
            return ()
        prompt = (
            "This image is the system's current best match for the person sought. For each slot of the "
            "schema, list the values you can see on this person ([] when you cannot tell)."
        )
        answer = self._ask("anchor", prompt, answers_schema(list(open_slots)), [image])
        return answers_to_facts(answer) if isinstance(answer, dict) else ()

    def judge(self, conversation: Sequence[str], images: Sequence[bytes]) -> list[float] | None:
        """Each image's probability (in order) of showing the person the conversation describes."""
        if not self.enabled("rerank") or not images:
            return None
        lines = "\n".join(f"- {line}" for line in conversation)
        prompt = (
            f"A witness describes a person:\n{lines}\nFor each of the {len(images)} images, in order, give "
            "the probability that it shows that person."
        )
        answer = self._ask("rerank", prompt, scores_schema(len(images)), images)
        return [float(p) for p in answer["scores"]] if isinstance(answer, dict) else None

    def close(self) -> None:
        self.client.close()


def judgement_bonus(p: float, weight: float) -> float:
    """What a judgement adds to a candidate's score: ``weight`` times its clipped log-odds.

    Example:
        >>> judgement_bonus(0.5, 1.0), round(judgement_bonus(1.0, 1.0), 3)
        (0.0, 3.892)
    """
    p = min(max(p, _P_CLIP), 1 - _P_CLIP)
    return weight * math.log(p / (1 - p))


def read_image(root: str | None, path: str) -> bytes | None:
    """A gallery image's bytes as the model gets them; None when the file cannot be read (the use falls back)."""
    full = path if root is None or os.path.isabs(path) else os.path.join(root, path)
    try:
        with open(full, "rb") as f:
            return f.read()
    except OSError:
        return None
