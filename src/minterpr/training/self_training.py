"""Self-training on a new camera's unlabelled crops with a mean teacher (``minterpr adapt --method self-train``).

The pseudo-label adaptation of :mod:`minterpr.training.adaptation` labels the crops once, with
the model as it came, and fine-tunes on those fixed answers. A mean teacher (Tarvainen &
Valpola 2017; French et al. 2018 for domain adaptation) keeps labelling while the model learns:
the *teacher* is an exponential moving average of the *student*'s image side; at every step it
answers the ontology's questions for a weakly augmented view of each crop (flip and a small
shift: what a camera would give), its confident answers (:func:`~.adaptation.pseudo_labels`)
become the targets (soft, its probabilities, or one-hot), and the student learns them from a
strongly augmented view of the same crops (colour casts, blur, low resolution, JPEG, erasing:
the new camera's look and worse). The averaged teacher changes slowly, so a wrong answer the
student picks up is not fed straight back as a label; the teacher is the result.

The loop checkpoints to ``DIR/last.pt`` every ``checkpoint_every_steps`` steps and at every
epoch end; a rerun with the same settings resumes exactly (each step's augmentation and dropout
are seeded by ``(seed, epoch, step)``). The result goes to ``DIR/self_trained.pt`` (the teacher's
image side and the per-epoch records), which a rerun reuses.

Example:
    >>> cfg = SelfTrainingConfig(epochs=1)
    >>> cfg.strong.colour_cast > 0, cfg.weak.colour_cast
    (True, 0.0)
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from minterpr.errors import RunError
from minterpr.models.losses import attribute_loss

from .checkpoint import load_checkpoint, save_checkpoint
from .config import ImageTuningConfig
from .data import item_seed
from .image_augment import AugmentConfig, augment_batch
from .image_tuning import image_optimizer, image_side_state
from .labelled_images import normalise

FORMAT = "minterpr-self-training/1"


@dataclass
class SelfTrainingConfig:
    """How the mean teacher labels the crops and the student learns them."""

    epochs: int = 2  # passes over the crops (a few short ones: the labels are the model's own)
    batch_size: int = 32  # crops per step
    lr: float = 1e-4  # peak learning rate of the image head (AdamW, warm-up then cosine)
    encoder_lr_scale: float = 0.2  # the encoder's stages get lr * this
    weight_decay: float = 0.01  # AdamW decoupled weight decay (not on biases and norms)
    warmup_steps: int = 20  # linear warm-up steps
    frozen_image_stages: int | str = "stem"  # earliest stages kept frozen, as in image tuning
    # teacher = EMA of the student; the decay ramps up as min(decay, (1 + n) / (10 + n)) after n
    # updates, so the teacher starts as the model and then follows the student slowly
    teacher_decay: float = 0.99
    confidence: float = 0.8  # a teacher answer becomes a target when it is at least this sure
    soft_targets: bool = True  # targets are the teacher's probabilities (False: its confident answers one-hot)
    checkpoint_every_steps: int = 50  # write DIR/last.pt every N steps (and at every epoch end)
    # the teacher's view: only what another frame of the same camera would change
    weak: AugmentConfig = field(
        default_factory=lambda: AugmentConfig(
            flip=0.5, shift=0.04, scale_min=0.95, scale_max=1.05, blur=0.0, low_resolution=0.0, jpeg=0.0, erasing=0.0
        )
    )
    # the student's view: another camera's colour cast, blur, resolution, compression and occluders
    strong: AugmentConfig = field(
        default_factory=lambda: AugmentConfig(blur=0.3, low_resolution=0.3, jpeg=0.3, erasing=0.5, colour_cast=0.8)
    )

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.checkpoint_every_steps < 1:
            raise ValueError("epochs, batch_size and checkpoint_every_steps must be >= 1")
        if not 0.0 <= self.teacher_decay < 1.0:
            raise ValueError(f"teacher_decay must be in [0, 1), got {self.teacher_decay}")
        if not 0.5 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0.5, 1), got {self.confidence}")

    def tuning(self) -> ImageTuningConfig:
        """The optimiser settings as an :class:`ImageTuningConfig` (for the shared optimiser builder)."""
        return ImageTuningConfig(
            epochs=self.epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            encoder_lr_scale=self.encoder_lr_scale,
            weight_decay=self.weight_decay,
            warmup_steps=self.warmup_steps,
            frozen_image_stages=self.frozen_image_stages,
        )


def teacher_targets(probs: torch.Tensor, confidence: float, soft: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, L) teacher probabilities -> (B, L) targets and bool masks of its confident answers.

    Example:
        >>> from minterpr.language.ontology import ONTOLOGY
        >>> probs = torch.full((1, len(ONTOLOGY.flat_labels())), 0.5)
        >>> probs[0, ONTOLOGY.slot_columns()["gender"]] = torch.tensor([0.9, 0.1])
        >>> targets, mask = teacher_targets(probs, 0.8, soft=True)
        >>> int(mask.sum()), [round(v, 2) for v in targets[mask].tolist()]
        (2, [0.9, 0.1])
    """
    from .adaptation import pseudo_labels

    hard, mask = pseudo_labels(probs.detach().cpu().numpy(), confidence)
    targets = probs.detach().cpu() if soft else torch.from_numpy(hard)
    return targets * torch.from_numpy(mask), torch.from_numpy(mask)


def self_training_fingerprint(cfg: SelfTrainingConfig, model: Any, paths: Sequence[str], seed: int) -> str:
    """What the result depends on: the settings, the model (config and starting weights' shape), the crops, the seed."""
    h = hashlib.sha1(json.dumps([asdict(cfg), model.config.to_dict(), seed], sort_keys=True, default=str).encode())
    for path in paths:
        h.update(path.encode())
        h.update(b"\0")
    return h.hexdigest()


class SelfTrainer:
    """Runs :class:`SelfTrainingConfig` on ``model`` with the (N, 3, H, W) uint8 ``pixels`` in ``out_dir``."""

    def __init__(
        self,
        model: Any,
        cfg: SelfTrainingConfig,
        out_dir: Path,
        *,
        pixels: torch.Tensor,
        paths: Sequence[str],
        seed: int = 0,
        log: Callable[[str], None] = print,
    ) -> None:
        if len(pixels) != len(paths) or not len(pixels):
            raise RunError(out_dir, f"self-training needs crops: {len(pixels)} images for {len(paths)} paths")
        self.model, self.cfg, self.dir, self.seed, self.log = model, cfg, Path(out_dir), seed, log
        self.pixels = pixels
        self.fingerprint = self_training_fingerprint(cfg, model, paths, seed)
        self.steps_per_epoch = -(-len(pixels) // cfg.batch_size)

    def run(self) -> dict[str, Any]:
        """Self-train (or resume, or reuse a finished result); the model ends with the teacher's weights."""
        result = self.dir / "self_trained.pt"
        if result.is_file():
            saved = load_checkpoint(result)
            if saved.get("format") != FORMAT or saved.get("fingerprint") != self.fingerprint:
                raise RunError(result, "was self-trained with other settings or crops; move it away to start over")
            self.model.load_state_dict(saved["weights"], strict=False)
            self.log(f"self-training: reusing {result}")
            return {k: v for k, v in saved.items() if k != "weights"}
        self.dir.mkdir(parents=True, exist_ok=True)
        model, cfg = self.model, self.cfg
        model.image_encoder.freeze(cfg.frozen_image_stages)
        for name, p in model.image_head.named_parameters():
            p.requires_grad_(name != "bnneck.bias")  # BNNeck keeps its shift at zero, as in image tuning
        optimizer, scheduler = image_optimizer(model, cfg.tuning(), self.steps_per_epoch * cfg.epochs)
        teacher = copy.deepcopy(model).eval()
        teacher.requires_grad_(False)
        state: dict[str, Any] = {
            "epoch": 0,
            "step": 0,
            "updates": 0,
            "history": [],
            "loss_sum": 0.0,
            "known_sum": 0.0,
            "seconds": 0.0,
        }
        last = self.dir / "last.pt"
        if last.is_file():
            ckpt = load_checkpoint(last)
            if ckpt.get("format") != FORMAT or ckpt.get("fingerprint") != self.fingerprint:
                raise RunError(last, "belongs to other self-training settings or crops; move it away to start over")
            model.load_state_dict(ckpt["student"], strict=False)
            teacher.load_state_dict(ckpt["teacher"], strict=False)
            optimizer.load_state_dict(ckpt["optimizer"])
            scheduler.load_state_dict(ckpt["scheduler"])
            state.update({k: ckpt[k] for k in state})
            self.log(f"self-training: resuming at epoch {state['epoch'] + 1}, step {state['step']}")
        for epoch in range(state["epoch"], cfg.epochs):
            self._epoch(epoch, state, teacher, optimizer, scheduler)
        weights = image_side_state(teacher)
        model.load_state_dict(weights, strict=False)
        record = {
            "format": FORMAT,
            "fingerprint": self.fingerprint,
            "history": state["history"],
            "seconds": round(state["seconds"], 3),
        }
        save_checkpoint({**record, "weights": weights}, result)
        return record

    def _epoch(self, epoch: int, state: dict[str, Any], teacher: Any, optimizer: Any, scheduler: Any) -> None:
        model, cfg = self.model, self.cfg
        order = torch.randperm(
            len(self.pixels), generator=torch.Generator().manual_seed(item_seed(self.seed, "self-train", epoch))
        )
        # frozen stages stay exactly as they are (an average of equal values would still round)
        frozen = tuple(f"image_encoder.stages.{i}." for i in range(model.image_encoder.frozen_stages))
        teacher_state = {
            k: v
            for k, v in teacher.state_dict().items()
            if k.startswith(("image_encoder.", "image_head.")) and not (frozen and k.startswith(frozen))
        }
        model.train()
        started = time.perf_counter()
        for step in range(state["step"], self.steps_per_epoch):
            batch = self.pixels[order[step * cfg.batch_size : (step + 1) * cfg.batch_size]]
            torch.manual_seed(item_seed(self.seed, "self-train-step", epoch, step))  # dropout: exact on resume
            generator = torch.Generator().manual_seed(item_seed(self.seed, "self-train-augment", epoch, step))
            weak = normalise(augment_batch(batch, cfg.weak, generator), model).to(model.device)
            strong = normalise(augment_batch(batch, cfg.strong, generator), model).to(model.device)
            with torch.no_grad():
                probs = torch.sigmoid(teacher.encode_images(weak)["attribute_logits"].float())
            targets, mask = teacher_targets(probs, cfg.confidence, cfg.soft_targets)
            logits = model.encode_images(strong)["attribute_logits"]
            loss = attribute_loss(logits, targets.to(model.device), mask.to(model.device))
            optimizer.zero_grad(set_to_none=True)
            if mask.any():  # a batch the teacher is sure of nothing in teaches nothing
                loss.backward()
                torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 5.0)
                optimizer.step()
            scheduler.step()
            self._update_teacher(teacher_state, state)
            state["step"] = step + 1
            state["loss_sum"] += float(loss.item())
            state["known_sum"] += float(mask.float().mean())
            if state["step"] % cfg.checkpoint_every_steps == 0 and state["step"] < self.steps_per_epoch:
                state["seconds"] += time.perf_counter() - started
                started = time.perf_counter()
                self._checkpoint(state, teacher, optimizer, scheduler)
        state["seconds"] += time.perf_counter() - started
        record = {
            "epoch": epoch + 1,
            "loss": round(state["loss_sum"] / self.steps_per_epoch, 5),
            # share of (crop, label) entries the teacher was sure of
            "confident_share": round(state["known_sum"] / self.steps_per_epoch, 4),
            "seconds": round(state["seconds"], 3),
        }
        self.log("self-training " + " ".join(f"{k} {v}" for k, v in record.items()))
        state["history"].append(record)
        state.update(epoch=epoch + 1, step=0, loss_sum=0.0, known_sum=0.0)
        self._checkpoint(state, teacher, optimizer, scheduler)

    @torch.no_grad()
    def _update_teacher(self, teacher_state: dict[str, torch.Tensor], state: dict[str, Any]) -> None:
        decay = min(self.cfg.teacher_decay, (1 + state["updates"]) / (10 + state["updates"]))
        live = self.model.state_dict()
        for key, value in teacher_state.items():
            if value.is_floating_point():
                value.mul_(decay).add_(live[key].detach(), alpha=1.0 - decay)
            else:
                value.copy_(live[key])
        state["updates"] += 1

    def _checkpoint(self, state: dict[str, Any], teacher: Any, optimizer: Any, scheduler: Any) -> None:
        save_checkpoint(
            {
                "format": FORMAT,
                "fingerprint": self.fingerprint,
                **state,
                "student": image_side_state(self.model),
                "teacher": image_side_state(teacher),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
            },
            self.dir / "last.pt",
        )
