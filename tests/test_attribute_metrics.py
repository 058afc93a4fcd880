"""PAR metrics (minterpr.evaluation.attribute_metrics) against plain per-label / per-image loops
written from Jia et al.'s definitions, hand-computed cases, and the per-label thresholds."""

from __future__ import annotations

import json
import math
import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from support.helpers import random_attributes
from minterpr.language.ontology import ONTOLOGY
from minterpr.evaluation.attribute_metrics import (
    LABELS,
    attribute_metrics,
    attribute_metrics_from_targets,
    attribute_targets,
    auc_scores,
    format_attribute_table,
)
from minterpr.evaluation.attribute_thresholds import balanced_thresholds
from minterpr.types import GalleryImage

L = len(LABELS)
COL = {label: j for j, label in enumerate(LABELS)}


def multi_attributes(rng: random.Random, unknown_rate: float) -> dict[str, tuple[str, ...]]:
    """Random valid attributes; multi-valued slots get one to three values."""
    attributes = dict(random_attributes(rng, unknown_rate))
    for slot in ONTOLOGY.slots:
        if slot.multi and slot.name in attributes and rng.random() < 0.5:
            plain = [v.name for v in slot.values if not v.excludes_others]
            attributes[slot.name] = tuple(rng.sample(plain, rng.randint(1, min(3, len(plain)))))
    return ONTOLOGY.validate(attributes)


def gallery(seed: int, n: int, unknown_rate: float = 0.3) -> list[GalleryImage]:
    rng = random.Random(seed)
    images = []
    for i in range(n):
        attributes = None if rng.random() < 0.1 else multi_attributes(rng, unknown_rate)
        images.append(GalleryImage(f"{i}.jpg", f"t:{i}", attributes=attributes))
    return images


def reference(probs, images, thresholds):
    """The definitions, one label and one image at a time, from the attribute dicts."""
    truth = [{s: set(v) for s, v in (im.attributes or {}).items()} for im in images]
    balanced = []
    for j, (slot, value) in enumerate(LABELS):
        pos = [i for i, t in enumerate(truth) if slot in t and value in t[slot]]
        neg = [i for i, t in enumerate(truth) if slot in t and value not in t[slot]]
        if pos and neg:
            tpr = sum(probs[i, j] > thresholds[j] for i in pos) / len(pos)
            tnr = sum(probs[i, j] <= thresholds[j] for i in neg) / len(neg)
            balanced.append((tpr + tnr) / 2)
    accs, precs, recs = [], [], []
    for i, t in enumerate(truth):
        labelled = [j for j, (slot, _) in enumerate(LABELS) if slot in t]
        if not labelled:
            continue
        true = {j for j in labelled if LABELS[j][1] in t[LABELS[j][0]]}
        pred = {j for j in labelled if probs[i, j] > thresholds[j]}
        accs.append(len(true & pred) / len(true | pred) if true | pred else 0.0)
        precs.append(len(true & pred) / len(pred) if pred else 0.0)
        recs.append(len(true & pred) / len(true) if true else 0.0)
    p, r = 100 * np.mean(precs), 100 * np.mean(recs)
    slots = {}
    for slot in ONTOLOGY.slots:
        rows = [(i, t[slot.name]) for i, t in enumerate(truth) if slot.name in t]
        if not rows:
            continue
        values = [v.name for v in slot.values]
        counts = Counter(v for _, held in rows for v in held)
        majority = max(values, key=lambda v: (counts[v], -values.index(v)))
        head = np.mean(
            [values[int(np.argmax([probs[i, COL[(slot.name, v)]] for v in values]))] in held for i, held in rows]
        )
        slots[slot.name] = (100 * head, 100 * np.mean([majority in held for _, held in rows]), majority)
    return (
        100 * np.mean(balanced) if balanced else None,
        len(balanced),
        100 * np.mean(accs),
        p,
        r,
        2 * p * r / (p + r),
        slots,
    )


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 40), per_label=st.booleans(), coarse=st.booleans())
def test_matches_the_loop_reference_on_random_data(seed, n, per_label, coarse):
    rng = np.random.default_rng(seed)
    images = gallery(seed, n)
    if not any(im.attributes for im in images):
        images[0] = GalleryImage("0.jpg", "t:0", attributes=random_attributes(random.Random(seed), 0.0))
    probs = rng.random((n, L))
    if coarse:  # many ties, probabilities exactly on the threshold
        probs = np.round(probs * 4) / 4
    thresholds = rng.random(L) if per_label else np.full(L, 0.5)
    result = attribute_metrics(probs, images, thresholds if per_label else 0.5)
    mA, counted, acc, prec, rec, f1, slots = reference(probs, images, thresholds)
    assert result.labels_counted == counted
    if counted:
        assert result.mA == pytest.approx(mA)
    assert (result.accuracy, result.precision, result.recall) == pytest.approx((acc, prec, rec))
    assert result.f1 == pytest.approx(f1 if prec + rec > 0 else 0.0)
    assert [s.slot for s in result.slots] == list(slots)
    assert [s.majority_value for s in result.slots] == [v[2] for v in slots.values()]
    assert [x for s in result.slots for x in (s.accuracy, s.majority_accuracy)] == pytest.approx(
        [x for v in slots.values() for x in v[:2]]
    )
    assert result.threshold == (None if per_label else 0.5)
    json.dumps(result.to_dict(), allow_nan=False)  # JSON-safe whatever the data


def test_hand_computed_case():
    male, female, red, white = (
        COL[("gender", "male")],
        COL[("gender", "female")],
        COL[("upper_colour", "red")],
        COL[("upper_colour", "white")],
    )
    images = [
        GalleryImage("a", "x:1", attributes={"gender": ("male",), "upper_colour": ("red", "white")}),
        GalleryImage("b", "x:2", attributes={"gender": ("female",)}),
        GalleryImage("c", "x:3", attributes={"gender": ("male",), "upper_colour": ("red",)}),
    ]
    probs = np.zeros((3, L))
    probs[0, [male, red]] = 0.9, 0.9  # white missed
    probs[1, [male, female, red]] = 0.2, 0.9, 0.9  # red is unlabelled for b: ignored
    probs[2, [female, white]] = 0.6, 0.7  # all wrong; red missed
    r = attribute_metrics(probs, images)
    # gender: male TPR 1/2, TNR 1/1; female TPR 1/1, TNR 1/2. upper_colour (a, c labelled): red is
    # positive on both (no negative: not counted), white TPR 0/1, TNR 0/1; the 9 other colours have no positive.
    assert r.labels_counted == 3
    assert r.mA == pytest.approx(100 * (0.75 + 0.75 + 0.0) / 3)
    # a: pred {male, red} true {male, red, white}; b: pred {female} true {female}; c: pred {female, white},
    # true {male, red}
    assert r.accuracy == pytest.approx(100 * (2 / 3 + 1 + 0) / 3)
    assert r.precision == pytest.approx(100 * (1 + 1 + 0) / 3)
    assert r.recall == pytest.approx(100 * (2 / 3 + 1 + 0) / 3)
    p, q = 2 / 3, (2 / 3 + 1) / 3
    assert r.f1 == pytest.approx(100 * 2 * p * q / (p + q))
    by_slot = {s.slot: s for s in r.slots}
    assert set(by_slot) == {"gender", "upper_colour"}
    assert (by_slot["gender"].accuracy, by_slot["gender"].majority_value) == (pytest.approx(200 / 3), "male")
    assert by_slot["gender"].majority_accuracy == pytest.approx(200 / 3)
    assert by_slot["upper_colour"].accuracy == 50.0 and by_slot["upper_colour"].majority_value == "red"
    rows = {(row.slot, row.value): row for row in r.labels}
    assert (rows[("upper_colour", "red")].positives, rows[("upper_colour", "red")].negatives) == (2, 0)
    assert rows[("upper_colour", "red")].balanced_accuracy is None and rows[("upper_colour", "red")].tnr is None
    assert rows[("gender", "male")].auc == 50.0 and rows[("upper_colour", "white")].auc == 0.0  # 0.9 > 0.2 > 0.0
    assert rows[("hair_length", "long")].positives == 0 and rows[("hair_length", "long")].negatives == 0
    text = format_attribute_table(r, "tiny")
    assert "mA 50.0 over 3 labels" in text and "upper_colour" in text


def test_threshold_is_strict_and_per_label_thresholds_apply():
    male = COL[("gender", "male")]
    images = [
        GalleryImage("a", "x:1", attributes={"gender": ("male",)}),
        GalleryImage("b", "x:2", attributes={"gender": ("female",)}),
    ]
    probs = np.zeros((2, L))
    probs[:, male] = 0.5, 0.3
    rows = {(x.slot, x.value): x for x in attribute_metrics(probs, images).labels}
    assert rows[("gender", "male")].tpr == 0.0  # 0.5 is not > 0.5
    thresholds = np.full(L, 0.5)
    thresholds[male] = 0.4
    rows = {(x.slot, x.value): x for x in attribute_metrics(probs, images, thresholds).labels}
    assert rows[("gender", "male")].tpr == 100.0 and rows[("gender", "male")].threshold == 0.4


def test_auc_matches_pairwise_counting():
    rng = np.random.default_rng(1)
    images = gallery(3, 60, unknown_rate=0.2)
    probs = np.round(rng.random((60, L)), 1)  # ties
    targets, mask = attribute_targets(images)
    for j, auc in enumerate(auc_scores(probs, targets, mask)):
        pos = probs[mask[:, j] & (targets[:, j] > 0), j]
        neg = probs[mask[:, j] & (targets[:, j] == 0), j]
        if not len(pos) or not len(neg):
            assert auc is None
            continue
        pairs = [(1.0 if p > q else 0.5 if p == q else 0.0) for p in pos for q in neg]
        assert auc == pytest.approx(100 * np.mean(pairs))


def test_balanced_thresholds_maximise_balanced_accuracy_on_the_split():
    rng = np.random.default_rng(2)
    images = [
        GalleryImage(im.path, im.person_id, attributes={**im.attributes, "gender": ("male",)})
        if im.attributes and "gender" in im.attributes
        else im
        for im in gallery(5, 80, unknown_rate=0.2)
    ]
    targets, mask = attribute_targets(images)
    probs = np.round(np.clip(0.3 * targets + 0.7 * rng.random((80, L)), 0, 1), 2)  # ties too
    thresholds = balanced_thresholds(probs, images)
    fitted = attribute_metrics(probs, images, thresholds)
    for j, row in enumerate(fitted.labels):
        if row.balanced_accuracy is None:
            continue
        y, p = targets[mask[:, j], j] > 0, probs[mask[:, j], j]
        # every partition p > t can make: t at each distinct score, or below them all
        best = max(50 * ((p[y] > t).mean() + (p[~y] <= t).mean()) for t in np.r_[np.unique(p), -1.0])
        assert row.balanced_accuracy == pytest.approx(best)
    assert fitted.mA >= attribute_metrics(probs, images).mA
    untouched = [j for j, row in enumerate(fitted.labels) if row.balanced_accuracy is None]
    assert COL[("gender", "female")] in untouched and (thresholds[untouched] == 0.5).all()


def test_training_uses_the_same_targets():
    from minterpr.training import data as training_data

    assert training_data.attribute_targets is attribute_targets


@pytest.mark.parametrize(
    "probs, message",
    [
        (np.zeros((2, 3)), "must be \\(N, 120\\)"),
        (np.full((2, L), np.nan), "NaN"),
        (np.zeros((3, L)), "3 probability rows for 2 images"),
    ],
)
def test_bad_input_is_a_clear_value_error(probs, message):
    images = [GalleryImage("a", "x:1", attributes={"gender": ("male",)}), GalleryImage("b", "x:2")]
    with pytest.raises(ValueError, match=message):
        attribute_metrics(probs, images)
    with pytest.raises(ValueError, match="per-label thresholds"):
        attribute_metrics(np.zeros((2, L)), images, [0.5, 0.5])


def test_nothing_labelled_gives_nulls_not_nan():
    r = attribute_metrics(np.zeros((1, L)), [GalleryImage("a", "x:1")])
    d = r.to_dict()
    assert math.isnan(r.mA) and d["label_based"]["mA"] is None and d["instance_based"]["f1"] is None
    assert d["slots"] == {} and d["instances"] == 0
    json.dumps(d, allow_nan=False)


def test_peta35_mA_averages_only_petas_standard_attributes():
    from minterpr.data.label_maps import PETA_35, peta35_labels
    from minterpr.language.ontology import ONTOLOGY

    labels = ONTOLOGY.flat_labels()
    rng = np.random.default_rng(0)
    targets = (rng.random((40, len(labels))) < 0.3).astype(np.float32)
    mask = np.ones_like(targets, dtype=bool)
    probs = rng.random(targets.shape)
    result = attribute_metrics_from_targets(probs, targets, mask)
    wanted = set(peta35_labels())
    expected = [r.balanced_accuracy for r in result.labels if (r.slot, r.value) in wanted]
    assert len(PETA_35) == len(wanted) == 35 and len(expected) == 35
    assert result.peta35 == pytest.approx((float(np.mean(expected)), 35))
    assert result.to_dict()["label_based"]["peta35_counted"] == 35
