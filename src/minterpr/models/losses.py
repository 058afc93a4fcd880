"""Training losses of the retrieval model, and :func:`compute_losses` that weighs them.

* ``itc``: identity-aware image-text contrastive loss. Similarities ``s * q . v`` (s = the
  model's ``logit_scale``); the target of a query is uniform over the batch images of the
  same person (soft targets, so two dialogues about one person are not pushed apart), and
  the same for images over queries; the two cross-entropies are averaged (CLIP).
* ``sdm``: similarity distribution matching (IRRA, Jiang & Ye, CVPR 2023): KL(softmax(s q.v)
  || row-normalised same-identity matrix), query->image plus image->query.
* ``id``: cross-entropy of the image identity logits.

``person_index`` -1 marks a sample whose identity is unknown: the id loss skips it and the
contrastive losses treat it as a person of its own.
* ``attribute``: binary cross-entropy of the attribute logits on known slots only.
* ``reference``: reference-as-negative margin ranking: once the user has seen a reference
  image and said how it differs, the query of that round and of every later round must
  score the target above that reference by ``margin``.

Deep supervision: ``itc`` and ``sdm`` apply to the query of *every* round, round r of a
dialogue weighing ``decay ** (last - r)`` (normalised per dialogue): 0 = last round only,
1 = all rounds alike. The first rounds must already retrieve well, so they are trained too.

Example:
    >>> import torch, torch.nn.functional as F
    >>> q = F.normalize(torch.randn(4, 3, 8), dim=-1)  # (B, R, D)
    >>> v = F.normalize(torch.randn(4, 8), dim=-1)  # (B, D)
    >>> terms = compute_losses({"queries": q, "image_embedding": v, "logit_scale": torch.tensor(20.0)},
    ...                        {"person_index": torch.tensor([0, 1, 1, 2])}, LossWeights())
    >>> sorted(terms)
    ['itc_loss', 'sdm_loss', 'total_loss']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch
import torch.nn.functional as F

from .memory import carry_forward

SDM_EPSILON = 1e-8  # keeps log(label) finite for other identities, as IRRA


@dataclass
class LossWeights:
    """Weights of the loss terms (0 switches a term off) and their settings."""

    itc: float = 1.0  # identity-aware image-text contrastive loss
    sdm: float = 1.0  # similarity distribution matching
    id: float = 0.5  # identity cross-entropy on the image id logits (needs num_identities > 0)
    attribute: float = 0.5  # masked attribute BCE on the image attribute logits
    reference: float = 0.5  # reference-as-negative margin ranking
    reference_margin: float = 0.1  # cosine margin of the reference loss
    deep_supervision: float = 0.5  # round weight decay: decay ** (last - r); 0 = last round only, 1 = uniform
    # weigh the attribute BCE by each label's positive share in the training gallery (Jia et al. 2021;
    # see attribute_loss): rare labels (a green jacket) are not drowned by their negatives
    balanced_attributes: bool = False


def same_identity(person_index: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(B,) identity indices -> (B, B), 1 where two samples show the same person, else 0.

    A negative index (identity unknown) matches only its own sample.

    Example:
        >>> same_identity(torch.tensor([3, 3, -1, -1])).tolist()
        [[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
    """
    same = (person_index.unsqueeze(0) == person_index.unsqueeze(1)) & (person_index >= 0).unsqueeze(1)
    return (same | torch.eye(len(person_index), dtype=torch.bool, device=person_index.device)).to(dtype)


def _itc_terms(
    queries: torch.Tensor, images: torch.Tensor, person_index: torch.Tensor, logit_scale: torch.Tensor
) -> torch.Tensor:
    """Per-sample ITC (B,): mean of query->image and image->query soft-target cross-entropies."""
    logits = logit_scale * queries @ images.t()  # (B, B): query i vs image j
    labels = same_identity(person_index, logits.dtype)
    targets = labels / labels.sum(dim=1, keepdim=True)  # uniform over same-person images
    q2i = -(targets * logits.log_softmax(dim=1)).sum(dim=1)
    i2q = -(targets * logits.t().log_softmax(dim=1)).sum(dim=1)  # the label matrix is symmetric
    return (q2i + i2q) / 2


def _sdm_terms(
    queries: torch.Tensor, images: torch.Tensor, person_index: torch.Tensor, logit_scale: torch.Tensor
) -> torch.Tensor:
    """Per-sample SDM (B,): KL(p || label distribution), query->image + image->query."""
    logits = logit_scale * queries @ images.t()  # (B, B)
    labels = same_identity(person_index, logits.dtype)
    log_target = torch.log(labels / labels.sum(dim=1, keepdim=True) + SDM_EPSILON)
    terms = []
    for scores in (logits, logits.t()):
        log_p = scores.log_softmax(dim=1)
        terms.append((log_p.exp() * (log_p - log_target)).sum(dim=1))
    return terms[0] + terms[1]


def itc_loss(
    queries: torch.Tensor, images: torch.Tensor, person_index: torch.Tensor, logit_scale: torch.Tensor
) -> torch.Tensor:
    """Identity-aware contrastive loss of (B, D) queries vs (B, D) images, a scalar."""
    return _itc_terms(queries, images, person_index, logit_scale).mean()


def sdm_loss(
    queries: torch.Tensor, images: torch.Tensor, person_index: torch.Tensor, logit_scale: torch.Tensor
) -> torch.Tensor:
    """IRRA's similarity distribution matching of (B, D) queries vs (B, D) images, a scalar."""
    return _sdm_terms(queries, images, person_index, logit_scale).mean()


def id_loss(id_logits: torch.Tensor, person_index: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of (B, K) identity logits; samples with ``person_index`` -1 are ignored."""
    known = person_index >= 0
    if not known.any():
        return id_logits.sum() * 0.0  # nothing to learn, but keep the graph connected
    return F.cross_entropy(id_logits[known], person_index[known])


def smoothed_id_loss(id_logits: torch.Tensor, person_index: torch.Tensor, smoothing: float = 0.1) -> torch.Tensor:
    """Cross-entropy of (B, K) identity logits with label smoothing (re-id: thousands of classes
    seen a few times each, where hard targets over-fit), a scalar."""
    return F.cross_entropy(id_logits, person_index, label_smoothing=smoothing)


def triplet_loss(features: torch.Tensor, person_index: torch.Tensor, margin: float = 0.3) -> torch.Tensor:
    """Batch-hard triplet loss (Hermans et al., 2017) on (B, D) features, a scalar.

    For each anchor, its farthest same-identity crop must be closer than its nearest other
    identity's by ``margin`` (Euclidean distances); a PK batch guarantees both exist.

    Example:
        >>> f = torch.tensor([[0.0, 0.0], [0.0, 1.0], [5.0, 0.0], [5.0, 1.0]])
        >>> float(triplet_loss(f, torch.tensor([0, 0, 1, 1])))
        0.0
    """
    distance = torch.cdist(features, features).clamp(min=1e-12)  # (B, B)
    same = person_index[:, None] == person_index[None, :]  # (B, B)
    hardest_positive = (distance * same).max(dim=1).values  # (B,)
    hardest_negative = distance.masked_fill(same, float("inf")).min(dim=1).values  # (B,)
    return F.relu(hardest_positive - hardest_negative + margin).mean()


def attribute_loss(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, positive_ratio: torch.Tensor | None = None
) -> torch.Tensor:
    """BCE-with-logits of (B, L) attribute logits against (B, L) targets, averaged over known labels.

    With ``positive_ratio`` (L,) (each label's share of positives among the training images where
    it is known), the imbalance-aware weighting of Jia et al. 2021 ("Rethinking of pedestrian
    attribute recognition"): a positive weighs exp(1 - r), a negative exp(r), so a rare label's
    few positives are not drowned by its negatives (a green jacket among thousands of others).
    Soft targets y in [0, 1] weigh ``y exp(1 - r) + (1 - y) exp(r)``.
    """
    targets = targets.to(logits.dtype)
    per_label = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    if positive_ratio is not None:
        ratio = positive_ratio.to(logits.dtype).view(1, -1)  # (1, L)
        # y exp(1 - r) + (1 - y) exp(r): the two weights for 0/1 targets, interpolated for the
        # soft targets of a mixup (minterpr.training.feature_mixup)
        per_label = per_label * (targets * torch.exp(1.0 - ratio) + (1.0 - targets) * torch.exp(ratio))
    mask = mask.to(logits.dtype)
    return (per_label * mask).sum() / mask.sum().clamp(min=1.0)


def positive_ratio(targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(N, L) targets and known-masks -> (L,) share of positives among known entries (0 where unknown)."""
    known = mask.to(torch.float32).sum(0)
    return (targets.to(torch.float32) * mask.to(torch.float32)).sum(0) / known.clamp(min=1.0)


def reference_loss(
    queries: torch.Tensor,
    images: torch.Tensor,
    reference_embedding: torch.Tensor,
    reference_round_mask: torch.Tensor,
    turn_mask: torch.Tensor | None = None,
    margin: float = 0.1,
) -> torch.Tensor:
    """Hinge ``max(0, margin - q_r.v + q_r.ref_k)`` over every reference round k and real round r >= k.

    queries (B, R, D), images (B, D) targets, reference_embedding (B, R, D) (row k = the
    reference shown at round k), reference_round_mask (B, R) bool; mean over the pairs.
    """
    b, r, _ = queries.shape
    if turn_mask is None:
        turn_mask = torch.ones(b, r, dtype=torch.bool, device=queries.device)
    target_score = (queries * images.unsqueeze(1)).sum(-1)  # (B, R)
    reference_score = queries @ reference_embedding.transpose(1, 2)  # (B, R_query, R_ref)
    later = torch.ones(r, r, dtype=torch.bool, device=queries.device).tril()  # query round >= reference round
    pairs = later & turn_mask.bool().unsqueeze(2) & reference_round_mask.bool().unsqueeze(1)  # (B, R, R)
    hinge = (margin - target_score.unsqueeze(2) + reference_score).clamp(min=0)
    return (hinge * pairs).sum() / pairs.sum().clamp(min=1)


def round_weights(turn_mask: torch.Tensor, decay: float) -> torch.Tensor:
    """(B, R) real rounds -> (B, R) weights ``decay ** (last - r)`` on real rounds, rows summing to 1.

    Example:
        >>> mask = torch.tensor([[True, True], [True, False]])
        >>> round_weights(mask, 1.0).tolist(), round_weights(mask, 0.0).tolist()
        ([[0.5, 0.5], [1.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]])
    """
    r = turn_mask.shape[1]
    positions = torch.arange(r, device=turn_mask.device, dtype=torch.float32)
    last = torch.where(turn_mask, positions, torch.full_like(positions, -1.0)).max(dim=1, keepdim=True).values
    # padded rounds past the last real one would raise decay to a negative power (inf for 0)
    exponent = (last - positions).clamp(min=0)
    weights = torch.tensor(float(decay), device=turn_mask.device).pow(exponent) * turn_mask
    return weights / weights.sum(dim=1, keepdim=True).clamp(min=1e-12)


def deep_supervised(
    terms: Callable[..., torch.Tensor],
    queries: torch.Tensor,
    images: torch.Tensor,
    person_index: torch.Tensor,
    logit_scale: torch.Tensor,
    turn_mask: torch.Tensor,
    decay: float,
) -> torch.Tensor:
    """A per-sample batch loss applied to every round's (B, D) queries, rounds weighted by :func:`round_weights`.

    Padded rounds repeat the dialogue's last real query (still a valid negative for the
    other images) and weigh 0.
    """
    weights = round_weights(turn_mask, decay)  # (B, R)
    queries = carry_forward(queries, turn_mask.bool())
    total = queries.new_zeros(())
    for r in range(queries.shape[1]):
        if weights[:, r].any():
            total = total + (weights[:, r] * terms(queries[:, r], images, person_index, logit_scale)).sum()
    return total / queries.shape[0]


def compute_losses(
    outputs: Mapping[str, Any], batch: Mapping[str, Any], weights: LossWeights
) -> dict[str, torch.Tensor]:
    """The weighted loss terms and their sum.

    Tensors are looked up in ``outputs`` first, then in ``batch``:
    ``queries`` (B, R, D) or (B, D), ``image_embedding`` (B, D), ``logit_scale`` (scalar),
    ``person_index`` (B,) long, ``turn_mask`` (B, R) (all real when absent), ``id_logits``
    (B, K), ``attribute_logits`` / ``attribute_targets`` / ``attribute_mask`` (B, L), ``attribute_positive_ratio``
    (L,) (optional: imbalance-aware weighting, see :func:`attribute_loss`),
    ``reference_embedding`` (B, R, D) and ``reference_round_mask`` (B, R).
    A term is computed when its weight is > 0 and its inputs are present (not None).

    Returns ``{"<term>_loss": value, ..., "total_loss": sum of weight * value}``.
    """
    source = {**batch, **outputs}

    def present(*keys: str) -> bool:
        return all(source.get(key) is not None for key in keys)

    terms: dict[str, torch.Tensor] = {}
    queries = source.get("queries")
    if queries is not None and queries.dim() == 2:
        queries = queries.unsqueeze(1)  # one round
    turn_mask = source.get("turn_mask")
    if queries is not None and turn_mask is None:
        turn_mask = torch.ones(queries.shape[:2], dtype=torch.bool, device=queries.device)
    contrastive = {"itc": _itc_terms, "sdm": _sdm_terms}
    for name, per_sample in contrastive.items():
        if getattr(weights, name) > 0 and queries is not None and present("image_embedding", "person_index"):
            if source.get("logit_scale") is None:
                raise KeyError(f"the {name} loss needs 'logit_scale' (model.logit_scale) in outputs or batch")
            terms[name] = deep_supervised(
                per_sample,
                queries,
                source["image_embedding"],
                source["person_index"],
                source["logit_scale"],
                turn_mask,
                weights.deep_supervision,
            )
    if weights.id > 0 and present("id_logits", "person_index"):
        terms["id"] = id_loss(source["id_logits"], source["person_index"])
    if weights.attribute > 0 and present("attribute_logits", "attribute_targets", "attribute_mask"):
        terms["attribute"] = attribute_loss(
            source["attribute_logits"],
            source["attribute_targets"],
            source["attribute_mask"],
            source.get("attribute_positive_ratio"),
        )
    if (
        weights.reference > 0
        and queries is not None
        and present("image_embedding", "reference_embedding", "reference_round_mask")
    ):
        terms["reference"] = reference_loss(
            queries,
            source["image_embedding"],
            source["reference_embedding"],
            source["reference_round_mask"],
            turn_mask,
            weights.reference_margin,
        )
    if not terms:
        raise ValueError("no loss term could be computed: every weight is 0 or its inputs are missing")
    out = {f"{name}_loss": value for name, value in terms.items()}
    out["total_loss"] = sum(getattr(weights, name) * value for name, value in terms.items())  # type: ignore[assignment]
    return out
