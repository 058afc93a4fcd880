"""Appearance compared about the gallery's centre (opt-in, ``SamePersonCalibration.centred``): the
centre and the moved vectors against plain formulas, the calibration's record, a gallery's compared
vectors and their subsets, the session's similarities, and the fit on centred vectors."""

from __future__ import annotations

import numpy as np
import pytest

from minterpr.index.appearance_space import CENTRE_PRIOR, appearance_centre, centre_vectors
from minterpr.index.gallery_index import GalleryIndex
from minterpr.interaction.appearance import SamePersonCalibration, fit_same_person
from minterpr.interaction.similarities import Similarities
from minterpr.runtime.appearance import with_appearance
from minterpr.types import GalleryImage

PLAIN = SamePersonCalibration(20.0, -14.0, 0.01, 100, "val", 95.0)
CENTRED = SamePersonCalibration(20.0, -14.0, 0.01, 100, "val", 95.0, centred=True)


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _camera(n: int = 40, seed: int = 0) -> np.ndarray:
    """(n, 8) unit vectors with a large part common to all (as one camera's crops have)."""
    rng = np.random.default_rng(seed)
    return _unit(2.0 + rng.normal(size=(n, 8)))


def _index(looks: np.ndarray, calibration) -> GalleryIndex:
    images = [GalleryImage(f"{i}.jpg", f"p{i // 2}") for i in range(len(looks))]
    emb = _unit(np.random.default_rng(9).normal(size=(len(looks), 4)))
    return with_appearance(GalleryIndex(images, emb), looks, calibration)


def test_the_centre_is_the_mean_shrunk_by_the_prior_count():
    looks = _camera(10)
    expected = [sum(float(v[d]) for v in looks) / (10 + CENTRE_PRIOR) for d in range(8)]  # n/(n+k) * mean
    np.testing.assert_allclose(appearance_centre(looks), expected, rtol=1e-5)
    with pytest.raises(ValueError, match="N >= 1"):
        appearance_centre(np.zeros((0, 8)))


def test_centred_vectors_are_unit_rows_less_the_centre_and_the_centre_itself_stays_zero():
    looks, centre = _camera(5), appearance_centre(_camera(5))
    moved = centre_vectors(looks, centre)
    for row, original in zip(moved, looks):
        diff = [float(a) - float(c) for a, c in zip(original, centre)]
        norm = sum(d * d for d in diff) ** 0.5
        np.testing.assert_allclose(row, [d / norm for d in diff], rtol=1e-5, atol=1e-6)
    assert not centre_vectors(centre, centre).any()  # no direction: cosine 0 with everything


def test_the_record_keeps_centred_and_older_records_read_as_not_centred():
    assert SamePersonCalibration.from_dict(CENTRED.to_dict()) == CENTRED
    older = {k: v for k, v in PLAIN.to_dict().items() if k != "centred"}
    assert SamePersonCalibration.from_dict(older).centred is False
    with pytest.raises(ValueError, match="'centred': must be true or false"):
        SamePersonCalibration.from_dict({**CENTRED.to_dict(), "centred": "yes"})


def test_a_gallery_compares_about_its_centre_only_when_its_calibration_was_fitted_so():
    looks = _camera()
    plain = _index(looks, PLAIN)
    assert plain.appearance_centre() is None and plain.compared_appearance() is plain.appearance
    centred = _index(looks, CENTRED)
    np.testing.assert_allclose(centred.compared_appearance(), centre_vectors(looks, appearance_centre(looks)))
    outside = _unit(np.ones(8))
    np.testing.assert_allclose(centred.compared_vector(outside), centre_vectors(outside, appearance_centre(looks)))
    uncalibrated = _index(looks, None)
    assert uncalibrated.compared_appearance() is uncalibrated.appearance
    # a shortlist's subset keeps the whole gallery's centre, not its own rows' mean
    rows = np.array([3, 7, 30])
    sub = centred.subset(rows)
    np.testing.assert_allclose(sub.appearance_centre(), centred.appearance_centre())
    np.testing.assert_allclose(sub.compared_appearance(), centred.compared_appearance()[rows])


def test_session_similarities_take_the_cosine_of_the_centred_vectors():
    looks = _camera()
    index = _index(looks, CENTRED)
    moved = centre_vectors(looks, appearance_centre(looks))
    sims = Similarities(index)
    np.testing.assert_allclose(sims.rows([0, 5]), moved[[0, 5]] @ moved.T, rtol=1e-5, atol=1e-6)
    example = _camera(1, seed=4)[0]  # an outside image's vector, as the model gives it
    np.testing.assert_allclose(sims.to(example), moved @ centre_vectors(example, appearance_centre(looks)), atol=1e-6)
    # the common part no longer makes everyone a near-duplicate
    assert (Similarities(_index(looks, PLAIN)).rows([0])[0] > 0.7).mean() > 0.9
    assert (sims.rows([0])[0] > 0.7).mean() < 0.2


def test_a_centred_fit_is_the_plain_fit_of_the_centred_vectors():
    rng = np.random.default_rng(1)
    people = np.repeat(np.arange(30), 3).astype(str)
    looks = _unit(1.5 + rng.normal(size=(30, 8))[np.repeat(np.arange(30), 3)] + 0.4 * rng.normal(size=(90, 8)))
    centred = fit_same_person(looks, people, split="val", centred=True)
    reference = fit_same_person(centre_vectors(looks, appearance_centre(looks)), people, split="val")
    assert centred.centred and not reference.centred
    assert (centred.scale, centred.bias, centred.auc) == pytest.approx((reference.scale, reference.bias, reference.auc))
    assert not fit_same_person(looks, people, split="val").centred  # the default: as the vectors are
