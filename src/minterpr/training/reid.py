"""Train the appearance model (``minterpr train --config reid``): PK batches, two losses, resumable.

Each step draws P identities and K crops of each (K with replacement for people with fewer),
augments them (flip, shift, random erasing: :mod:`minterpr.training.image_augment`) and sums
``id_loss`` (cross-entropy with label smoothing over the BNNeck) and ``triplet_loss`` (batch-hard,
on the raw feature) in one place. Decoded crops are cached as uint8 at the model's size, so
only the first epoch reads files. Every epoch is scored on the val manifest's query/gallery
split with the field's protocol (:func:`minterpr.evaluation.reid.reid_metrics`); RUN/best.pt is
the epoch with the best val mAP. RUN/last.pt holds everything a rerun with ``--resume`` needs
to continue exactly (weights, optimiser, epoch, step, random states).

Example:
    $ minterpr train --config reid --out runs/reid --set 'train=[data/reid/train.jsonl]' --set val=data/reid/val.jsonl
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch

from minterpr.data.images import load_rgb
from minterpr.data.reid import ReidImage, by_identity, query_gallery_split, read_manifest, split_labels
from minterpr.evaluation.reid import ReidMetrics, reid_metrics
from minterpr.models.device import resolve_device
from minterpr.models.losses import smoothed_id_loss, triplet_loss
from minterpr.models.reid import ReidModel
from minterpr.training.checkpoint import (
    capture_rng_state,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
    seed_everything,
)
from minterpr.training.image_augment import augment_batch
from minterpr.training.reid_config import ReidTrainConfig, load_reid_config, save_reid_config

if TYPE_CHECKING:
    from minterpr.interaction.appearance import SamePersonCalibration

log = logging.getLogger(__name__)

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


class CropCache:
    """Crops decoded once at (H, W) as uint8 (B, 3, H, W) tensors, keyed by path."""

    def __init__(self, size: tuple[int, int]) -> None:
        self.size = size
        self._crops: dict[str, torch.Tensor] = {}

    def get(self, paths: Sequence[str]) -> torch.Tensor:
        height, width = self.size
        for path in paths:
            if path not in self._crops:
                rgb = load_rgb(path).resize((width, height))
                self._crops[path] = torch.from_numpy(np.asarray(rgb, dtype=np.uint8).copy()).permute(2, 0, 1)
        return torch.stack([self._crops[p] for p in paths])  # (B, 3, H, W) uint8


def normalise(crops: torch.Tensor) -> torch.Tensor:
    """uint8 (B, 3, H, W) -> the network's ImageNet-normalised float input."""
    return (crops.float() / 255.0 - MEAN) / STD


def embed_images(model: ReidModel, images: Sequence[ReidImage], cache: CropCache, batch_size: int) -> torch.Tensor:
    """(N, F) appearance embeddings of crops (eval mode)."""
    model.eval()
    device = next(model.parameters()).device
    parts = [
        model.embed(normalise(cache.get([i.path for i in images[s : s + batch_size]])).to(device)).cpu()
        for s in range(0, len(images), batch_size)
    ]
    return torch.cat(parts) if parts else torch.empty(0, model.config.feature_dim)


def fit_same_person_on(
    model: ReidModel,
    images: Sequence[ReidImage],
    cache: CropCache | None = None,
    batch_size: int = 128,
    *,
    split: str = "val",
    centred: bool = False,
) -> "SamePersonCalibration":
    """The same-person calibration of ``model`` on the crops of a re-id manifest (all its pairs; a
    person's pairs from one camera left out when every crop names its camera): see
    :func:`minterpr.interaction.appearance.fit_same_person_both` (the cosine fit and the re-ranked one).
    ``centred``: fitted about the crops' centre (galleries then compare about theirs).
    ValueError when the crops hold no cross-camera pair of one person."""
    from minterpr.interaction.appearance import fit_same_person_both

    cache = cache or CropCache(model.config.image_size)
    with torch.inference_mode():
        vectors = embed_images(model, images, cache, batch_size).float().numpy()
    cameras = None if any(not image.camera for image in images) else [image.camera for image in images]
    return fit_same_person_both(vectors, [image.person_id for image in images], cameras, split=split, centred=centred)


def evaluate(
    model: ReidModel, query: Sequence[ReidImage], gallery: Sequence[ReidImage], cache: CropCache, batch_size: int = 128
) -> ReidMetrics:
    """The field's protocol on a query/gallery split."""
    q = embed_images(model, query, cache, batch_size)
    g = embed_images(model, gallery, cache, batch_size)
    return reid_metrics(q.numpy(), g.numpy(), *split_labels(query, gallery))


class PKSampler:
    """Batches of P identities x K crops, drawn from one seeded generator."""

    def __init__(self, images: Sequence[ReidImage], p: int, k: int, rng: random.Random) -> None:
        self.groups = by_identity(images)
        self.people = sorted(self.groups)
        if len(self.people) < p:
            raise ValueError(f"{len(self.people)} training identities, fewer than identities_per_batch ({p})")
        self.p, self.k, self.rng = p, k, rng

    def batch(self) -> list[ReidImage]:
        chosen = self.rng.sample(self.people, self.p)
        crops: list[ReidImage] = []
        for person in chosen:
            pool = self.groups[person]
            crops += self.rng.sample(pool, self.k) if len(pool) >= self.k else self.rng.choices(pool, k=self.k)
        return crops


def learning_rate(cfg: ReidTrainConfig, step: int, total: int, per_epoch: int) -> float:
    """Linear warm-up from 10 % over ``warmup_epochs``, then cosine decay to 0."""
    warmup = cfg.warmup_epochs * per_epoch
    if step < warmup:
        return cfg.lr * (0.1 + 0.9 * step / warmup)
    progress = (step - warmup) / max(total - warmup, 1)
    return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


@dataclass
class ReidTrainResult:
    run_dir: Path
    best_epoch: int  # 0-based
    best: dict  # the best epoch's val metrics
    images_per_second: float


def start_from(model: ReidModel, source: str) -> None:
    """Load the encoder and neck of the appearance model ``source`` (``shipped[:NAME]``, a model
    directory or a run's ``best.pt``) into ``model``, in float32; its classifier stays as initialised,
    since the training identities are new. The networks must match (width, norm, size, feature)."""
    from minterpr.errors import RunError
    from minterpr.models.reid_dir import load_reid_any
    from minterpr.runtime.appearance import appearance_file

    file = appearance_file(source)
    start = load_reid_any(file)
    mine, theirs = model.config.to_dict(), start.config.to_dict()
    differ = [key for key in ("width", "norm", "image_size", "feature_dim") if mine[key] != theirs[key]]
    if differ:
        key = differ[0]
        raise RunError(str(file), f"its model.{key} is {theirs[key]!r}, the config's {mine[key]!r}: set model.{key}")
    state = {k: v.float() if v.is_floating_point() else v for k, v in start.search_state_dict().items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or any(not key.startswith("classifier.") for key in missing):
        raise RunError(
            str(file), f"weights do not fit the network (missing {missing[:3]}, unexpected {unexpected[:3]})"
        )
    model.encoder.set_channels_last(model.encoder.channels_last)  # loading copied into the old layout
    log.info("started from %s", file)


def train_reid(cfg: ReidTrainConfig, run_dir: str | Path, *, resume: bool = False) -> ReidTrainResult:
    """Train (or resume) the appearance model into ``run_dir`` (config.yaml, metrics.jsonl, best.pt)."""
    run_dir = Path(run_dir)
    if not cfg.train or not cfg.val:
        raise ValueError("the reid recipe needs train manifests and a val manifest (--set train=[...] --set val=...)")
    train_images = [image for manifest in cfg.train for image in read_manifest(manifest)]
    people = sorted(by_identity(train_images))
    index = {person: i for i, person in enumerate(people)}
    query, gallery = query_gallery_split(read_manifest(cfg.val), seed=cfg.seed)
    seed_everything(cfg.seed)
    device = resolve_device(cfg.device)
    model = ReidModel(cfg.model, num_identities=len(people), weights=cfg.weights, channels_last=cfg.channels_last)
    last = run_dir / "last.pt"
    if cfg.init and not (resume and last.is_file()):  # a resumed run's weights come from last.pt
        start_from(model, cfg.init)
    model.to(device)  # before the optimiser: its state follows the parameters' device
    optimiser = torch.optim.Adam(
        [p for p in model.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=cfg.weight_decay
    )
    rng = random.Random(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    per_epoch = cfg.iterations_per_epoch or max(len(train_images) // cfg.batch_size, 1)
    total = per_epoch * cfg.epochs
    step, best_epoch, best = 0, -1, {}
    if resume and last.is_file():
        state = load_checkpoint(last)
        model.load_state_dict(state["model"])
        model.encoder.set_channels_last(cfg.channels_last)  # loading copied into the old layout
        optimiser.load_state_dict(state["optimiser"])
        step, best_epoch, best = int(state["step"]), int(state["best_epoch"]), dict(state["best"])
        rng.setstate(_python_state(state["sampler"]))
        generator.set_state(state["augment"])
        restore_rng_state(state["rng"])
        log.info("resumed %s at step %d", run_dir, step)
    elif (run_dir / "config.yaml").exists() and not resume:
        raise ValueError(f"{run_dir} already holds a run: use --resume, or another --out")
    run_dir.mkdir(parents=True, exist_ok=True)
    save_reid_config(cfg, run_dir / "config.yaml")
    sampler = PKSampler(train_images, cfg.identities_per_batch, cfg.images_per_identity, rng)
    cache = CropCache(cfg.model.image_size)

    def checkpoint() -> None:
        save_checkpoint(
            {
                "model": model.state_dict(),
                "optimiser": optimiser.state_dict(),
                "step": step,
                "best_epoch": best_epoch,
                "best": best,
                "sampler": _plain_state(rng.getstate()),
                "augment": generator.get_state(),
                "rng": capture_rng_state(),
            },
            last,
        )

    seen, started = 0, time.perf_counter()
    while step < total:
        epoch = step // per_epoch
        model.train()
        crops = sampler.batch()
        # augmented on the CPU (its generator: the same crops on any device), then moved
        pixels = normalise(augment_batch(cache.get([c.path for c in crops]), cfg.augment, generator)).to(device)
        labels = torch.tensor([index[c.person_id] for c in crops], device=device)
        for group in optimiser.param_groups:
            group["lr"] = learning_rate(cfg, step, total, per_epoch)
        out = model(pixels)
        losses = {
            "id_loss": cfg.id_weight * smoothed_id_loss(out["logits"], labels, cfg.label_smoothing),
            "triplet_loss": cfg.triplet_weight * triplet_loss(out["feature"], labels, cfg.triplet_margin),
        }
        loss = sum(losses.values())
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        step += 1
        seen += len(crops)
        if step % cfg.checkpoint_every_steps == 0:
            checkpoint()
        if step % per_epoch == 0:
            metrics = evaluate(model, query, gallery, cache, cfg.eval_batch_size).to_dict()
            record = {
                "epoch": epoch + 1,
                "step": step,
                **{k: float(v.detach()) for k, v in losses.items()},
                "lr": optimiser.param_groups[0]["lr"],
                **{f"val_{k}": v for k, v in metrics.items()},
                "seconds": round(time.perf_counter() - started, 1),
            }
            with open(run_dir / "metrics.jsonl", "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
            log.info("reid epoch %d: val rank-1 %.1f mAP %.1f", epoch + 1, metrics["rank1"], metrics["mAP"])
            if metrics["mAP"] > best.get("mAP", -1.0):
                best_epoch, best = epoch, metrics
                weights = {k: v.detach().cpu() for k, v in model.search_state_dict().items()}  # loads anywhere
                save_checkpoint(
                    {"model": weights, "config": cfg.model.to_dict(), "epoch": epoch, "val": metrics},
                    run_dir / "best.pt",
                )
            checkpoint()
    rate = seen / max(time.perf_counter() - started, 1e-9)
    if best_epoch >= 0:  # the best epoch's cosine -> same-person probability, on val (same_person.json)
        _calibrate_best(run_dir / "best.pt", [*query, *gallery], cache, cfg.eval_batch_size)
    return ReidTrainResult(run_dir, best_epoch, best, rate)


def _calibrate_best(best_pt: Path, images: Sequence[ReidImage], cache: CropCache, batch_size: int) -> None:
    """Fit and store the same-person calibration of the model in ``best_pt`` on the val crops; a val
    split without a cross-camera pair of one person leaves none (logged: `minterpr calibrate appearance`)."""
    from minterpr.interaction.appearance import write_same_person
    from minterpr.models.reid import load_reid_model

    try:
        record = fit_same_person_on(load_reid_model(str(best_pt)), images, cache, batch_size)
    except ValueError as err:
        log.warning("no same-person calibration stored (%s)", err)
        return
    path = write_same_person(best_pt, record)
    log.info("same-person calibration on val: AUC %.1f %% -> %s", record.auc, path)


def _plain_state(state: tuple) -> list:
    """random.Random's state as plain lists (loadable with weights_only)."""
    version, internal, gauss = state
    return [version, list(internal), gauss]


def _python_state(state: Sequence) -> tuple:
    version, internal, gauss = state
    return (version, tuple(internal), gauss)


def train_reid_from_file(
    config: str, run_dir: str, overrides: Sequence[str] = (), *, resume: bool = False
) -> ReidTrainResult:
    """``minterpr train --config reid``'s work: load the config (the run's own on --resume) and train."""
    saved = Path(run_dir) / "config.yaml"
    source = saved if resume and saved.is_file() else config
    return train_reid(load_reid_config(source, overrides), run_dir, resume=resume)
