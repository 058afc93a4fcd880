"""One scoring path: the static replay scores every round exactly as a Session fed the same turns."""

from __future__ import annotations

import numpy as np
import pytest

from minterpr.errors import InputError
from minterpr.evaluation.static import evaluate_dialogues, replay_scores
from minterpr.index.gallery_index import GalleryIndex
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.language.dialogue_acts import turn_facts, turn_reading
from minterpr.interaction.reranking import RerankConfig, rerank, rerank_rows
from minterpr.interaction.session import HistoryEntry, Session
from minterpr.types import DescriptionTurn, Dialogue, GalleryImage, QATurn, ReferenceTurn, RetrievalSample

CONFIGS = {
    "defaults": RerankConfig(),
    "off": RerankConfig.off(),
    "attributes only": RerankConfig.off().with_(attributes=True, attribute_weight=0.2),
    "no attributes": RerankConfig(attributes=False),
    "no rejection": RerankConfig(rejection=False),
    "no anchor": RerankConfig(anchor=False),
    "eager anchor, no pin": RerankConfig(attribute_weight=0.4, anchor_margin=0.0, pin_confirmed=False),
    "stored (old form)": RerankConfig.from_dict(
        {"attribute_weight": 0.1, "prob_floor": 0.05, "reject_references": True}
    ),
}


def _samples(gallery: list[GalleryImage]) -> list[RetrievalSample]:
    """Dialogues that exercise every term: facts (some repeated, some negated), rejections of
    images with same-person near-duplicates, an unsure verdict, a confirmation, a changed
    verdict, and dialogues of different lengths."""
    g = [image.path for image in gallery]
    return [
        RetrievalSample(
            g[0],
            gallery[0].person_id,
            Dialogue(
                "a woman in a red jacket and blue jeans",
                (QATurn("What colour was the top?", "Red."), QATurn("Did she carry a backpack?", "No backpack.")),
                (
                    ReferenceTurn(g[4], "That's not the person. She had long hair."),
                    ReferenceTurn(g[9], "Maybe, I can't tell."),
                    ReferenceTurn(g[7], "No, not her. The top was red, not that."),
                ),
            ),
        ),
        RetrievalSample(
            g[3],
            gallery[3].person_id,
            Dialogue(
                "a man with short hair",
                (QATurn("What colour was the top?", "Black."),),
                (ReferenceTurn(g[5], "Yes, that's him."),),
            ),
        ),
        RetrievalSample(g[6], gallery[6].person_id, Dialogue("someone in a white t-shirt")),
        RetrievalSample(
            g[10],
            gallery[10].person_id,
            Dialogue(
                "an old man in a grey coat",
                (QATurn("Was he wearing a hat?", "Yes, a hat."),),
                (
                    ReferenceTurn(g[1], "No, that's not him."),
                    ReferenceTurn(g[12], "No."),
                    ReferenceTurn(g[1], "Actually yes, that's him."),
                    ReferenceTurn(g[2], "Not this one."),
                ),
            ),
        ),
        RetrievalSample(
            g[8],
            gallery[8].person_id,
            Dialogue(  # what is said of a shown image: evidence about it
                "a man in brown shoes with a backpack",
                (),
                (
                    ReferenceTurn(g[11], "Maybe. These shoes are blue though."),
                    ReferenceTurn(g[13], "No. His shoes were brown, this one has no backpack."),
                    ReferenceTurn(g[11], "Maybe. This one has a backpack."),
                ),
            ),
        ),
    ]


@pytest.fixture(scope="module")
def setup(attribute_gallery):
    gallery = attribute_gallery[:45]  # 15 identities x 3 images: same-person images are near-duplicates
    backend = AttributeBackend(noise=1.0, seed=0)  # imperfect attribute probabilities
    return backend, backend.index_images(gallery), gallery, _samples(gallery)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_static_replay_scores_as_a_session_replaying_the_dialogue(setup, name):
    backend, index, gallery, samples = setup
    config = CONFIGS[name]
    static = replay_scores(backend, samples, gallery, reranking=config)  # R x (Q, G)
    assert len(static) == max(len(s.dialogue.turns()) for s in samples)
    for q, sample in enumerate(samples):
        history = [
            HistoryEntry(turn, turn_reading(turn).target, (), turn_reading(turn).shown)
            for turn in sample.dialogue.turns()
        ]
        for r in range(len(static)):
            session = Session.replay(history[: r + 1], backend, index, reranking=config)
            np.testing.assert_array_equal(
                static[r][q], session.step.gallery_scores(), err_msg=f"dialogue {q} round {r}"
            )


def test_every_term_acts_in_the_replay(setup):
    """The configurations above differ where they should (so the test above compares something)."""
    backend, index, gallery, samples = setup
    scores = {name: replay_scores(backend, samples, gallery, reranking=config) for name, config in CONFIGS.items()}
    for name in CONFIGS:
        if name != "defaults":
            assert any(not np.array_equal(a, b) for a, b in zip(scores[name], scores["defaults"])), name
    last = scores["defaults"][-1]
    g = {image.path: i for i, image in enumerate(gallery)}
    assert last[0].argmax() not in (g[gallery[4].path], g[gallery[7].path])  # rejected: never first
    assert last[1].argmax() == 5  # confirmed: pinned first
    assert last[3].argmax() == 1  # rejected, then confirmed: the latest verdict counts


def test_a_repeated_fact_counts_once_in_both_paths(setup):
    backend, index, gallery, _ = setup
    description, again, new = "a woman in a red top", "She wore a red top.", "She wore black trousers."
    assert set(turn_facts(DescriptionTurn(again))) <= set(turn_facts(DescriptionTurn(description)))
    attributes = RerankConfig.off().with_(attributes=True, attribute_weight=0.3)
    # a session: the facts of both turns score as the description's alone
    facts = [f for text in (description, again) for f in turn_facts(DescriptionTurn(text))]
    zero = np.zeros(len(index))
    assert np.array_equal(
        rerank(zero, index, facts, {}, attributes).scores,
        rerank(zero, index, facts[: len(turn_facts(DescriptionTurn(description)))], {}, attributes).scores,
    )

    class SameQuery:  # every round the same query: only the attribute term can change the scores
        def index_images(self, images, root=None, *, progress=False):
            return index

        def encode_turns(self, turns, index):
            return np.tile(index.embeddings[0], (len(turns), 1))

    # the replay: restating a fact changes nothing, a new fact does
    def rounds(answer):
        sample = RetrievalSample(
            gallery[0].path, gallery[0].person_id, Dialogue(description, (QATurn("Anything else?", answer),))
        )
        return replay_scores(SameQuery(), [sample], gallery, reranking=attributes)

    restated, added = rounds(again), rounds(new)
    assert np.array_equal(restated[1], restated[0])
    assert not np.array_equal(added[1], added[0])


def test_a_batch_row_scores_as_it_does_alone(setup):
    backend, index, _, _ = setup
    rng = np.random.default_rng(0)
    query = rng.normal(size=(5, len(index)))
    judgements = [{}, {3: False}, {4: True, 7: False}, {1: None}, {0: False, 1: False, 2: False}]
    loglik = rng.normal(size=(5, len(index)))
    together, anchors = rerank_rows(query, index, loglik, judgements, RerankConfig())
    for row in range(5):
        alone, anchor = rerank_rows(
            query[row : row + 1], index, loglik[row : row + 1], judgements[row : row + 1], RerankConfig()
        )
        np.testing.assert_array_equal(alone[0], together[row])
        assert anchor[0] == anchors[row]
    with pytest.raises(InputError, match="out of range"):
        rerank_rows(query[:1], index, None, [{len(index): False}], RerankConfig())


def test_the_default_is_one_default():
    import minterpr.evaluation.static as static

    assert not hasattr(static, "ScoringConfig") and RerankConfig() == RerankConfig()  # one name, one default
    with pytest.raises(ImportError):  # folded into static (issue 23)
        import minterpr.evaluation.scoring  # noqa: F401
    samples = [RetrievalSample("a.jpg", "x:1", Dialogue("person"))]
    toy = GalleryIndex([GalleryImage("a.jpg", "x:1")], np.ones((1, 2), np.float32) / np.sqrt(2))

    class Toy:
        def index_images(self, images, root=None, *, progress=False):
            return toy

        def encode_turns(self, turns, index):
            return np.ones((len(turns), 2), np.float32) / np.sqrt(2)

    report = evaluate_dialogues(Toy(), samples, toy.images, None)
    assert report.protocol["scoring"] == RerankConfig().to_dict()  # the whole configuration is recorded
    assert report.protocol["attribute_evidence"] is False  # no attribute probabilities: skipped, as in a session
