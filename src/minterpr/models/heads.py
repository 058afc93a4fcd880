"""Image-side heads: the embedding over global + stripe features, attributes, identities.

Under camera shift the global feature alone loses the layout of a person (upper vs lower
garment colours), so the image embedding projects the global feature *and* the P stripe
(part) features. The attribute head lets every ontology slot attend over the stripes (a
shoe colour lives in the bottom stripe, hair in the top one), and the identity head is a
BNNeck-style classifier (BatchNorm, then a bias-free linear) used only in training.
With a colour branch (:mod:`minterpr.models.colour`), its per-stripe palette histograms
become extra tokens beside the stripes, so both the attributes and the embedding see colour.

Example:
    >>> import torch
    >>> head = ImageHead(global_dim=40, stripe_dim=24, num_stripes=4, embed_dim=16,
    ...                  label_slots=[0, 0, 1, 1, 1], num_identities=7).eval()
    >>> out = head(torch.randn(2, 40), torch.randn(2, 4, 24))
    >>> out["embedding"].shape, out["attribute_logits"].shape, out["id_logits"].shape
    (torch.Size([2, 16]), torch.Size([2, 5]), torch.Size([2, 7]))
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from minterpr.data.ontology import ONTOLOGY


def ontology_label_slots() -> list[int]:
    """Slot index of every label of ``ONTOLOGY.flat_labels()`` (the attribute head's outputs)."""
    slot_index = {name: i for i, name in enumerate(ONTOLOGY.slot_names)}
    return [slot_index[slot] for slot, _ in ONTOLOGY.flat_labels()]


class SlotAttributeHead(nn.Module):
    """One learned query per slot attends over part tokens; each label scores its slot's summary.

    tokens (B, T, D) -> logits (B, L): slot s pools ``softmax(q_s . k_t)`` over tokens, then
    label l (of slot s) is ``w_l . pooled_s + b_l``.
    """

    def __init__(self, dim: int, label_slots: Sequence[int]) -> None:
        super().__init__()
        num_slots = max(label_slots) + 1
        self.register_buffer("label_slots", torch.tensor(list(label_slots), dtype=torch.long), persistent=False)
        self.norm = nn.LayerNorm(dim)
        self.slot_queries = nn.Parameter(torch.randn(num_slots, dim) * dim**-0.5)  # (S, D)
        self.keys = nn.Linear(dim, dim, bias=False)
        self.label_weight = nn.Parameter(torch.randn(len(label_slots), dim) * dim**-0.5)  # (L, D)
        self.label_bias = nn.Parameter(torch.zeros(len(label_slots)))  # (L,)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        tokens = self.norm(tokens)  # (B, T, D)
        scores = torch.einsum("sd,btd->bst", self.slot_queries, self.keys(tokens)) / math.sqrt(tokens.shape[-1])
        pooled = scores.softmax(dim=-1) @ tokens  # (B, S, D)
        per_label = pooled[:, self.label_slots]  # (B, L, D)
        return (per_label * self.label_weight).sum(-1) + self.label_bias  # (B, L)


class ImageHead(nn.Module):
    """Encoder outputs {"global", "stripes"} -> embedding (L2-normalised), attribute logits, id logits."""

    def __init__(
        self,
        *,
        global_dim: int,
        stripe_dim: int,
        num_stripes: int,
        embed_dim: int,
        label_slots: Sequence[int],
        num_identities: int = 0,
        dropout: float = 0.0,
        colour_dim: int = 0,
        colour_stripes: int = 0,
    ) -> None:
        super().__init__()
        if (colour_dim > 0) != (colour_stripes > 0):
            raise ValueError(f"colour_dim ({colour_dim}) and colour_stripes ({colour_stripes}) must both be 0 or > 0")
        # LayerNorm first: backbone features (post-ReLU6 averages, CLIP projections) have
        # scales unrelated to the new layers'
        self.global_proj = nn.Sequential(nn.LayerNorm(global_dim), nn.Linear(global_dim, embed_dim))
        self.stripe_proj = nn.Sequential(nn.LayerNorm(stripe_dim), nn.Linear(stripe_dim, embed_dim))
        self.part_embedding = nn.Parameter(torch.zeros(num_stripes, embed_dim))  # (P, D): which stripe
        # fuse: a linear over [global; stripe_1..stripe_P] keeps the part layout in the embedding
        self.colour_stripes = colour_stripes
        if colour_stripes:
            # histograms -> tokens; the square root (Hellinger map) lifts small but telling
            # fractions such as the shoes' share of the bottom stripe
            self.colour_proj: nn.Module | None = nn.Sequential(
                nn.Linear(colour_dim, embed_dim), nn.GELU(), nn.Linear(embed_dim, embed_dim)
            )
            self.colour_position = nn.Parameter(torch.zeros(colour_stripes, embed_dim))  # (P_c, D)
        else:
            self.colour_proj = None
        num_tokens = 1 + num_stripes + colour_stripes
        self.fuse = nn.Sequential(nn.Dropout(dropout), nn.Linear(num_tokens * embed_dim, embed_dim))
        self.attributes = SlotAttributeHead(embed_dim, label_slots)
        self.num_identities = num_identities
        if num_identities > 0:
            self.bnneck = nn.BatchNorm1d(embed_dim)
            self.bnneck.bias.requires_grad_(False)  # BNNeck: no shift before the classifier
            self.classifier: nn.Linear | None = nn.Linear(embed_dim, num_identities, bias=False)
            nn.init.normal_(self.classifier.weight, std=0.001)
        else:
            self.classifier = None

    def forward(
        self, global_feat: torch.Tensor, stripes: torch.Tensor, colour: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor | None]:
        """global (B, C_g), stripes (B, P, C_s), colour (B, P_c, K) histograms when the head has a
        colour branch -> {"embedding", "attribute_logits", "id_logits"}."""
        g = self.global_proj(global_feat)  # (B, D)
        parts = self.stripe_proj(stripes) + self.part_embedding  # (B, P, D)
        token_list = [g.unsqueeze(1), parts]
        if self.colour_proj is not None:
            if colour is None or colour.shape[1] != self.colour_stripes:
                got = None if colour is None else tuple(colour.shape)
                raise ValueError(f"this head needs colour histograms (B, {self.colour_stripes}, K), got {got}")
            token_list.append(self.colour_proj(colour.clamp(min=0).sqrt()) + self.colour_position)  # (B, P_c, D)
        tokens = torch.cat(token_list, dim=1)  # (B, 1 + P + P_c, D)
        features = g + self.fuse(tokens.flatten(1))  # (B, D); the global path stays a residual
        id_logits = None
        if self.classifier is not None:
            id_logits = self.classifier(self._bnneck(features))
        return {
            "embedding": F.normalize(features, dim=-1),
            "attribute_logits": self.attributes(tokens),
            "id_logits": id_logits,
        }

    def _bnneck(self, features: torch.Tensor) -> torch.Tensor:
        # a batch of one has no batch statistics: use the running ones instead of failing
        use_batch_stats = self.training and features.shape[0] > 1
        bn = self.bnneck
        return F.batch_norm(
            features, bn.running_mean, bn.running_var, bn.weight, bn.bias,
            training=use_batch_stats, momentum=bn.momentum, eps=bn.eps,
        )
