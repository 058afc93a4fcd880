"""The appearance (re-identification) recipe's config: ``minterpr train --config reid``.

A config file whose top level says ``task: reid`` trains the appearance model
(:mod:`minterpr.training.reid`) instead of the retrieval model; ``--set`` works as for any config.

Example:
    >>> cfg = load_reid_config("reid", ["epochs=2", "train=[a.jsonl]", "val=b.jsonl"])
    >>> cfg.epochs, cfg.batch_size, cfg.model.width
    (2, 64, 'x0_25')
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml

from minterpr.fileio import atomic_write_text
from minterpr.models.reid import ReidModelConfig
from minterpr.training.config_yaml import ConfigError, apply_overrides, build_dataclass, read_config_mapping
from minterpr.training.image_augment import AugmentConfig

TASK = "reid"


@dataclass
class ReidTrainConfig:
    """Identity cross-entropy (label smoothing) + batch-hard triplet over a BNNeck, PK batches."""

    seed: int = 0  # seeds sampling, augmentation and initialisation: same seed, same weights
    train: list[str] = field(default_factory=list)  # re-id manifests to train on (minterpr data reid)
    val: str = ""  # manifest whose query/gallery split selects the epoch (never a test split)
    weights: str | None = None  # starting weights: a torchreid OSNet state dict file; None = random
    init: str | None = None  # or start from a minterpr appearance model (shipped[:NAME], a directory, a best.pt)
    model: ReidModelConfig = field(default_factory=ReidModelConfig)  # the network
    epochs: int = 30  # passes of ``iterations_per_epoch`` PK batches
    identities_per_batch: int = 16  # P: identities in a batch
    images_per_identity: int = 4  # K: crops of each (drawn with replacement when fewer)
    iterations_per_epoch: int = 0  # batches per epoch; 0 = training images // batch size
    lr: float = 3.5e-4  # peak learning rate (Adam; warm-up then cosine to 0)
    weight_decay: float = 5e-4  # Adam's L2 weight decay (the field's recipe)
    warmup_epochs: int = 2  # linear warm-up from 10 % of lr
    label_smoothing: float = 0.1  # of the identity cross-entropy
    triplet_margin: float = 0.3  # of the batch-hard triplet loss
    id_weight: float = 1.0  # weight of id_loss
    triplet_weight: float = 1.0  # weight of triplet_loss
    augment: AugmentConfig = field(default_factory=lambda: AugmentConfig(erasing=0.5))  # random erasing 0.5
    eval_batch_size: int = 128  # crops per forward pass when validating
    channels_last: bool = True  # NHWC convolutions: about 3x faster OSNet steps on a CPU, same results
    checkpoint_every_steps: int = 100  # write RUN/last.pt every N steps (and at every epoch end)
    device: str = "cpu"  # torch device of the steps: cpu, cuda, cuda:N or auto (may change on --resume)

    @property
    def batch_size(self) -> int:
        return self.identities_per_batch * self.images_per_identity

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["model"] = self.model.to_dict()
        return {"task": TASK, **data}


def reid_config_from_dict(raw: dict[str, Any], source: str = "<dict>") -> ReidTrainConfig:
    """Build and check a config (unknown keys and bad values name the key and the file)."""
    raw = {k: v for k, v in raw.items() if k != "task"}
    model = ReidModelConfig.from_dict(_checked_model(raw.pop("model", {}) or {}, source))
    augment = build_dataclass(AugmentConfig, raw.pop("augment", {"erasing": 0.5}) or {}, "augment", source)
    cfg: ReidTrainConfig = build_dataclass(ReidTrainConfig, raw, "", source)
    cfg.model, cfg.augment = model, augment
    if cfg.epochs < 1 or cfg.identities_per_batch < 2 or cfg.images_per_identity < 2:
        raise ConfigError(
            f"{source}: epochs >= 1, identities_per_batch >= 2 and images_per_identity >= 2 "
            "(the triplet loss needs two identities of two crops)"
        )
    if cfg.weights and cfg.init:
        raise ConfigError(f"{source}: set weights (a torchreid file) or init (a minterpr appearance model), not both")
    if cfg.lr <= 0 or not 0 <= cfg.label_smoothing < 1 or cfg.triplet_margin < 0:
        raise ConfigError(f"{source}: lr > 0, 0 <= label_smoothing < 1 and triplet_margin >= 0")
    return cfg


def _checked_model(raw: Any, source: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: 'model' must be a mapping, got {raw!r}")
    allowed = ("width", "norm", "image_size", "feature_dim", "flip_test")
    unknown = [k for k in raw if k not in allowed]
    if unknown:
        raise ConfigError(f"{source}: unknown key 'model.{unknown[0]}' (allowed: {', '.join(allowed)})")
    return raw


def read_task(name_or_path: str | os.PathLike[str]) -> str:
    """The ``task`` a config file declares ("retrieval" when it names none)."""
    raw, _ = read_config_mapping(name_or_path)
    return str(raw.get("task", "retrieval"))


def load_reid_config(name_or_path: str | os.PathLike[str], overrides: Sequence[str] = ()) -> ReidTrainConfig:
    """A ``task: reid`` config file or shipped name, with ``key.path=value`` overrides (YAML values)."""
    raw, source = read_config_mapping(name_or_path)
    apply_overrides(raw, overrides, source)
    return reid_config_from_dict(raw, source)


def save_reid_config(cfg: ReidTrainConfig, path: str | os.PathLike[str]) -> Path:
    """Write the resolved config as YAML; :func:`load_reid_config` reads it back."""
    return atomic_write_text(path, yaml.safe_dump(cfg.to_dict(), sort_keys=False))
