"""Re-ranking on appearance: image-to-image comparisons use GalleryIndex.appearance when the gallery
has it with its same-person calibration (near-duplicates by probability, rejections weighted by
it, example images), the embeddings otherwise, exactly as before."""

from __future__ import annotations

import numpy as np
import pytest

from minterpr.index.gallery_index import GalleryIndex
from minterpr.interaction.appearance import SamePersonCalibration
from minterpr.interaction.attribute_backend import AttributeBackend
from minterpr.interaction.reranking import RerankConfig, rerank
from minterpr.interaction.similarities import Similarities
from minterpr.interaction.session import Session
from minterpr.interaction.shortlist import ShortlistConfig, rank_candidates
from minterpr.runtime.appearance import with_appearance
from minterpr.types import DescriptionTurn, GalleryImage

CAL = SamePersonCalibration(scale=20.0, bias=-14.0, base_rate=0.01, pairs=1000, split="val", auc=95.0)


def _unit(rows: list[list[float]]) -> np.ndarray:
    a = np.asarray(rows, dtype=np.float32)
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def _gallery(calibrated: bool = True) -> GalleryIndex:
    """Five images: 0 and 3 are one person (alike in appearance, unlike in the attribute embedding),
    1, 2, 4 others; the embeddings make 0 and 1 near-duplicates (cosine 0.95), appearance does not."""
    images = [GalleryImage(f"{i}.jpg", f"p{p}") for i, p in enumerate([0, 1, 2, 0, 3])]
    emb = _unit([[1, 0, 0], [0.95, 0.31, 0], [0, 1, 0], [0, 0.2, 1], [0.3, 0.3, 0.9]])
    looks = _unit([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0.95, 0.1, 0, 0.3], [0, 0, 0.2, 1]])
    return with_appearance(GalleryIndex(images, emb), looks, CAL if calibrated else None)


def test_similarities_compare_appearance_when_calibrated_else_embeddings():
    index = _gallery()
    np.testing.assert_allclose(Similarities(index).rows([0]), index.appearance[[0]] @ index.appearance.T, rtol=1e-6)
    plain = _gallery(calibrated=False)  # vectors without a calibration: the embeddings, as before
    assert Similarities(plain).calibration is None
    np.testing.assert_allclose(Similarities(plain).rows([0]), plain.embeddings[[0]] @ plain.embeddings.T, rtol=1e-6)


def test_duplicate_threshold_comes_from_the_same_person_probability():
    sims = Similarities(_gallery())
    assert sims.threshold(RerankConfig()) == pytest.approx(14.0 / 20.0)  # logit(0.5) = 0
    assert sims.threshold(RerankConfig(duplicate_probability=0.9)) == pytest.approx((np.log(9.0) + 14.0) / 20.0)
    duplicates = sims.duplicates([0], sims.threshold(RerankConfig()))[0]
    assert duplicates.tolist() == [True, False, False, True, False]  # its other crop; not the embedding look-alike
    probs = sims.same_person([0])[0]
    assert probs[0] == 1.0 and probs[3] > 0.5 > probs[1]


def test_rejection_pushes_down_the_appearance_neighbours():
    query = np.array([0.5, 0.45, 0.3, 0.6, 0.4])  # 3 leads; the user rules out 0, the same person
    appearance = rerank(query, _gallery(), (), {0: False}, RerankConfig(anchor=False))
    assert int(np.argmax(appearance.scores)) != 3  # its other crop sank with it (penalty x P(same))
    p3 = CAL.probability(float(_gallery().appearance[3] @ _gallery().appearance[0]))
    assert appearance.scores[3] == pytest.approx(0.6 - 0.5 * p3)
    before = rerank(query, _gallery(calibrated=False), (), {0: False}, RerankConfig(anchor=False))
    assert int(np.argmax(before.scores)) == 3  # on embeddings 3 does not look like 0: untouched
    assert before.scores[1] == pytest.approx(0.45 - 0.5)  # the embedding near-duplicate lost the penalty


def test_plausible_reference_pulls_up_its_appearance_neighbour():
    query = np.array([0.5, 0.45, 0.55, 0.3, 0.5])
    result = rerank(query, _gallery(), (), {0: None}, RerankConfig(anchor=False))
    order = np.argsort(-result.scores).tolist()
    assert order.index(3) < order.index(2)  # "could be" 0: its other crop overtakes the query's favourite


def test_example_image_ranks_by_appearance_only_when_calibrated():
    query = np.array([0.2, 0.8, 0.7, 0.3, 0.2])
    example = _gallery().appearance[3]
    ranked = rerank(query, _gallery(), (), {}, RerankConfig(example_lambda=0.3, anchor=False), example=example)
    assert int(np.argmax(ranked.scores)) == 3
    np.testing.assert_allclose(ranked.scores[2], 0.3 * 0.7 + 0.7 * float(_gallery().appearance[2] @ example))
    plain = rerank(query, _gallery(calibrated=False), (), {}, RerankConfig(), example=example)
    np.testing.assert_array_equal(plain.scores, rerank(query, _gallery(calibrated=False), (), {}).scores)


def test_shortlist_keeps_the_examples_appearance_neighbours():
    rng = np.random.default_rng(1)
    n = 60
    emb = rng.normal(size=(n, 6)).astype(np.float32)
    looks = rng.normal(size=(n, 5)).astype(np.float32)
    index = with_appearance(
        GalleryIndex(
            [GalleryImage(f"{i}.jpg", f"p{i}") for i in range(n)], emb / np.linalg.norm(emb, axis=1, keepdims=True)
        ),
        looks / np.linalg.norm(looks, axis=1, keepdims=True),
        CAL,
    )
    query, example = index.embeddings[5], index.appearance[40]
    exact = rank_candidates(index, query, (), {}, None, example=example)
    short = rank_candidates(index, query, (), {}, ShortlistConfig(size=8, min_gallery=0), example=example)
    top = exact.rows[np.argsort(-exact.scores)[:5]]
    assert 40 in top[:2].tolist()  # the example's own crop leads (or follows the query's own image)
    assert set(top.tolist()) <= set(short.rows.tolist())  # far from the query, still a candidate
    assert short.rows[np.argmax(short.scores)] == top[0]


class _BlindBackend(AttributeBackend):
    """The attribute backend that sees no image outside the gallery: its query ignores example images."""

    def encode_turns(self, turns, index):
        return (
            super()
            .encode_turns(
                [
                    t
                    for t in turns
                    if index.index_of(getattr(t, "image_path", "")) is not None or not hasattr(t, "image_path")
                ]
                or [DescriptionTurn("a person")],
                index,
            )[-1:]
            .repeat(len(turns), axis=0)
        )


class _FakeAppearance:
    """Stands in for runtime.appearance.Appearance: embeds any file as one fixed vector."""

    def __init__(self, vector: np.ndarray) -> None:
        self.vector, self.calls = vector, []

    def embed_files(self, paths, *, strict=False):
        self.calls.append(list(paths))
        return np.stack([self.vector] * len(paths)), list(range(len(paths))), []


def test_session_search_with_an_image_inside_and_outside_the_gallery(tmp_path):
    backend = AttributeBackend()
    images = [
        GalleryImage(f"{i}.jpg", f"p{p}", attributes={"gender": (g,)})
        for i, (p, g) in enumerate([(0, "female"), (1, "male"), (2, "female"), (0, "female"), (3, "male")])
    ]
    for image in images:
        (tmp_path / image.path).write_bytes(b"")
    (tmp_path / "probe.jpg").write_bytes(b"")
    base = backend.index_images(images, root=str(tmp_path))
    index = with_appearance(base, _gallery().appearance, CAL)
    step = Session(backend, index, schedule="questions").example("0.jpg")
    assert int(step.ranking[0]) == 0 and int(step.ranking[1]) == 3  # then the same person's other crop
    fake = _FakeAppearance(index.appearance[3])
    session = Session(_BlindBackend(), index, schedule="questions", appearance=fake)
    assert int(session.example("probe.jpg").ranking[0]) == 3
    assert fake.calls == [[str(tmp_path / "probe.jpg")]]
    session.describe("a person")  # a later turn reuses the vector: one reading per path
    assert len(fake.calls) == 1
    # no calibrated appearance: exactly the scores of today's gallery
    plain = Session(backend, with_appearance(base, _gallery().appearance), schedule="questions").example("0.jpg")
    today = Session(backend, base, schedule="questions").example("0.jpg")
    np.testing.assert_array_equal(plain.scores, today.scores)


def _context(index: GalleryIndex, scores: list[float]):
    import random

    from minterpr.interaction.policies import PolicyContext

    s = np.asarray(scores, dtype=np.float64)
    return PolicyContext(index, s, np.argsort(-s, kind="stable"), (), frozenset(), frozenset(), random.Random(0))


def test_reference_policies_tell_people_apart_by_appearance():
    from minterpr.interaction.policies import DiverseReferences
    from minterpr.interaction.schedule import shown_person_mass

    scores = [0.9, 0.85, 0.5, 0.88, 0.4]  # 0, 3 (one person by appearance), 1 (0's embedding look-alike)
    looks, plain = _context(_gallery(), scores), _context(_gallery(calibrated=False), scores)
    diverse = DiverseReferences(trade_off=0.9)
    assert diverse.choose(looks, 2) == [0, 1]  # 3 is 0's other crop: not shown beside it
    assert diverse.choose(plain, 2) == [0, 3]  # on embeddings 1 was the "duplicate"
    # a user shown image 0 recognises its person: on appearance that is 3's mass too
    assert shown_person_mass(looks, [0], temperature=0.1) > shown_person_mass(plain, [0], temperature=0.1)
