"""The dialogue memory: a small causal transformer over atomic turn vectors.

Round r's query may only depend on turns 0..r (causal mask), so one forward pass yields the
query after every round, and appending a turn never changes earlier queries. The output is

    q_r = normalize(m_r + W_o LN(h_r))

where h_r is the transformer state at round r and ``m_r`` a learned, turn-type-weighted
running mean of the turn vectors 0..r. The running mean is the residual path: at round 0
it *is* the description vector, so the first query is good before the memory learns
anything, and later rounds start from a plain average that the transformer corrects.
Padded rounds (``turn_mask`` False) repeat the last real round's query.

Example:
    >>> import torch
    >>> memory = DialogueMemory(dim=8, layers=1, heads=2, max_turns=6).eval()
    >>> turns, types = torch.randn(2, 3, 8), torch.tensor([[0, 1, 1], [0, 2, -1]])
    >>> q = memory(turns, types, types >= 0)
    >>> q.shape, torch.allclose(q[1, 2], q[1, 1])
    (torch.Size([2, 3, 8]), True)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .turn_encoder import NUM_TURN_TYPES


class MemoryLayer(nn.Module):
    """Pre-LN transformer layer: x + attn(LN(x)), then x + FFN(LN(x))."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(4 * dim, dim))
        self.dropout = nn.Dropout(dropout)
        self.attn_dropout = dropout

    def forward(self, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """x (B, R, D), allowed (B, 1, R, R) bool: query r may attend to key j."""
        b, r, d = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, r, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, H, R, D/H)
        p = self.attn_dropout if self.training else 0.0
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)  # (B, H, R, D/H)
        x = x + self.dropout(self.out(attended.transpose(1, 2).reshape(b, r, d)))
        return x + self.dropout(self.ffn(self.norm2(x)))


def attention_mask(turn_mask: torch.Tensor) -> torch.Tensor:
    """(B, R) real turns -> (B, 1, R, R): causal, real keys only, and always self.

    Letting every round see itself keeps padded rows (all earlier keys masked when the
    dialogue is entirely padding) from a softmax over nothing, i.e. NaN.
    """
    r = turn_mask.shape[1]
    causal = torch.ones(r, r, dtype=torch.bool, device=turn_mask.device).tril()  # (R, R)
    allowed = causal & turn_mask[:, None, :]  # (B, R, R): key j real and j <= r
    allowed = allowed | torch.eye(r, dtype=torch.bool, device=turn_mask.device)
    return allowed.unsqueeze(1)


def carry_forward(values: torch.Tensor, turn_mask: torch.Tensor) -> torch.Tensor:
    """(B, R, D) per-round values -> padded rounds replaced by the last real round's value.

    Rounds before any real turn become zeros.

    Example:
        >>> v = torch.tensor([[[1.0], [2.0], [9.0]]])
        >>> carry_forward(v, torch.tensor([[True, True, False]])).flatten().tolist()
        [1.0, 2.0, 2.0]
    """
    r = turn_mask.shape[1]
    positions = torch.arange(r, device=turn_mask.device).expand_as(turn_mask)  # (B, R)
    last_real = torch.where(turn_mask, positions, -1).cummax(dim=1).values  # (B, R), -1 = none yet
    gathered = values.gather(1, last_real.clamp(min=0).unsqueeze(-1).expand_as(values))
    return torch.where((last_real >= 0).unsqueeze(-1), gathered, torch.zeros_like(values))


class DialogueMemory(nn.Module):
    """Turn vectors (B, R, D) + types + mask -> L2-normalised queries after every round (B, R, D)."""

    def __init__(self, dim: int, layers: int, heads: int, max_turns: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.max_turns = max_turns
        self.type_embedding = nn.Embedding(NUM_TURN_TYPES, dim)
        self.position_embedding = nn.Parameter(torch.zeros(max_turns, dim))  # (R_max, D)
        nn.init.normal_(self.type_embedding.weight, std=0.02)
        nn.init.normal_(self.position_embedding, std=0.02)
        self.layers = nn.ModuleList([MemoryLayer(dim, heads, dropout) for _ in range(layers)])
        self.final_norm = nn.LayerNorm(dim)
        self.output = nn.Linear(dim, dim)
        # small init: at the start the query is nearly the running mean (the residual path);
        # not zero, so that the layers below get gradients from the first step
        nn.init.normal_(self.output.weight, std=0.02)
        nn.init.zeros_(self.output.bias)
        # per-type log-weight of a turn in the running mean (descriptions may count more than Q&A)
        self.type_log_weight = nn.Parameter(torch.zeros(NUM_TURN_TYPES))

    def running_mean(
        self, turns: torch.Tensor, turn_types: torch.Tensor, turn_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Causal weighted mean of turn vectors 0..r, (B, R, D); padded turns weigh 0."""
        weights = self.type_log_weight.exp()[turn_types.clamp(min=0)]  # (B, R)
        if turn_mask is not None:
            weights = weights * turn_mask
        total = (weights.unsqueeze(-1) * turns).cumsum(dim=1)  # (B, R, D)
        return total / weights.cumsum(dim=1).clamp(min=1e-6).unsqueeze(-1)

    def forward(self, turns: torch.Tensor, turn_types: torch.Tensor, turn_mask: torch.Tensor | None) -> torch.Tensor:
        """turns (B, R, D), turn_types (B, R) long, turn_mask (B, R) bool -> (B, R, D).

        ``turn_mask`` None: every turn is real (no padding), as in one live conversation; the same
        queries as an all-True mask, bit for bit, without the masking and carrying that padding
        needs (the graph exported to ONNX, :mod:`minterpr.models.onnx_query`, is this path).
        """
        r = turns.shape[1]
        if r > self.max_turns:
            raise ValueError(f"dialogue has {r} turns but the model was built for max_turns={self.max_turns}")
        x = turns + self.type_embedding(turn_types.clamp(min=0)) + self.position_embedding[:r]
        if turn_mask is None:  # causal only: with no padded key, "always self" adds nothing
            allowed = torch.ones(r, r, dtype=torch.bool, device=turns.device).tril()[None, None]  # (1, 1, R, R)
        else:
            allowed = attention_mask(turn_mask)
        for layer in self.layers:
            x = layer(x, allowed)
        queries = self.running_mean(turns, turn_types, turn_mask) + self.output(self.final_norm(x))
        if turn_mask is not None:
            queries = carry_forward(queries, turn_mask)
        return F.normalize(queries, dim=-1)
