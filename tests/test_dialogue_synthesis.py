import pytest

from minterpr.data.dialogue_synthesis import (
    REFERENCE_STRATEGIES,
    DialogueSynthesisConfig,
    ambiguity,
    synthesize_records,
)
from minterpr.language.ontology import ONTOLOGY
from minterpr.language.text_parser import parse_facts
from minterpr.errors import InputError
from minterpr.registry import RegistryError


@pytest.fixture(scope="module")
def records(attribute_gallery):
    return synthesize_records(attribute_gallery[:450], attribute_gallery, DialogueSynthesisConfig(seed=7))


def _texts(record):
    d = record.sample.dialogue
    return (
        [(d.description, None)]
        + [(q.answer, s) for q, s in zip(d.qa_turns, record.asked_slots)]
        + [(t.feedback, None) for t in d.reference_turns]
    )


def test_deterministic(attribute_gallery, records):
    again = synthesize_records(attribute_gallery[:450], attribute_gallery, DialogueSynthesisConfig(seed=7))
    assert [r.sample for r in again] == [r.sample for r in records]
    other = synthesize_records(attribute_gallery[:450], attribute_gallery, DialogueSynthesisConfig(seed=8))
    assert [r.sample for r in other] != [r.sample for r in records]


def test_two_records_per_image_with_different_strategies(records):
    assert len(records) == 900
    for first, second in zip(records[::2], records[1::2]):
        assert first.sample.target_path == second.sample.target_path
        assert {first.strategy, second.strategy} == {"hard_negative", "attribute_rank"}


def test_turn_counts_follow_config(attribute_gallery):
    config = DialogueSynthesisConfig(seed=1, min_qa_turns=2, max_qa_turns=2, min_image_turns=3, max_image_turns=3)
    for record in synthesize_records(attribute_gallery[:30], attribute_gallery, config):
        d = record.sample.dialogue
        assert len(d.qa_turns) == 2 and len(d.reference_turns) == 3
        assert len(record.round_facts) == d.num_rounds == 6


def test_references_are_other_identities_and_not_repeated(records, attribute_gallery):
    pid = {g.path: g.person_id for g in attribute_gallery}
    for record in records:
        refs = [t.reference_path for t in record.sample.dialogue.reference_turns]
        assert len({pid[r] for r in refs}) == len(refs)  # each reference shows a new identity
        assert all(pid[r] != record.sample.person_id for r in refs)


def test_every_stated_and_parsed_fact_is_true(records, attribute_gallery):
    truth = {g.path: g.attributes for g in attribute_gallery}
    for record in records:
        attributes = truth[record.sample.target_path]
        for facts in record.round_facts:
            assert all(f.holds(attributes) is not False for f in facts), (record.sample.dialogue, facts)
        for text, slot in _texts(record):
            for fact in parse_facts(text, context_slot=slot):
                assert fact.holds(attributes) is not False, (text, fact)


def test_descriptions_are_never_empty(records):
    for record in records:
        assert record.round_facts[0], record.sample.dialogue.description
        assert len(record.sample.dialogue.description.split()) >= 3


def test_every_ontology_value_is_expressed_and_read_back(records):
    read_back = set()
    for record in records:
        for text, slot in _texts(record):
            for fact in parse_facts(text, context_slot=slot):
                if not fact.negated and len(fact.values) == 1:
                    read_back.add((fact.slot, fact.values[0]))
    # upper_type=other is the catch-all "some top": no words single it out.
    missing = [label for label in ONTOLOGY.flat_labels() if label not in read_back and label != ("upper_type", "other")]
    assert not missing, f"never written or not read back: {missing}"


def test_hard_negatives_share_more_attributes_than_random(attribute_gallery):
    def shared(strategy):
        config = DialogueSynthesisConfig(seed=3, strategies=(strategy,), records_per_image=1)
        recs = synthesize_records(attribute_gallery[:150], attribute_gallery, config)
        attrs = {g.path: g.attributes for g in attribute_gallery}
        total = n = 0
        for r in recs:
            for turn in r.sample.dialogue.reference_turns:
                a, b = attrs[r.sample.target_path], attrs[turn.reference_path]
                total += sum(a.get(s) == b.get(s) for s in ONTOLOGY.slot_names)
                n += 1
        return total / n

    assert shared("hard_negative") > shared("random") + 2


def test_ambiguity_drops_with_text_turns(records, attribute_gallery):
    first = ambiguity(records, attribute_gallery, rounds=1)
    after = ambiguity(records, attribute_gallery)
    assert first > after


def test_unknown_strategy_lists_members():
    with pytest.raises(RegistryError, match="must be one of attribute_rank, hard_negative, random"):
        DialogueSynthesisConfig(strategies=("nope",))
    assert "random" in REFERENCE_STRATEGIES


def test_description_style_defaults_to_the_synthetic_one(attribute_gallery):
    plain = synthesize_records(attribute_gallery[:60], attribute_gallery, DialogueSynthesisConfig(seed=7))
    named = synthesize_records(
        attribute_gallery[:60], attribute_gallery, DialogueSynthesisConfig(seed=7, description_style="synthetic")
    )
    assert [r.sample for r in named] == [r.sample for r in plain]
    with pytest.raises(InputError, match="unknown description_style 'poem': must be one of synthetic, caption"):
        DialogueSynthesisConfig(description_style="poem")


def test_caption_style_reads_like_captions_and_stays_true(attribute_gallery):
    records = synthesize_records(
        attribute_gallery[:200], attribute_gallery, DialogueSynthesisConfig(seed=7, description_style="caption")
    )
    truth = {g.path: g.attributes for g in attribute_gallery}
    words = [len(r.sample.dialogue.description.split()) for r in records]
    assert 15 <= sum(words) / len(words) <= 30  # real CUHK-PEDES captions: 23 words on average
    stated = read = 0
    for record in records:
        attributes, description = truth[record.sample.target_path], record.sample.dialogue.description
        assert record.round_facts[0] and all(f.holds(attributes) is not False for f in record.round_facts[0])
        parsed = parse_facts(description)
        assert all(f.holds(attributes) is not False for f in parsed), (description, parsed)
        stated += len(record.round_facts[0])
        read += sum(f in parsed for f in record.round_facts[0])
        assert parsed[0].slot in ("gender", "age") or "gender" not in {f.slot for f in parsed}, description
    assert read / stated > 0.97  # the parser reads back what the caption style claims
