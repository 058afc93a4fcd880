"""The re-ranked same-person fit: stored beside the cosine one, used for two crops of one gallery."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from minterpr.index.reciprocal import ReciprocalConfig, k_reciprocal_distances
from minterpr.interaction import pair_scores
from minterpr.interaction.appearance import (
    SamePersonCalibration,
    fit_same_person,
    fit_same_person_both,
    read_same_person,
    write_same_person,
)
from minterpr.interaction.follow import follow
from minterpr.interaction.pair_scores import GalleryPairs, gallery_pairs


def _crops(people=12, shots=4, noise=0.5, seed=0):
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(people), shots)
    x = rng.normal(size=(people, 8))[ids] + noise * rng.normal(size=(people * shots, 8))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), ids.astype(str)


def test_both_fits_are_stored_and_read_back(tmp_path):
    x, ids = _crops()
    fit = fit_same_person_both(x, ids, split="val")
    assert fit.rerank is None and fit.reranked is not None and fit.reranked.rerank == ReciprocalConfig()
    assert fit.reranked.base_rate == fit.base_rate and fit.reranked.pairs == fit.pairs
    write_same_person(tmp_path / "best.pt", fit)
    assert read_same_person(tmp_path / "best.pt") == fit
    stored = json.loads((tmp_path / "same_person.json").read_text())
    assert (
        stored["reranked"]["rerank"] == {"k1": 8, "k2": 3, "lambda": 0.3, "qe_k": 5, "qe_alpha": 3.0}
        and "rerank" not in stored
    )


def test_a_file_from_before_the_re_ranked_fit_reads_as_cosine_only(tmp_path):
    fit = fit_same_person(*_crops(), split="val")
    (tmp_path / "same_person.json").write_text(json.dumps(fit.to_dict()))
    assert set(fit.to_dict()) == {"scale", "bias", "base_rate", "pairs", "split", "auc"}
    assert read_same_person(tmp_path / "m.pt").reranked is None


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"reranked": {"scale": 1.0}}, "'reranked'"),
        ({"reranked": "x"}, "'reranked'"),
        ({"rerank": {"k1": 8}}, "'rerank'"),
    ],
)
def test_a_malformed_re_ranked_fit_names_its_field(tmp_path, bad, field):
    record = {**fit_same_person(*_crops(), split="val").to_dict(), **bad}
    (tmp_path / "same_person.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=f"same_person.json: malformed .*{field}"):
        read_same_person(tmp_path / "m.pt")


def test_a_re_ranked_fit_without_its_settings_is_refused():
    fit = fit_same_person(*_crops(), split="val")
    with pytest.raises(ValueError, match="'reranked': has no 'rerank' settings"):
        SamePersonCalibration.from_dict({**fit.to_dict(), "reranked": fit.to_dict()})


def test_gallery_pairs_score_re_ranked_with_their_own_fit():
    x, ids = _crops(seed=1)
    fit = fit_same_person_both(x, ids, split="val")
    pairs = GalleryPairs(x, fit)
    assert pairs.reranked and pairs.calibration is fit.reranked
    expected = 1.0 - k_reciprocal_distances(x, None, ReciprocalConfig())
    np.testing.assert_allclose(pairs.scores([3, 0]), expected[[3, 0]], atol=1e-6)
    np.testing.assert_allclose(pairs.probability([3]), fit.reranked.probability(expected[[3]]), atol=1e-6)
    # the re-ranked fit tells this gallery's people apart at least as well as the cosine
    assert fit.reranked.auc >= fit.auc - 0.5


def test_gallery_pairs_fall_back_to_cosine(monkeypatch):
    x, ids = _crops(seed=2)
    fit = fit_same_person_both(x, ids, split="val")
    monkeypatch.setattr(pair_scores, "RERANK_MAX", len(x) - 1)  # a gallery too large to re-rank
    big = GalleryPairs(x, fit)
    assert not big.reranked and big.calibration is fit
    np.testing.assert_allclose(big.scores([0]), x[[0]] @ x.T, atol=1e-6)
    monkeypatch.undo()
    assert not GalleryPairs(x, replace(fit, reranked=None)).reranked  # a model fitted before it


def test_one_gallery_pairs_per_index_until_its_vectors_change():
    from minterpr.index.gallery_index import GalleryIndex
    from minterpr.types import GalleryImage

    x, ids = _crops(seed=3)
    index = GalleryIndex([GalleryImage(f"{i}.jpg", p) for i, p in enumerate(ids)], x)
    assert gallery_pairs(index) is None  # no appearance vectors
    index.appearance, index.same_person = x, fit_same_person_both(x, ids, split="val")
    first = gallery_pairs(index)
    assert gallery_pairs(index) is first
    index.appearance = x.copy()
    assert gallery_pairs(index) is not first


def test_follow_offers_by_the_pairs_probability():
    x, ids = _crops(people=6, shots=4, seed=4)
    fit = fit_same_person_both(x, ids, split="val")
    pairs = GalleryPairs(x, fit)
    cameras, times = ["a", "b"] * (len(x) // 2), [float(t) for t in range(len(x))]
    lanes = follow(x, 0, fit, cameras=cameras, times=times, pairs=pairs)
    probs = pairs.probability([0])[0]
    offered = {c.row: c.probability for lane in lanes for c in lane.candidates}
    assert offered and all(abs(p - probs[row]) < 1e-9 for row, p in offered.items())
    assert {row for row, p in enumerate(probs) if p >= 0.2 and row != 0} == set(offered)


def test_tracks_seen_at_once_are_other_people_only_within_one_video():
    from minterpr.ingest.links import seen_at_once

    def crop(job, track, at, span=None):
        return {
            "job": job,
            "track": track,
            "offset_s": at,
            **({} if span is None else {"track_span": [*span, *[0] * 8]}),
        }

    rows = [
        crop("a", 0, 1.0, (0.0, 10.0)),  # the anchor's track, seen from 0 to 10 s
        crop("a", 1, 12.0, (9.5, 20.0)),  # overlaps its end: someone else
        crop("a", 2, 30.0, (25.0, 35.0)),  # later: may be the same person again
        crop("b", 3, 5.0, (0.0, 10.0)),  # another video (camera) at the same time: may be them
        {"path": "folder.jpg"},  # no track: a folder of crops
        crop("a", 4, 3.0),  # a job ingested before spans: its kept crops' times (3 s) bound it
        crop("a", 0, 8.0, (0.0, 10.0)),  # the anchor's track again
    ]
    assert seen_at_once(rows, 0) == [1, 5]
    assert seen_at_once(rows, 2) == [] and seen_at_once(rows, 4) == []


def test_no_re_ranked_fit_for_more_crops_than_re_ranking_compares(monkeypatch):
    from minterpr.index import reciprocal

    x, ids = _crops()
    monkeypatch.setattr(reciprocal, "MAX_ITEMS", len(x) - 1)
    fit = fit_same_person_both(x, ids, split="val")
    assert fit.reranked is None and fit == fit_same_person(x, ids, split="val")
