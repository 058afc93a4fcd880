"""The attribute ceiling benchmarks use: the gallery's reading replaced by its labels."""

from __future__ import annotations

import numpy as np
import pytest

from minterpr.errors import InputError
from minterpr.evaluation.label_reading import label_truth, misread, parse_label_reading, read_from_labels
from minterpr.index.gallery_index import GalleryIndex
from minterpr.language.ontology import ONTOLOGY
from minterpr.types import GalleryImage

OUTFIT = {"gender": ("female",), "upper_colour": ("red", "white")}


def _index(images):
    rng = np.random.default_rng(0)
    probs = rng.random((len(images), len(ONTOLOGY.flat_labels()))).astype(np.float32)  # the model's reading
    return GalleryIndex(images, np.eye(len(images), 4, dtype=np.float32), probs)


def _images():
    return [
        GalleryImage("a.jpg", "x:1", attributes=OUTFIT),
        GalleryImage("b.jpg", "x:1", attributes=OUTFIT),
        GalleryImage("c.jpg", "x:2", attributes={"gender": ("male",)}),
        GalleryImage("d.jpg", "x:3"),
    ]


def test_labels_replace_only_the_labelled_slots():
    index = _index(_images())
    read = read_from_labels(index, confidence=0.8)
    columns = ONTOLOGY.slot_columns()
    labels = ONTOLOGY.flat_labels()
    for row, image in enumerate(index.images):
        for column, (slot, value) in enumerate(labels):
            known = (image.attributes or {}).get(slot)
            expected = (0.8 if value in known else 0.2) if known else index.attribute_probs[row, column]
            assert read.attribute_probs[row, column] == pytest.approx(expected)
    assert read.attribute_probs[0, columns["upper_colour"]].max() == pytest.approx(0.8)
    assert (read.embeddings == index.embeddings).all() and index.attribute_probs is not read.attribute_probs


def test_labels_by_person_for_crops_that_carry_none():
    images = [GalleryImage("a.jpg", "street:p01"), GalleryImage("b.jpg", "street:p02")]
    truth = label_truth(_index(images), {"street:p01": {"gender": ("male",)}})
    gender = ONTOLOGY.slot_columns()["gender"]
    assert truth[0, gender].tolist() == [1.0, 0.0] and np.isnan(truth[1]).all()
    assert np.isnan(np.delete(truth[0], gender)).all()


def test_misreading_is_one_other_value_the_same_on_every_crop_of_a_person():
    index = _index(_images())
    truth = label_truth(index)
    assert np.array_equal(misread(truth, index.person_ids, 0.0), truth, equal_nan=True)
    wrong = misread(truth, index.person_ids, 1.0, seed=3)
    assert np.array_equal(wrong, misread(truth, index.person_ids, 1.0, seed=3), equal_nan=True)  # seeded
    for slot, columns in ONTOLOGY.slot_columns().items():
        for row in range(len(index.images)):
            if np.isnan(truth[row, columns[0]]):
                assert np.isnan(wrong[row, columns]).all()
                continue
            assert wrong[row, columns].sum() == 1.0  # one value read
            assert truth[row, columns][wrong[row, columns].argmax()] == 0.0  # and not a true one
        assert np.array_equal(wrong[0, columns], wrong[1, columns], equal_nan=True)  # x:1 misread alike


def test_bad_settings_are_one_line():
    index = _index(_images())
    with pytest.raises(InputError, match="confidence in"):
        read_from_labels(index, confidence=0.4)
    with pytest.raises(InputError, match="CONFIDENCE"):
        parse_label_reading("high")
    with pytest.raises(InputError, match="errors in"):
        parse_label_reading("0.9:2")
