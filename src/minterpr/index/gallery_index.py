"""The gallery index: image embeddings, attribute predictions and metadata, searchable.

A :class:`GalleryIndex` is what a retrieval backend builds from gallery images once; sessions
and evaluators rank it for every query. Embeddings are L2-normalised, so a dot product is the
cosine similarity. Each path appears once (feedback on an image is routed by its path), and
the images a backend could not read are listed in :attr:`GalleryIndex.skipped`. An index is
read-only once built: threads may share it.

Example:
    >>> import numpy as np
    >>> from minterpr.types import GalleryImage
    >>> images = [GalleryImage("a.jpg", "x:1"), GalleryImage("b.jpg", "x:2")]
    >>> index = GalleryIndex(images, np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32))
    >>> index.rank(np.array([0.2, 0.9], dtype=np.float32)).tolist()
    [1, 0]
    >>> GalleryIndex(images, index.embeddings, skipped=(("c.jpg", "image not found"),)).skipped_summary()
    "1 of 3 images skipped (unreadable): 'c.jpg' (image not found)"
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Protocol, Sequence

import numpy as np

from minterpr.errors import InputError
from minterpr.index.appearance_space import appearance_centre, centre_vectors
from minterpr.types import GalleryImage, Turn

SUMMARY_EXAMPLES = 3  # skipped images named in skipped_summary(); the rest are counted


def summarise_skipped(skipped: Sequence[tuple[str, str]], total: int) -> str:
    """``"K of N images skipped (unreadable): 'a.jpg' (reason), ... and M more"``."""
    named = ", ".join(f"{path!r} ({reason})" for path, reason in skipped[:SUMMARY_EXAMPLES])
    more = len(skipped) - SUMMARY_EXAMPLES
    return f"{len(skipped)} of {total} images skipped (unreadable): {named}" + (f" and {more} more" if more > 0 else "")


@dataclass
class GalleryIndex:
    """Gallery images with their embeddings and (optionally) attribute probabilities."""

    images: list[GalleryImage]  # metadata, in index order
    embeddings: np.ndarray  # (N, D) float32, L2-normalised rows
    attribute_probs: np.ndarray | None = (
        None  # (N, L) P(label) over ONTOLOGY.flat_labels(), if the backend predicts them
    )
    root: str | None = None  # image root the paths are relative to
    skipped: tuple[tuple[str, str], ...] = ()  # (path, reason) of each image the backend could not read
    # optional nearest-neighbour index over the same embeddings, ids = gallery positions 0..N-1 (a VectorIndex):
    #   sessions on a shortlist search it for the query's top-K instead of scanning every row
    vectors: Any = field(default=None, repr=False, compare=False)
    # optional search of the fused score (cosine + attribute evidence) over the same rows
    #   (index/fused_ivf.FusedIVF): a shortlist takes its top-K by that score, preferred to ``vectors``
    fused: Any = field(default=None, repr=False, compare=False)
    # optional (N, A) float32 L2-normalised appearance vectors (minterpr.runtime.appearance): what
    #   image-to-image comparisons use when present (the embedding was trained for text, not identity)
    appearance: np.ndarray | None = field(default=None, repr=False, compare=False)
    # optional VectorIndex over ``appearance`` (ids = gallery positions, a store's appearance_vectors/): an example
    #   image's appearance neighbours are searched there instead of scanning every row
    appearance_vectors: Any = field(default=None, repr=False, compare=False)
    # the appearance model's same-person calibration (interaction.appearance.SamePersonCalibration), None when
    #   not fitted: with it, image-to-image comparisons use ``appearance`` and their thresholds are probabilities
    same_person: Any = field(default=None, repr=False, compare=False)
    _path_to_index: dict[str, int] | None = field(default_factory=dict, repr=False)  # None: built on first use
    # (A,) the centre the appearance vectors are compared about and the (N, A) vectors so moved, on first use
    #   (index.appearance_space; a copy made by dataclasses.replace computes them again)
    _centre: Any = field(default=None, init=False, repr=False, compare=False)
    _compared: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.embeddings = np.ascontiguousarray(self.embeddings, dtype=np.float32)
        if self.embeddings.ndim != 2 or len(self.embeddings) != len(self.images):
            raise ValueError(
                f"embeddings must be (N, D) with N = {len(self.images)} images, got {self.embeddings.shape}"
            )
        if self.attribute_probs is not None and len(self.attribute_probs) != len(self.images):
            raise ValueError("attribute_probs must have one row per image")
        if self.appearance is not None:
            self.appearance = np.ascontiguousarray(self.appearance, dtype=np.float32)
            if self.appearance.ndim != 2 or len(self.appearance) != len(self.images):
                raise ValueError(
                    f"appearance must be (N, A) with N = {len(self.images)} images, got {self.appearance.shape}"
                )
        self._path_to_index = {}
        for i, image in enumerate(self.images):
            first = self._path_to_index.setdefault(image.path, i)
            if first != i:  # feedback names images by path: a second row would never get it
                raise InputError(
                    f"gallery image {image.path!r} is listed twice (positions {first} and {i}); "
                    "each path may appear once in a gallery"
                )
        self.skipped = tuple((str(path), str(reason)) for path, reason in self.skipped)

    def __len__(self) -> int:
        return len(self.images)

    def skipped_summary(self) -> str:
        """One line on the images left out because they could not be read; "" when none were."""
        return summarise_skipped(self.skipped, len(self.images) + len(self.skipped)) if self.skipped else ""

    def require_complete(self, purpose: str) -> "GalleryIndex":
        """This index when no image was skipped; InputError otherwise. An evaluation needs every
        image of its gallery: a skipped one would shift the positions its metrics read.

        Example:
            >>> from minterpr.types import GalleryImage
            >>> index = GalleryIndex([GalleryImage("a.jpg", "x:1")], np.ones((1, 2), np.float32),
            ...                      skipped=(("b.jpg", "truncated file"),))
            >>> index.require_complete("evaluation")
            Traceback (most recent call last):
            ...
            minterpr.errors.InputError: evaluation needs every gallery image: 1 of 2 images skipped (unreadable): 'b.jpg' (truncated file)
        """
        if self.skipped:
            raise InputError(f"{purpose} needs every gallery image: {self.skipped_summary()}")
        return self

    def index_of(self, path: str) -> int | None:
        """Position of the image at ``path`` (as stored), or None."""
        if self._path_to_index is None:  # a subset's, on first use
            self._path_to_index = {image.path: j for j, image in enumerate(self.images)}
        return self._path_to_index.get(path)

    def appearance_centre(self) -> np.ndarray | None:
        """(A,) the point the appearance vectors are compared about: the gallery's
        (:func:`~minterpr.index.appearance_space.appearance_centre`) when its calibration was fitted on
        centred vectors (``same_person.centred``), else None (compared as they are). A subset keeps its gallery's."""
        if self.appearance is None or not getattr(self.same_person, "centred", False):
            return None
        if self._centre is None:
            self._centre = appearance_centre(self.appearance)
        return self._centre

    def compared_appearance(self) -> np.ndarray | None:
        """(N, A) the appearance vectors as image-to-image comparisons take their cosine: less
        :meth:`appearance_centre` and re-normalised when there is one, else ``appearance`` itself (cached).

        Example:
            >>> from types import SimpleNamespace
            >>> index = GalleryIndex([GalleryImage(f"{i}.jpg", "x") for i in range(2)], np.eye(2, dtype=np.float32))
            >>> index.appearance = np.array([[0.8, 0.6], [0.6, 0.8]], np.float32)
            >>> index.compared_appearance() is index.appearance  # no calibration: as they are
            True
            >>> index.same_person = SimpleNamespace(centred=True)
            >>> index.compared_appearance().astype(np.float64).round(2).tolist()
            [[0.81, 0.59], [0.59, 0.81]]
        """
        centre = self.appearance_centre()
        if centre is None:
            return self.appearance
        if self._compared is None:
            self._compared = centre_vectors(self.appearance, centre)
        return self._compared

    def compared_vector(self, vector: np.ndarray) -> np.ndarray:
        """(A,) an appearance vector from outside the gallery (an example image's) in the space of
        :meth:`compared_appearance`."""
        centre = self.appearance_centre()
        vector = np.asarray(vector, dtype=np.float32)
        return vector if centre is None else centre_vectors(vector, centre)

    @property
    def person_ids(self) -> np.ndarray:
        return np.array([image.person_id for image in self.images])

    def scores(self, queries: np.ndarray) -> np.ndarray:
        """Cosine similarity of (D,) or (Q, D) queries with every image: (N,) or (Q, N)."""
        return queries.astype(np.float32) @ self.embeddings.T

    def subset(self, rows: np.ndarray) -> "GalleryIndex":
        """The images at gallery positions ``rows`` (in that order) as an index of their own: embeddings and
        attribute probabilities (and appearance vectors) copied, no ``vectors``, nothing skipped (a session's shortlist).

        Example:
            >>> index = GalleryIndex([GalleryImage(f"{i}.jpg", "x") for i in range(3)], np.eye(3, dtype=np.float32))
            >>> index.subset(np.array([2, 0])).embeddings.tolist()
            [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
        """
        rows = np.asarray(rows, dtype=np.int64)
        ascending = len(rows) < 2 or bool((rows[1:] > rows[:-1]).all())  # a shortlist's rows: no sort needed
        if not ascending and len(np.unique(rows)) != len(rows):
            raise InputError("subset: rows must be distinct gallery positions")
        sub = object.__new__(GalleryIndex)  # a valid index's distinct rows are valid: no re-check, O(K)
        sub.images = (
            list(itemgetter(*rows.tolist())(self.images)) if len(rows) > 1 else [self.images[i] for i in rows.tolist()]
        )
        if self._fused_copies_match():  # the fused index's list-contiguous copies: the rows it just read
            sub.embeddings, sub.attribute_probs = self.fused.gather(rows)
        else:
            sub.embeddings = self.embeddings[rows]
            sub.attribute_probs = None if self.attribute_probs is None else self.attribute_probs[rows]
        sub.appearance = None if self.appearance is None else self.appearance[rows]
        sub.appearance_vectors = None  # its ids are the whole gallery's positions
        sub.same_person = self.same_person
        sub._centre = self.appearance_centre()  # the gallery's centre, not the shortlist's
        sub._compared = None if self._compared is None else self._compared[rows]
        sub.root, sub.skipped, sub.vectors, sub.fused = self.root, (), None, None
        sub._path_to_index = None  # built by the first index_of: most turns never ask
        return sub

    def _fused_copies_match(self) -> bool:
        """Whether ``fused`` holds copies of these rows in these dtypes (then a subset reads them there)."""
        fused = self.fused
        if fused is None or not hasattr(fused, "gather") or len(fused) != len(self.images):
            return False
        theirs = getattr(fused, "probs_perm", None)
        if (theirs is None) != (self.attribute_probs is None):
            return False
        return fused.embeddings.dtype == self.embeddings.dtype and (
            theirs is None or theirs.dtype == self.attribute_probs.dtype
        )

    def rank(self, query: np.ndarray) -> np.ndarray:
        """Gallery indices best first for one (D,) query (stable: ties keep index order)."""
        return np.argsort(-self.scores(query), kind="stable")


class RetrievalBackend(Protocol):
    """What sessions and evaluators need from a model.

    A backend embeds gallery images once, then turns a conversation (a sequence of turns) into
    one query embedding per turn: row r is the query after turns[0..r].
    """

    def index_images(
        self, images: Sequence[GalleryImage], root: str | None = None, *, progress: bool = False, strict: bool = False
    ) -> GalleryIndex:
        """Embed ``images`` (paths relative to ``root``) into a searchable index.

        An image that cannot be read is left out and listed in ``GalleryIndex.skipped``
        (``strict``: its ImageError is raised instead); no readable image at all, an empty
        list or a path listed twice raise :class:`~minterpr.errors.InputError`.
        """
        ...

    def encode_turns(self, turns: Sequence[Turn], index: GalleryIndex) -> np.ndarray:
        """(R, D) L2-normalised query after each of the R turns.

        Reference and example images are looked up in ``index`` by path, else loaded from
        ``index.root``.
        """
        ...
