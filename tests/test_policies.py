"""Question and reference policies, schedules, and the re-ranking terms."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.language.utterances import ASKABLE_SLOTS
from minterpr.index.gallery_index import GalleryIndex
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.language.dialogue_acts import question_slot
from minterpr.interaction.policies import (
    QUESTION_POLICIES,
    REFERENCE_POLICIES,
    PolicyContext,
    answer_distribution,
    comparison_entropy,
    expected_information_gain,
)
from minterpr.interaction.schedule import make_schedule
from minterpr.interaction.fact_likelihoods import attribute_log_likelihood
from minterpr.interaction.reranking import RerankConfig, rerank
from minterpr.language.evidence import fact_log_likelihood
from minterpr.interaction.session import AskQuestion, Session
from minterpr.interaction.simulators import SIMULATORS
from minterpr.registry import RegistryError
from minterpr.types import GalleryImage

_COLUMN = {label: j for j, label in enumerate(ONTOLOGY.flat_labels())}


@pytest.fixture(scope="module")
def noisy(attribute_gallery):
    backend = AttributeBackend(noise=1.0, seed=0)
    return backend, backend.index_images(attribute_gallery)


def _context(index, scores, facts=(), asked=(), judged=(), seed=0, seen=()):
    scores = np.asarray(scores, dtype=np.float64)
    return PolicyContext(
        index,
        scores,
        np.argsort(-scores, kind="stable"),
        list(facts),
        frozenset(asked),
        frozenset(judged),
        random.Random(seed),
        seen=frozenset(seen),
    )


def test_information_gain_values():
    weights = np.full(4, 0.25)
    split = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=float)
    assert expected_information_gain(weights, split) == pytest.approx(math.log(2))
    constant = np.array([[1, 0]] * 4, dtype=float)
    assert expected_information_gain(weights, constant) == pytest.approx(0.0)
    four_way = np.eye(4)
    assert expected_information_gain(weights, four_way) == pytest.approx(math.log(4))
    # an answer already decided by the candidates' own uncertainty carries no information
    noisy = np.full((4, 2), 0.5)
    assert expected_information_gain(weights, noisy) == pytest.approx(0.0)


def test_info_gain_asks_the_slot_that_splits_the_candidates():
    # Four equally likely people: all men in red, but their trousers differ -> ask about trousers.
    images = []
    for i, lower in enumerate(["blue", "black", "white", "green"]):
        images.append(
            GalleryImage(
                f"{i}.jpg",
                f"x:{i}",
                attributes={
                    "gender": ("male",),
                    "upper_colour": ("red",),
                    "lower_colour": (lower,),
                    "carried": ("nothing",),
                },
            )
        )
    backend = AttributeBackend()
    index = backend.index_images(images)
    ctx = _context(index, [0.5, 0.5, 0.5, 0.5])
    choice = QUESTION_POLICIES.create("info_gain").choose(ctx)
    assert choice.slot == "lower_colour" and choice.gain == pytest.approx(math.log(4))
    # once that is known, it is not asked again
    ctx = _context(index, [0.5] * 4, facts=[Fact("lower_colour", ("blue",))])
    assert QUESTION_POLICIES.create("info_gain").choose(ctx).slot != "lower_colour"


def test_answer_distribution_single_and_multi_slots():
    probs = np.zeros((2, len(_COLUMN)))
    probs[0, _COLUMN[("gender", "male")]] = 0.6
    probs[0, _COLUMN[("gender", "female")]] = 0.2
    probs[1, _COLUMN[("carried", "backpack")]] = 0.7
    probs[1, _COLUMN[("carried", "umbrella")]] = 0.9
    single = answer_distribution(probs, "gender")
    assert single[0].tolist() == pytest.approx([0.75, 0.25]) and single[1].tolist() == pytest.approx([0.5, 0.5])
    multi = answer_distribution(probs, "carried")
    assert multi[1, ONTOLOGY.slot("carried").value_names.index("umbrella")] == 1 and multi[1].sum() == 1


@pytest.mark.parametrize("policy", ["info_gain", "fixed", "random"])
def test_no_policy_asks_a_known_or_asked_slot(noisy, attribute_gallery, policy):
    backend, index = noisy
    simulator = SIMULATORS.create("oracle", dont_know_rate=0.2)
    for q, target in enumerate(attribute_gallery[::60]):
        session = Session(backend, index, question_policy=policy, schedule="questions", seed=q)
        user = simulator.user(target, index, query=q, seed=0)
        step = session.describe(user.describe())
        asked: list[str] = []
        for _ in range(8):
            action = step.action
            assert isinstance(action, AskQuestion)
            known = {f.slot for f in session.facts}
            assert action.slot not in known and action.slot not in asked
            assert question_slot(action.text) == action.slot
            asked.append(action.slot)
            step = session.add(user.respond(action))


def test_fixed_follows_salience_and_random_is_seeded(noisy):
    backend, index = noisy
    ctx = _context(index, np.zeros(len(index)), facts=[Fact("gender", ("male",))], asked=["upper_colour"])
    assert QUESTION_POLICIES.create("fixed").choose(ctx).slot == ASKABLE_SLOTS[2]
    picks = {
        QUESTION_POLICIES.create("random").choose(_context(index, np.zeros(len(index)), seed=s)).slot for s in range(20)
    }
    assert len(picks) > 3
    a = QUESTION_POLICIES.create("random").choose(_context(index, np.zeros(len(index)), seed=7))
    assert a == QUESTION_POLICIES.create("random").choose(_context(index, np.zeros(len(index)), seed=7))
    everything = _context(index, np.zeros(len(index)), asked=ASKABLE_SLOTS)
    assert all(QUESTION_POLICIES.create(p).choose(everything) is None for p in QUESTION_POLICIES.names())


def _line_index():
    # Images 0-2 are one person (same embedding), 3-5 another, 6-8 a third.
    emb = np.zeros((9, 3), dtype=np.float32)
    for i in range(9):
        emb[i, i // 3] = 1.0
    return GalleryIndex([GalleryImage(f"{i}.jpg", f"x:{i // 3}") for i in range(9)], emb)


def test_reference_policies_show_unjudged_and_diverse_images():
    index = _line_index()
    scores = np.array([0.9, 0.89, 0.88, 0.8, 0.79, 0.78, 0.5, 0.4, 0.3])
    assert REFERENCE_POLICIES.create("topk").choose(_context(index, scores), 3) == [0, 1, 2]
    assert REFERENCE_POLICIES.create("top1").choose(_context(index, scores), 3) == [0]
    assert REFERENCE_POLICIES.create("top1").choose(_context(index, scores, judged=[0]), 3) == [1]
    diverse = REFERENCE_POLICIES.create("diverse").choose(_context(index, scores), 3)
    assert diverse == [0, 3, 6]  # one image per person
    judged = REFERENCE_POLICIES.create("diverse").choose(_context(index, scores, judged=[0, 3]), 2)
    assert 0 not in judged and 3 not in judged and len(judged) == 2
    for name in REFERENCE_POLICIES.names():
        shown = REFERENCE_POLICIES.create(name).choose(_context(index, scores, judged=range(8)), 3)
        assert shown == [8]


@pytest.mark.parametrize("name", REFERENCE_POLICIES.names())
def test_every_reference_policy_shows_images_not_yet_shown_first(name):
    """A passed-over image is not shown again while others are left, and no longer keeps its
    look-alike off the screen: with 0 seen, diverse shows 1 (the same person) before 3 would be."""
    index = _line_index()
    scores = np.array([0.9, 0.89, 0.88, 0.8, 0.79, 0.78, 0.5, 0.4, 0.3])
    policy = REFERENCE_POLICIES.create(name)
    shown = policy.choose(_context(index, scores, seen=[0, 3, 6]), 3)
    assert shown and not {0, 3, 6} & set(shown)
    assert 1 in shown  # the best image not yet shown, though image 0 (seen) is its near-duplicate
    # every image not judged was shown before: they come again, best first
    assert policy.choose(_context(index, scores, judged=range(7), seen=[7, 8]), 1) == [7]


def test_a_session_does_not_show_the_references_the_user_passed_over_again(noisy, attribute_gallery):
    """The user rules out one of the three shown; the next references are three others, and the
    history records what was shown after each turn (a replay shows the same)."""
    backend, index = noisy
    session = Session(backend, index, schedule="references", reference_policy="diverse", seed=4)
    session.describe("a woman in a red top")
    first = session.action.indices
    assert session.history[-1].offered == tuple(first) and len(first) == 3
    session.feedback(first[0], "not her, she had a backpack")
    second = session.action.indices
    assert len(second) == 3 and not set(first) & set(second)
    assert [e.offered for e in session.history] == [tuple(first), tuple(second)]
    replayed = Session.replay(
        session.history, backend, index, schedule="references", reference_policy="diverse", seed=4
    )
    assert replayed.history == session.history and replayed.action == session.action


def test_uncertain_shows_the_image_whose_comparison_splits_the_candidates():
    # Person 0 is the favourite and unlike everyone; persons 1-3 look alike (women in blue).
    emb = np.eye(4, dtype=np.float32)
    index = GalleryIndex([GalleryImage(f"{i}.jpg", f"x:{i}") for i in range(4)], emb)
    probs = np.zeros((4, len(_COLUMN)), dtype=np.float32)
    for i, (gender, colour) in enumerate([("male", "red"), ("female", "blue"), ("female", "blue"), ("female", "blue")]):
        probs[i, _COLUMN[("gender", gender)]] = 0.9
        probs[i, _COLUMN[("upper_colour", colour)]] = 0.9
    index.attribute_probs = probs
    scores = np.log([0.4, 0.2, 0.2, 0.2])  # softmax at temperature 1 = these weights
    policy = REFERENCE_POLICIES.create("uncertain", temperature=1.0)
    shown = policy.choose(_context(index, scores), 2)
    # Showing person 0 only tells "him" (0.4) from "not him" (0.6): H = 0.67 nats. Showing one of
    # the women tells "her" (0.2), "someone like her" (0.4), "the man" (0.4): H = 1.05 nats.
    assert shown[0] in (1, 2, 3) and len(shown) == 2 and len(set(shown)) == 2
    assert REFERENCE_POLICIES.create("topk").choose(_context(index, scores), 2)[0] == 0
    assert 0 not in policy.choose(_context(index, scores, judged=[1]), 1)
    assert policy.choose(_context(index, scores, judged=[0, 1, 2, 3]), 2) == []


def test_comparison_entropy_values():
    weights = np.array([0.4, 0.2, 0.2, 0.2])
    labels = np.array([[0, 0], [1, 1], [1, 1], [1, 1]])
    same = np.eye(4, dtype=bool)
    assert comparison_entropy(weights, labels, same, 0) == pytest.approx(-(0.4 * math.log(0.4) + 0.6 * math.log(0.6)))
    assert comparison_entropy(weights, labels, same, 1) == pytest.approx(
        -(0.2 * math.log(0.2) + 2 * 0.4 * math.log(0.4))
    )


def test_schedules():
    assert make_schedule("auto").auto
    schedule = make_schedule(["question", "reference"])
    assert [schedule.kind(r) for r in (1, 2, 3)] == ["question", "reference", "reference"]
    with pytest.raises(ValueError, match="unknown schedule"):
        make_schedule("sometimes")
    with pytest.raises(ValueError, match="question"):
        make_schedule(["question", "dance"])
    with pytest.raises(RegistryError, match="must be one of"):
        QUESTION_POLICIES.create("psychic")


def test_fact_log_likelihood():
    probs = np.zeros((2, len(_COLUMN)))
    probs[:, _COLUMN[("gender", "male")]] = [0.9, 0.3]
    probs[:, _COLUMN[("gender", "female")]] = [0.1, 0.3]
    probs[:, _COLUMN[("carried", "backpack")]] = [0.5, 0.0]
    probs[:, _COLUMN[("carried", "umbrella")]] = [0.5, 0.0]
    male = fact_log_likelihood(Fact("gender", ("male",)), probs)
    assert male == pytest.approx(np.log([0.9, 0.5]))  # normalised over the slot's values
    assert fact_log_likelihood(Fact("gender", ("male",), negated=True), probs) == pytest.approx(np.log([0.1, 0.5]))
    either = fact_log_likelihood(Fact("carried", ("backpack", "umbrella")), probs)
    assert either == pytest.approx(np.log([0.75, 0.02]))  # independent labels; floor clips log(0)
    no_bag = fact_log_likelihood(Fact("carried", ("backpack",), negated=True), probs)
    assert no_bag == pytest.approx(np.log([0.5, 0.98]))
    total = attribute_log_likelihood([Fact("gender", ("male",)), Fact("carried", ("backpack",), negated=True)], probs)
    assert total == pytest.approx(male + no_bag)


def test_rerank_terms_switch_and_act():
    index = _line_index()
    probs = np.zeros((9, len(_COLUMN)), dtype=np.float32)
    probs[:, _COLUMN[("gender", "male")]] = [0.9] * 3 + [0.1] * 6
    probs[:, _COLUMN[("gender", "female")]] = [0.1] * 3 + [0.9] * 6
    index.attribute_probs = probs
    query = np.array([0.5, 0.5, 0.5, 0.6, 0.6, 0.6, 0.1, 0.1, 0.1])
    off = rerank(query, index, [Fact("gender", ("male",))], {}, RerankConfig.off())
    assert np.array_equal(off.scores, query) and off.anchor is None
    attrs = rerank(
        query, index, [Fact("gender", ("male",))], {}, RerankConfig.off().with_(attributes=True, attribute_weight=0.1)
    )
    assert np.argmax(attrs.scores) in (0, 1, 2)  # the men overtake
    rejected = rerank(query, index, [], {3: False}, RerankConfig.off().with_(rejection=True))
    assert set(np.argsort(-rejected.scores)[:3]) == {0, 1, 2}  # person 1 (3, 4, 5) demoted as a whole
    confirmed = rerank(query, index, [], {7: True}, RerankConfig(anchor_lambda=0.5))
    assert confirmed.anchor == 7 and np.argmax(confirmed.scores) == 7
    assert set(np.argsort(-confirmed.scores)[:3]) == {6, 7, 8}  # the anchor lifts its near-duplicates
    confident = rerank(
        np.array([0.9, 0.9, 0.9, 0.2, 0.2, 0.2, 0.1, 0.1, 0.1]), index, [], {}, RerankConfig(anchor_margin=0.3)
    )
    assert confident.anchor == 0


def test_attribute_backend_leaves_out_paths_outside_the_root_like_a_backend_reading_files():
    from minterpr.errors import InputError

    images = [
        GalleryImage(path, f"x:{k}", attributes={"gender": ("male",)})
        for k, path in enumerate(["a.jpg", "../outside.jpg", "/abs/b.jpg"])
    ]
    index = AttributeBackend().index_images(images, root="gallery")
    assert [image.path for image in index.images] == ["a.jpg"]
    assert [path for path, _ in index.skipped] == ["../outside.jpg", "/abs/b.jpg"]
    assert len(AttributeBackend().index_images(images).images) == 3  # no root: the paths are the user's own
    with pytest.raises(InputError, match="leaves its root"):
        AttributeBackend().index_images(images, root="gallery", strict=True)
