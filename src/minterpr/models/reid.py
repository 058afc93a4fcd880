"""The appearance model: an OSNet that tells one person's crops from look-alikes.

Trained with identities, not attributes: a BNNeck (Luo et al., "Bag of Tricks", 2019) between
the feature and the identity classifier, so the triplet loss shapes the raw feature's distances
while the cross-entropy works on its batch-normalised copy; the embedding used for search is
the normalised copy, L2-normalised (cosine similarity). The classifier is only for training
(its identities are the training set's) and is never saved with the shipped model.

Example:
    >>> import torch
    >>> model = ReidModel(ReidModelConfig(image_size=(64, 32)), num_identities=5).eval()
    >>> model.embed(torch.zeros(2, 3, 64, 32)).shape
    torch.Size([2, 512])
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from minterpr.models.encoders import ImagePreprocess, create_image_encoder


@dataclass
class ReidModelConfig:
    """What builds an appearance model (stored beside its weights)."""

    width: str = "x0_25"  # OSNet width: x0_25, x0_5, x0_75, x1_0
    norm: str = "bn"  # "bn", "ibn" (instance norm early) or "ain"
    image_size: tuple[int, int] = (256, 128)  # (H, W) input: the re-id field's size
    feature_dim: int = 512  # width of the feature layer (the published weights' 512)
    flip_test: bool = True  # average the embedding with the mirror image's at inference

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["image_size"] = list(self.image_size)
        return data

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "ReidModelConfig":
        known = {k: raw[k] for k in ("width", "norm", "feature_dim", "flip_test") if k in raw}
        size = raw.get("image_size", (256, 128))
        return cls(image_size=(int(size[0]), int(size[1])), **known)


class ReidModel(nn.Module):
    """OSNet -> feature (B, F) -> BNNeck -> classifier (training) / normalised embedding (search)."""

    def __init__(
        self,
        config: ReidModelConfig,
        num_identities: int = 0,
        *,
        weights: str | None = None,
        channels_last: bool = True,
    ) -> None:
        super().__init__()
        self.config = config
        # channels_last: NHWC convolutions, about 3x faster for OSNet on a CPU, the same results
        self.encoder = create_image_encoder(
            "osnet",
            width=config.width,
            norm=config.norm,
            feature_dim=config.feature_dim,
            weights=weights,
            preprocess=ImagePreprocess(size=tuple(config.image_size)),
            channels_last=channels_last,
        )
        self.neck = nn.BatchNorm1d(config.feature_dim)
        self.neck.bias.requires_grad_(False)  # BNNeck: no shift, so the classifier's hyperplanes pass 0
        nn.init.ones_(self.neck.weight)
        nn.init.zeros_(self.neck.bias)
        self.classifier = nn.Linear(config.feature_dim, num_identities, bias=False) if num_identities else None
        if self.classifier is not None:
            nn.init.normal_(self.classifier.weight, std=0.001)

    @property
    def device(self) -> torch.device:
        """Where the weights are (the ONNX engine runs only beside CPU weights)."""
        return next(self.parameters()).device

    @property
    def preprocess(self) -> ImagePreprocess:
        return self.encoder.preprocess

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        """(B, 3, H, W) -> {"feature": (B, F) for the triplet loss, "logits": (B, N) for the id loss}."""
        feature = self.encoder(images)["global"]  # (B, F)
        out = {"feature": feature}
        if self.classifier is not None:
            out["logits"] = self.classifier(self.neck(feature))
        return out

    @torch.no_grad()
    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> (B, F) L2-normalised appearance embeddings (eval mode; flip-averaged)."""
        neck = self.neck(self.encoder(images)["global"])
        if self.config.flip_test:
            neck = neck + self.neck(self.encoder(images.flip(-1))["global"])
        return F.normalize(neck, dim=1)

    def search_state_dict(self) -> dict[str, torch.Tensor]:
        """The weights a search needs: encoder and neck, not the training identities' classifier."""
        return {k: v for k, v in self.state_dict().items() if not k.startswith("classifier.")}


def load_reid_model(path: str) -> ReidModel:
    """An appearance model from a training run's ``best.pt`` (weights and config; tensors only)."""
    from minterpr.errors import RunError
    from minterpr.models.io import load_torch_file

    state = load_torch_file(path, "cpu")
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict) or "config" not in state:
        raise RunError(path, "not an appearance model (expected a reid run's best.pt with model and config)")
    model = ReidModel(ReidModelConfig.from_dict(state["config"]))
    try:
        model.load_state_dict(state["model"], strict=True)
    except RuntimeError as err:
        raise RunError(path, f"weights do not fit the stored config ({str(err).splitlines()[0]})") from None
    model.encoder.set_channels_last(True)  # loading copied into the old memory layout
    return model.eval()
