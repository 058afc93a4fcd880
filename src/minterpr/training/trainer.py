"""The training loop: progressive stages, validation, model selection, exact resume.

Files written to RUN_DIR (only by rank 0 under torchrun):

* ``config.yaml``: the resolved config;
* ``last.pt``: the full training state (model, optimiser, scheduler, RNG states, stage /
  epoch / step and the epoch's shuffled order), atomically every ``checkpoint_every_steps``
  steps and at every epoch end; ``--resume`` continues from it exactly, so a run killed at
  any moment ends with the same weights as one never interrupted (it holds tensors and plain
  data only and is loaded weights-only: a crafted last.pt is refused, never executed);
* ``best.pt``: the best model on the validation selection metric (``save_model`` format, extra
  = stage, epoch, validation metrics); ``model.pt``: the final selected model (best.pt, or the
  last weights when nothing was validated), what ``minterpr eval`` loads;
* ``train.log`` (log lines), ``metrics.jsonl`` (one record per epoch), ``cache/`` (features).

Example:
    >>> from minterpr.training.config import load_config
    >>> cfg = load_config("tiny", ["data.root=/path/to/dataset"])  # doctest: +SKIP
    >>> result = train(cfg, "runs/tiny")  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from minterpr.fileio import atomic_write_text, remove_stale_temporaries
from minterpr.models import compute_losses, create_model
from minterpr.models.device import resolve_device
from minterpr.models.losses import positive_ratio

from .checkpoint import check_resumable, initial_state, restore_rng_state, save_checkpoint, seed_everything
from .config import ConfigError, TrainConfig, save_config
from .data import attribute_targets, identity_index, item_seed, iter_pixel_batches, load_split, plan_dialogues
from .resume import load_run_weights, resume_checkpoint, training_state
from .selection import ModelSelection
from .stages import (
    FeatureSource,
    StageData,
    StepForward,
    apply_freezing,
    build_optimizer,
    stage_data,
    stage_loss_weights,
    validate,
)


@dataclass
class TrainResult:
    """What a finished run produced."""

    run_dir: Path  # the run directory
    model_path: Path  # RUN_DIR/model.pt, the selected model
    best: dict[str, Any] | None  # {"stage", "epoch", "value", "metrics"} of best.pt, None if never validated
    history: list[dict[str, Any]] = field(default_factory=list)  # the metrics.jsonl records
    samples_per_second: dict[str, float] = field(default_factory=dict)  # training throughput per stage


class Trainer:
    """Runs the stages of a :class:`TrainConfig` in ``run_dir``; see the module doc."""

    def __init__(self, cfg: TrainConfig, run_dir: str | os.PathLike[str], *, resume: bool = False) -> None:
        self.world = int(os.environ.get("WORLD_SIZE", "1"))  # > 1 under torchrun
        self.rank = int(os.environ.get("RANK", "0"))
        self.is_main = self.rank == 0
        self.device = resolve_device(cfg.device, int(os.environ.get("LOCAL_RANK", "0")))
        self.run_dir = Path(run_dir)
        self.last_path = self.run_dir / "last.pt"
        self.checkpoint = resume_checkpoint(self.run_dir, resume)
        self.train_split = load_split(cfg.data, "train", cfg.data.max_train_samples)
        self.val_split = (
            load_split(cfg.data, "val", cfg.data.max_val_samples)
            if any(s.resolved_validate() for s in cfg.stages)
            else None
        )
        self.identities = identity_index([image.person_id for image in self.train_split.gallery])
        self.cfg = self._with_identities(cfg)
        if self.checkpoint is not None:
            check_resumable(self.checkpoint, self.cfg, self.run_dir, self.last_path)
        if self.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            remove_stale_temporaries(self.run_dir)
            save_config(self.cfg, self.run_dir / "config.yaml")
        if self.world > 1:
            torch.distributed.init_process_group("nccl" if self.device.type == "cuda" else "gloo")
            if self.device.type == "cuda":
                torch.cuda.set_device(self.device)
        seed_everything(self.cfg.seed)
        self.model = create_model(self.cfg.model).to(self.device)
        self.step_module: torch.nn.Module = StepForward(self.model)
        if self.world > 1:  # find_unused: each stage trains a different subset of the model
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.step_module = torch.nn.parallel.DistributedDataParallel(
                self.step_module, device_ids=ids, find_unused_parameters=True
            )
        cache_root = Path(self.cfg.cache_dir) if self.cfg.cache_dir else self.run_dir / "cache"
        cache = cache_root if self.is_main else None  # other ranks keep features in memory
        self.source = FeatureSource(self.model, self.cfg, cache, self.device, self.cfg.progress and self.is_main)
        self.state: dict[str, Any] = initial_state()
        self.image_tuning: dict[str, Any] | None = None  # the image-tuning record, when the config tunes
        if self.cfg.image_tuning is not None and self.checkpoint is None and self.cfg.image_tuning.epochs > 0:
            self._tune_images()  # resumable on its own; last.pt (written later) carries the tuned weights
        if self.checkpoint is not None:
            load_run_weights(self.model, self.checkpoint, self.last_path)
            self.state.update({k: self.checkpoint[k] for k in self.state})
        self.selection = ModelSelection(self.cfg.selection_metric, self.run_dir)
        # (L,) positive share of each label in the training gallery, for the balanced attribute loss
        self.positive_ratio = (
            positive_ratio(*(torch.from_numpy(a) for a in attribute_targets(self.train_split.gallery))).to(self.device)
            if self.cfg.loss_weights.balanced_attributes
            else None
        )
        self.throughput: dict[str, list[float]] = {}

    # ---------------------------------------------------------------- setup helpers
    def _with_identities(self, cfg: TrainConfig) -> TrainConfig:
        """Size the identity classifier from the training gallery when a stage uses the id loss."""
        wants_id = any("id" in s.resolved_losses() for s in cfg.stages) and cfg.loss_weights.id > 0
        k, given = len(self.identities), cfg.model.num_identities
        if wants_id and given == 0:
            cfg = dataclasses.replace(cfg, model=cfg.model.replace(num_identities=k))
        elif given not in (0, k):
            raise ConfigError(
                f"model.num_identities is {given} but the training gallery has {k} identities "
                "(set it to 0 to size it automatically)"
            )
        return cfg

    def _tune_images(self) -> None:
        """Fine-tune the image side on the labelled images (:mod:`minterpr.training.run_tuning`)."""
        from .run_tuning import tune_run_images

        self.image_tuning = tune_run_images(
            self.cfg,
            self.model,
            self.train_split,
            self.val_split,
            self.identities,
            self.run_dir,
            progress=self.cfg.progress and self.is_main,
            log=self.log,
        )
        seed_everything(self.cfg.seed)  # the stages start from the same random state as without tuning

    def log(self, message: str) -> None:
        """A line in RUN_DIR/train.log (and on the console when progress is shown)."""
        if not self.is_main:
            return
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}"
        with open(self.run_dir / "train.log", "a", encoding="utf-8") as f:
            f.write(line + "\n")
        if self.cfg.progress:
            tqdm.write(line)

    def _save_state(self, optimizer: Any, scheduler: Any) -> None:
        if not self.is_main:
            return
        save_checkpoint(training_state(self.cfg, self.state, self.model, optimizer, scheduler), self.last_path)

    def _write_metrics(self) -> None:
        if self.is_main:  # rewritten whole from the checkpointed history: a killed run never duplicates lines
            atomic_write_text(
                self.run_dir / "metrics.jsonl", "".join(json.dumps(rec) + "\n" for rec in self.state["history"])
            )

    # ---------------------------------------------------------------- the loop
    def run(self) -> TrainResult:
        if self.state["done"]:
            self.log(f"{self.run_dir} already finished; nothing to do")
            return self._result()
        self.log(
            f"training on {self.device} ({self.world} process{'es' if self.world > 1 else ''}), "
            f"{len(self.train_split.samples)} train dialogues, {len(self.identities)} identities, "
            f"resume={self.checkpoint is not None}"
        )
        for si in range(self.state["stage_index"], len(self.cfg.stages)):
            self._run_stage(si)
        self.state.update(done=True, order=None)
        self._finish()
        return self._result()

    def _epoch_order(self, si: int, epoch: int, n: int) -> list[int]:
        """The epoch's item order: a seeded permutation (a DistributedSampler shard under torchrun)."""
        if self.world > 1:
            sampler = torch.utils.data.DistributedSampler(
                range(n), num_replicas=self.world, rank=self.rank, shuffle=True, seed=item_seed(self.cfg.seed, si)
            )
            sampler.set_epoch(epoch)
            return list(sampler)
        generator = torch.Generator().manual_seed(item_seed(self.cfg.seed, si, epoch))
        return torch.randperm(n, generator=generator).tolist()

    def _run_stage(self, si: int) -> None:
        stage = self.cfg.stages[si]
        if stage.epochs == 0:  # skipped before its items and feature tables are built (that costs minutes)
            self.state.update(stage_index=si + 1, epoch=0, step_in_epoch=0, order=None)
            return
        apply_freezing(self.model, stage)
        data = stage_data(stage, self.train_split, self.identities, self.source, self.model.config.max_turns)
        if len(data) == 0:
            self.state.update(stage_index=si + 1, epoch=0, step_in_epoch=0, order=None)
            return
        per_rank = -(-len(data) // self.world)
        steps_per_epoch = -(-per_rank // self.cfg.batch_size)
        optimizer, scheduler = build_optimizer(self.model, stage, steps_per_epoch * stage.epochs)
        ckpt = self.checkpoint
        if ckpt is not None and ckpt.get("optimizer") is not None and ckpt["optimizer_stage"] == si:
            optimizer.load_state_dict(ckpt["optimizer"])
            scheduler.load_state_dict(ckpt["scheduler"])
        weights = stage_loss_weights(self.cfg.loss_weights, stage)
        self.log(
            f"stage {si + 1}/{len(self.cfg.stages)} {stage.name}: {len(data)} {data.kind}, "
            f"{steps_per_epoch} steps/epoch, losses {', '.join(stage.resolved_losses())}"
        )
        if ckpt is not None:  # every setup step is done: continue the random streams exactly
            restore_rng_state(ckpt["rng"])
            self.checkpoint = None
        for epoch in range(self.state["epoch"], stage.epochs):
            self._run_epoch(si, epoch, data, weights, optimizer, scheduler)
        self.state.update(epoch=0)

    def _run_epoch(self, si: int, epoch: int, data: StageData, weights: Any, optimizer: Any, scheduler: Any) -> None:
        stage, cfg = self.cfg.stages[si], self.cfg
        if self.state["order"] is None or self.state["step_in_epoch"] == 0:
            self.state["order"] = self._epoch_order(si, epoch, len(data))
        order = self.state["order"]
        batches = [order[i : i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]
        start = self.state["step_in_epoch"]
        plans = [
            plan_dialogues([data.samples[i] for i in b], data.max_rounds, data.pid_of)
            if data.kind == "dialogues"
            else None
            for b in batches[start:]
        ]
        images = [
            plan.images if plan is not None else [data.paths[i] for i in b] for plan, b in zip(plans, batches[start:])
        ]
        if data.stems is None:  # no stem cache: decode (and augment) pixels, workers reading ahead
            seeds = (
                [[item_seed(cfg.seed, si, epoch, start + k, p) for p in paths] for k, paths in enumerate(images)]
                if cfg.augment
                else None
            )
            pixel_iter = iter_pixel_batches(
                images, self.train_split.image_root, self.model.preprocess, workers=cfg.workers, seeds=seeds
            )
        self.model.train()
        bar = tqdm(
            total=len(batches),
            initial=start,
            desc=f"{stage.name} {epoch + 1}/{stage.epochs}",
            unit="step",
            disable=not (cfg.progress and self.is_main),
            dynamic_ncols=True,
            leave=False,
        )
        sums: dict[str, float] = self.state["loss_sums"]  # kept in checkpoints: a resumed epoch averages all its steps
        seen, t0 = 0, time.perf_counter()
        for k, (batch, plan, paths) in enumerate(zip(batches[start:], plans, images)):
            idx = torch.tensor(batch, dtype=torch.long)
            if data.stems is not None:
                inputs, from_stems = data.stems.rows(paths, self.device), True
            else:
                inputs, from_stems = next(pixel_iter).to(self.device), False
            texts = (
                None
                if plan is None
                else (data.texts.rows(plan.texts, self.device) if data.texts is not None else plan.texts)
            )
            outputs = self.step_module(inputs, from_stems, plan, texts)
            targets = {
                "person_index": data.person_index[idx].to(self.device),
                "attribute_targets": data.attr_targets[idx].to(self.device),
                "attribute_mask": data.attr_mask[idx].to(self.device),
                "attribute_positive_ratio": self.positive_ratio,
            }
            terms = compute_losses(outputs, targets, weights)
            optimizer.zero_grad(set_to_none=True)
            terms["total_loss"].backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
            optimizer.step()
            scheduler.step()
            seen += len(batch)
            for name, value in terms.items():
                sums[name] = sums.get(name, 0.0) + float(value.detach()) * len(batch)
            self.state["items_seen"] += len(batch)
            self.state["step_in_epoch"] = start + k + 1
            self.state["global_step"] += 1
            rate = seen / max(time.perf_counter() - t0, 1e-9)
            bar.update(1)
            bar.set_postfix(loss=f"{float(terms['total_loss'].detach()):.4f}", samples_s=f"{rate:.1f}")
            if self.state["global_step"] % cfg.log_every == 0:
                self.log(
                    f"{stage.name} epoch {epoch + 1} step {start + k + 1}/{len(batches)} "
                    + " ".join(f"{n}={float(v.detach()):.4f}" for n, v in terms.items())
                    + f" lr={scheduler.get_last_lr()[0]:.2e} samples/s={rate:.1f}"
                )
            if self.state["global_step"] % cfg.checkpoint_every_steps == 0:
                self._save_state(optimizer, scheduler)
        bar.close()
        elapsed = time.perf_counter() - t0
        if seen:
            self.throughput.setdefault(stage.name, []).append(seen / max(elapsed, 1e-9))
        total = self.state["items_seen"]
        self._end_epoch(si, epoch, {n: v / max(total, 1) for n, v in sums.items()}, seen, elapsed, optimizer, scheduler)

    def _end_epoch(
        self, si: int, epoch: int, losses: dict[str, float], seen: int, elapsed: float, optimizer: Any, scheduler: Any
    ) -> None:
        stage = self.cfg.stages[si]
        record: dict[str, Any] = {
            "stage": stage.name,
            "stage_index": si,
            "epoch": epoch,
            "global_step": self.state["global_step"],
            "train": losses,
            "samples_per_s": seen / max(elapsed, 1e-9) if seen else None,
        }
        if stage.resolved_validate() and self.val_split is not None and self.is_main:
            metrics = validate(self.model, self.val_split, self.source, self.cfg.eval_batch_size)
            where = {"stage": stage.name, "stage_index": si, "epoch": epoch}
            fields, best = self.selection.judge(self.model, metrics, self.state["best"], where)
            record.update(fields)
            if best is not None:
                self.state["best"] = best
            value = fields["selection"][self.cfg.selection_metric]
            self.log(
                f"{stage.name} epoch {epoch + 1}: val {self.cfg.selection_metric}={value:.3f} "
                f"R@1 by round {[round(r['r1'], 2) for r in metrics['rounds']]}" + (" (best)" if fields["best"] else "")
            )
        self.state["history"].append(record)
        last_epoch = epoch + 1 >= stage.epochs
        self.state.update(
            step_in_epoch=0,
            order=None,
            loss_sums={},
            items_seen=0,
            epoch=0 if last_epoch else epoch + 1,
            stage_index=si + 1 if last_epoch else si,
        )
        # a finished stage's optimiser is of no use to the next stage
        self._save_state(None if last_epoch else optimizer, None if last_epoch else scheduler)
        self._write_metrics()
        if self.world > 1:
            torch.distributed.barrier()

    def _finish(self) -> None:
        if self.is_main:
            chosen = self.selection.finish(self.model, self.state["best"], self.cfg.stages[-1].name)
            self._save_state(None, None)
            self._write_metrics()
            rates = {k: round(sum(v) / len(v), 1) for k, v in self.throughput.items()}
            self.log(f"done: {self.run_dir / 'model.pt'} ({chosen}); training samples/s {rates}")
        if self.world > 1:
            torch.distributed.barrier()
            torch.distributed.destroy_process_group()

    def _result(self) -> TrainResult:
        rates = {k: sum(v) / len(v) for k, v in self.throughput.items()}
        return TrainResult(
            self.run_dir, self.run_dir / "model.pt", self.state["best"], list(self.state["history"]), rates
        )


def train(cfg: TrainConfig, run_dir: str | os.PathLike[str], *, resume: bool = False) -> TrainResult:
    """Train ``cfg`` into ``run_dir`` (``resume=True`` continues from RUN_DIR/last.pt).

    Example:
        >>> result = train(load_config("tiny", ["data.root=DATA"]), "runs/tiny")  # doctest: +SKIP
        >>> result.model_path  # doctest: +SKIP
        PosixPath('runs/tiny/model.pt')
    """
    return Trainer(cfg, run_dir, resume=resume).run()
