"""MixStyle (Zhou et al., ICLR 2021): mix two images' feature statistics in the early stages.

A camera's look (white balance, contrast, sensor noise, compression) lives mostly in the
per-channel mean and standard deviation of the early feature maps, while what a person wears
lives in their normalised pattern. MixStyle re-styles each image of a training batch with a
mixture of its own and a random partner's statistics,
``x' = (x - mu) / sigma * (lam * sigma + (1 - lam) * sigma_p) + lam * mu + (1 - lam) * mu_p``,
``lam ~ Beta(alpha, alpha)`` per image, applied to a batch with probability ``p`` after each
named stage, in training mode only (evaluation and exported models never see it), frozen
stages included (what they output still feeds the stages that learn). So the image
side learns attributes across "cameras" it never had labels for. The statistics are detached,
as in the paper, so the gradient does not push the styles themselves. Randomness comes from
torch's global generator, which :class:`~minterpr.training.image_tuning.ImageTuner` seeds per
step, so a resumed tuning repeats exactly.

Example:
    >>> import torch
    >>> from minterpr.models.encoders import create_image_encoder
    >>> encoder = create_image_encoder("tiny_cnn", pretrained=False)
    >>> with mixstyle(encoder, ["stage1"], p=1.0, alpha=0.1):
    ...     out = encoder(torch.randn(4, 3, 32, 16))["global"]
    >>> out.shape
    torch.Size([4, 32])
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import torch
from torch import nn

EPS = 1e-6  # added to the variance before its square root (a flat channel has none)


def mix_style(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """(B, C, H, W) -> the same features with each image's channel statistics mixed with a random partner's.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> x = torch.randn(2, 3, 4, 4) * torch.tensor([1.0, 3.0]).view(2, 1, 1, 1)
        >>> y = mix_style(x, 0.1)
        >>> y.shape, torch.allclose(x, y)  # same shape, other styles
        (torch.Size([2, 3, 4, 4]), False)
    """
    b = x.shape[0]
    if b < 2:
        return x
    mu = x.mean(dim=(2, 3), keepdim=True).detach()
    sigma = (x.var(dim=(2, 3), keepdim=True) + EPS).sqrt().detach()
    lam = torch.distributions.Beta(alpha, alpha).sample((b, 1, 1, 1)).to(x.device, x.dtype)
    partner = torch.randperm(b, device=x.device)
    mu_mix = lam * mu + (1.0 - lam) * mu[partner]
    sigma_mix = lam * sigma + (1.0 - lam) * sigma[partner]
    return (x - mu) / sigma * sigma_mix + mu_mix


@contextmanager
def mixstyle(encoder: nn.Module, stages: Sequence[str], *, p: float, alpha: float) -> Iterator[None]:
    """While inside, the outputs of ``encoder``'s named ``stages`` are MixStyle-d (training mode only).

    ``p``: probability that a batch is mixed at a stage; ``alpha``: Beta(alpha, alpha) of the mixing
    weight. p = 0 registers nothing. Unknown stage names raise ValueError naming the known ones.
    """
    if p <= 0:
        yield
        return
    names = list(getattr(encoder, "stage_names", []))
    unknown = [s for s in stages if s not in names]
    if unknown:
        raise ValueError(f"image_tuning.mixstyle_stages {unknown}: the image encoder's stages are {', '.join(names)}")

    def hook(module: nn.Module, inputs: object, output: torch.Tensor) -> torch.Tensor | None:
        # the encoder's mode, not the stage's: a frozen stage stays in eval mode while the encoder
        # trains, and its output re-styled still reaches the stages that learn
        if not encoder.training or torch.rand(()) >= p:
            return None
        return mix_style(output, alpha)

    handles = [encoder.stages[names.index(s)].register_forward_hook(hook) for s in stages]  # type: ignore[index]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
