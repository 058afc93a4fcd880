"""Attribute evidence in static evaluation, and the one scoring configuration (RerankConfig)."""

from __future__ import annotations

import numpy as np
import pytest

from minterpr.language.ontology import ONTOLOGY
from minterpr.errors import InputError
from minterpr.evaluation.static import round_log_likelihoods
from minterpr.interaction.reranking import RerankConfig
from minterpr.evaluation.static import evaluate_dialogues
from minterpr.evaluation.weight_selection import select_attribute_weight
from minterpr.index.gallery_index import GalleryIndex
from minterpr.types import Dialogue, DescriptionTurn, GalleryImage, QATurn, RetrievalSample

RED = ONTOLOGY.flat_labels().index(("upper_colour", "red"))
BLUE = ONTOLOGY.flat_labels().index(("upper_colour", "blue"))


def _probs() -> np.ndarray:
    """Image 0 predicted blue on top, image 1 red on top."""
    probs = np.full((2, len(ONTOLOGY.flat_labels())), 0.05, np.float32)
    probs[0, BLUE] = probs[1, RED] = 0.9
    return probs


class FlatBackend:
    """Every image and query has the same embedding: only the attribute term can rank."""

    def index_images(self, images, root=None, *, progress=False):
        return GalleryIndex(list(images), np.ones((len(images), 2), np.float32) / np.sqrt(2), _probs(), root)

    def encode_turns(self, turns, index):
        return np.ones((len(turns), 2), np.float32) / np.sqrt(2)


GALLERY = [GalleryImage("blue.jpg", "x:1"), GalleryImage("red.jpg", "x:2")]


def _sample(*answers: str) -> RetrievalSample:
    qa = tuple(QATurn("What colour was the top?", a) for a in answers)
    return RetrievalSample("red.jpg", "x:2", Dialogue("a person", qa))


def test_loglik_follows_stated_and_negated_facts() -> None:
    ll = round_log_likelihoods(
        [DescriptionTurn("someone in a red top"), DescriptionTurn("the top was not red")], _probs()
    )  # (R, N)
    assert ll.shape == (2, 2)
    assert ll[0, 1] > ll[0, 0]  # "red top" favours the red image
    step = ll[1] - ll[0]  # what "not red" added
    assert step[0] > step[1]  # the negation counts against the red image


def test_fusion_changes_the_ranking_only_with_a_weight() -> None:
    samples = [_sample("red")]
    off = evaluate_dialogues(FlatBackend(), samples, GALLERY, None, reranking=RerankConfig(attribute_weight=0.0))
    on = evaluate_dialogues(FlatBackend(), samples, GALLERY, None, reranking=RerankConfig(attribute_weight=0.1))
    assert [r["r1"] for r in off.rounds] == [0.0, 0.0]  # ties keep gallery order: blue first
    assert [r["r1"] for r in on.rounds] == [0.0, 100.0]  # round 1 says "red"
    assert on.protocol["scoring"]["attribute_weight"] == 0.1


def test_select_attribute_weight_prefers_evidence_when_it_helps() -> None:
    best, tried = select_attribute_weight(FlatBackend(), [_sample("red")], GALLERY, None, grid=(0.0, 0.1))
    assert best.attribute_weight == 0.1 and tried == {0.0: 0.0, 0.1: 100.0}


def test_scoring_config_validates_and_round_trips() -> None:
    with pytest.raises(InputError, match="attribute_weight"):
        RerankConfig(attribute_weight=-1.0)
    for field, bad in [
        ("prob_floor", 0.5),
        ("anchor_lambda", 1.5),
        ("duplicate_threshold", float("nan")),
        ("rejection_penalty", -0.1),
        ("anchor", "yes"),
        ("attribute_weight", True),
        ("anchor_margin", "0.1"),
    ]:
        with pytest.raises(InputError, match=field):
            RerankConfig(**{field: bad})
    config = RerankConfig(attribute_weight=0.3, prob_floor=0.05, anchor=False, anchor_margin=1)
    assert RerankConfig.from_dict(config.to_dict()) == config and RerankConfig.from_dict(None) == RerankConfig()
    assert config.anchor_margin == 1.0 and isinstance(config.anchor_margin, float)  # plain JSON values
    assert set(config.to_dict()) == {f for f in RerankConfig.__dataclass_fields__}  # every field is stored


def test_scoring_config_reads_the_stored_forms() -> None:
    # what `minterpr train` stored before the configs were one: weight, floor and the rejection rule kept
    old = RerankConfig.from_dict({"attribute_weight": 0.1, "prob_floor": 0.05, "reject_references": False})
    assert (old.attribute_weight, old.prob_floor, old.rejection) == (0.1, 0.05, False)
    assert old.anchor == RerankConfig().anchor  # what it did not store keeps the default
    assert RerankConfig.from_dict({"rejection": True, "reject_references": True}).rejection
    with pytest.raises(InputError, match="reject_references=False contradicts rejection=True"):
        RerankConfig.from_dict({"rejection": True, "reject_references": False})
    with pytest.raises(InputError, match="unknown key 'weight'"):
        RerankConfig.from_dict({"weight": 0.1})
    with pytest.raises(InputError, match="mapping"):
        RerankConfig.from_dict([("attribute_weight", 0.1)])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="prob_floor"):
        RerankConfig.from_dict({"prob_floor": None})
    with pytest.raises(InputError, match="unknown field"):
        RerankConfig().with_(weight=1.0)
    assert RerankConfig.with_attribute_weight(None) == RerankConfig()
    assert RerankConfig.with_attribute_weight(0.2) == RerankConfig(attribute_weight=0.2)


def test_select_attribute_weight_keeps_the_other_terms_and_needs_probabilities() -> None:
    base = RerankConfig(anchor=False, prob_floor=0.05)
    best, _ = select_attribute_weight(FlatBackend(), [_sample("red")], GALLERY, None, grid=(0.0, 0.1), reranking=base)
    assert best == base.with_(attribute_weight=0.1)

    class NoProbs(FlatBackend):
        def index_images(self, images, root=None, *, progress=False):
            return GalleryIndex(list(images), np.ones((len(images), 2), np.float32) / np.sqrt(2), None, root)

    with pytest.raises(InputError, match="attribute_probs"):
        select_attribute_weight(NoProbs(), [_sample("red")], GALLERY, None)


def _keep_below_loop(scores: np.ndarray, rejected: np.ndarray) -> np.ndarray:
    """Plain reference of keep_rejected_below: one row and one image at a time."""
    scores = scores.astype(np.float64)
    out = scores.copy()
    for row in range(len(scores)):
        if rejected[row].any() and not rejected[row].all():
            best = max(s for s, r in zip(scores[row], rejected[row]) if not r)
            for j in range(scores.shape[1]):
                if rejected[row, j]:
                    out[row, j] = min(scores[row, j], best - 1e-6 * (1.0 + abs(best)))
    return out


def test_keep_rejected_below_matches_a_loop_and_keeps_the_rest() -> None:
    from minterpr.interaction.reranking import keep_rejected_below

    rng = np.random.default_rng(0)
    scores = rng.normal(size=(40, 9)).astype(np.float32)
    rejected = rng.random((40, 9)) < 0.2
    rejected[0] = True  # all rejected: nothing to keep them below, row unchanged
    got = keep_rejected_below(scores, rejected)
    np.testing.assert_array_equal(got, _keep_below_loop(scores, rejected))
    np.testing.assert_array_equal(got[~rejected], scores[~rejected])  # only rejected images move
    mixed = rejected.any(1) & ~rejected.all(1)
    assert (got[mixed].argmax(1) == np.where(rejected[mixed], -np.inf, scores[mixed]).argmax(1)).all()
    assert keep_rejected_below(scores[1], rejected[1]).shape == (9,)  # one row works too
