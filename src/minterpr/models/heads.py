"""Image-side heads: the embedding over global + stripe features, attributes, identities.

Under camera shift the global feature alone loses the layout of a person (upper vs lower
garment colours), so the image embedding projects the global feature *and* the P stripe
(part) features. The attribute head lets every ontology slot attend over the stripes (a
shoe colour lives in the bottom stripe, hair in the top one), and the identity head is a
BNNeck-style classifier (BatchNorm, then a bias-free linear) used only in training.
With a colour branch (:mod:`minterpr.models.colour`), its per-stripe palette histograms
become extra tokens beside the stripes, so both the attributes and the embedding see colour.

With Q > 1 columns the stripes are a P x Q grid of cells (a mid-level feature map, e.g.
16 x 8). The embedding still fuses one token per stripe (the row means, cheap, the same
layers as Q = 1), while the attribute head attends over every cell: each cell's backbone
channels and its colour histogram go through one 3x3 convolution, so a token sees its
neighbours (a collar, a shoe's outline) and its colours together: a collar or a shoe is read
from its shape and its colour at once (how much it helps: docs/model.md).

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
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from minterpr.language.ontology import ONTOLOGY


def ontology_label_slots() -> list[int]:
    """Slot index of every label of ``ONTOLOGY.flat_labels()`` (the attribute head's outputs)."""
    slot_index = {name: i for i, name in enumerate(ONTOLOGY.slot_names)}
    return [slot_index[slot] for slot, _ in ONTOLOGY.flat_labels()]


class SlotAttributeHead(nn.Module):
    """One learned query per slot attends over part tokens; each label scores its slot's summary.

    tokens (B, T, D) -> logits (B, L): slot s pools ``softmax(q_s . k_t)`` over tokens, then
    label l (of slot s) is ``w_l . pooled_s + b_l``. With ``logit_norm`` those scores go through
    a BatchNorm1d over the L labels (Jia et al. 2021's baseline, ``logits = BN(FC(x))``): each
    label's logit is re-centred on its batch, which offsets the imbalance of rare labels.
    """

    def __init__(self, dim: int, label_slots: Sequence[int], logit_norm: bool = False) -> None:
        super().__init__()
        num_slots = max(label_slots) + 1
        self.register_buffer("label_slots", torch.tensor(list(label_slots), dtype=torch.long), persistent=False)
        self.norm = nn.LayerNorm(dim)
        self.slot_queries = nn.Parameter(torch.randn(num_slots, dim) * dim**-0.5)  # (S, D)
        self.keys = nn.Linear(dim, dim, bias=False)
        self.label_weight = nn.Parameter(torch.randn(len(label_slots), dim) * dim**-0.5)  # (L, D)
        self.label_bias = nn.Parameter(torch.zeros(len(label_slots)))  # (L,)
        self.logit_norm: nn.BatchNorm1d | None = nn.BatchNorm1d(len(label_slots)) if logit_norm else None

    def forward(self, tokens: torch.Tensor, mix: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
        """tokens (B, T, D) -> logits (B, L).

        ``mix`` (training only): (B, L) scores -> (B, L) scores, applied before the logit norm.
        A label's score is linear in its slot's pooled feature, so mixing the scores of two
        images with weight lambda is exactly mixing the pooled features fed to that label
        (per-label feature mixup, :mod:`minterpr.training.feature_mixup`).
        """
        tokens = self.norm(tokens)  # (B, T, D)
        # q_s . (W_k t) == (W_k^T q_s) . t: projecting the S queries instead of the T tokens is
        # the same score at a fraction of the cost when a part grid gives hundreds of tokens
        query_keys = self.slot_queries @ self.keys.weight  # (S, D)
        scores = torch.einsum("sd,btd->bst", query_keys, tokens) / math.sqrt(tokens.shape[-1])
        pooled = scores.softmax(dim=-1) @ tokens  # (B, S, D)
        per_label = pooled[:, self.label_slots]  # (B, L, D)
        scores = (per_label * self.label_weight).sum(-1) + self.label_bias  # (B, L)
        if mix is not None:
            scores = mix(scores)
        if self.logit_norm is None:
            return scores
        bn = self.logit_norm  # one image has no batch statistics: it uses the running ones (as _bnneck)
        return F.batch_norm(
            scores,
            bn.running_mean,
            bn.running_var,
            bn.weight,
            bn.bias,
            training=self.training and scores.shape[0] > 1,
            momentum=bn.momentum,
            eps=bn.eps,
        )


class GridProjection(nn.Module):
    """Cells of a P x Q grid (B, P*Q, C) -> tokens (B, P*Q, D) through a 3x3 convolution.

    BatchNorm first: the backbone's channels have unrelated scales (as the LayerNorm of the
    stripe projection); the convolution (to ``hidden`` channels, then a linear map to D)
    gives each cell its neighbourhood.
    """

    def __init__(self, in_dim: int, out_dim: int, rows: int, columns: int, hidden: int = 128) -> None:
        super().__init__()
        self.rows, self.columns = rows, columns
        self.norm = nn.BatchNorm2d(in_dim)
        self.conv = nn.Conv2d(in_dim, hidden, 3, padding=1)
        self.out = nn.Linear(hidden, out_dim)

    def forward(self, cells: torch.Tensor) -> torch.Tensor:
        b, n, c = cells.shape
        grid = cells.transpose(1, 2).reshape(b, c, self.rows, self.columns)  # (B, C, P, Q)
        bn = self.norm  # one image has no batch statistics: it uses the running ones (as _bnneck)
        grid = F.batch_norm(
            grid,
            bn.running_mean,
            bn.running_var,
            bn.weight,
            bn.bias,
            training=self.training and b > 1,
            momentum=bn.momentum,
            eps=bn.eps,
        )
        return self.out(F.gelu(self.conv(grid)).flatten(2).transpose(1, 2))  # (B, P*Q, D)


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
        num_columns: int = 1,
        attribute_logit_norm: bool = False,
    ) -> None:
        super().__init__()
        if num_columns < 1:
            raise ValueError(f"num_columns must be >= 1, got {num_columns}")
        if (colour_dim > 0) != (colour_stripes > 0):
            raise ValueError(f"colour_dim ({colour_dim}) and colour_stripes ({colour_stripes}) must both be 0 or > 0")
        self.num_stripes, self.num_columns = num_stripes, num_columns  # P rows x Q columns of cells
        # LayerNorm first: backbone features (post-ReLU6 averages, CLIP projections) have
        # scales unrelated to the new layers'
        self.global_proj = nn.Sequential(nn.LayerNorm(global_dim), nn.Linear(global_dim, embed_dim))
        self.stripe_proj = nn.Sequential(nn.LayerNorm(stripe_dim), nn.Linear(stripe_dim, embed_dim))
        self.part_embedding = nn.Parameter(torch.zeros(num_stripes, embed_dim))  # (P, D): which stripe
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
        # fuse: a linear over [global; stripe_1..stripe_P; colour_1..colour_P_c] keeps the part
        # layout in the embedding
        num_tokens = 1 + num_stripes + colour_stripes
        self.fuse = nn.Sequential(nn.Dropout(dropout), nn.Linear(num_tokens * embed_dim, embed_dim))
        if num_columns > 1:  # the attribute head's own cell tokens (attribute-only parameters)
            # each cell's channels: the backbone's and the square-rooted colour histogram of that cell
            self.cell_proj: GridProjection | None = GridProjection(
                stripe_dim + (colour_dim if colour_stripes else 0), embed_dim, num_stripes, num_columns
            )
            self.cell_embedding = nn.Parameter(torch.zeros(num_stripes * num_columns, embed_dim))  # (P*Q, D)
        else:
            self.cell_proj = None
        self.attributes = SlotAttributeHead(embed_dim, label_slots, logit_norm=attribute_logit_norm)
        self.num_identities = num_identities
        if num_identities > 0:
            self.bnneck = nn.BatchNorm1d(embed_dim)
            self.bnneck.bias.requires_grad_(False)  # BNNeck: no shift before the classifier
            self.classifier: nn.Linear | None = nn.Linear(embed_dim, num_identities, bias=False)
            nn.init.normal_(self.classifier.weight, std=0.001)
        else:
            self.classifier = None

    def forward(
        self,
        global_feat: torch.Tensor,
        stripes: torch.Tensor,
        colour: torch.Tensor | None = None,
        attribute_rows: torch.Tensor | None = None,
        attribute_mix: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> dict[str, torch.Tensor | None]:
        """global (B, C_g), stripes (B, P*Q, C_s), colour (B, P_c*Q, K) histograms when the head has
        a colour branch -> {"embedding" (B, D), "attribute_logits", "id_logits" (B, K) | None}.

        ``attribute_rows`` (long (B',)): compute the attribute logits (B', L) of those rows only
        (training needs them for targets, not for every reference image); None = all rows.
        ``attribute_mix``: the per-label mix of :meth:`SlotAttributeHead.forward` (training only).
        """
        if self.colour_proj is not None:
            cells = self.colour_stripes * self.num_columns
            if colour is None or colour.shape[1] != cells:
                got = None if colour is None else tuple(colour.shape)
                raise ValueError(f"this head needs colour histograms (B, {cells}, K), got {got}")
        g = self.global_proj(global_feat).unsqueeze(1)  # (B, 1, D)
        rows = [g, self.stripe_proj(self._row_means(stripes)) + self.part_embedding]  # + (B, P, D)
        if self.colour_proj is not None:
            rows.append(self.colour_proj(self._row_means(colour).clamp(min=0).sqrt()) + self.colour_position)
        row_tokens = torch.cat(rows, dim=1)  # (B, 1 + P + P_c, D): one token per stripe
        features = g[:, 0] + self.fuse(row_tokens.flatten(1))  # (B, D); the global path stays a residual
        id_logits = None
        if self.classifier is not None:
            id_logits = self.classifier(self._bnneck(features))
        pick = (lambda x: x) if attribute_rows is None else (lambda x: x[attribute_rows])
        if self.cell_proj is None:
            tokens = pick(row_tokens)
        else:  # the grid: every cell is a token the slots attend over
            cells = pick(stripes)  # (B', P*Q, C_s)
            if colour is not None and self.colour_proj is not None:
                cells = torch.cat([cells, self._colour_cells(pick(colour)).clamp(min=0).sqrt()], dim=-1)
            tokens = torch.cat([pick(g), self.cell_proj(cells) + self.cell_embedding], dim=1)  # (B', 1 + P*Q, D)
        return {
            "embedding": F.normalize(features, dim=-1),
            "attribute_logits": self.attributes(tokens, mix=attribute_mix),
            "id_logits": id_logits,
        }

    def _colour_cells(self, colour: torch.Tensor) -> torch.Tensor:
        """(B, P_c*Q, K) colour cells -> (B, P*Q, K) on the part grid (pooled when P_c != P)."""
        if self.colour_stripes == self.num_stripes:
            return colour
        grid = colour.transpose(1, 2).unflatten(2, (self.colour_stripes, self.num_columns))  # (B, K, P_c, Q)
        return F.adaptive_avg_pool2d(grid, (self.num_stripes, self.num_columns)).flatten(2).transpose(1, 2)

    def _row_means(self, cells: torch.Tensor) -> torch.Tensor:
        """(B, R*Q, C) cells, row by row -> (B, R, C) row means (the stripes)."""
        if self.num_columns == 1:
            return cells
        return cells.unflatten(1, (-1, self.num_columns)).mean(dim=2)

    def _bnneck(self, features: torch.Tensor) -> torch.Tensor:
        # a batch of one has no batch statistics: use the running ones instead of failing
        use_batch_stats = self.training and features.shape[0] > 1
        bn = self.bnneck
        return F.batch_norm(
            features,
            bn.running_mean,
            bn.running_var,
            bn.weight,
            bn.bias,
            training=use_batch_stats,
            momentum=bn.momentum,
            eps=bn.eps,
        )
