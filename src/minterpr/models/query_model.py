"""The retrieval model: image embeddings for the gallery, dialogue queries for the user.

Image side: encoder stem (frozen, cacheable) -> encoder head -> :class:`ImageHead`
(embedding over global + stripe features, attribute logits, identity logits). With
``config.colour_stripes`` the stem output also carries the colour branch's stripe
histograms (both packed in one flat tensor, so caches store one row per image).
Text side: a frozen text encoder gives cacheable features (Dt), which the turn encoder
projects to D. Dialogue side: every turn -> one vector (:class:`TurnEncoder`), then the
causal :class:`DialogueMemory` gives the query after every round in one pass.

A dialogue batch is a dict of tensors (R = rounds, padded):

* ``turn_types`` (B, R) long: 0 description, 1 Q&A, 2 reference image + feedback,
  3 example image, -1 padding;
* ``turn_text`` (B, R, Dt): text features (:meth:`RetrievalModel.text_features`) of the
  description / "question answer" / feedback; zeros for example and padding turns;
* ``turn_image`` (B, R, D): ``encode_image_features(...)["embedding"]`` of the reference or
  example image; zeros otherwise;
* ``turn_mask`` (B, R) bool, True = real turn (optional: ``turn_types >= 0`` by default).

Example:
    >>> import torch
    >>> model = create_model("tiny").eval()
    >>> images = model.encode_images(torch.randn(3, 3, 64, 32))
    >>> images["embedding"].shape, images["attribute_logits"].shape
    (torch.Size([3, 32]), torch.Size([3, 120]))
    >>> text = model.text_features(["a man in a red jacket", "what shoes? white"])  # (2, Dt)
    >>> batch = {"turn_types": torch.tensor([[0, 1]]), "turn_text": text.unsqueeze(0),
    ...          "turn_image": torch.zeros(1, 2, 32)}
    >>> model.encode_dialogues(batch).shape
    torch.Size([1, 2, 32])
"""

from __future__ import annotations

import contextlib
import math
from typing import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from minterpr.language.ontology import ONTOLOGY

from .colour import PALETTE, ColourBranch
from .config import MODEL_CONFIGS, ModelConfig
from .encoders import ImagePreprocess, create_image_encoder, create_text_encoder
from .heads import ImageHead, ontology_label_slots
from .memory import DialogueMemory
from .turn_encoder import PADDING, TurnEncoder

MAX_LOGIT_SCALE = 100.0  # CLIP's cap on 1/temperature: beyond it training becomes unstable


class RetrievalModel(nn.Module):
    """Image encoder + heads, text encoder + turn encoder + dialogue memory, and a learnable temperature."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        image_kwargs = {
            "num_stripes": config.num_stripes,
            "stripe_columns": config.stripe_columns,
            **({"stripe_stage": config.stripe_stage} if config.stripe_stage is not None else {}),
            **config.image_kwargs(),
        }
        if config.image_encoder == "clip":
            image_kwargs.setdefault("image_size", config.image_size)  # CLIP builds its patch grid from it
        self.image_encoder = create_image_encoder(config.image_encoder, pretrained=config.pretrained, **image_kwargs)
        self.image_encoder.preprocess = self.image_encoder.preprocess.with_size(*config.image_size)
        self.image_encoder.freeze(self._frozen_stages(config.frozen_image_stages))
        self.image_encoder.flip_test = config.flip_test
        self.text_encoder = create_text_encoder(
            config.text_encoder, pretrained=config.pretrained, **config.text_kwargs()
        )
        if config.freeze_text:
            self.text_encoder.requires_grad_(False)
        self.text_dim = int(self.text_encoder.out_dim)  # Dt
        self.image_head = ImageHead(
            global_dim=self.image_encoder.out_dim,
            stripe_dim=self.image_encoder.stripe_dim,
            num_stripes=self.image_encoder.num_stripes,
            embed_dim=config.embed_dim,
            label_slots=ontology_label_slots(),
            num_identities=config.num_identities,
            dropout=config.dropout,
            colour_dim=len(PALETTE) if config.colour_stripes else 0,
            colour_stripes=config.colour_stripes,
            num_columns=config.stripe_columns,
            attribute_logit_norm=config.attribute_logit_norm,
        )
        preprocess = self.image_encoder.preprocess
        self.colour_branch = ColourBranch(mean=preprocess.mean, std=preprocess.std) if config.colour_stripes else None
        self._stem_shape: tuple[int, ...] | None = None  # per-image stem output shape, found lazily
        self.turn_encoder = TurnEncoder(self.text_dim, config.embed_dim, config.dropout)
        self.memory = DialogueMemory(
            config.embed_dim, config.memory_layers, config.memory_heads, config.max_turns, config.dropout
        )
        # learnable temperature in log space, as CLIP: logit_scale = exp(.) = 1 / temperature
        self.log_logit_scale = nn.Parameter(torch.tensor(math.log(1.0 / config.init_temperature)))
        # per-label temperature of the attribute probabilities, one value per slot, fitted after
        # training on the validation split (minterpr.training.calibration); ones = uncalibrated
        self.register_buffer("attribute_temperature", torch.ones(len(ONTOLOGY.flat_labels())))  # (L,)
        self.train()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        # models saved before calibration existed have no temperature: they load as uncalibrated
        key = prefix + "attribute_temperature"
        if key not in state_dict:
            state_dict[key] = torch.ones_like(self.attribute_temperature)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _frozen_stages(self, frozen: int | str) -> int | str:
        if isinstance(frozen, int) and frozen < 0:  # "all but the last |frozen| stages"
            return max(0, len(self.image_encoder.stages) + frozen)
        return frozen

    # ------------------------------------------------------------------ properties
    @property
    def logit_scale(self) -> torch.Tensor:
        """Scalar multiplier of cosine similarities in the contrastive losses (1 / temperature)."""
        return self.log_logit_scale.clamp(max=math.log(MAX_LOGIT_SCALE)).exp()

    @property
    def preprocess(self) -> ImagePreprocess:
        """PIL image -> (3, H, W) tensor at ``config.image_size``, as the image encoder expects."""
        return self.image_encoder.preprocess

    @property
    def embed_dim(self) -> int:
        return self.config.embed_dim

    @property
    def device(self) -> torch.device:
        return self.log_logit_scale.device

    def train(self, mode: bool = True) -> "RetrievalModel":
        super().train(mode)
        if self.config.freeze_text:
            self.text_encoder.eval()  # a frozen encoder must give the same (cacheable) features always
        return self

    # ------------------------------------------------------------------ image side
    def image_stem(self, pixels: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) preprocessed images -> output of the frozen stem (cacheable; no grad).

        With a colour branch: (B, S + P_c*Q * K), the flattened stem and the histograms of the P_c x Q colour grid.
        """
        frozen = self.image_encoder.frozen_stages == self.image_encoder.split_stage
        with torch.no_grad() if frozen else contextlib.nullcontext():
            stem = self.image_encoder.forward_stem(pixels)
        if self.colour_branch is None:
            return stem
        self._stem_shape = tuple(stem.shape[1:])
        with torch.no_grad():  # no parameters: nothing to train
            membership = self.colour_branch(pixels)  # (B, K, h, w), pooled to at most its grid
            grid = (self.config.colour_stripes, self.config.stripe_columns)
            colour = F.adaptive_avg_pool2d(membership, grid).flatten(2)  # (B, K, P_c*Q)
        return torch.cat([stem.flatten(1), colour.transpose(1, 2).flatten(1).to(stem.dtype)], dim=1)

    def unpack_stem(self, stem_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Inverse of the packing in :meth:`image_stem`: -> (stem, colour (B, P_c*Q, K) | None)."""
        if self.colour_branch is None:
            return stem_out, None
        if self._stem_shape is None:  # e.g. stems read from a cache: run the stem once to learn its shape
            h, w = self.config.image_size
            was_training = self.image_encoder.training
            with torch.no_grad():
                self._stem_shape = tuple(
                    self.image_encoder.eval().forward_stem(torch.zeros(1, 3, h, w, device=self.device)).shape[1:]
                )
            self.image_encoder.train(was_training)
        k, p = self.colour_branch.num_colours, self.config.colour_stripes * self.config.stripe_columns
        expected = math.prod(self._stem_shape) + p * k
        if stem_out.dim() != 2 or stem_out.shape[1] != expected:
            raise ValueError(f"packed stem output must be (B, {expected}), got {tuple(stem_out.shape)}")
        stem = stem_out[:, : -p * k].reshape(-1, *self._stem_shape)
        return stem, stem_out[:, -p * k :].reshape(-1, p, k)

    def encode_image_features(
        self,
        stem_out: torch.Tensor,
        attribute_rows: torch.Tensor | None = None,
        attribute_mix: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> dict[str, torch.Tensor | None]:
        """Stem output -> {"embedding": (B, D) L2-normalised, "attribute_logits": (B, L), "id_logits": (B, K) | None}.

        L = ``len(ONTOLOGY.flat_labels())``; K = ``config.num_identities`` (None when 0).
        ``attribute_rows`` (long (B',)) limits the attribute logits to those rows: (B', L).
        ``attribute_mix`` mixes the attribute scores per label (training; :mod:`minterpr.training.feature_mixup`).
        """
        stem, colour = self.unpack_stem(stem_out)
        features = self.image_encoder.forward_head(stem)
        return self.image_head(
            features["global"], features["stripes"], colour, attribute_rows=attribute_rows, attribute_mix=attribute_mix
        )

    def encode_images(
        self,
        pixels: torch.Tensor,
        attribute_rows: torch.Tensor | None = None,
        attribute_mix: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> dict[str, torch.Tensor | None]:
        """(B, 3, H, W) -> the dict of :meth:`encode_image_features`."""
        return self.encode_image_features(self.image_stem(pixels), attribute_rows, attribute_mix)

    def attribute_probabilities(self, attribute_logits: torch.Tensor) -> torch.Tensor:
        """(B, L) attribute logits -> (B, L) calibrated probabilities ``sigmoid(logit / T_slot)``."""
        temperature = self.attribute_temperature.to(attribute_logits.device, attribute_logits.dtype)  # (L,)
        return torch.sigmoid(attribute_logits / temperature)

    def set_attribute_temperature(self, temperatures: Mapping[str, float]) -> None:
        """Set the temperature of every label of the named slots (others keep theirs); each > 0."""
        columns = ONTOLOGY.slot_columns()
        unknown = sorted(set(temperatures) - set(columns))
        if unknown:
            raise ValueError(f"unknown attribute slots {unknown}; must be among {sorted(columns)}")
        for slot, value in temperatures.items():
            if not value > 0:
                raise ValueError(f"temperature of slot {slot!r} must be > 0, got {value}")
            self.attribute_temperature[columns[slot]] = float(value)

    # ------------------------------------------------------------------ text side
    def text_features(self, texts: Sequence[str], batch_size: int = 256) -> torch.Tensor:
        """Texts -> (B, Dt) raw text-encoder features (no grad when the text encoder is frozen)."""
        texts = list(texts)
        if not texts:
            return torch.zeros(0, self.text_dim, device=self.device)
        # batches of similar length: short Q&A turns are not padded to a long description's length
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        chunks = []
        with torch.no_grad() if self.config.freeze_text else contextlib.nullcontext():
            for start in range(0, len(texts), batch_size):
                tokens = self.text_encoder.tokenize([texts[i] for i in order[start : start + batch_size]])
                tokens = {k: v.to(self.device) for k, v in tokens.items()}
                chunks.append(self.text_encoder(tokens)["global"])
        features = torch.cat(chunks)  # (B, Dt) in length order
        inverse = torch.empty(len(order), dtype=torch.long)
        inverse[torch.tensor(order)] = torch.arange(len(order))
        return features[inverse.to(features.device)]

    # ------------------------------------------------------------------ dialogues
    def encode_dialogues(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Dialogue batch (see the module docstring) -> (B, R, D) L2-normalised query after each round.

        Round r depends on turns 0..r only; padded rounds repeat the last real query.
        """
        turn_types = batch["turn_types"]
        turn_text, turn_image = batch["turn_text"], batch["turn_image"]
        turn_mask = batch.get("turn_mask")
        if turn_mask is None:
            turn_mask = turn_types >= 0
        turn_mask = turn_mask.bool()
        b, r = turn_types.shape
        if turn_text.shape != (b, r, self.text_dim):
            raise ValueError(f"turn_text must be (B, R, Dt) = {(b, r, self.text_dim)}, got {tuple(turn_text.shape)}")
        if turn_image.shape != (b, r, self.embed_dim):
            raise ValueError(f"turn_image must be (B, R, D) = {(b, r, self.embed_dim)}, got {tuple(turn_image.shape)}")
        turn_types = torch.where(turn_mask, turn_types, torch.full_like(turn_types, PADDING))
        turns = self.turn_encoder(turn_types, turn_text, turn_image)  # (B, R, D)
        return self.memory(turns, turn_types, turn_mask)

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Same as :meth:`encode_dialogues`."""
        return self.encode_dialogues(batch)


def create_model(config: ModelConfig | str = "efficientnet_minilm", **overrides: object) -> RetrievalModel:
    """Build a :class:`RetrievalModel` from a config or a ``MODEL_CONFIGS`` name, with field overrides.

    Example:
        >>> model = create_model("tiny", embed_dim=16, num_identities=10)
        >>> model.config.embed_dim, model.image_head.classifier.out_features
        (16, 10)
    """
    if isinstance(config, str):
        config = MODEL_CONFIGS.create(config)
    if overrides:
        config = config.replace(**overrides)
    for name, kwargs in ((config.image_encoder, config.image_kwargs()), (config.text_encoder, config.text_kwargs())):
        if name == "clip" and not str(kwargs.get("model_dir") or "").strip():
            raise ValueError(
                "clip encoders need a local CLIP directory (a transformers save_pretrained folder): "
                "add --set model.encoder_kwargs.model_dir=DIR (in Python: encoder_kwargs={'model_dir': DIR})"
            )
    return RetrievalModel(config)
