"""Training data: splits, identities, attribute targets, dialogue batch plans, pixel loading.

A split is a MInterPEDES dialogue file plus its gallery manifest; the manifest is the source
of truth for identities (``person_id`` of a sample's ``target_path``) and attributes. Batches
are *planned* here in plain Python (which texts and which images a batch needs and where each
turn takes them from); the trainer fills the plan with cached or freshly computed features.

Example:
    >>> from minterpr.types import Dialogue, QATurn, RetrievalSample
    >>> s = RetrievalSample("a.jpg", "x:1", Dialogue("a man", (QATurn("Bag?", "no"),)))
    >>> plan = plan_dialogues([s], max_rounds=None)
    >>> plan.texts, plan.turn_types.tolist(), plan.images
    (['a man', 'Bag? no'], [[0, 1]], ['a.jpg'])
"""

from __future__ import annotations

import hashlib
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np
import torch
from PIL import Image, ImageEnhance, ImageOps
from tqdm import tqdm

from minterpr.data.dataset import BuiltDataset, SplitData  # noqa: F401  (SplitData: one definition; re-exported here)
from minterpr.data.images import load_rgb
from minterpr.evaluation.attribute_metrics import attribute_targets  # noqa: F401  (one definition; re-exported here)
from minterpr.fileio import TEMPORARY_GLOB, atomic_write
from minterpr.models.encoders import ImagePreprocess
from minterpr.models.turn_encoder import DESCRIPTION, EXAMPLE, PADDING, QA, REFERENCE
from minterpr.types import DescriptionTurn, ExampleTurn, QATurn, ReferenceTurn, RetrievalSample, Turn

from .config import DataConfig


def load_split(cfg: DataConfig, split: str, max_samples: int = 0) -> SplitData:
    """Read ``split`` ("train", "val", "test") of the dataset described by ``cfg``
    (:meth:`minterpr.data.dataset.BuiltDataset.split`, with the config's file names).

    ``cfg.root`` must be a finished build whose fingerprint verifies
    (:func:`minterpr.data.build.require_built_dataset`: DatasetError naming the command that
    rebuilds it otherwise; ``minterpr data mark DIR`` fingerprints a folder assembled by hand).
    """
    if not cfg.root:
        raise ValueError("data.root is empty: pass --data DIR or set data.root in the config")
    return BuiltDataset(cfg.root, cfg.image_root).split(
        split, max_samples, dialogues=getattr(cfg, split), gallery=getattr(cfg, f"{split}_gallery")
    )


def identity_index(person_ids: Sequence[str]) -> dict[str, int]:
    """Sorted distinct person ids -> dense class indices 0..K-1 (stable across runs)."""
    return {pid: i for i, pid in enumerate(sorted(set(person_ids)))}


def turn_parts(turn: Turn) -> tuple[int, str | None, str | None]:
    """(turn type, text or None, image path or None) of one turn, as the model's batch expects.

    Q&A turns are "question answer" (one space); reference turns carry their feedback.
    """
    if isinstance(turn, DescriptionTurn):
        return DESCRIPTION, turn.text, None
    if isinstance(turn, QATurn):
        return QA, f"{turn.question} {turn.answer}", None
    if isinstance(turn, ReferenceTurn):
        return REFERENCE, turn.feedback, turn.reference_path
    if isinstance(turn, ExampleTurn):
        return EXAMPLE, None, turn.image_path
    raise TypeError(f"not a dialogue turn: {turn!r}")


@dataclass
class DialoguePlan:
    """Index tensors of a dialogue batch; features are gathered into it by the trainer."""

    turn_types: torch.Tensor  # (B, R) long, PADDING (-1) after a dialogue's last turn
    turn_mask: torch.Tensor  # (B, R) bool, True = real turn
    text_index: torch.Tensor  # (B, R) long into ``texts``; -1 = no text
    image_index: torch.Tensor  # (B, R) long into ``images``; -1 = no image
    target_index: torch.Tensor  # (B,) long into ``images``: each dialogue's target
    texts: list[str]  # distinct texts of the batch, first-seen order
    images: list[str]  # distinct image paths: the targets first, then reference/example images
    same_person: torch.Tensor  # (B, R) bool: the turn's image shows the target's own person


def plan_dialogues(
    samples: Sequence[RetrievalSample], max_rounds: int | None, pid_of: Mapping[str, str] | None = None
) -> DialoguePlan:
    """Plan a batch of dialogues truncated to ``max_rounds`` rounds (None = all).

    ``pid_of`` (image path -> person id, from the manifest) marks turns whose image shows the
    target's own person (``same_person``): such a reference must not be trained as a negative.
    """
    images: dict[str, int] = {}
    texts: dict[str, int] = {}
    for s in samples:
        images.setdefault(s.target_path, len(images))
    rows = []
    for s in samples:
        turns = s.dialogue.turns()
        rows.append([turn_parts(t) for t in (turns if max_rounds is None else turns[:max_rounds])])
    width = max(len(r) for r in rows)
    shape = (len(samples), width)
    turn_types = torch.full(shape, PADDING, dtype=torch.long)
    text_index = torch.full(shape, -1, dtype=torch.long)
    image_index = torch.full(shape, -1, dtype=torch.long)
    same_person = torch.zeros(shape, dtype=torch.bool)
    pid_of = pid_of or {}
    for b, (sample, row) in enumerate(zip(samples, rows)):
        target_pid = pid_of.get(sample.target_path)
        for r, (kind, text, image) in enumerate(row):
            turn_types[b, r] = kind
            if text is not None:
                text_index[b, r] = texts.setdefault(text, len(texts))
            if image is not None:
                image_index[b, r] = images.setdefault(image, len(images))
                same_person[b, r] = target_pid is not None and pid_of.get(image) == target_pid
    target_index = torch.tensor([images[s.target_path] for s in samples], dtype=torch.long)
    return DialoguePlan(
        turn_types, turn_types >= 0, text_index, image_index, target_index, list(texts), list(images), same_person
    )


def gather_rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` with zeros where index is -1: (N, D), (B, R) -> (B, R, D)."""
    rows = table[index.clamp(min=0)]
    return rows * (index >= 0).unsqueeze(-1).to(rows.dtype)


def dialogue_texts(samples: Sequence[RetrievalSample], max_rounds: int | None) -> list[str]:
    """Sorted distinct turn texts of ``samples`` (what a text-feature cache must hold)."""
    out = set()
    for s in samples:
        turns = s.dialogue.turns()
        for turn in turns if max_rounds is None else turns[:max_rounds]:
            text = turn_parts(turn)[1]
            if text is not None:
                out.add(text)
    return sorted(out)


def dialogue_images(samples: Sequence[RetrievalSample], max_rounds: int | None) -> list[str]:
    """Sorted distinct target + reference/example image paths of ``samples``."""
    out = {s.target_path for s in samples}
    for s in samples:
        turns = s.dialogue.turns()
        for turn in turns if max_rounds is None else turns[:max_rounds]:
            image = turn_parts(turn)[2]
            if image is not None:
                out.add(image)
    return sorted(out)


# ----------------------------------------------------------------------------- pixels
def item_seed(*parts: object) -> int:
    """A stable 32-bit seed from any printable parts (same parts -> same seed, any process)."""
    return zlib.crc32(repr(parts).encode("utf-8"))


def augment_image(image: Image.Image, seed: int) -> Image.Image:
    """Random pad-and-crop (up to 8% shift), horizontal flip, brightness/contrast jitter.

    Hue and saturation are left alone on purpose: colour words ("red jacket") are the main
    signal of person descriptions, and a hue shift would make the image contradict its text.
    """
    rng = np.random.default_rng(seed)
    image = image.convert("RGB")
    w, h = image.size
    pad_w, pad_h = max(1, int(0.08 * w)), max(1, int(0.08 * h))
    padded = ImageOps.expand(image, border=(pad_w, pad_h), fill=(0, 0, 0))
    x, y = int(rng.integers(0, 2 * pad_w + 1)), int(rng.integers(0, 2 * pad_h + 1))
    image = padded.crop((x, y, x + w, y + h))
    if rng.random() < 0.5:
        image = ImageOps.mirror(image)
    image = ImageEnhance.Brightness(image).enhance(float(rng.uniform(0.8, 1.2)))
    return ImageEnhance.Contrast(image).enhance(float(rng.uniform(0.8, 1.2)))


class PixelBatches(torch.utils.data.Dataset):
    """Item k = (B_k, 3, H, W) pixels of the k-th list of image paths.

    With ``seeds`` every image is augmented with its own seed, so the pixels do not depend
    on which worker process decoded them.
    """

    def __init__(
        self,
        batches: Sequence[Sequence[str]],
        root: Path,
        preprocess: ImagePreprocess,
        seeds: Sequence[Sequence[int]] | None = None,
    ) -> None:
        self.batches, self.root, self.preprocess, self.seeds = batches, root, preprocess, seeds

    def __len__(self) -> int:
        return len(self.batches)

    def _one(self, path: str, seed: int | None) -> torch.Tensor:
        image = load_rgb(self.root / path)  # any mode, EXIF orientation, ImageError naming the file
        return self.preprocess(image if seed is None else augment_image(image, seed))

    def __getitem__(self, k: int) -> torch.Tensor:
        seeds = self.seeds[k] if self.seeds is not None else [None] * len(self.batches[k])
        return torch.stack([self._one(p, s) for p, s in zip(self.batches[k], seeds)])


def iter_pixel_batches(
    batches: Sequence[Sequence[str]],
    root: Path,
    preprocess: ImagePreprocess,
    *,
    workers: int = 0,
    seeds: Sequence[Sequence[int]] | None = None,
):
    """Yield the (B_k, 3, H, W) pixels of each list of paths, in order; ``workers`` > 0 decodes
    ahead in that many processes."""
    dataset = PixelBatches(batches, root, preprocess, seeds)
    if workers == 0:
        yield from (dataset[k] for k in range(len(dataset)))
        return
    # batch_size=None: each dataset item already is a batch. A private generator: creating the
    # loader would otherwise draw the workers' base seed from the global RNG and so change the
    # dropout masks of training depending on ``workers`` (and break exact resume)
    yield from torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=workers, generator=torch.Generator())


def sha1_of(*parts: object) -> str:
    """Hex SHA-1 of the repr of ``parts`` (cache keys)."""
    return hashlib.sha1(repr(parts).encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------ feature cache
STALE_TEMPORARY_SECONDS = 3600.0  # a cache chunk is written in seconds: an older temporary was left by a killed run


def remove_old_temporaries(cache_dir: Path, older_than: float = STALE_TEMPORARY_SECONDS) -> int:
    """Delete the temporaries killed writers left in a feature cache; returns how many.

    Only those older than ``older_than`` seconds: runs may share a cache folder, and another
    run's chunk being written right now must not be removed (fileio.remove_stale_temporaries
    would)."""
    if not cache_dir.is_dir():
        return 0
    removed, now = 0, time.time()
    for tmp in cache_dir.glob(TEMPORARY_GLOB):
        try:
            if tmp.is_file() and now - tmp.stat().st_mtime > older_than:
                tmp.unlink()
                removed += 1
        except FileNotFoundError:  # its writer finished (renamed it) meanwhile
            continue
    return removed


def _read_chunk(file: Path, keys: list[str]) -> torch.Tensor | None:
    """The features stored for ``keys`` in a cache chunk; None when the file is not a readable
    chunk of exactly these keys (damaged, foreign or a hash collision): it is recomputed and
    overwritten. Weights-only loading: a crafted file runs no code."""
    try:
        stored = torch.load(file, map_location="cpu", weights_only=True)
    except Exception:  # any unreadable file (truncated, random bytes, not torch): the cache is disposable
        return None
    if not isinstance(stored, dict) or stored.get("keys") != keys:
        return None
    features = stored.get("features")
    if not isinstance(features, torch.Tensor) or features.ndim < 1 or len(features) != len(keys):
        return None
    return features.to(torch.float16)


class FeatureTable:
    """Float16 features of a fixed set of keys (image paths or texts), one row per key.

    :meth:`build` sorts the keys, cuts them into fixed chunks and loads each chunk from
    ``cache_dir/<sha1(namespace, chunk keys)>.pt`` or computes and writes it (atomically).
    The namespace fingerprints everything the features depend on (encoder, frozen weights,
    image size), so a stale cache can never be read. Chunks depend only on the key set, so a
    resumed run reads back exactly the values the interrupted run used.

    Example:
        >>> table = FeatureTable.build(["b", "a"], "demo", lambda chunks: (torch.ones(len(c), 2) for c in chunks))
        >>> table.rows(["a", "b", "a"]).shape
        torch.Size([3, 2])
    """

    def __init__(self, keys: list[str], features: torch.Tensor) -> None:
        self.keys = keys  # sorted distinct keys
        self.features = features  # (N, ...) float16, row i = keys[i]
        self.index = {key: i for i, key in enumerate(keys)}

    def rows(self, keys: Sequence[str], device: torch.device | str = "cpu") -> torch.Tensor:
        """(len(keys), ...) float32 features on ``device``; an unknown key raises KeyError."""
        idx = torch.tensor([self.index[k] for k in keys], dtype=torch.long)
        return self.features[idx].to(device=device, dtype=torch.float32)

    @classmethod
    def build(
        cls,
        keys: Sequence[str],
        namespace: str,
        compute: Callable[[list[list[str]]], Iterator[torch.Tensor]],
        *,
        cache_dir: Path | None = None,
        chunk_size: int = 256,
        desc: str = "features",
        progress: bool = False,
    ) -> "FeatureTable":
        """Load or compute the features of ``keys``; ``compute(chunks)`` yields one
        (len(chunk), ...) tensor per chunk, in order (it only sees the chunks not on disk)."""
        keys = sorted(set(keys))
        chunks = [keys[i : i + chunk_size] for i in range(0, len(keys), chunk_size)]
        files = [cache_dir / f"{sha1_of(namespace, chunk)[:24]}.pt" if cache_dir else None for chunk in chunks]
        parts: list[torch.Tensor | None] = [None] * len(chunks)
        if cache_dir is not None:
            remove_old_temporaries(cache_dir)
        for k, file in enumerate(files):
            if file is not None and file.is_file():
                parts[k] = _read_chunk(file, chunks[k])
        todo = [k for k, part in enumerate(parts) if part is None]
        bar = tqdm(
            total=len(keys),
            desc=desc,
            unit="item",
            disable=not progress or not todo,
            initial=len(keys) - sum(len(chunks[k]) for k in todo),
            leave=False,
        )
        for k, values in zip(todo, compute([chunks[k] for k in todo])):
            if len(values) != len(chunks[k]):
                raise ValueError(f"{desc}: computed {len(values)} rows for a chunk of {len(chunks[k])}")
            parts[k] = values.detach().to("cpu", torch.float16).contiguous()
            if files[k] is not None:
                payload = {"keys": chunks[k], "features": parts[k]}
                atomic_write(files[k], lambda f, p=payload: torch.save(p, f))
            bar.update(len(chunks[k]))
        bar.close()
        features = torch.cat([p for p in parts if p is not None]) if parts else torch.empty(0)
        return cls(keys, features)
