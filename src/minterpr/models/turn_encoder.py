"""Atomic turn encoding: every turn of a dialogue becomes one D-dimensional vector.

Turn types (the ``turn_types`` codes of a dialogue batch):

* ``DESCRIPTION`` (0) and ``QA`` (1): the projected text feature;
* ``REFERENCE`` (2): a reference image shown to the user plus their corrective feedback,
  combined by :class:`Composition`;
* ``EXAMPLE`` (3): an image of the person sought, through its own projection;
* ``PADDING`` (-1): a zero vector.

Encoding turns one by one (rather than one long concatenated text) keeps the cost per new
turn constant and lets text features be cached; the dialogue memory then aggregates them.

Example:
    >>> import torch
    >>> enc = TurnEncoder(text_dim=12, embed_dim=8).eval()
    >>> types = torch.tensor([[DESCRIPTION, QA, REFERENCE, PADDING]])
    >>> enc(types, torch.randn(1, 4, 12), torch.randn(1, 4, 8)).shape
    torch.Size([1, 4, 8])
"""

from __future__ import annotations

import torch
from torch import nn

PADDING, DESCRIPTION, QA, REFERENCE, EXAMPLE = -1, 0, 1, 2, 3
NUM_TURN_TYPES = 4  # real turn types (padding excluded)


class ResidualMLP(nn.Module):
    """x + MLP(LN(x)): a small trainable refinement that starts close to the identity."""

    def __init__(self, dim: int, hidden: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(dim), nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


class TextProjection(nn.Module):
    """Frozen text-encoder features (..., Dt) -> (..., D): LayerNorm, linear, residual MLP."""

    def __init__(self, text_dim: int, embed_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        # LayerNorm: sentence-transformer means are not normalised; the scale must not leak in
        self.proj = nn.Sequential(nn.LayerNorm(text_dim), nn.Linear(text_dim, embed_dim))
        self.refine = ResidualMLP(embed_dim, 2 * embed_dim, dropout)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.refine(self.proj(features))


class Composition(nn.Module):
    """Reference image embedding e and feedback text t (both D) -> one turn vector.

    ``v = sigmoid(W_g t) * W_e e + W_t t + MLP([e, t, e * t])``: the gate lets the feedback
    decide how much of the reference to keep ("same jacket, but ..." vs "no, not him"),
    the text path carries what the feedback states, and the MLP models interactions.
    Whether the reference counts as a positive or a negative is left to the memory,
    trained by the reference-as-negative loss.
    """

    def __init__(self, dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, dim)
        self.image = nn.Linear(dim, dim, bias=False)
        self.text = nn.Linear(dim, dim)
        self.mix = nn.Sequential(
            nn.LayerNorm(3 * dim), nn.Linear(3 * dim, 2 * dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(2 * dim, dim)
        )

    def forward(self, image: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        gated = torch.sigmoid(self.gate(text)) * self.image(image)
        return gated + self.text(text) + self.mix(torch.cat([image, text, image * text], dim=-1))


class TurnEncoder(nn.Module):
    """(turn_types, turn_text, turn_image) -> (B, R, D) turn vectors, zeros at padding."""

    def __init__(self, text_dim: int, embed_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.text_proj = TextProjection(text_dim, embed_dim, dropout)
        self.compose = Composition(embed_dim, dropout)
        self.example_proj = nn.Sequential(
            nn.Linear(embed_dim, embed_dim), ResidualMLP(embed_dim, 2 * embed_dim, dropout)
        )

    def forward(self, turn_types: torch.Tensor, turn_text: torch.Tensor, turn_image: torch.Tensor) -> torch.Tensor:
        """turn_types (B, R) long, turn_text (B, R, Dt), turn_image (B, R, D) -> (B, R, D)."""
        text = self.text_proj(turn_text)  # (B, R, D)
        types = turn_types.unsqueeze(-1)  # (B, R, 1)
        out = torch.where(types == REFERENCE, self.compose(turn_image, text), text)
        out = torch.where(types == EXAMPLE, self.example_proj(turn_image), out)
        # every branch runs on every turn (a few small matmuls); selecting with where keeps
        # one code path and gives unselected branches exactly zero gradient
        return torch.where(types == PADDING, torch.zeros_like(out), out)
