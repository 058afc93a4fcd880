"""Fine-tuning the image side on real labelled pixels, before the retrieval stages.

An ImageNet backbone kept frozen reads real CCTV crops poorly: on PETA its attribute head stays
near the majority answer on cameras it never saw. This step trains the image encoder (all but
its earliest stages) with the image head end to end on every labelled image given, the
training split's gallery plus ``extra_galleries`` (e.g. the PA-100K sample), with

* the imbalance-aware attribute loss of Jia et al. 2021 (:func:`minterpr.models.losses.attribute_loss`)
  and the identity loss on images whose identity is known (it shapes the image embedding that
  judged reference images are compared with);
* colour-true augmentation of whole batches (:mod:`minterpr.training.image_augment`), and
  optionally per-label feature mixup (:mod:`minterpr.training.feature_mixup`), and for cameras
  never seen, MixStyle in the early stages (:mod:`minterpr.training.mixstyle`) and colour casts;
* model selection on the validation split's label-based mA (test-time flip when the model
  config asks for it), never on test.

Images are decoded once (:mod:`minterpr.training.labelled_images`), at the model's input size,
into a uint8 tensor kept in memory (13,909 PETA crops at 256x128 take 1.4 GB), so an epoch costs only augmentation and the network. With
``progressive_sizes`` the early epochs' batches are resized down from that tensor on the fly
(one copy in memory, at the size validation uses; a resize of a batch costs far less than its
forward pass).
The loop checkpoints to ``DIR/last.pt`` every ``checkpoint_every_steps`` steps and at every epoch
end; a rerun resumes exactly (each step's augmentation and dropout are seeded by
``(seed, epoch, step)``). The selected weights go to ``DIR/tuned.pt``, the per-epoch records to
``DIR/metrics.jsonl``. :class:`~minterpr.training.trainer.Trainer` runs it when the config has
an ``image_tuning`` section.

Example:
    >>> from minterpr.training.config import ImageTuningConfig
    >>> ImageTuningConfig(epochs=2).frozen_image_stages
    'stem'
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any, Callable

import torch
from tqdm import tqdm

from minterpr.errors import RunError
from minterpr.evaluation.attribute_metrics import attribute_metrics_from_targets
from minterpr.fileio import atomic_write_text
from minterpr.models import RetrievalModel
from minterpr.models.losses import attribute_loss, id_loss, positive_ratio

from .checkpoint import load_checkpoint, save_checkpoint
from .config import ImageTuningConfig
from .data import item_seed
from .feature_mixup import LabelMix
from .image_augment import augment_batch
from .labelled_images import LabelledImages, normalise, predict_probabilities, resize_batch
from .mixstyle import mixstyle

FORMAT = "minterpr-image-tuning/1"


# fields added to ImageTuningConfig after results were published count in the fingerprint only when
# set, so tunings made before they existed are still reused and resumed
LATER_FIELDS: dict[str, Any] = {
    "ema_decay": 0.0,
    "feature_mixup_alpha": 0.0,
    "progressive_sizes": [],
    "mixstyle_p": 0.0,
    "mixstyle_alpha": 0.1,
    "mixstyle_stages": ["stage1", "stage2", "stage3"],
}
LATER_AUGMENT = ("colour_cast", "cast_gain", "cast_gamma")  # counted only with colour_cast on


def _settings(cfg: ImageTuningConfig) -> dict[str, Any]:
    settings = {k: v for k, v in cfg.to_dict().items() if k not in LATER_FIELDS or v != LATER_FIELDS[k]}
    if not settings["augment"].get("colour_cast"):
        settings["augment"] = {k: v for k, v in settings["augment"].items() if k not in LATER_AUGMENT}
    return settings


def tuning_fingerprint(
    cfg: ImageTuningConfig, model: RetrievalModel, train: LabelledImages, seed: int, balanced: bool
) -> str:
    """What the tuned weights depend on: the tuning config, the model config, the images and the seed."""
    settings = _settings(cfg)
    h = hashlib.sha1(
        json.dumps([settings, model.config.to_dict(), seed, balanced], sort_keys=True, default=str).encode()
    )
    for image in train.images:
        h.update(image.path.encode())
        h.update(b"\0")
    return h.hexdigest()


def image_optimizer(model: RetrievalModel, cfg: ImageTuningConfig, total_steps: int):
    encoder = [p for p in model.image_encoder.parameters() if p.requires_grad]
    head = [p for p in model.image_head.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in ps if p.ndim > 1], "lr": lr, "weight_decay": cfg.weight_decay}
        for ps, lr in ((encoder, cfg.lr * cfg.encoder_lr_scale), (head, cfg.lr))
    ]
    groups += [
        {"params": [p for p in ps if p.ndim <= 1], "lr": lr, "weight_decay": 0.0}
        for ps, lr in ((encoder, cfg.lr * cfg.encoder_lr_scale), (head, cfg.lr))
    ]
    optimizer = torch.optim.AdamW([g for g in groups if g["params"]])
    warmup = cfg.warmup_steps

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total_steps - warmup))))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def image_side_state(model: RetrievalModel) -> dict[str, torch.Tensor]:
    return {
        k: v.detach().clone() for k, v in model.state_dict().items() if k.startswith(("image_encoder.", "image_head."))
    }


class WeightAverage:
    """An exponential moving average of the image side's weights and buffers (Polyak averaging).

    The decay ramps up as ``min(decay, (1 + n) / (10 + n))`` after n updates (as TF's and timm's
    averages do), so the first steps' random head does not linger in the average; integer buffers
    (BatchNorm's step counts) are copied.

    Example:
        >>> from minterpr.models import create_model
        >>> model = create_model("tiny")
        >>> average = WeightAverage(model, 0.999)
        >>> average.update(model); average.update(model)
        >>> average.updates, min(0.999, 2 / 11)  # the decay of the next update
        (2, 0.18181818181818182)
    """

    def __init__(self, model: RetrievalModel, decay: float, state: dict[str, Any] | None = None) -> None:
        self.decay = decay
        self.state = dict(state["weights"]) if state else image_side_state(model)
        self.updates = int(state["updates"]) if state else 0

    @torch.no_grad()
    def update(self, model: RetrievalModel) -> None:
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates))
        live = model.state_dict()
        for key, average in self.state.items():
            if average.is_floating_point():
                average.mul_(decay).add_(live[key].detach(), alpha=1.0 - decay)
            else:
                average.copy_(live[key])
        self.updates += 1

    def to_dict(self) -> dict[str, Any]:
        return {"weights": self.state, "updates": self.updates}


def load_tuned(model: RetrievalModel, path: Path) -> dict[str, Any]:
    """Load ``DIR/tuned.pt`` (image encoder + image head weights) into ``model``; returns its record."""
    saved = load_checkpoint(path)
    if saved.get("format") != FORMAT or not isinstance(saved.get("weights"), dict):
        raise RunError(path, f"not an image-tuning result (format {saved.get('format')!r}, expected {FORMAT})")
    missing, unexpected = model.load_state_dict(saved["weights"], strict=False)
    wrong = [k for k in missing if k.startswith(("image_encoder.", "image_head."))] + list(unexpected)
    if wrong:
        raise RunError(path, f"the tuned weights do not fit the model config: {', '.join(wrong[:5])}")
    return {k: v for k, v in saved.items() if k != "weights"}


class ImageTuner:
    """Runs :class:`ImageTuningConfig` on ``model`` in ``out_dir``; see the module doc."""

    def __init__(
        self,
        model: RetrievalModel,
        cfg: ImageTuningConfig,
        out_dir: Path,
        *,
        train: LabelledImages,
        val: LabelledImages | None,
        seed: int,
        balanced_attributes: bool = True,
        progress: bool = True,
        log: Callable[[str], None] = print,
    ) -> None:
        self.model, self.cfg, self.dir, self.seed = model, cfg, Path(out_dir), seed
        self.train, self.val, self.progress, self.log = train, val, progress, log
        self.fingerprint = tuning_fingerprint(cfg, model, train, seed, balanced_attributes)
        # (L,) positive shares for Jia's weighting of the attribute loss; None = plain BCE
        self.ratio = positive_ratio(train.targets, train.mask) if balanced_attributes else None
        self.steps_per_epoch = -(-len(train) // cfg.batch_size)
        unknown = [s for s in cfg.mixstyle_stages if s not in model.image_encoder.stage_names] if cfg.mixstyle_p else []
        if unknown:
            raise RunError(
                out_dir,
                f"image_tuning.mixstyle_stages {unknown}: the image encoder's stages are "
                f"{', '.join(model.image_encoder.stage_names)}",
            )
        height, width = train.pixels.shape[-2:]
        larger = [entry for entry in cfg.progressive_sizes if entry[1] > height or entry[2] > width]
        if larger:
            raise RunError(
                out_dir,
                f"image_tuning.progressive_sizes {larger} exceed the model's input size "
                f"{height}x{width}: the images are decoded at that size and only resized down",
            )

    def run(self) -> dict[str, Any]:
        """Tune (or resume, or reuse a finished result); the model ends with the selected weights."""
        tuned = self.dir / "tuned.pt"
        if tuned.is_file():
            record = load_tuned(self.model, tuned)
            if record.get("fingerprint") == self.fingerprint:
                self.log(f"image tuning: reusing {tuned} (epoch {record.get('best', {}).get('epoch')})")
                return record
            raise RunError(tuned, "was tuned with another config or other images; move it away to tune again")
        self.dir.mkdir(parents=True, exist_ok=True)
        model, cfg = self.model, self.cfg
        model.image_encoder.freeze(cfg.frozen_image_stages)
        for name, p in model.image_head.named_parameters():
            p.requires_grad_(name != "bnneck.bias")  # BNNeck keeps its shift at zero
        optimizer, scheduler = image_optimizer(model, cfg, self.steps_per_epoch * cfg.epochs)
        state = {"epoch": 0, "step": 0, "best": None, "history": [], "loss_sum": 0.0, "seconds": 0.0}
        last = self.dir / "last.pt"
        if last.is_file():
            ckpt = load_checkpoint(last)
            if ckpt.get("format") != FORMAT or ckpt.get("fingerprint") != self.fingerprint:
                raise RunError(
                    last, "belongs to another image-tuning config or other images; move it away to start over"
                )
            model.load_state_dict(ckpt["weights"], strict=False)
            optimizer.load_state_dict(ckpt["optimizer"])
            scheduler.load_state_dict(ckpt["scheduler"])
            state.update({k: ckpt[k] for k in state})
            self.log(f"image tuning: resuming at epoch {state['epoch'] + 1}, step {state['step']}")
        best_weights = ckpt.get("best_weights") if last.is_file() else None
        self.average = (
            WeightAverage(model, cfg.ema_decay, ckpt.get("ema") if last.is_file() else None)
            if cfg.ema_decay > 0
            else None
        )
        with mixstyle(model.image_encoder, cfg.mixstyle_stages, p=cfg.mixstyle_p, alpha=cfg.mixstyle_alpha):
            for epoch in range(state["epoch"], cfg.epochs):
                best_weights = self._epoch(epoch, state, optimizer, scheduler, best_weights)
        if best_weights is not None:
            model.load_state_dict(best_weights, strict=False)
        record = {
            "format": FORMAT,
            "fingerprint": self.fingerprint,
            "best": state["best"],
            "history": state["history"],
            "seconds": state["seconds"],
        }
        save_checkpoint({**record, "weights": image_side_state(model)}, tuned)
        return record

    def _epoch(self, epoch: int, state: dict[str, Any], optimizer, scheduler, best_weights):  # noqa: ANN001
        model, cfg, data = self.model, self.cfg, self.train
        order = torch.randperm(len(data), generator=torch.Generator().manual_seed(item_seed(self.seed, "tune", epoch)))
        model.train()
        bar = tqdm(
            total=self.steps_per_epoch,
            initial=state["step"],
            desc=f"image tuning {epoch + 1}/{cfg.epochs}",
            disable=not self.progress,
            unit="step",
            leave=False,
        )
        size = cfg.input_size(epoch)  # None: the model's size (progressive sizes: smaller first)
        started = time.perf_counter()
        for step in range(state["step"], self.steps_per_epoch):
            rows = order[step * cfg.batch_size : (step + 1) * cfg.batch_size]
            torch.manual_seed(item_seed(self.seed, "step", epoch, step))  # dropout: exact on resume
            generator = torch.Generator().manual_seed(item_seed(self.seed, "augment", epoch, step))
            pixels = normalise(augment_batch(resize_batch(data.pixels[rows], size), cfg.augment, generator), model).to(
                model.device
            )
            targets, mask = data.targets[rows].to(model.device), data.mask[rows].to(model.device)
            mix = None
            if cfg.feature_mixup_alpha > 0:
                mix = LabelMix.draw(
                    len(rows), targets.shape[1], cfg.feature_mixup_alpha, item_seed(self.seed, "mixup", epoch, step)
                ).to(model.device)
                targets, mask = mix.targets(targets, mask)
            out = model.encode_images(pixels, attribute_mix=mix)
            loss = cfg.attribute_weight * attribute_loss(
                out["attribute_logits"], targets, mask, None if self.ratio is None else self.ratio.to(model.device)
            )
            if cfg.id_weight > 0 and out["id_logits"] is not None:
                loss = loss + cfg.id_weight * id_loss(out["id_logits"], data.person_index[rows].to(model.device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 5.0)
            optimizer.step()
            scheduler.step()
            if self.average is not None:
                self.average.update(model)
            state["step"], state["loss_sum"] = step + 1, state["loss_sum"] + loss.item()
            bar.update(1)
            bar.set_postfix(loss=f"{state['loss_sum'] / (step + 1):.3f}")
            if state["step"] % cfg.checkpoint_every_steps == 0 and state["step"] < self.steps_per_epoch:
                state["seconds"] += time.perf_counter() - started
                started = time.perf_counter()
                self._checkpoint(state, optimizer, scheduler, best_weights)
        bar.close()
        state["seconds"] += time.perf_counter() - started
        record = {
            "epoch": epoch + 1,
            "loss": state["loss_sum"] / max(1, self.steps_per_epoch),
            "seconds": round(state["seconds"], 3),
        }
        if size is not None:
            record["input_size"] = list(size)
        if self.val is not None and len(self.val):
            live = image_side_state(model) if self.average is not None else None
            if self.average is not None:  # validate (and keep) the averaged weights
                model.load_state_dict(self.average.state, strict=False)
            report = attribute_metrics_from_targets(
                predict_probabilities(model, self.val.pixels),
                self.val.targets.numpy(),
                self.val.mask.numpy(),
                auc=False,
            )
            record["val_mA"] = round(report.mA, 2)  # percent, at p > 0.5
            # beside mA, whether the most probable value of a slot beats always answering its majority value
            slot_accuracy, majority = report.slot_mean
            record["val_slot_accuracy"], record["val_slot_majority"] = round(slot_accuracy, 2), round(majority, 2)
            if state["best"] is None or record["val_mA"] > state["best"]["val_mA"]:
                state["best"] = dict(record)
                best_weights = image_side_state(model)
            if live is not None:
                model.load_state_dict(live, strict=False)
        elif self.average is not None:  # no validation: the average is the result
            best_weights = {k: v.clone() for k, v in self.average.state.items()}
        self.log("image tuning " + " ".join(f"{k} {v}" for k, v in record.items()))
        state["history"].append(record)
        state.update(epoch=epoch + 1, step=0, loss_sum=0.0)
        atomic_write_text(self.dir / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in state["history"]))
        self._checkpoint(state, optimizer, scheduler, best_weights)
        return best_weights

    def _checkpoint(self, state: dict[str, Any], optimizer, scheduler, best_weights) -> None:  # noqa: ANN001
        save_checkpoint(
            {
                "format": FORMAT,
                "fingerprint": self.fingerprint,
                **state,
                "weights": image_side_state(self.model),
                "best_weights": best_weights,
                "ema": None if self.average is None else self.average.to_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
            },
            self.dir / "last.pt",
        )
