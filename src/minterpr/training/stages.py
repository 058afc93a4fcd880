"""What one training stage needs: freezing, items, feature tables, the forward pass, optimiser.

A stage trains on *images* ("attributes": attribute + identity losses on gallery images) or
on *dialogues* ("alignment": round-0 descriptions; "dialogue": every round). When the image
stem is frozen its outputs are computed once per image into a :class:`FeatureTable` (and
on disk under RUN_DIR/cache), and likewise the text features of a frozen text encoder, so an
epoch only runs the trainable parts. ``augment: true`` (random crop/flip/brightness) needs
fresh pixels every epoch, so it turns the stem cache off: slower epochs, less overfitting.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch
from torch import nn

from minterpr.evaluation.dialogue_metrics import per_round_metrics
from minterpr.models import LossWeights, RetrievalModel
from minterpr.models.turn_encoder import REFERENCE

from .config import StageConfig, TrainConfig
from .data import (
    DialoguePlan,
    FeatureTable,
    SplitData,
    attribute_targets,
    dialogue_images,
    dialogue_texts,
    gather_rows,
    iter_pixel_batches,
    plan_dialogues,
)

TEXT_CHUNKS_PER_PASS = 8  # cache chunks (256 texts each) encoded together, sorted by length


def apply_freezing(model: RetrievalModel, stage: StageConfig) -> None:
    """Freeze the stage's image stages (default: the model config's); the rest trains."""
    frozen = model.config.frozen_image_stages if stage.frozen_image_stages is None else stage.frozen_image_stages
    if isinstance(frozen, int) and frozen < 0:  # "all but the last |frozen| stages", as the model does
        frozen = max(0, len(model.image_encoder.stages) + frozen)
    model.image_encoder.freeze(frozen)


def stage_loss_weights(weights: LossWeights, stage: StageConfig) -> LossWeights:
    """The configured weights with every loss the stage does not switch on set to 0."""
    on = set(stage.resolved_losses())
    return dataclasses.replace(
        weights, **{n: 0.0 for n in ("itc", "sdm", "id", "attribute", "reference") if n not in on}
    )


def _hash_module(h: Any, module: nn.Module) -> None:
    for key, value in module.state_dict().items():
        h.update(key.encode())
        h.update(value.detach().cpu().contiguous().numpy().tobytes())


def stem_fingerprint(model: RetrievalModel) -> str:
    """Hash of what the stem output depends on: encoder, image size, frozen stages and their weights,
    and the colour branch packed with it."""
    enc = model.image_encoder
    h = hashlib.sha1(
        repr(
            (
                model.config.image_encoder,
                tuple(model.config.image_size),
                enc.preprocess,
                enc.split_stage,
                model.config.colour_stripes,
                model.config.stripe_columns,
                *((True,) if enc.flip_test else ()),  # older caches (no flip) keep their key
                # a whole-encoder stem is pooled: its output depends on the part grid
                (enc.stripe_stage, enc.num_stripes, enc.stripe_columns) if enc.stem_is_pooled else None,
                None if model.colour_branch is None else (model.colour_branch.sigma, model.colour_branch.grid),
            )
        ).encode()
    )
    for stage in list(enc.stages)[: enc.split_stage]:
        _hash_module(h, stage)
    return h.hexdigest()


def text_fingerprint(model: RetrievalModel) -> str:
    """Hash of the frozen text encoder (name, truncation length, weights)."""
    h = hashlib.sha1(repr((model.config.text_encoder, model.text_encoder.max_length)).encode())
    _hash_module(h, model.text_encoder)
    return h.hexdigest()


class FeatureSource:
    """Stems and text features of one run: cached tables when allowed, else computed live."""

    def __init__(
        self, model: RetrievalModel, cfg: TrainConfig, cache_dir: Path | None, device: torch.device, progress: bool
    ) -> None:
        self.model, self.cfg, self.device, self.progress = model, cfg, device, progress
        self.cache_dir = cache_dir  # None: tables stay in memory only
        self._text_fp: str | None = None

    @property
    def text_cached(self) -> bool:
        return self.cfg.cache_features and self.model.config.freeze_text

    def stem_table(self, paths: Sequence[str], root: Path, desc: str) -> FeatureTable:
        """Stems of ``paths`` (frozen stem, no augmentation): from disk or computed once."""
        model = self.model

        def compute(chunks: list[list[str]]) -> Iterator[torch.Tensor]:
            # the stem is frozen, so its stages are in eval mode whatever the model's mode is
            for pixels in iter_pixel_batches(chunks, root, model.preprocess, workers=self.cfg.workers):
                with torch.no_grad():
                    yield model.image_stem(pixels.to(self.device))

        namespace = f"stem:{stem_fingerprint(model)}:{root.resolve()}"
        return FeatureTable.build(
            paths,
            namespace,
            compute,
            cache_dir=self._dir("stems"),
            chunk_size=self.cfg.eval_batch_size,
            desc=desc,
            progress=self.progress,
        )

    def text_table(self, texts: Sequence[str], desc: str) -> FeatureTable:
        """Features of ``texts`` from the frozen text encoder, from disk or computed once."""
        if self._text_fp is None:  # the frozen text encoder never changes during a run
            self._text_fp = text_fingerprint(self.model)

        def compute(chunks: list[list[str]]) -> Iterator[torch.Tensor]:
            # chunks hold alphabetically sorted texts of every length; encoding 8 chunks at once
            # in batches of 64 similar lengths pads ~1.8x fewer tokens than one batch per chunk
            for start in range(0, len(chunks), TEXT_CHUNKS_PER_PASS):
                group = chunks[start : start + TEXT_CHUNKS_PER_PASS]
                with torch.no_grad():
                    features = self.model.text_features([t for chunk in group for t in chunk], batch_size=64)
                yield from features.split([len(chunk) for chunk in group])

        return FeatureTable.build(
            texts,
            f"text:{self._text_fp}",
            compute,
            cache_dir=self._dir("texts"),
            chunk_size=256,
            desc=desc,
            progress=self.progress,
        )

    def _dir(self, kind: str) -> Path | None:
        return self.cache_dir / kind if self.cache_dir is not None else None


@dataclass
class StageData:
    """The training items of a stage and their tables (None = computed live each step)."""

    kind: str  # "images" (attributes stage) or "dialogues"
    max_rounds: int | None  # rounds of each dialogue fed to the model (None = all)
    paths: list[str]  # images: item i's image path; dialogues: item i's target path
    samples: list[Any]  # dialogues: the RetrievalSamples; images: empty
    person_index: torch.Tensor  # (N,) long dense identity of item i
    attr_targets: torch.Tensor  # (N, L) float attribute targets of item i's image
    attr_mask: torch.Tensor  # (N, L) bool, label known
    stems: FeatureTable | None  # cached stems of every image the stage touches
    texts: FeatureTable | None  # cached text features of every turn text of the stage
    pid_of: dict[str, str]  # image path -> person id (the split's manifest)

    def __len__(self) -> int:
        return len(self.paths)


def stage_data(
    stage: StageConfig, split: SplitData, identities: dict[str, int], source: FeatureSource, max_turns: int
) -> StageData:
    """Items of ``stage`` from the training split, with feature tables when caching is on."""
    cfg = source.cfg
    if stage.name == "attributes":
        limit = cfg.data.max_train_samples  # smoke runs cap the image items too
        images, samples, rounds = split.gallery[:limit] if limit > 0 else split.gallery, [], 0
        needed = [image.path for image in images]
    else:
        images, samples = split.target_images(), split.samples
        rounds = stage.resolved_max_rounds()
        rounds = max_turns if rounds is None else min(rounds, max_turns)
        needed = dialogue_images(samples, rounds)
    targets, mask = attribute_targets(images)
    cache_stems = cfg.cache_features and not cfg.augment
    stems = source.stem_table(needed, split.image_root, f"{stage.name}: stems") if cache_stems else None
    texts = (
        source.text_table(dialogue_texts(samples, rounds), f"{stage.name}: texts")
        if samples and source.text_cached
        else None
    )
    return StageData(
        "images" if stage.name == "attributes" else "dialogues",
        rounds,
        [image.path for image in images],
        list(samples),
        torch.tensor([identities.get(image.person_id, -1) for image in images], dtype=torch.long),
        torch.from_numpy(targets),
        torch.from_numpy(mask),
        stems,
        texts,
        {image.path: image.person_id for image in split.gallery},
    )


class StepForward(nn.Module):
    """One training forward pass as a module, so torchrun can wrap it in DistributedDataParallel.

    ``images``: stems (when ``from_stems``) or pixels of ``plan.images`` (dialogues) or of the
    batch items; ``texts``: cached (T, Dt) features or the raw strings (trainable encoder).
    Returns the model outputs :func:`minterpr.models.compute_losses` reads.
    """

    def __init__(self, model: RetrievalModel) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        images: torch.Tensor,
        from_stems: bool,
        plan: DialoguePlan | None = None,
        texts: torch.Tensor | list[str] | None = None,
    ) -> dict[str, torch.Tensor | None]:
        model = self.model
        device = images.device
        # dialogues: attribute logits only for the targets (references need just their embedding)
        t = None if plan is None else plan.target_index.to(device)
        out = model.encode_image_features(images, t) if from_stems else model.encode_images(images, t)
        if plan is None:  # image items: the batch rows are the images
            return {
                "image_embedding": out["embedding"],
                "attribute_logits": out["attribute_logits"],
                "id_logits": out["id_logits"],
            }
        assert t is not None
        text = texts if isinstance(texts, torch.Tensor) else model.text_features(texts or [])
        turn_types, turn_mask = plan.turn_types.to(device), plan.turn_mask.to(device)
        turn_image = gather_rows(out["embedding"], plan.image_index.to(device))  # (B, R, D)
        queries = model.encode_dialogues(
            {
                "turn_types": turn_types,
                "turn_mask": turn_mask,
                "turn_image": turn_image,
                "turn_text": gather_rows(text, plan.text_index.to(device)),  # (B, R, Dt)
            }
        )  # (B, R, D)
        id_logits = out["id_logits"]
        return {
            "queries": queries,
            "turn_mask": turn_mask,
            "logit_scale": model.logit_scale,
            "image_embedding": out["embedding"][t],
            "attribute_logits": out["attribute_logits"],  # (B, L): targets
            "id_logits": None if id_logits is None else id_logits[t],
            # the reference shown at round k is what round k and later must rank below the
            # target, unless it shows the target's own person
            "reference_embedding": turn_image,
            "reference_round_mask": (turn_types == REFERENCE) & ~plan.same_person.to(device),
        }


def build_optimizer(
    model: RetrievalModel, stage: StageConfig, total_steps: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over the trainable parameters (encoders at ``lr * encoder_lr_scale``; no weight decay
    on biases, norms and the temperature) with linear warm-up then cosine decay."""
    groups: dict[tuple[bool, bool], list[nn.Parameter]] = {}
    for name, param in model.named_parameters():
        if param.requires_grad:
            encoder = name.startswith(("image_encoder.", "text_encoder."))
            groups.setdefault((encoder, param.ndim > 1), []).append(param)
    if not groups:
        raise ValueError(f"stage {stage.name!r} has no trainable parameters")
    param_groups = [
        {
            "params": params,
            "lr": stage.lr * (stage.encoder_lr_scale if encoder else 1.0),
            "weight_decay": stage.weight_decay if decay else 0.0,
        }
        for (encoder, decay), params in sorted(groups.items())
    ]
    optimizer = torch.optim.AdamW(param_groups)
    warmup, total = stage.warmup_steps, max(1, total_steps)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


@dataclass
class SplitOutputs:
    """A split encoded by the model (eval mode): what validation and the choices after training read."""

    gallery_embeddings: np.ndarray  # (N, D) L2-normalised, in gallery order
    gallery_attribute_logits: np.ndarray  # (N, L) raw attribute logits, in gallery order
    queries: list[np.ndarray]  # one (R_i, D) array per dialogue: the query after each of its rounds


@torch.no_grad()
def encode_split(model: RetrievalModel, split: SplitData, source: FeatureSource, batch_size: int) -> SplitOutputs:
    """Gallery embeddings and attribute logits, and every dialogue's per-round queries, of ``split``.

    Images and texts come from the source's tables (the run's caches) when features are cached,
    so this costs only the trainable parts; otherwise they are computed from pixels and text.
    """
    was_training = model.training
    model.eval()
    try:
        rounds = model.config.max_turns
        images = sorted({image.path for image in split.gallery} | set(dialogue_images(split.samples, rounds)))
        if source.cfg.cache_features:
            stems = source.stem_table(images, split.image_root, f"{split.name}: stems")
            chunks: Iterator[torch.Tensor] = (
                stems.rows(images[i : i + batch_size], source.device) for i in range(0, len(images), batch_size)
            )
        else:
            chunks = (
                model.image_stem(p.to(source.device))
                for p in iter_pixel_batches(
                    [images[i : i + batch_size] for i in range(0, len(images), batch_size)],
                    split.image_root,
                    model.preprocess,
                    workers=source.cfg.workers,
                )
            )
        outputs = [model.encode_image_features(s) for s in chunks]
        embedding = torch.cat([out["embedding"].float() for out in outputs])  # (N_all, D)
        logits = torch.cat([out["attribute_logits"].float() for out in outputs])  # (N_all, L)
        row = {path: i for i, path in enumerate(images)}
        texts = (
            source.text_table(dialogue_texts(split.samples, rounds), f"{split.name}: texts")
            if source.text_cached
            else None
        )
        per_sample: list[np.ndarray] = []
        for start in range(0, len(split.samples), batch_size):
            plan = plan_dialogues(split.samples[start : start + batch_size], rounds)
            text = texts.rows(plan.texts, source.device) if texts is not None else model.text_features(plan.texts)
            image_rows = embedding[torch.tensor([row[p] for p in plan.images], device=source.device)]
            queries = (
                model.encode_dialogues(
                    {
                        "turn_types": plan.turn_types.to(source.device),
                        "turn_mask": plan.turn_mask.to(source.device),
                        "turn_text": gather_rows(text, plan.text_index.to(source.device)),
                        "turn_image": gather_rows(image_rows, plan.image_index.to(source.device)),
                    }
                )
                .float()
                .cpu()
                .numpy()
            )
            lengths = plan.turn_mask.sum(1).tolist()
            per_sample += [queries[i, : lengths[i]] for i in range(len(lengths))]
        gallery = torch.tensor([row[image.path] for image in split.gallery], device=embedding.device)
        return SplitOutputs(embedding[gallery].cpu().numpy(), logits[gallery].cpu().numpy(), per_sample)
    finally:
        model.train(was_training)


def validate(model: RetrievalModel, split: SplitData, source: FeatureSource, batch_size: int) -> dict[str, Any]:
    """Per-round metrics (:func:`per_round_metrics`) of the split's dialogues against its gallery.

    A dialogue that has ended keeps its last query for the later rounds.
    """
    encoded = encode_split(model, split, source, batch_size)
    per_sample, gallery = encoded.queries, encoded.gallery_embeddings
    num_rounds = max(len(q) for q in per_sample)
    query_rounds = ((np.stack([q[min(r, len(q) - 1)] for q in per_sample]), gallery) for r in range(num_rounds))
    return per_round_metrics(query_rounds, split.sample_pids, [image.person_id for image in split.gallery])
