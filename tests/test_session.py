"""Sessions: rankings, answers in context, rejections, confirmation, undo, replay, explanations."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from minterpr.language.phrasing import Fact
from minterpr.language.utterances import choose_description_slots, description
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.language.dialogue_acts import is_match, question_slot, verdict
from minterpr.interaction.session import AskQuestion, HistoryEntry, Session
from minterpr.interaction.simulators import SIMULATORS
from minterpr.types import ExampleTurn


@pytest.fixture(scope="module")
def truth_index(attribute_gallery):
    backend = AttributeBackend()
    return backend, backend.index_images(attribute_gallery)


@pytest.fixture(scope="module")
def noisy_index(attribute_gallery):
    backend = AttributeBackend(noise=1.5, seed=1)
    return backend, backend.index_images(attribute_gallery)


def _full_description(attributes, seed=0):
    rng = random.Random(seed)
    slots = ["gender", "upper_colour", "upper_type", "lower_colour", "lower_type", "hair_length", "carried"]
    return description(attributes, [s for s in slots if s in attributes], rng, vague_rate=0.0).text


def _talk(session, user, turns):
    """Let a simulated user reply to ``turns`` system moves; returns every step."""
    steps = [session.describe(user.describe())]
    for _ in range(turns):
        turn = user.respond(steps[-1].action)
        if turn is None:
            break
        steps.append(session.add(turn))
    return steps


def test_description_ranks_matching_images_first(truth_index, attribute_gallery):
    backend, index = truth_index
    target = attribute_gallery[30]
    step = Session(backend, index).describe(_full_description(target.attributes))
    assert len(step.ranking) == len(index) and sorted(step.ranking.tolist()) == list(range(len(index)))
    assert np.all(np.diff(step.scores) <= 0)  # scores are in ranking order
    explanation = step.explain(0)
    assert explanation.source == "ground_truth"
    assert explanation.contradicted == () and len(explanation.matched) >= 5
    assert index.images[step.ranking[0]].person_id == target.person_id


def test_answer_is_read_with_the_asked_slot(truth_index):
    backend, index = truth_index
    session = Session(backend, index, question_policy="fixed", schedule="questions")
    step = session.describe("A woman.")
    assert isinstance(step.action, AskQuestion) and step.action.slot == "upper_colour"  # salience after gender
    assert "her" in step.action.text.lower() or "she" in step.action.text.lower()  # pronoun from the known gender
    session.answer("Navy.")  # a bare colour means nothing without the question
    assert Fact("upper_colour", ("blue",)) in session.facts
    with pytest.raises(ValueError, match="no pending question"):
        Session(backend, index).answer("Navy.")


def test_rejected_image_never_returns_to_rank1_unless_confirmed(noisy_index):
    backend, index = noisy_index
    for seed in range(15):
        session = Session(backend, index, seed=seed)
        rejected = int(session.describe(_full_description(index.images[3 * seed].attributes, seed)).ranking[0])
        session.feedback(rejected, "No, that's not her.")
        # Everything after describes the rejected image itself: without the rule it would lead.
        rejected_words = _full_description(index.images[rejected].attributes, seed + 1)
        for _ in range(3):
            step = session.describe(rejected_words)
            assert step.ranking[0] != rejected
        step = session.feedback(rejected, "Yes, that's her.")
        assert step.ranking[0] == rejected and step.action is None  # confirmed: found, nothing to ask


def test_rejection_demotes_near_duplicates(truth_index):
    backend, index = truth_index
    for text in ("A woman in a red top.", "A man with a backpack.", "Someone in blue jeans."):
        session = Session(backend, index)
        step = session.describe(text)
        rejected = int(step.ranking[0])
        person = index.images[rejected].person_id
        step = session.feedback(rejected, "No, that's not the person.")
        # the same person's other images (identical attributes: cosine 1) leave the top 10 with it
        assert person not in {index.images[i].person_id for i in step.ranking[:10]}
        assert step.anchor is None or index.images[step.anchor].person_id != person


def test_undo_restores_the_previous_state_exactly(noisy_index):
    backend, index = noisy_index
    session = Session(backend, index, schedule="alternate", seed=3)
    steps = [session.describe("A woman in a red top.")]
    steps.append(session.answer("Jeans."))
    steps.append(session.feedback(int(steps[-1].ranking[0]), "Not her. She had no backpack."))
    steps.append(session.describe("Her shoes were white."))
    steps.append(session.feedback(int(steps[-1].ranking[1]), "No, her hair was long."))
    assert len(session.history) == 5 and len(session.judgements) == 2
    for k in range(len(steps) - 1, 0, -1):
        restored = session.undo()
        assert np.array_equal(restored.ranking, steps[k - 1].ranking)
        assert np.array_equal(restored.scores, steps[k - 1].scores)
        assert restored.action == steps[k - 1].action
        assert len(session.history) == k
    assert session.judgements == {}  # the feedback turns are gone, and with them the rejections
    assert session.undo() is None and session.step is None
    with pytest.raises(ValueError, match="nothing to undo"):
        session.undo()
    # Redoing a turn after undo (the generator state is restored too) gives the same step.
    session.describe("A woman in a red top.")
    redo = session.answer("Jeans.")
    assert redo.action == steps[1].action and np.array_equal(redo.ranking, steps[1].ranking)


def test_replay_of_history_reproduces_rankings(noisy_index, attribute_gallery):
    backend, index = noisy_index
    options = dict(question_policy="info_gain", reference_policy="diverse", schedule="alternate", seed=5)
    session = Session(backend, index, **options)
    user = SIMULATORS.create("oracle", wrong_answer_rate=0.2).user(attribute_gallery[40], index, query=0, seed=1)
    steps = _talk(session, user, 5)
    history = session.history
    assert [len(entry) for entry in history] == [5] * len(history)  # (turn, facts, top, shown, offered)
    turn, facts, top, shown, offered = history[1]
    assert shown == () and history[1].understood  # the oracle's feedback names no shown image's facts
    assert top == tuple(int(i) for i in steps[1].ranking[:10])
    assert [e.offered for e in history] == [s.offered for s in steps]  # the references each step showed
    # through JSON, as a service would store it
    stored = json.loads(json.dumps([entry.to_dict() for entry in history]))
    rebuilt = Session.replay([HistoryEntry.from_dict(d) for d in stored], backend, index, **options)
    assert rebuilt.history == history
    assert np.array_equal(rebuilt.step.ranking, steps[-1].ranking)
    assert rebuilt.step.action == steps[-1].action


def test_example_turn_finds_the_person(truth_index, attribute_gallery):
    backend, index = truth_index
    target = attribute_gallery[301]
    step = Session(backend, index).example(target.path)
    assert index.images[step.ranking[0]].person_id == target.person_id
    assert isinstance(Session(backend, index).add(ExampleTurn(target.path)).ranking, np.ndarray)


def test_explain_uses_predicted_probabilities_without_ground_truth(noisy_index):
    backend, index = noisy_index
    session = Session(backend, index)
    step = session.describe("A man in a red jacket, carrying a backpack.")
    for k in range(5):
        e = step.explain(k)
        assert e.source == "predicted"
        probs = index.attribute_probs[step.ranking[k]]
        from minterpr.language.ontology import ONTOLOGY

        column = {label: j for j, label in enumerate(ONTOLOGY.flat_labels())}
        for fact in e.matched:
            assert any(probs[column[(fact.slot, v)]] >= 0.5 for v in fact.values) != fact.negated
        for fact in e.contradicted:
            assert any(probs[column[(fact.slot, v)]] >= 0.5 for v in fact.values) == fact.negated
        assert len(e.matched) + len(e.contradicted) + len(e.unknown) == len(set(session.facts))


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Yes, that's her.", True),
        ("That's him!", True),
        ("Yes, this one.", True),
        ("yes", True),
        ("No, that's not her.", False),
        ("Not her. Her top was red.", False),
        ("Not this one.", False),
        ("No.", False),
        ("That's not the person.", False),
        ("Her top was red, not white.", False),
    ],
)
def test_is_match(text, expected):
    assert is_match(text) is expected


def test_undecided_feedback_neither_rejects_nor_confirms(noisy_index):
    backend, index = noisy_index
    assert verdict("Maybe, I'm not sure.") is None and verdict("Could be, everything I remember fits.") is None
    assert verdict("Not sure, no.") is None and verdict("No, she had no hat.") is False
    session = Session(backend, index, schedule="references")
    step = session.describe("A woman in a red top.")
    first = int(step.ranking[0])
    after = session.feedback(first, "Maybe, I'm not sure.")
    assert session.judgements == {first: None}
    assert after.ranking[0] == first and after.action is not None  # still first, search goes on
    assert first not in after.action.indices  # but never shown again


def test_question_slot_reads_every_template_and_free_questions():
    rng = random.Random(0)
    from minterpr.language.utterances import ASKABLE_SLOTS, question

    for slot in ASKABLE_SLOTS:
        for known in ({}, {"gender": ("male",)}, {"gender": ("female",)}):
            assert question_slot(question(slot, known, rng)) == slot
    assert question_slot("What colour were the shoes she wore?") == "footwear_colour"
    assert question_slot("Did he carry a bag?") == "carried"
    assert question_slot("Nice weather today?") is None


def test_choose_description_slots_is_what_oracle_uses(attribute_gallery):
    # the oracle's description mentions only slots the target has: every fact in it holds
    target = attribute_gallery[9]
    rng = random.Random(2)
    said = description(target.attributes, choose_description_slots(target.attributes, rng), rng)
    assert all(f.holds(target.attributes) for f in said.facts)


# ----- atomic turns and argument checks (issue 11) ------------------------------------------------
class _Flaky:
    """Wraps a backend; ``fail`` makes encode_turns raise (an unreadable image, a broken model)."""

    def __init__(self, backend):
        self.backend, self.fail, self.calls = backend, False, 0

    def index_images(self, images, root=None, *, progress=False):
        return self.backend.index_images(images, root)

    def encode_turns(self, turns, index):
        self.calls += 1
        if self.fail:
            raise RuntimeError("the model fell over")
        return self.backend.encode_turns(turns, index)


class _DrawThenFail:
    """A question policy that draws from the session's generator, then fails on 'hat' facts."""

    name = "draw_then_fail"

    def choose(self, ctx):
        ctx.rng.random()
        if any(f.slot == "headwear" for f in ctx.facts):
            raise KeyError("headwear")
        return None


def _assert_same_as_replay(session, backend, index, **options):
    rebuilt = Session.replay(session.history, backend, index, **options)
    assert rebuilt.history == session.history and rebuilt._rng.getstate() == session._rng.getstate()
    assert np.array_equal(rebuilt.step.ranking, session.step.ranking) and rebuilt.step.action == session.step.action


def test_a_failed_turn_changes_nothing_and_the_session_goes_on(truth_index):
    from minterpr.errors import TurnError

    backend, index = truth_index
    session = Session(backend, index, schedule="alternate")
    first = session.describe("A woman in a red top.")
    for bad in (
        lambda: session.example("missing.jpg"),
        lambda: session.describe("\ud800"),
        lambda: session.describe("a man \udcff"),
        lambda: session.example(index.images[0].path + "x"),
    ):
        with pytest.raises(TurnError) as caught:
            bad()
        assert "lone surrogate" in str(caught.value) or "missing" in str(caught.value) or "x'" in str(caught.value)
        assert len(session.history) == 1 and session.step is first
    step = session.describe("She carried a backpack.")  # later turns work
    assert len(session.history) == 2 and step is session.step
    _assert_same_as_replay(session, backend, index, schedule="alternate")


def test_exceptions_while_computing_become_turn_errors_and_are_undone(truth_index):
    from minterpr.errors import TurnError

    base, index = truth_index
    backend = _Flaky(base)
    session = Session(backend, index, question_policy=_DrawThenFail(), schedule="questions", seed=4)
    session.describe("A woman.")
    session.describe("She wore jeans.")
    history, step, state = session.history, session.step, session._rng.getstate()
    with pytest.raises(TurnError, match="KeyError") as caught:  # fails after drawing from the generator
        session.describe("She wore a hat.")
    assert isinstance(caught.value.__cause__, KeyError)
    backend.fail = True
    for move in (lambda: session.describe("Long hair."), session.undo):
        with pytest.raises(TurnError, match="the model fell over") as caught:
            move()
        assert isinstance(caught.value.__cause__, RuntimeError)
    assert session.history == history and session.step is step and session._rng.getstate() == state
    backend.fail = False
    _assert_same_as_replay(session, backend, index, question_policy=_DrawThenFail(), schedule="questions", seed=4)
    assert session.undo() is not None and len(session.history) == 1


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda s: s.describe(""), "description text is empty"),
        (lambda s: s.describe(" \t\n "), "description text is empty"),
        (lambda s: s.describe(None), "description text must be a str, got NoneType"),
        (lambda s: s.describe(b"a woman"), "must be a str, got bytes"),
        (lambda s: s.describe("a woman " * 12_500), "too long: 100,000 characters"),
        (lambda s: s.feedback(0, ""), "feedback text is empty"),
        (lambda s: s.feedback(1.5, "not her"), "gallery_index must be an int, got float"),
        (lambda s: s.feedback(True, "not her"), "gallery_index must be an int, got bool"),
        (lambda s: s.feedback("3", "not her"), "gallery_index must be an int, got str"),
        (lambda s: s.feedback(-1, "not her"), "gallery_index -1 out of range"),
        (lambda s: s.feedback(10**20, "not her"), "out of range"),
        (lambda s: s.example(""), "image path is empty"),
        (lambda s: s.example(None), "image path must be a str or path, got NoneType"),
        (lambda s: s.answer("Red."), "no pending question"),
        (lambda s: s.add("a woman"), "not a turn: str"),
        (lambda s: s.step.explain(10**6), "rank k 1000000 out of range"),
    ],
)
def test_bad_arguments_are_refused_with_clear_messages(truth_index, call, message):
    from minterpr.errors import TurnError

    backend, index = truth_index
    session = Session(backend, index, schedule="references")
    session.describe("A woman in a red top.")
    history = session.history
    with pytest.raises(TurnError, match=message.replace("(", r"\(")):
        call(session)
    assert session.history == history


def test_text_is_cleaned_and_numpy_indices_work(truth_index):
    backend, index = truth_index
    session = Session(backend, index, max_text_chars=40)
    session.describe("a\x00woman\x1b in\r a red\u2028top\twith\njeans")
    assert session.history[0].turn.text == "a woman  in  a red top\twith\njeans"
    assert {f.slot for f in session.facts} >= {"gender", "upper_colour"}
    session.feedback(np.int64(5), "Not her.")
    assert session.judgements == {5: False}
    with pytest.raises(ValueError, match="at most 40"):
        session.describe("x" * 41)


def test_example_paths_stay_under_the_root_unless_allowed(attribute_gallery, tmp_path):
    from minterpr.errors import InputError, TurnError

    root = tmp_path / "gallery"
    root.mkdir()
    (root / "extra.jpg").write_bytes(b"\xff\xd8 not much of a jpeg")
    (tmp_path / "secret.jpg").write_bytes(b"secret")
    backend = _Flaky(AttributeBackend())
    index = backend.index_images(attribute_gallery[:30], str(root))
    session = Session(backend, index)
    for path, message in (
        ("../secret.jpg", "leaves its root"),
        (str(tmp_path / "secret.jpg"), "leaves its root"),
        ("nowhere.jpg", "no such image file"),
    ):
        with pytest.raises(TurnError, match=message):
            session.example(path)
    assert backend.calls == 0  # refused before any computing
    session.example(index.images[4].path)  # gallery paths are always fine (no file needed)
    with pytest.raises(TurnError, match="cannot see 'extra.jpg'"):  # under the root: read, then refused
        session.example("extra.jpg")
    outside = Session(backend, index, allow_external_images=True)
    with pytest.raises(TurnError, match="cannot see"):  # allowed now: the backend gets to try
        outside.example(tmp_path / "secret.jpg")
    with pytest.raises(InputError, match="empty"):
        Session(backend, backend.index_images([]))
