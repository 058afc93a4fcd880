"""The neural retrieval backend: a :class:`~minterpr.models.RetrievalModel` behind ``RetrievalBackend``.

Gallery images are loaded in batches with the model's own preprocessing (the next batch is
decoded on a background thread while the current one runs through the network) and
embedded once; conversations are turned into a one-dialogue batch and encoded in one pass,
giving the query after every turn. Reference and example images are looked up in the index
by path (their stored embedding) and only loaded from ``index.root`` when absent. Text
features of a frozen text encoder are cached, so re-encoding a growing conversation only
runs the text encoder on the new turn.

Example:
    >>> from minterpr.models import create_model
    >>> from minterpr.types import DescriptionTurn, QATurn
    >>> backend = NeuralBackend(create_model("tiny"))
    >>> index = GalleryIndex([], np.zeros((0, 32), dtype=np.float32))
    >>> backend.encode_turns([DescriptionTurn("a man in red"), QATurn("Shoes?", "white")], index).shape
    (2, 32)
"""
from __future__ import annotations

import os
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np

from minterpr.index.gallery_index import GalleryIndex
from minterpr.types import DescriptionTurn, ExampleTurn, GalleryImage, QATurn, ReferenceTurn, Turn

if TYPE_CHECKING:  # torch stays an optional dependency of minterpr.index
    import torch

    from minterpr.models import RetrievalModel

try:
    from tqdm import tqdm
except ImportError:  # pragma: no cover - tqdm is a core dependency
    tqdm = None


def qa_text(turn: QATurn) -> str:
    """The text a Q&A turn is encoded from: question then answer (the answer alone is often "no")."""
    return f"{turn.question} {turn.answer}"


class NeuralBackend:
    """Index gallery images and encode conversations with a retrieval model.

    ``device``: where the model runs ("cpu" by default; any torch device string).
    ``batch_size``: images per forward pass when indexing, dialogues per pass in
    :meth:`encode_dialogues`. ``text_cache_size``: texts whose features are kept.
    """

    def __init__(
        self, model: "RetrievalModel", *, device: "str | torch.device" = "cpu", batch_size: int = 64,
        text_cache_size: int = 4096,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model.to(device).eval()
        self.device = model.device
        self.batch_size = batch_size
        self.text_cache_size = text_cache_size
        self._text_cache: OrderedDict[str, "torch.Tensor"] = OrderedDict()

    # ------------------------------------------------------------------ gallery
    def _load_batches(self, paths: Sequence[str]) -> Iterator["torch.Tensor"]:
        """Preprocessed (b, 3, H, W) batches of ``paths``; batch i + 1 is decoded while i is used."""
        chunks = [paths[i : i + self.batch_size] for i in range(0, len(paths), self.batch_size)]
        if not chunks:
            return
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(self.model.preprocess.load_batch, chunks[0])
            for next_chunk in chunks[1:] + [None]:
                batch = pending.result()
                if next_chunk is not None:
                    pending = pool.submit(self.model.preprocess.load_batch, next_chunk)
                yield batch

    def image_outputs(self, paths: Sequence[str], *, progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Image files -> (N, D) L2-normalised embeddings and (N, L) raw attribute logits (float32)."""
        import torch

        embeddings, logits = [], []
        bar = tqdm(total=len(paths), desc="indexing", unit="img", disable=not progress) if tqdm else None
        with torch.inference_mode():
            for pixels in self._load_batches(list(paths)):
                out = self.model.encode_images(pixels.to(self.device))
                embeddings.append(out["embedding"].float().cpu())
                logits.append(out["attribute_logits"].float().cpu())
                if bar is not None:
                    bar.update(len(pixels))
        if bar is not None:
            bar.close()
        if not embeddings:
            labels = self.model.attribute_temperature.shape[0]
            return np.zeros((0, self.model.embed_dim), np.float32), np.zeros((0, labels), np.float32)
        return torch.cat(embeddings).numpy(), torch.cat(logits).numpy()

    def embed_image_files(self, paths: Sequence[str], *, progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Image files -> (N, D) L2-normalised embeddings and (N, L) calibrated attribute probabilities."""
        embeddings, logits = self.image_outputs(paths, progress=progress)
        return embeddings, self.attribute_probabilities(logits)

    def attribute_probabilities(self, logits: np.ndarray) -> np.ndarray:
        """(N, L) raw attribute logits -> (N, L) float32 probabilities at the model's slot temperatures."""
        import torch

        with torch.inference_mode():
            probs = self.model.attribute_probabilities(torch.from_numpy(np.asarray(logits, np.float32)))
        return probs.cpu().numpy()

    def index_images(
        self, images: Sequence[GalleryImage], root: str | None = None, *, progress: bool = False
    ) -> GalleryIndex:
        """Embed ``images`` (paths relative to ``root``, or absolute) into a :class:`GalleryIndex`."""
        paths = [os.path.join(root, image.path) if root else image.path for image in images]
        embeddings, probs = self.embed_image_files(paths, progress=progress)
        return GalleryIndex(list(images), embeddings, attribute_probs=probs, root=root)

    # ------------------------------------------------------------------ queries
    def _text_features(self, texts: Sequence[str]) -> "torch.Tensor":
        """(n, Dt) features, computing only the texts not cached yet."""
        import torch

        missing = list(dict.fromkeys(t for t in texts if t not in self._text_cache))
        if missing:
            with torch.inference_mode():
                features = self.model.text_features(missing)
            for text, row in zip(missing, features):
                self._text_cache[text] = row
        if not texts:
            return torch.zeros(0, self.model.text_dim, device=self.device)
        features = torch.stack([self._text_cache[t] for t in texts])
        for text in texts:  # least recently used first, so eviction drops the stalest
            self._text_cache.move_to_end(text)
        while len(self._text_cache) > self.text_cache_size:
            self._text_cache.popitem(last=False)
        return features

    def _image_embeddings(self, paths: Sequence[str], index: GalleryIndex) -> "torch.Tensor":
        """(n, D) embeddings of reference/example images: index rows, else files under ``index.root``."""
        import torch

        if len(index) and index.embeddings.shape[1] != self.model.embed_dim:
            raise ValueError(
                f"index embeddings have D={index.embeddings.shape[1]} but the model embeds to D={self.model.embed_dim}"
            )
        rows = torch.zeros(len(paths), self.model.embed_dim)
        to_load = [(i, path) for i, path in enumerate(paths) if index.index_of(path) is None]
        for i, path in enumerate(paths):
            position = index.index_of(path)
            if position is not None:
                rows[i] = torch.from_numpy(index.embeddings[position])
        if to_load:
            files = [os.path.join(index.root, p) if index.root else p for _, p in to_load]
            loaded, _ = self.embed_image_files(files)
            for (i, _), row in zip(to_load, loaded):
                rows[i] = torch.from_numpy(row)
        return rows.to(self.device)

    def dialogue_batch(self, dialogues: Sequence[Sequence[Turn]], index: GalleryIndex) -> dict[str, "torch.Tensor"]:
        """Turn sequences -> the model's dialogue batch (``turn_types``, ``turn_text``, ``turn_image``, ``turn_mask``)."""
        import torch

        b, r = len(dialogues), max((len(turns) for turns in dialogues), default=0)
        types = torch.full((b, r), -1, dtype=torch.long)
        texts: list[tuple[int, int, str]] = []
        images: list[tuple[int, int, str]] = []
        for i, turns in enumerate(dialogues):
            for j, turn in enumerate(turns):
                if isinstance(turn, DescriptionTurn):
                    types[i, j] = 0
                    texts.append((i, j, turn.text))
                elif isinstance(turn, QATurn):
                    types[i, j] = 1
                    texts.append((i, j, qa_text(turn)))
                elif isinstance(turn, ReferenceTurn):
                    types[i, j] = 2
                    texts.append((i, j, turn.feedback))
                    images.append((i, j, turn.reference_path))
                elif isinstance(turn, ExampleTurn):
                    types[i, j] = 3
                    images.append((i, j, turn.image_path))
                else:
                    raise TypeError(f"unknown turn type {type(turn).__name__}: expected one of minterpr.types.Turn")
        turn_text = torch.zeros(b, r, self.model.text_dim, device=self.device)
        turn_image = torch.zeros(b, r, self.model.embed_dim, device=self.device)
        if texts:
            features = self._text_features([t for _, _, t in texts])
            rows, cols = zip(*[(i, j) for i, j, _ in texts])
            turn_text[list(rows), list(cols)] = features
        if images:
            embedded = self._image_embeddings([p for _, _, p in images], index)
            rows, cols = zip(*[(i, j) for i, j, _ in images])
            turn_image[list(rows), list(cols)] = embedded
        types = types.to(self.device)
        return {"turn_types": types, "turn_text": turn_text, "turn_image": turn_image, "turn_mask": types >= 0}

    def encode_dialogues(self, dialogues: Sequence[Sequence[Turn]], index: GalleryIndex) -> list[np.ndarray]:
        """Many conversations at once -> one (R_i, D) array per conversation (batched by ``batch_size``)."""
        import torch

        out: list[np.ndarray] = []
        for start in range(0, len(dialogues), self.batch_size):
            chunk = dialogues[start : start + self.batch_size]
            batch = self.dialogue_batch(chunk, index)
            with torch.inference_mode():
                queries = self.model.encode_dialogues(batch).float().cpu().numpy()  # (b, R, D)
            out.extend(np.ascontiguousarray(queries[i, : len(turns)]) for i, turns in enumerate(chunk))
        return out

    def encode_turns(self, turns: Sequence[Turn], index: GalleryIndex) -> np.ndarray:
        """(R, D) L2-normalised query after each of the R turns (row r sees turns 0..r)."""
        if not turns:
            return np.zeros((0, self.model.embed_dim), np.float32)
        return self.encode_dialogues([turns], index)[0]
