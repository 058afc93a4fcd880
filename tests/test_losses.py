"""Each loss against a plain loop implementation, plus compute_losses' bookkeeping."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

from minterpr.models.losses import (  # noqa: E402
    SDM_EPSILON,
    LossWeights,
    attribute_loss,
    compute_losses,
    id_loss,
    itc_loss,
    reference_loss,
    round_weights,
    sdm_loss,
)


# One intra-op thread (see conftest.one_torch_thread).
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def unit(*shape: int, seed: int = 0) -> torch.Tensor:
    return F.normalize(torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64), dim=-1)


def log_softmax_list(values: list[float]) -> list[float]:
    top = max(values)
    lse = top + math.log(sum(math.exp(v - top) for v in values))
    return [v - lse for v in values]


def itc_reference_terms(q, v, pid, scale) -> list[float]:
    """Loop version, per sample: for query i, uniform target over the images of its person; and the reverse."""
    b = len(q)
    terms = []
    for i in range(b):
        same = [j for j in range(b) if pid[j] == pid[i]]
        q2i = log_softmax_list([scale * float(q[i] @ v[j]) for j in range(b)])
        i2q = log_softmax_list([scale * float(q[j] @ v[i]) for j in range(b)])
        terms.append((-sum(q2i[j] for j in same) / len(same) - sum(i2q[j] for j in same) / len(same)) / 2)
    return terms


def itc_reference(q, v, pid, scale) -> float:
    return sum(itc_reference_terms(q, v, pid, scale)) / len(q)


def sdm_reference(q, v, pid, scale) -> float:
    """Loop version of IRRA's SDM: KL(p || label distribution + eps), both directions summed."""
    b = len(q)
    total = 0.0
    for i in range(b):
        same = [j for j in range(b) if pid[j] == pid[i]]
        label = [(1.0 / len(same) if j in same else 0.0) for j in range(b)]
        for scores in ([scale * float(q[i] @ v[j]) for j in range(b)], [scale * float(q[j] @ v[i]) for j in range(b)]):
            log_p = log_softmax_list(scores)
            total += sum(math.exp(lp) * (lp - math.log(lb + SDM_EPSILON)) for lp, lb in zip(log_p, label))
    return total / b


@pytest.mark.parametrize("pid", [[0, 1, 2, 3, 4], [0, 0, 1, 2, 2]])
def test_itc_and_sdm_match_loop_references(pid):
    q, v, person = unit(5, 8, seed=1), unit(5, 8, seed=2), torch.tensor(pid)
    scale = torch.tensor(7.0, dtype=torch.float64)
    assert itc_loss(q, v, person, scale).item() == pytest.approx(itc_reference(q, v, pid, 7.0), rel=1e-9)
    assert sdm_loss(q, v, person, scale).item() == pytest.approx(sdm_reference(q, v, pid, 7.0), rel=1e-9)


def test_sdm_hand_calculation():
    # two people, query i == image i, scale 1: similarities [[1, 0], [0, 1]]
    eye = torch.eye(2, dtype=torch.float64)
    p_same, p_other = math.e / (math.e + 1), 1 / (math.e + 1)
    kl = p_same * (math.log(p_same) - math.log(1 + SDM_EPSILON)) + p_other * (math.log(p_other) - math.log(SDM_EPSILON))
    # each sample: the same KL in both directions; mean over the 2 samples
    assert sdm_loss(eye, eye, torch.tensor([0, 1]), torch.tensor(1.0)).item() == pytest.approx(2 * kl, rel=1e-9)
    # one person: label = [1/2, 1/2] = p, so the divergence is ~0
    assert sdm_loss(eye, eye, torch.tensor([5, 5]), torch.tensor(0.0)).item() == pytest.approx(0.0, abs=1e-6)


def test_soft_targets_do_not_separate_images_of_one_person():
    q, v = unit(4, 6, seed=3), unit(4, 6, seed=4)
    person, scale = torch.tensor([0, 0, 1, 2]), torch.tensor(10.0)
    swapped = v[[1, 0, 2, 3]]  # exchange the two images of person 0
    assert itc_loss(q, swapped, person, scale).item() == pytest.approx(itc_loss(q, v, person, scale).item())
    # with all-distinct ids (hard targets) the same swap matters
    distinct = torch.arange(4)
    assert itc_loss(q, swapped, distinct, scale).item() != pytest.approx(itc_loss(q, v, distinct, scale).item())


def test_unknown_identities_only_match_themselves():
    q, v, scale = unit(4, 6, seed=8), unit(4, 6, seed=9), torch.tensor(5.0)
    unknown, distinct = torch.tensor([-1, -1, 2, 2]), torch.tensor([7, 8, 2, 2])
    assert itc_loss(q, v, unknown, scale).item() == pytest.approx(itc_loss(q, v, distinct, scale).item())
    assert sdm_loss(q, v, unknown, scale).item() == pytest.approx(sdm_loss(q, v, distinct, scale).item())


def test_id_loss_ignores_unknown_identities():
    logits, person = torch.randn(4, 3, dtype=torch.float64), torch.tensor([2, -1, 0, 2])
    expected = sum(-torch.log_softmax(logits[i], 0)[person[i]].item() for i in (0, 2, 3)) / 3
    assert id_loss(logits, person).item() == pytest.approx(expected)
    none_known = id_loss(logits.requires_grad_(), torch.tensor([-1, -1, -1, -1]))
    assert none_known.item() == 0.0 and none_known.requires_grad


def test_attribute_bce_ignores_unknown_slots():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    targets = (torch.rand(3, 5, generator=gen) < 0.5).double()
    mask = torch.tensor([[1, 0, 1, 1, 0], [0, 0, 0, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.bool)
    terms = []
    for i in range(3):
        for j in range(5):
            if mask[i, j]:
                p = 1 / (1 + math.exp(-logits[i, j].item()))
                terms.append(-(targets[i, j].item() * math.log(p) + (1 - targets[i, j].item()) * math.log(1 - p)))
    assert attribute_loss(logits, targets, mask).item() == pytest.approx(sum(terms) / len(terms))
    changed = logits.clone()
    changed[~mask] = 50.0  # unknown slots may say anything
    assert attribute_loss(changed, targets, mask).item() == pytest.approx(sum(terms) / len(terms))
    assert attribute_loss(logits, targets, torch.zeros_like(mask)).item() == 0.0


def test_weighted_attribute_bce_of_soft_targets_interpolates_the_weights():
    """A mixup's soft target y weighs y exp(1 - r) + (1 - y) exp(r); 0/1 targets keep Jia's weights."""
    from minterpr.models.losses import positive_ratio

    logits = torch.tensor([[1.5, -0.5, 0.2]])
    ratio = torch.tensor([0.1, 0.7, 0.4])
    mask = torch.ones(1, 3, dtype=torch.bool)
    soft = torch.tensor([[0.3, 1.0, 0.0]])
    expected = []
    for j in range(3):
        p, y, r = torch.sigmoid(logits[0, j]).item(), soft[0, j].item(), ratio[j].item()
        bce = -(y * math.log(p) + (1 - y) * math.log(1 - p))
        expected.append(bce * (y * math.exp(1 - r) + (1 - y) * math.exp(r)))
    assert attribute_loss(logits, soft, mask, ratio).item() == pytest.approx(sum(expected) / 3, rel=1e-6)
    hard = torch.tensor([[1.0, 0.0, 1.0]])
    plain = F.binary_cross_entropy_with_logits(logits, hard, reduction="none")
    jia = plain * torch.where(hard > 0.5, torch.exp(1 - ratio), torch.exp(ratio))
    assert torch.equal(attribute_loss(logits, hard, mask, ratio), jia.sum() / 3)  # bitwise as before
    assert positive_ratio(soft, mask).tolist() == pytest.approx([0.3, 1.0, 0.0])


def reference_reference(q, v, ref, ref_mask, turn_mask, margin) -> float:
    terms = []
    b, r, _ = q.shape
    for i in range(b):
        for k in range(r):  # reference shown at round k
            if not ref_mask[i, k]:
                continue
            for t in range(k, r):  # every real round from k on
                if turn_mask[i, t]:
                    terms.append(max(0.0, margin - float(q[i, t] @ v[i]) + float(q[i, t] @ ref[i, k])))
    return sum(terms) / max(len(terms), 1)


def test_reference_loss_matches_loop_and_is_zero_when_margin_holds():
    q, v, ref = unit(3, 4, 6, seed=5), unit(3, 6, seed=6), unit(3, 4, 6, seed=7)
    ref_mask = torch.tensor([[False, True, False, True], [False, False, False, False], [False, False, True, False]])
    turn_mask = torch.tensor([[True] * 4, [True, True, False, False], [True, True, True, False]])
    got = reference_loss(q, v, ref, ref_mask, turn_mask, margin=0.3).item()
    assert got == pytest.approx(reference_reference(q, v, ref, ref_mask, turn_mask, 0.3))
    assert got > 0
    # every query equals its target and the references point elsewhere: margin satisfied
    target = torch.eye(6, dtype=torch.float64)[:3]
    queries = target.unsqueeze(1).expand(3, 4, 6)
    away = torch.eye(6, dtype=torch.float64)[3:].unsqueeze(1).expand(3, 4, 6)
    assert reference_loss(queries, target, away, ref_mask, turn_mask, margin=0.5).item() == 0.0
    # the same reference as the target violates any positive margin by exactly the margin
    assert reference_loss(queries, target, queries, ref_mask, turn_mask, margin=0.5).item() == pytest.approx(0.5)


def test_round_weights_decay():
    mask = torch.tensor([[True, True, True], [True, True, False]])
    weights = round_weights(mask, 0.5)
    torch.testing.assert_close(weights[0], torch.tensor([1.0, 2.0, 4.0]) / 7)
    torch.testing.assert_close(weights[1], torch.tensor([1.0, 2.0, 0.0]) / 3)
    torch.testing.assert_close(round_weights(mask, 1.0)[0], torch.full((3,), 1 / 3))


def loss_inputs(seed: int = 0) -> tuple[dict, dict]:
    gen = torch.Generator().manual_seed(seed)
    b, r, d, labels = 4, 3, 8, 6
    turn_mask = torch.tensor([[True, True, True], [True, True, False], [True, False, False], [True, True, True]])
    outputs = {
        "queries": unit(b, r, d, seed=seed + 1),
        "image_embedding": unit(b, d, seed=seed + 2),
        "logit_scale": torch.tensor(10.0, dtype=torch.float64),
        "id_logits": torch.randn(b, 5, generator=gen, dtype=torch.float64),
        "attribute_logits": torch.randn(b, labels, generator=gen, dtype=torch.float64),
    }
    batch = {
        "person_index": torch.tensor([0, 1, 1, 3]),
        "turn_mask": turn_mask,
        "attribute_targets": (torch.rand(b, labels, generator=gen) < 0.3).double(),
        "attribute_mask": torch.rand(b, labels, generator=gen) < 0.7,
        "reference_embedding": unit(b, r, d, seed=seed + 3),
        "reference_round_mask": torch.tensor([[False, False, True], [False, True, False], [False] * 3, [False] * 3]),
    }
    return outputs, batch


def test_compute_losses_keys_and_weighted_total():
    outputs, batch = loss_inputs()
    weights = LossWeights(itc=1.0, sdm=0.5, id=0.25, attribute=2.0, reference=0.75)
    terms = compute_losses(outputs, batch, weights)
    assert set(terms) == {"itc_loss", "sdm_loss", "id_loss", "attribute_loss", "reference_loss", "total_loss"}
    expected = sum(getattr(weights, k.removesuffix("_loss")) * v for k, v in terms.items() if k != "total_loss")
    assert terms["total_loss"].item() == pytest.approx(expected.item())
    # a zero weight or a missing input drops the term
    partial = compute_losses({**outputs, "id_logits": None}, batch, LossWeights(sdm=0.0))
    assert set(partial) == {"itc_loss", "attribute_loss", "reference_loss", "total_loss"}
    with pytest.raises(ValueError, match="no loss term"):
        compute_losses(outputs, {}, LossWeights())
    with pytest.raises(KeyError, match="logit_scale"):
        compute_losses({**outputs, "logit_scale": None}, batch, LossWeights())


def test_deep_supervision_last_round_only():
    outputs, batch = loss_inputs()
    full = {**batch, "turn_mask": torch.ones(4, 3, dtype=torch.bool)}
    q, v, person, scale = outputs["queries"], outputs["image_embedding"], batch["person_index"], outputs["logit_scale"]
    only_last = compute_losses(outputs, full, LossWeights(deep_supervision=0.0))
    assert only_last["itc_loss"].item() == pytest.approx(itc_loss(q[:, -1], v, person, scale).item())
    assert only_last["sdm_loss"].item() == pytest.approx(sdm_loss(q[:, -1], v, person, scale).item())


@pytest.mark.parametrize("decay", [0.0, 0.5, 1.0])
def test_deep_supervision_weights_every_round(decay):
    outputs, batch = loss_inputs()
    q, v, person, mask = outputs["queries"], outputs["image_embedding"], batch["person_index"], batch["turn_mask"]
    last = [2, 1, 0, 2]  # last real round of each dialogue
    got = compute_losses(outputs, batch, LossWeights(deep_supervision=decay))["itc_loss"].item()
    expected = 0.0
    for i in range(4):
        weights = [decay ** (last[i] - r) if mask[i, r] else 0.0 for r in range(3)]
        for r in range(3):
            if weights[r]:
                # round r's batch: a finished dialogue contributes its last query as a negative
                filled = torch.stack([q[j, min(r, last[j])] for j in range(4)])
                expected += weights[r] / sum(weights) * itc_reference_terms(filled, v, person.tolist(), 10.0)[i]
    assert got == pytest.approx(expected / 4)
