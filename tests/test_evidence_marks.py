"""Evidence marks that do not lie: a ✓ / ✗ only where the model is confident and calibrated, "unsure"
otherwise, labels it cannot recognise never shown; match figures bounded; old runs' fallback."""

from __future__ import annotations

import numpy as np
import pytest

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.phrasing import Fact
from minterpr.errors import RunError
from minterpr.index.fused_vectors import fact_log_likelihood
from minterpr.index.gallery_index import GalleryIndex
from minterpr.interaction.explain import CONFIDENT, MIN_LABEL_AUC, EvidencePolicy, explain_image, fact_probability
from minterpr.interaction.match import match_probabilities
from minterpr.interaction.fitted import CalibrationRecord, RunExtras
from minterpr.training.post_training import label_aucs
from minterpr.types import GalleryImage

LABELS = ONTOLOGY.flat_labels()
COLUMN = {label: j for j, label in enumerate(LABELS)}
FACTS = [
    Fact("gender", ("male",)),
    Fact("carried", ("backpack",)),
    Fact("headwear", ("hat",)),
    Fact("upper_colour", ("red",), negated=True),
]


def _index(rows: list[dict[tuple[str, str], float]]) -> GalleryIndex:
    probs = np.full((len(rows), len(LABELS)), 0.5, np.float32)
    for i, row in enumerate(rows):
        for label, p in row.items():
            probs[i, COLUMN[label]] = p
    images = [GalleryImage(f"{i}.jpg", f"x:{i}") for i in range(len(rows))]
    return GalleryIndex(images, np.eye(len(rows), 4, dtype=np.float32), attribute_probs=probs)


def test_only_confident_calibrated_recognisable_facts_are_marked() -> None:
    index = _index(
        [
            {
                ("gender", "male"): 0.95,
                ("gender", "female"): 0.05,
                ("carried", "backpack"): 0.6,
                ("headwear", "hat"): 0.99,
                ("upper_colour", "red"): 0.97,
            }
        ]
    )
    auc = {f"{s}:{v}": 90.0 for s, v in LABELS} | {"headwear:hat": MIN_LABEL_AUC - 1}
    e = explain_image(index, 0, FACTS, evidence=EvidencePolicy(calibrated=True, label_auc=auc))
    assert e.matched == (FACTS[0],)  # P(male) = 0.95 >= 0.8
    assert e.unsure == (FACTS[1],)  # P(backpack) = 0.6: neither
    assert e.unrecognised == (FACTS[2],)  # AUC under the threshold: no evidence, whatever P says
    assert e.contradicted == (FACTS[3],)  # P(not red) = 0.03 <= 0.2
    # the probability judged is the one retrieval scores with
    for fact, p in e.probabilities.items():
        assert np.log(np.clip(p, 0.02, 0.98)) == pytest.approx(
            float(fact_log_likelihood(fact, index.attribute_probs)[0]), abs=1e-6
        )
    # uncalibrated: nothing is confident enough to mark
    plain = explain_image(index, 0, FACTS, evidence=EvidencePolicy(calibrated=False))
    assert plain.matched == plain.contradicted == () and set(plain.unsure) == set(FACTS)
    # no policy: the library's old 0.5 threshold marks everything
    old = explain_image(index, 0, FACTS)
    assert len(old.matched) + len(old.contradicted) == len(FACTS)


def test_the_confidence_bounds_are_inclusive_and_symmetric() -> None:
    policy, fact = EvidencePolicy(calibrated=True), Fact("gender", ("male",))
    assert policy.verdict(fact, CONFIDENT) == "yes" and policy.verdict(fact, 1 - CONFIDENT) == "no"
    assert policy.verdict(fact, CONFIDENT - 1e-3) == policy.verdict(fact, 1 - CONFIDENT + 1e-3) == "unsure"
    # a label without a measured AUC (no positives or no negatives on val) is not recognised
    assert EvidencePolicy(calibrated=True, label_auc={"gender:female": 99.0}).verdict(fact, 0.99) == "unrecognised"


def test_single_valued_probabilities_are_normalised_over_the_slot() -> None:
    row = np.zeros(len(LABELS))
    row[COLUMN[("gender", "male")]], row[COLUMN[("gender", "female")]] = 0.6, 0.2
    assert fact_probability(Fact("gender", ("male",)), row) == pytest.approx(0.75)
    assert fact_probability(Fact("gender", ("male",), negated=True), row) == pytest.approx(0.25)


def test_policies_of_runs_old_and_new() -> None:
    assert EvidencePolicy.from_calibration(None) == EvidencePolicy(calibrated=False)
    old = CalibrationRecord("val", {"gender": 1.5}, 2.0, 1.5)  # written before label AUCs were stored
    assert EvidencePolicy.from_calibration(old).label_auc is None  # fallback: confidence alone decides
    assert EvidencePolicy.from_calibration(old).verdict(Fact("headwear", ("hat",)), 0.9) == "yes"
    new = CalibrationRecord("val", {"gender": 1.5}, 2.0, 1.5, {"gender:male": 88.5})
    assert EvidencePolicy.from_calibration(new).label_auc == {"gender:male": 88.5}


def test_label_aucs_round_trip_in_the_run_extras_and_old_records_still_load() -> None:
    extras = RunExtras(calibration=CalibrationRecord("val", {"gender": 1.5}, 2.0, 1.5, {"gender:male": 88.5}))
    assert RunExtras.from_dict(extras.to_dict()) == extras
    old = {"calibration": {"split": "val", "temperatures": {"gender": 1.5}, "nll_before": 2.0, "nll_after": 1.5}}
    assert RunExtras.from_dict(old).calibration.label_auc == {}
    with pytest.raises(RunError, match="label_auc"):
        RunExtras.from_dict({"calibration": {**old["calibration"], "label_auc": {"gender:male": "high"}}})


def test_label_aucs_skip_labels_without_both_classes() -> None:
    rng = np.random.default_rng(0)
    targets = (rng.random((200, len(LABELS))) < 0.5).astype(np.float32)
    probs = np.clip(targets * 0.6 + rng.random(targets.shape) * 0.4, 0, 1)
    mask = np.zeros(targets.shape, bool)
    mask[:, COLUMN[("gender", "male")]] = mask[:, COLUMN[("carried", "backpack")]] = True
    targets[:, COLUMN[("carried", "backpack")]] = 1.0  # positives only: no AUC
    assert list(label_aucs(probs, targets, mask)) == ["gender:male"]
    assert label_aucs(probs, targets, mask)["gender:male"] > 90


def test_match_probabilities_are_bounded_and_sum_to_one() -> None:
    scores = np.array([3.0, 1.0, -2.0, -np.inf])
    p = match_probabilities(scores)
    assert np.all((p >= 0) & (p <= 1)) and p.sum() == pytest.approx(1.0) and p[-1] == 0.0
    assert list(np.argsort(-p[:3])) == [0, 1, 2]  # the same order as the scores
    assert match_probabilities(scores + 100).tolist() == pytest.approx(p.tolist())  # a shift changes nothing
