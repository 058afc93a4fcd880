"""The gallery index: image embeddings, attribute predictions and metadata, searchable.

A :class:`GalleryIndex` is what a retrieval backend builds from gallery images once; sessions
and evaluators rank it for every query. Embeddings are L2-normalised, so a dot product is the
cosine similarity.

Example:
    >>> import numpy as np
    >>> from minterpr.types import GalleryImage
    >>> images = [GalleryImage("a.jpg", "x:1"), GalleryImage("b.jpg", "x:2")]
    >>> index = GalleryIndex(images, np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32))
    >>> index.rank(np.array([0.2, 0.9], dtype=np.float32)).tolist()
    [1, 0]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

from minterpr.types import GalleryImage, Turn


@dataclass
class GalleryIndex:
    """Gallery images with their embeddings and (optionally) attribute probabilities."""

    images: list[GalleryImage]  # metadata, in index order
    embeddings: np.ndarray  # (N, D) float32, L2-normalised rows
    attribute_probs: np.ndarray | None = None  # (N, L) P(label) over ONTOLOGY.flat_labels(), if the backend predicts them
    root: str | None = None  # image root the paths are relative to
    _path_to_index: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.embeddings = np.ascontiguousarray(self.embeddings, dtype=np.float32)
        if self.embeddings.ndim != 2 or len(self.embeddings) != len(self.images):
            raise ValueError(f"embeddings must be (N, D) with N = {len(self.images)} images, got {self.embeddings.shape}")
        if self.attribute_probs is not None and len(self.attribute_probs) != len(self.images):
            raise ValueError("attribute_probs must have one row per image")
        self._path_to_index = {image.path: i for i, image in enumerate(self.images)}

    def __len__(self) -> int:
        return len(self.images)

    def index_of(self, path: str) -> int | None:
        """Position of the image at ``path`` (as stored), or None."""
        return self._path_to_index.get(path)

    @property
    def person_ids(self) -> np.ndarray:
        return np.array([image.person_id for image in self.images])

    def scores(self, queries: np.ndarray) -> np.ndarray:
        """Cosine similarity of (D,) or (Q, D) queries with every image: (N,) or (Q, N)."""
        return queries.astype(np.float32) @ self.embeddings.T

    def rank(self, query: np.ndarray) -> np.ndarray:
        """Gallery indices best first for one (D,) query (stable: ties keep index order)."""
        return np.argsort(-self.scores(query), kind="stable")


class RetrievalBackend(Protocol):
    """What sessions and evaluators need from a model.

    A backend embeds gallery images once, then turns a conversation (a sequence of turns) into
    one query embedding per turn: row r is the query after turns[0..r].
    """

    def index_images(self, images: Sequence[GalleryImage], root: str | None = None, *,
                     progress: bool = False) -> GalleryIndex:
        """Embed ``images`` (paths relative to ``root``) into a searchable index."""
        ...

    def encode_turns(self, turns: Sequence[Turn], index: GalleryIndex) -> np.ndarray:
        """(R, D) L2-normalised query after each of the R turns.

        Reference and example images are looked up in ``index`` by path, else loaded from
        ``index.root``.
        """
        ...
