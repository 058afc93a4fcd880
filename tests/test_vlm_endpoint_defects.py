"""Issue 40: the VLM plug-in against an endpoint of our own (a scripted server): reworded questions,
model text shown raw, the key variable, a slow endpoint, undo, caption budgets, Retry-After, strict
schemas. Each test failed before its fix."""
import json

import pytest

from minterpr.language.dialogue_acts import question_slot
from minterpr.language.ontology import ONTOLOGY
from minterpr.vlm.assist import VLMAssistant
from minterpr.vlm.config import VLMConfig
from minterpr.vlm.testing import ScriptedServer, reply

PRONOUNS = ({"pronoun": "she", "possessive": "her", "object": "her"},
            {"pronoun": "he", "possessive": "his", "object": "him"})


def _phrased(server, slot, template):
    vlm = VLMAssistant(VLMConfig(server.url, "m", uses=("asking",)))
    vlm.begin_turn()
    text = vlm.phrase(slot, {}, "TEMPLATE", accept=lambda q: question_slot(q) == slot)
    return text, vlm.turn_usage()["discarded"]


def test_every_templates_own_wording_reworded_by_the_model_is_kept():
    """The check discarded ~45 % of correct questions: "hat" inside "what", offered alternatives ("a man
    or a woman"), the slot's own noun ("What kind of shoes")."""
    cases = [(slot.name, template.format(**p)) for slot in ONTOLOGY.slots for template in slot.questions
             for p in PRONOUNS]
    cases += [("hair_length", "And what about the length of her hair?"), ("gender", "Man or woman, would you say?")]
    with ScriptedServer([lambda body: reply(json.dumps({"question": _asked[0]}))], repeat=True) as server:
        discarded = []
        for slot, question in cases:
            _asked[:] = [question]
            text, count = _phrased(server, slot, question)
            if text != question:
                discarded.append((slot, question))
            assert count == (text != question)
    assert discarded == []


_asked = [""]


@pytest.mark.parametrize("slot, question", [("upper_colour", "Was her top red?"),  # suggests an answer
                                            ("headwear", "What was that, then?"),  # "hat" inside "that"
                                            ("footwear_type", "Was she in boots?")])
def test_leading_or_off_slot_questions_are_discarded_and_counted(slot, question):
    with ScriptedServer([reply(json.dumps({"question": question}))]) as server:
        assert _phrased(server, slot, question) == ("TEMPLATE", 1)


HOSTILE = "\x1b[2J\x1b[H\x1b]0;SESSION EXPIRED\x07What colour was \u202eher top\u202c?\x9b31m\r\n"


def test_model_text_loses_escape_codes_and_bidi_overrides_before_it_is_shown():
    with ScriptedServer([reply(json.dumps({"question": HOSTILE}))]) as server:
        text, discarded = _phrased(server, "upper_colour", "What colour was her top?")
    assert text == "What colour was her top ?" and discarded == 0
    assert not any(ord(c) < 32 or 0x7f <= ord(c) < 0xa0 or 0x202a <= ord(c) <= 0x202e for c in text)
