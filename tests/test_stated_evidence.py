"""What the user says of a shown image ("these shoes are blue") is evidence about that image: it
decides the image's marks and its attribute term in the ranking (language/evidence.py,
stated_log_likelihood), on the exact path and on a shortlist alike, and never becomes a fact
about the person sought."""

from __future__ import annotations

import numpy as np
import pytest

from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.reranking import RerankConfig
from minterpr.interaction.session import Session
from minterpr.language.evidence import PROB_FLOOR, fact_log_likelihood, stated_log_likelihood
from minterpr.language.phrasing import Fact

BROWN = Fact("footwear_colour", ("brown",))


@pytest.fixture(scope="module")
def world(attribute_gallery):
    backend = AttributeBackend(noise=1.0, seed=0)  # imperfect probabilities: the model can be wrong
    index = backend.index_images(attribute_gallery[:60])
    # the image the model most believes wears brown shoes
    shown = int(np.argmax(fact_log_likelihood(BROWN, index.attribute_probs)))
    return backend, index, shown


def _scores(world, remark: str, **options) -> tuple[np.ndarray, Session]:
    backend, index, shown = world
    session = Session(backend, index, schedule="questions", **options)
    session.describe("a man in brown shoes")
    session.feedback(shown, remark)
    return session.step.gallery_scores(), session


def test_saying_what_the_shown_image_shows_moves_that_image_only(world) -> None:
    _, index, shown = world
    # "Maybe." leaves the image undecided, which pulls every score towards it (tests/test_plausible.py);
    # off here, so that the stated term is seen alone
    alone = RerankConfig(plausible=False)
    plain, _ = _scores(world, "Maybe.", reranking=alone)
    blue, session = _scores(world, "Maybe. These shoes are blue though.", reranking=alone)
    brown, _ = _scores(world, "Maybe. These shoes are brown.", reranking=alone)
    assert session.facts.count(Fact("footwear_colour", ("blue",))) == 0  # not the person's: the image's
    assert session.image_facts == {shown: (Fact("footwear_colour", ("blue",)),)}
    weight = RerankConfig().attribute_weight
    model = float(fact_log_likelihood(BROWN, index.attribute_probs)[shown])
    assert blue[shown] == pytest.approx(plain[shown] + weight * (np.log(PROB_FLOOR) - model))  # its shoes: not brown
    assert brown[shown] == pytest.approx(plain[shown] + weight * (np.log(1 - PROB_FLOOR) - model))
    others = np.arange(len(index)) != shown
    np.testing.assert_array_equal(blue[others], plain[others])  # nobody else's evidence moves
    assert session.step.explain_image(shown).contradicted == (BROWN,)  # and its mark says so


def test_a_shortlist_scores_the_described_image_as_the_exact_path(world) -> None:
    _, _, shown = world
    config = RerankConfig(anchor=False)  # the anchor may differ between the two candidate sets
    exact, _ = _scores(world, "Maybe. These shoes are blue though.", shortlist=None, reranking=config)
    short, session = _scores(world, "Maybe. These shoes are blue though.", shortlist=8, reranking=config)
    assert len(session.step.ranking) < len(exact) and session.step.rank_of(shown) is not None
    assert short[shown] == exact[shown]


def test_words_that_decide_no_fact_leave_the_term_as_it_was() -> None:
    from minterpr.language.ontology import ONTOLOGY

    probs = np.random.default_rng(0).uniform(0.05, 0.95, size=(3, len(ONTOLOGY.flat_labels())))
    loglik = fact_log_likelihood(BROWN, probs)
    same = stated_log_likelihood(loglik, [BROWN], {1: [Fact("carried", ("backpack",))]}, probs)
    np.testing.assert_array_equal(same, loglik)
    changed = stated_log_likelihood(loglik, [BROWN, BROWN], {2: [Fact("footwear_colour", ("brown",))]}, probs)
    assert changed[2] == pytest.approx(np.log(1 - PROB_FLOOR)) and changed[0] == loglik[0]  # a repeat counts once
