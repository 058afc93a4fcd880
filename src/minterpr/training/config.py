"""Training configuration: typed dataclasses loaded from YAML with ``--set`` overrides.

A config is a YAML file (a path, or the name of one shipped in ``minterpr/configs``) whose
top-level keys are the fields of :class:`TrainConfig`; ``data``, ``model``, ``loss_weights``
and ``stages`` are nested sections. Unknown keys are errors naming the key and the file, so a
typo never silently falls back to a default. ``model`` takes the fields of
:class:`minterpr.models.config.ModelConfig`, optionally on top of a named ``preset``.

``stages`` lists the progressive tuning stages (as ChatReID): ``attributes`` (attribute and
identity losses on images), ``alignment`` (round-0 descriptions against images: ITC + SDM,
with the identity and attribute terms kept on), ``dialogue`` (every round of full dialogues,
deep supervision, reference loss). An entry may be a mapping or just a stage name, which
picks that stage from the file (or its defaults): so ``--set stages=[attributes,alignment]``
trains the description-only baseline.

Example:
    >>> cfg = load_config("tiny", ["batch_size=4", "stages.0.epochs=2"])
    >>> cfg.batch_size, cfg.stages[0].name, cfg.stages[0].epochs
    (4, 'attributes', 2)
    >>> load_config("tiny", ["selection_split=test"])
    Traceback (most recent call last):
    ...
    minterpr.training.config_yaml.ConfigError: selection_split='test' is refused: ...
"""

from __future__ import annotations

import copy
import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from minterpr.data.layout import dialogues_file, gallery_file
from minterpr.fileio import atomic_write_text
from minterpr.models.config import ModelConfig
from minterpr.models.losses import LossWeights

from .config_yaml import ConfigError, apply_overrides, build_dataclass, plain, read_config_mapping
from .image_augment import AugmentConfig

STAGE_NAMES = ("attributes", "alignment", "dialogue")
LOSS_NAMES = ("itc", "sdm", "id", "attribute", "reference")  # LossWeights fields a stage can switch on
# which builder made data.root: `data synth`, `data peta`, or "custom" for any other finished dataset
# folder in the same layout (`minterpr data convert` wrote it, or `minterpr data mark` fingerprinted it)
DATA_KINDS = ("synthetic", "peta", "custom")
ROUND_METRICS = ("r1", "r5", "r10", "mAP", "mINP", "hits1", "hits5", "hits10")  # selectable per round

# per-stage defaults: which losses are on, how many dialogue rounds are used, validate or not
STAGE_DEFAULTS: dict[str, dict[str, Any]] = {
    "attributes": {"losses": ["attribute", "id"], "max_rounds": 0, "validate": False},
    "alignment": {"losses": ["itc", "sdm", "id", "attribute"], "max_rounds": 1, "validate": True},
    "dialogue": {"losses": ["itc", "sdm", "id", "attribute", "reference"], "max_rounds": None, "validate": True},
}


@dataclass
class DataConfig:
    """Where the dataset lies and which files make its splits (paths relative to ``root``)."""

    root: str = ""  # dataset directory (e.g. made by `minterpr data synth`); `--data DIR` sets it
    kind: str = "synthetic"  # "synthetic", "peta" or "custom" (data convert / data mark): which builder made root
    train: str = dialogues_file("train")  # MInterPEDES dialogues of the training split
    val: str = dialogues_file("val")  # dialogues used for validation and model selection
    test: str = dialogues_file("test")  # dialogues of the test split (never used for selection)
    train_gallery: str = gallery_file("train")  # gallery manifest: identities + attributes of train images
    val_gallery: str = gallery_file("val")  # gallery manifest of the validation split
    test_gallery: str = gallery_file("test")  # gallery manifest of the test split
    image_root: str | None = None  # where image paths resolve; None = root
    max_train_samples: int = 0  # smoke runs: first N training dialogues (and N images for stage 1); 0 = all
    max_val_samples: int = 0  # keep only the first N validation dialogues; 0 = all


@dataclass
class StageConfig:
    """One stage of progressive tuning; unset fields take the stage's defaults."""

    name: str = "dialogue"  # "attributes" | "alignment" | "dialogue" (see the module doc)
    epochs: int = 1  # passes over the stage's training items
    lr: float = 1e-3  # peak learning rate of the trainable heads (AdamW)
    encoder_lr_scale: float = 0.1  # encoder parameters (unfrozen image stages, text) get lr * this
    weight_decay: float = 0.01  # AdamW decoupled weight decay
    warmup_steps: int = 0  # linear warm-up steps, then cosine decay to 0 over the stage
    losses: list[str] | None = None  # loss terms switched on (LossWeights fields); None = stage default
    max_rounds: int | None = None  # dialogue rounds fed to the model (1 = description only); None = default
    frozen_image_stages: int | str | None = None  # image stages kept frozen; None = model.frozen_image_stages
    validate: bool | None = None  # validate each epoch (and allow selecting it); None = stage default

    def resolved_losses(self) -> list[str]:
        return list(STAGE_DEFAULTS[self.name]["losses"] if self.losses is None else self.losses)

    def resolved_max_rounds(self) -> int | None:
        """0 = images only (no dialogue), None = every round, N = the first N rounds."""
        return STAGE_DEFAULTS[self.name]["max_rounds"] if self.max_rounds is None else self.max_rounds

    def resolved_validate(self) -> bool:
        return bool(STAGE_DEFAULTS[self.name]["validate"] if self.validate is None else self.validate)


@dataclass
class ImageTuningConfig:
    """Fine-tuning of the image side on labelled pixels before the stages (minterpr.training.image_tuning)."""

    epochs: int = 8  # passes over the labelled images
    batch_size: int = 64  # images per optimiser step
    lr: float = 1e-3  # peak learning rate of the image head (AdamW, warm-up then cosine decay)
    encoder_lr_scale: float = 0.2  # the image encoder's stages get lr * this
    weight_decay: float = 0.01  # AdamW decoupled weight decay (not on biases and norms)
    warmup_steps: int = 100  # linear warm-up steps
    # earliest image stages kept frozen (a count or a stage name, up to and including it); the
    # rest of the encoder trains end to end on augmented pixels
    frozen_image_stages: int | str = "stem"
    attribute_weight: float = 1.0  # weight of the attribute loss
    id_weight: float = 0.5  # weight of the identity loss (images of known training identities)
    # more labelled images besides the training split's gallery: "MANIFEST" or "MANIFEST=IMAGE_ROOT"
    # (e.g. a PA-100K gallery manifest); their identities are unknown to the identity loss
    extra_galleries: list[str] = field(default_factory=list)
    checkpoint_every_steps: int = 100  # write DIR/last.pt every N steps (and at every epoch end)
    # exponential moving average of the image side's weights, updated after every step (0 = off;
    # e.g. 0.999 averages over ~1,000 steps); validation, selection and the tuned weights use it
    ema_decay: float = 0.0
    # per-label feature mixup of the attribute head (minterpr.training.feature_mixup): each label
    # of each image mixes its slot feature and target with a random partner's, lambda ~
    # Beta(alpha, alpha); 0 = off
    feature_mixup_alpha: float = 0.0
    # progressive input sizes: [[epochs, height, width], ...] run in order first, each at most the
    # model's image_size (batches are resized down on the fly from the images decoded at the
    # model's size); the epochs left after them, and validation, at the model's size; [] = off
    progressive_sizes: list[list[int]] = field(default_factory=list)
    # MixStyle (minterpr.training.mixstyle; Zhou et al. 2021): after each of mixstyle_stages, a
    # training batch's per-channel feature mean/std are mixed with a random partner image's, with
    # probability mixstyle_p (0 = off), weight ~ Beta(mixstyle_alpha, mixstyle_alpha); it targets
    # cameras never seen in training (the leave-one-camera-set-out folds decide, not PETA test)
    mixstyle_p: float = 0.0
    mixstyle_alpha: float = 0.1  # the paper's 0.1: most mixes stay near one of the two styles
    mixstyle_stages: list[str] = field(default_factory=lambda: ["stage1", "stage2", "stage3"])  # early stages only
    augment: AugmentConfig = field(default_factory=AugmentConfig)  # colour-true augmentation

    def __post_init__(self) -> None:
        if self.feature_mixup_alpha < 0:
            raise ValueError(f"feature_mixup_alpha must be >= 0 (0 = off), got {self.feature_mixup_alpha}")
        if not 0.0 <= self.mixstyle_p <= 1.0 or self.mixstyle_alpha <= 0:
            raise ValueError(
                f"mixstyle_p must be in [0, 1] (0 = off) and mixstyle_alpha > 0, got "
                f"{self.mixstyle_p}, {self.mixstyle_alpha}"
            )
        for i, entry in enumerate(self.progressive_sizes):
            if len(entry) != 3 or min(entry) < 1:
                raise ValueError(f"progressive_sizes[{i}] must be [epochs, height, width], each >= 1, got {entry}")
        planned = sum(entry[0] for entry in self.progressive_sizes)
        if planned > self.epochs:
            raise ValueError(f"progressive_sizes plan {planned} epochs, more than epochs ({self.epochs})")

    def input_size(self, epoch: int) -> tuple[int, int] | None:
        """(H, W) of the training batches of ``epoch`` (0-based); None = the model's size.

        Example:
            >>> cfg = ImageTuningConfig(epochs=4, progressive_sizes=[[2, 128, 64], [1, 192, 96]])
            >>> [cfg.input_size(e) for e in range(4)]
            [(128, 64), (128, 64), (192, 96), None]
        """
        end = 0
        for epochs, height, width in self.progressive_sizes:
            end += epochs
            if epoch < end:
                return height, width
        return None

    def to_dict(self) -> dict[str, Any]:
        return plain(dataclasses.asdict(self))


@dataclass
class TrainConfig:
    """Everything a training run needs; saved resolved as RUN_DIR/config.yaml."""

    seed: int = 0  # seeds python, numpy and torch: same seed + config => same weights
    device: str = "cpu"  # "cpu", "cuda", "cuda:N" or "auto" (cuda when available)
    batch_size: int = 32  # training items per optimiser step (per process under torchrun)
    eval_batch_size: int = 128  # images / dialogues per forward pass when validating
    workers: int = 0  # DataLoader worker processes for image decoding (0 = main process)
    cache_features: bool = True  # cache frozen image-stem outputs and frozen text features
    # where the caches live ("" = RUN_DIR/cache); runs with the same frozen encoders can share
    # one directory: every entry is keyed by a fingerprint of the weights and settings it came from
    cache_dir: str = ""
    augment: bool = False  # random crop/flip/brightness on pixels; disables the stem cache (slower)
    checkpoint_every_steps: int = 200  # write RUN_DIR/last.pt every N optimiser steps (and per epoch)
    log_every: int = 20  # write a train.log line every N steps
    grad_clip: float = 5.0  # clip the gradient norm to this; 0 = off
    selection_metric: str = "r1@last"  # "<metric>@<round|last>" or "bri" on the selection split
    selection_split: str = "val"  # split used to pick best.pt; "test" is refused
    # after training, `minterpr train` also picks the weight of the attribute evidence in the
    # static score (cosine + w * log-likelihood) on the selection split and stores it in model.pt
    select_attribute_weight: bool = True
    # ... and, before that, fits one temperature per attribute slot to the selection split's gallery
    # labels (calibrated probabilities; minterpr.training.calibration), stored in model.pt
    calibrate_attributes: bool = True
    progress: bool = True  # tqdm progress bars
    data: DataConfig = field(default_factory=DataConfig)  # dataset files
    # the retrieval model (in Python: the default model; a config file's omitted fields: see _model_config)
    model: ModelConfig = field(default_factory=ModelConfig)
    loss_weights: LossWeights = field(default_factory=LossWeights)  # weight of each loss when on
    stages: list[StageConfig] = field(default_factory=lambda: [StageConfig(n) for n in STAGE_NAMES])
    # fine-tune the image side on labelled pixels before the stages (None = keep the pretrained encoder)
    image_tuning: ImageTuningConfig | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain-YAML dict of every field (the resolved config)."""
        out = {
            f.name: copy.deepcopy(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name not in ("data", "model", "loss_weights", "stages", "image_tuning")
        }
        if self.image_tuning is not None:  # absent when off: configs and checkpoints from before it compare equal
            out["image_tuning"] = self.image_tuning.to_dict()
        out["data"] = dataclasses.asdict(self.data)
        out["model"] = plain(self.model.to_dict())
        out["loss_weights"] = plain(dataclasses.asdict(self.loss_weights))
        out["stages"] = [dataclasses.asdict(s) for s in self.stages]
        return out


def parse_selection_metric(spec: str) -> tuple[str, int | None, bool]:
    """``"r1@last"`` -> ("r1", None, True): metric key, round (None = last), higher is better.

    Example:
        >>> parse_selection_metric("mAP@0"), parse_selection_metric("bri")
        (('mAP', 0, True), ('bri', None, False))
    """
    if spec == "bri":
        return "bri", None, False
    key, sep, where = spec.partition("@")
    if not sep or key not in ROUND_METRICS or not (where == "last" or where.isdigit()):
        raise ConfigError(
            f"selection_metric {spec!r} is not '<metric>@<round|last>' with metric one of "
            f"{', '.join(ROUND_METRICS)}, nor 'bri'"
        )
    return key, None if where == "last" else int(where), True


def _model_config(raw: Any, source: str) -> ModelConfig:
    """``model:`` section: ModelConfig fields, on top of ``preset`` (a MODEL_CONFIGS name) if given;
    without one, a stored model config of ``config_version`` (default 1: the fields left out read
    as they did when such sections were written; :func:`minterpr.models.io.read_model_config`)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: 'model' must be a mapping, got {raw!r}")
    raw = dict(raw)
    preset = raw.pop("preset", None)
    version = raw.pop("config_version", 1)
    from minterpr.models.config import MODEL_CONFIGS
    from minterpr.models.io import MODEL_CONFIG_VERSION, read_model_config

    try:
        if preset is None:
            return read_model_config(raw, version)
        return read_model_config({**MODEL_CONFIGS.create(preset).to_dict(), **raw}, MODEL_CONFIG_VERSION)
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"{source}: model: {err}") from None


def _expand_stage_names(stages: Any, file_stages: list[Any]) -> Any:
    """A bare stage name becomes that stage as the file defines it (else ``{"name": name}``)."""
    if not isinstance(stages, list):
        return stages
    return [
        copy.deepcopy(
            next((s for s in file_stages if isinstance(s, Mapping) and s.get("name") == item), {"name": item})
        )
        if isinstance(item, str)
        else item
        for item in stages
    ]


def _stages(raw: Any, file_stages: list[Any], source: str) -> list[StageConfig]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{source}: 'stages' must be a non-empty list, got {raw!r}")
    stages = []
    for i, item in enumerate(_expand_stage_names(raw, file_stages)):
        stage = build_dataclass(StageConfig, item, f"stages.{i}", source)
        if stage.name not in STAGE_NAMES:
            raise ConfigError(f"{source}: 'stages.{i}.name' is {stage.name!r}: must be one of {', '.join(STAGE_NAMES)}")
        bad = [n for n in stage.resolved_losses() if n not in LOSS_NAMES]
        if bad:
            raise ConfigError(
                f"{source}: 'stages.{i}.losses' has unknown loss {bad[0]!r}: must be one of {', '.join(LOSS_NAMES)}"
            )
        rounds = stage.resolved_max_rounds()
        if stage.name != "attributes" and rounds is not None and rounds < 1:
            raise ConfigError(f"{source}: 'stages.{i}.max_rounds' must be >= 1 (or null = all rounds), got {rounds}")
        if stage.epochs < 0 or stage.lr <= 0:
            raise ConfigError(f"{source}: 'stages.{i}' needs epochs >= 0 and lr > 0")
        stages.append(stage)
    return stages


def _image_tuning(raw: Any, source: str) -> ImageTuningConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: 'image_tuning' must be a mapping, got {raw!r}")
    raw = dict(raw)
    augment = raw.pop("augment", None)
    try:
        tuning = build_dataclass(ImageTuningConfig, raw, "image_tuning", source)
    except ValueError as err:
        raise ConfigError(f"{source}: image_tuning: {err}") from None
    if augment is not None:
        try:
            tuning.augment = build_dataclass(AugmentConfig, augment, "image_tuning.augment", source)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{source}: image_tuning.augment: {err}") from None
    if tuning.epochs < 0 or tuning.lr <= 0 or tuning.batch_size < 1 or tuning.checkpoint_every_steps < 1:
        raise ConfigError(
            f"{source}: 'image_tuning' needs epochs >= 0, lr > 0, batch_size >= 1 and checkpoint_every_steps >= 1"
        )
    return tuning


def config_from_dict(
    raw: Mapping[str, Any], source: str = "<dict>", file_stages: list[Any] | None = None
) -> TrainConfig:
    """Build and check a TrainConfig; ``source`` names the file in error messages."""
    raw = dict(raw)
    sections = {
        name: raw.pop(name) for name in ("data", "model", "loss_weights", "stages", "image_tuning") if name in raw
    }
    cfg = build_dataclass(TrainConfig, raw, "", source)
    if "data" in sections:
        cfg.data = build_dataclass(DataConfig, sections["data"] or {}, "data", source)
    # a file without a model section (or one without a preset) means what it meant when written: the
    # fields it leaves out read as a version-1 stored config's (models.io.V1_DEFAULTS)
    cfg.model = _model_config(sections.get("model") or {}, source)
    if "loss_weights" in sections:
        cfg.loss_weights = build_dataclass(LossWeights, sections["loss_weights"] or {}, "loss_weights", source)
    if "stages" in sections:
        cfg.stages = _stages(sections["stages"], file_stages or [], source)
    if sections.get("image_tuning") is not None:
        cfg.image_tuning = _image_tuning(sections["image_tuning"], source)
    validate_config(cfg, source)
    return cfg


def validate_config(cfg: TrainConfig, source: str = "<config>") -> None:
    """Checks that need several fields; raises ConfigError naming the key and file."""
    if cfg.selection_split == "test":
        raise ConfigError(
            "selection_split='test' is refused: picking the model on the test split leaks the test "
            "set into training decisions and makes the reported test figures optimistic; select on "
            f"'val' and evaluate on test once, at the end ({source})"
        )
    if cfg.selection_split != "val":
        raise ConfigError(f"{source}: 'selection_split' must be 'val', got {cfg.selection_split!r}")
    parse_selection_metric(cfg.selection_metric)
    if cfg.data.kind not in DATA_KINDS:
        raise ConfigError(f"{source}: 'data.kind' must be one of {', '.join(DATA_KINDS)}, got {cfg.data.kind!r}")
    for key in ("batch_size", "eval_batch_size", "checkpoint_every_steps", "log_every"):
        if getattr(cfg, key) < 1:
            raise ConfigError(f"{source}: '{key}' must be >= 1, got {getattr(cfg, key)}")
    if cfg.workers < 0 or cfg.grad_clip < 0:
        raise ConfigError(f"{source}: 'workers' and 'grad_clip' must be >= 0")
    if not (cfg.device in ("cpu", "cuda", "auto") or cfg.device.startswith("cuda:")):
        raise ConfigError(f"{source}: 'device' must be cpu, cuda, cuda:N or auto, got {cfg.device!r}")


def load_config(name_or_path: str | os.PathLike[str], overrides: Sequence[str] = ()) -> TrainConfig:
    """Load a config file or shipped config name, apply ``key.path=value`` overrides, check it.

    Override values are parsed as YAML (``3``, ``1e-3``, ``true``, ``[a, b]``).
    """
    raw, source = read_config_mapping(name_or_path)
    file_stages = copy.deepcopy(raw.get("stages") or [])

    def expand_stages(
        raw: dict[str, Any],
    ) -> None:  # bare names -> mappings, so a later stages.N.key=... edits the file's stage
        if "stages" in raw:
            raw["stages"] = _expand_stage_names(raw["stages"], file_stages)

    set_by = apply_overrides(raw, overrides, source, after_each=expand_stages)
    try:
        return config_from_dict(raw, source, file_stages)
    except ConfigError as err:
        if err.key is not None and err.key in set_by:
            raise ConfigError(f"{err} (from --set {set_by[err.key]})", err.key) from None
        raise


def save_config(cfg: TrainConfig, path: str | os.PathLike[str]) -> Path:
    """Write the resolved config as YAML (atomically); ``load_config(path)`` reads it back."""
    return atomic_write_text(path, yaml.safe_dump(cfg.to_dict(), sort_keys=False))
