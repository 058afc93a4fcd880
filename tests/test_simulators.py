"""User simulators: truthful oracle, imperfect oracle, text-only witness, recorded replay."""

from __future__ import annotations

import random

import pytest

from minterpr.data.dialogue_synthesis import DialogueSynthesisConfig, synthesize_records
from minterpr.language.utterances import ASKABLE_SLOTS, DONT_KNOW, question
from minterpr.errors import InputError
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.language.dialogue_acts import is_match, turn_facts
from minterpr.interaction.session import AskQuestion, ShowReferences
from minterpr.interaction.simulators import SIMULATORS, knowledge_from_text
from minterpr.types import DescriptionTurn, QATurn, ReferenceTurn


@pytest.fixture(scope="module")
def index(attribute_gallery):
    return AttributeBackend().index_images(attribute_gallery)


def _ask(slot, rng):
    return AskQuestion(slot, question(slot, {}, rng))


def test_oracle_never_contradicts_the_ground_truth(index, attribute_gallery):
    simulator = SIMULATORS.create("oracle")
    rng = random.Random(0)
    checked = 0
    for q, target in enumerate(attribute_gallery[::9]):
        user = simulator.user(target, index, query=q, seed=0)
        said = [DescriptionTurn(user.describe())]
        for slot in ASKABLE_SLOTS:
            turn = user.respond(_ask(slot, rng))
            said.append((turn, slot))
        other = (attribute_gallery.index(target) + 3) % len(attribute_gallery)  # another person
        said.append(user.respond(ShowReferences((other,), "Is this her?")))
        assert user.claims and all(f.holds(target.attributes) is not False for f in user.claims)
        # ... and what the system reads from the words holds too
        for item in said:
            turn, slot = item if isinstance(item, tuple) else (item, None)
            for fact in turn_facts(turn, slot):
                assert fact.holds(target.attributes) is not False, (turn, fact)
                checked += 1
    assert checked > 500


def test_oracle_recognises_the_target_and_judges_the_closest_other(index, attribute_gallery):
    target = attribute_gallery[30]  # person 10, images 30-32
    user = SIMULATORS.create("oracle").user(target, index, query=0, seed=0)
    turn = user.respond(ShowReferences((5, 31, 7), "Is one of these the person?"))
    assert isinstance(turn, ReferenceTurn) and turn.reference_path == "10_1.jpg" and is_match(turn.feedback)
    turn = user.respond(ShowReferences((0, 3), "Is one of these the person?"))
    assert not is_match(turn.feedback) and turn.reference_path in ("0_0.jpg", "1_0.jpg")
    assert user.respond(None) is None


def test_oracle_error_rates(index, attribute_gallery):
    rng = random.Random(1)
    wrong = SIMULATORS.create("oracle", wrong_answer_rate=1.0)
    dont_know = SIMULATORS.create("oracle", dont_know_rate=1.0)
    contradictions = 0
    for q, target in enumerate(attribute_gallery[:60:3]):
        w_user = wrong.user(target, index, query=q, seed=0)
        d_user = dont_know.user(target, index, query=q, seed=0)
        for slot in ("upper_colour", "lower_type", "gender"):
            if slot not in target.attributes:
                continue
            w_user.respond(_ask(slot, rng))
            assert d_user.respond(_ask(slot, rng)).answer in DONT_KNOW
        contradictions += sum(f.holds(target.attributes) is False for f in w_user.claims)
    assert contradictions >= 50  # a wrong answer names another value of the slot


def test_oracle_is_seeded(index, attribute_gallery):
    simulator = SIMULATORS.create("oracle")
    a = simulator.user(attribute_gallery[0], index, query=4, seed=2).describe()
    assert a == simulator.user(attribute_gallery[0], index, query=4, seed=2).describe()
    others = {simulator.user(attribute_gallery[0], index, query=4, seed=s).describe() for s in range(10)}
    assert len(others) > 1


def test_witness_answers_only_what_its_description_says(index, attribute_gallery):
    rng = random.Random(3)
    simulator = SIMULATORS.create("witness", caption_slots=4)
    answered = 0
    for q, target in enumerate(attribute_gallery[::15]):
        user = simulator.user(target, index, query=q, seed=0)
        caption = user.describe()
        knows = knowledge_from_text(caption)
        for slot in ASKABLE_SLOTS:
            turn = user.respond(_ask(slot, rng))
            if slot not in knows:
                assert turn.answer in DONT_KNOW, (caption, slot, turn.answer)
            else:
                answered += 1
            assert {f.slot for f in turn_facts(turn, slot)} <= set(knows), (caption, turn)
        other = (attribute_gallery.index(target) + 3) % len(attribute_gallery)
        feedback = user.respond(ShowReferences((other,), "Is this the person?"))
        assert not is_match(feedback.feedback)  # text-only: it cannot recognise anyone
        assert {f.slot for f in turn_facts(feedback)} <= set(knows)
    assert answered > 0


def test_witness_uses_given_captions(index, attribute_gallery):
    target = attribute_gallery[0]
    caption = "A man in a black jacket with a backpack."
    simulator = SIMULATORS.create("witness", captions={target.path: caption})
    user = simulator.user(target, index, query=0, seed=0)
    assert user.describe() == caption
    assert user.respond(AskQuestion("lower_colour", "What colour were his trousers?")).answer in DONT_KNOW
    assert "black" in user.respond(AskQuestion("upper_colour", "What colour was his top?")).answer.lower()
    with pytest.raises(InputError, match="no caption"):
        simulator.user(attribute_gallery[3], index, query=1, seed=0)


def test_replay_yields_exactly_the_recorded_turns(index, attribute_gallery):
    config = DialogueSynthesisConfig(
        seed=0, min_qa_turns=2, max_qa_turns=3, min_image_turns=1, max_image_turns=2, records_per_image=1
    )
    records = synthesize_records(attribute_gallery[:30:3], attribute_gallery, config)
    samples = [r.sample for r in records]
    simulator = SIMULATORS.create("replay", samples=samples)
    targets = simulator.targets(index)
    assert [t.path for t in targets] == [s.target_path for s in samples]
    for q, (target, sample) in enumerate(zip(targets, samples)):
        user = simulator.user(target, index, query=q, seed=0)
        played = [DescriptionTurn(user.describe())]
        action = AskQuestion("gender", "Was it a man or a woman?")  # whatever the system asks
        while (turn := user.respond(action)) is not None:
            played.append(turn)
        assert tuple(played) == sample.dialogue.turns()
        assert any(isinstance(t, QATurn) for t in played) and any(isinstance(t, ReferenceTurn) for t in played)
    with pytest.raises(ValueError, match="is about"):
        simulator.user(targets[1], index, query=0, seed=0)
