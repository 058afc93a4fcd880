"""Per-label feature mixup for the attribute head (after PIL, IJCV 2025), a training-only regulariser.

Within a batch of B images and for each of the L attribute labels independently, row i's feature
fed to label l is mixed with the feature of a partner row ``j = pi_l(i)`` (``pi_l`` an independent
random permutation of the batch for every label), and that label's target with the same weight:

    f'_il = lam_il f_il + (1 - lam_il) f_jl,    y'_il = lam_il y_il + (1 - lam_il) y_jl,
    known'_il = known_il and known_jl,          lam_il ~ Beta(alpha, alpha)

The feature of label l is its slot's attention-pooled summary (``SlotAttributeHead``), the last
per-label feature the head has. Since the label's score ``w_l . f + b_l`` is linear in it, mixing
the features is exactly mixing the scores; :class:`LabelMix` therefore mixes the (B, L) scores,
before the optional logit BatchNorm (which then sees the mixed batch, as it would mixed features).
Everything before the pooling (backbone, tokens, attention) is unmixed, and the identity loss and
the embedding never see a mix. The mixed targets are soft: the weighted BCE interpolates its
weights (:func:`minterpr.models.losses.attribute_loss`).

Example:
    >>> import torch
    >>> mix = LabelMix.draw(batch=4, labels=3, alpha=0.4, seed=0)
    >>> mix.partner.shape, bool(((mix.weight >= 0) & (mix.weight <= 1)).all())
    (torch.Size([4, 3]), True)
    >>> sorted(mix.partner[:, 0].tolist())  # every row is some row's partner once, per label
    [0, 1, 2, 3]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class LabelMix:
    """One batch's draw: each (row, label) mixes with ``partner[row, label]`` at ``weight[row, label]``."""

    partner: torch.Tensor  # (B, L) long: the row whose feature (and target) is mixed in
    weight: torch.Tensor  # (B, L) float in [0, 1]: lambda, the share of the row's own feature

    @classmethod
    def draw(cls, batch: int, labels: int, alpha: float, seed: int) -> "LabelMix":
        """A draw from ``seed`` alone (numpy's generator): a resumed run draws the same."""
        if alpha <= 0:
            raise ValueError(f"feature mixup needs alpha > 0, got {alpha}")
        rng = np.random.default_rng(seed)
        partner = rng.permuted(np.tile(np.arange(batch), (labels, 1)), axis=1).T  # (B, L)
        weight = rng.beta(alpha, alpha, size=(batch, labels))
        return cls(torch.from_numpy(np.ascontiguousarray(partner)).long(), torch.from_numpy(weight).float())

    def to(self, device: torch.device | str) -> "LabelMix":
        return LabelMix(self.partner.to(device), self.weight.to(device))

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        """(B, L) per-label scores (or features' linear images) -> the mixed (B, L)."""
        weight = self.weight.to(scores.dtype)
        return weight * scores + (1.0 - weight) * scores.gather(0, self.partner)

    def targets(self, targets: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L) targets and known-masks -> the mixed soft targets and the ANDed masks."""
        return self(targets.float()), mask & mask.gather(0, self.partner)
