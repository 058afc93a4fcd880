"""A retrieval backend with no neural network: attribute vectors in, parsed facts as queries.

Image embeddings are the (normalised) attribute-probability vectors of the gallery over
``ONTOLOGY.flat_labels()``: from ground truth (an "oracle vision" upper bound) or from ground
truth plus calibrated noise (a stand-in for an imperfect attribute classifier). The query after
each turn is the normalised evidence vector of every fact parsed so far (positive facts add,
negated facts subtract, see :func:`~minterpr.language.text_parser.facts_to_evidence`). It needs no
torch, so it tests sessions, policies and evaluation fast, and bounds what attributes alone give.

Example:
    >>> from minterpr.types import DescriptionTurn, GalleryImage
    >>> images = [GalleryImage("a.jpg", "x:1", attributes={"upper_colour": ("red",)}),
    ...           GalleryImage("b.jpg", "x:2", attributes={"upper_colour": ("blue",)})]
    >>> backend = AttributeBackend()
    >>> index = backend.index_images(images)
    >>> queries = backend.encode_turns([DescriptionTurn("someone in a blue top")], index)
    >>> index.rank(queries[-1]).tolist()
    [1, 0]
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from minterpr.language.ontology import ONTOLOGY
from minterpr.language.text_parser import facts_to_evidence
from minterpr.data.paths import resolve_under
from minterpr.errors import InputError
from minterpr.index.gallery_index import GalleryIndex, summarise_skipped
from minterpr.language.dialogue_acts import is_match, turn_facts
from minterpr.language.evidence import SLOT_COLUMNS
from minterpr.types import ExampleTurn, GalleryImage, ReferenceTurn, Turn

_LABELS = ONTOLOGY.flat_labels()
_COLUMN = {label: j for j, label in enumerate(_LABELS)}


def truth_matrix(images: Sequence[GalleryImage]) -> tuple[np.ndarray, np.ndarray]:
    """(N, L) 0/1 labels and (N, S) known-slot mask (S = ONTOLOGY.slots order) from ground truth."""
    labels = np.zeros((len(images), len(_LABELS)), dtype=np.float32)
    known = np.zeros((len(images), len(ONTOLOGY.slots)), dtype=bool)
    slot_pos = {s.name: k for k, s in enumerate(ONTOLOGY.slots)}
    for i, image in enumerate(images):
        for slot, values in (image.attributes or {}).items():
            known[i, slot_pos[slot]] = True
            for value in values:
                labels[i, _COLUMN[(slot, value)]] = 1.0
    return labels, known


def noisy_attribute_probs(
    images: Sequence[GalleryImage], *, noise: float = 1.0, confidence: float = 3.0, seed: int = 0
) -> np.ndarray:
    """(N, L) P(label) as a classifier would give: sigmoid(±confidence + noise·N(0, 1)).

    A known label is pushed towards 1, an absent one towards 0; ``noise`` (logit std) makes some
    predictions wrong. Slots unknown in ground truth get the uninformed prior 1 / #values.
    ``noise=0`` gives sigmoid(±confidence), nearly hard labels.
    """
    labels, known = truth_matrix(images)
    rng = np.random.default_rng(seed)
    logits = confidence * (2.0 * labels - 1.0) + noise * rng.standard_normal(labels.shape).astype(np.float32)
    probs = 1.0 / (1.0 + np.exp(-logits))
    for k, slot in enumerate(ONTOLOGY.slots):
        cols = SLOT_COLUMNS[slot.name]
        unknown = ~known[:, k]
        probs[np.ix_(unknown, cols)] = 1.0 / len(cols)
    return probs.astype(np.float32)


def _normalise(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norm, 1e-12)


class AttributeBackend:
    """RetrievalBackend over attribute vectors (see the module doc).

    ``noise=None`` uses exact ground truth (``ground_truth`` is then True: explanations may read
    the images' true attributes); a number uses :func:`noisy_attribute_probs` with that noise.
    ``attribute_probs`` given explicitly (N, L) replaces both, row i for the i-th indexed image.
    """

    name = "attribute"

    def __init__(
        self,
        noise: float | None = None,
        *,
        confidence: float = 3.0,
        seed: int = 0,
        attribute_probs: np.ndarray | None = None,
    ) -> None:
        self.noise = noise  # logit noise of the simulated classifier; None = ground truth
        self.confidence = confidence  # logit magnitude of a clean prediction
        self.seed = seed  # noise seed
        self.attribute_probs = attribute_probs  # explicit (N, L) probabilities, or None
        self.ground_truth = noise is None and attribute_probs is None

    def describe(self) -> dict[str, object]:
        """The backend's settings, for evaluation protocols."""
        return {
            "backend": self.name,
            "noise": self.noise,
            "confidence": self.confidence,
            "seed": self.seed,
            "explicit_probs": self.attribute_probs is not None,
        }

    def index_images(
        self, images: Sequence[GalleryImage], root: str | None = None, *, progress: bool = False, strict: bool = False
    ) -> GalleryIndex:
        """Index images by their attributes; every image needs ground-truth attributes (or explicit probs).

        No file is read; only a path that leaves ``root`` is skipped (``strict``: refused), as a
        backend reading the files would. An empty gallery, a path listed twice or an image without
        attributes raise :class:`~minterpr.errors.InputError`.
        """
        images = list(images)
        if not images:
            raise InputError("the gallery is empty: there are no images to index")
        explicit = None if self.attribute_probs is None else np.asarray(self.attribute_probs, dtype=np.float32)
        if explicit is not None and explicit.shape != (len(images), len(_LABELS)):
            raise InputError(f"attribute_probs must be (N, L) = ({len(images)}, {len(_LABELS)}), got {explicit.shape}")
        # the same rule as a backend that reads the files: a path leaving the root is left out
        skipped = []
        if root is not None:
            keep = []
            for k, image in enumerate(images):
                try:
                    resolve_under(root, image.path)
                    keep.append(k)
                except InputError as exc:
                    if strict:
                        raise
                    skipped.append((image.path, str(exc)))
            if not keep:
                raise InputError(f"no gallery image lies under {root!r}: {summarise_skipped(skipped, len(images))}")
            if skipped:
                images = [images[k] for k in keep]
                explicit = None if explicit is None else explicit[keep]
        if explicit is not None:
            probs = explicit
        else:
            missing = [image.path for image in images if image.attributes is None]
            if missing:
                raise InputError(
                    f"the attribute backend needs ground-truth attributes; {len(missing)} images have "
                    f"none (e.g. {missing[0]!r}); use a neural backend for unlabelled images"
                )
            if self.noise is None:
                labels, _ = truth_matrix(images)
                probs = labels
            else:
                probs = noisy_attribute_probs(images, noise=self.noise, confidence=self.confidence, seed=self.seed)
        embeddings = _normalise(probs)  # (N, L)
        return GalleryIndex(images, embeddings, attribute_probs=probs, root=root, skipped=tuple(skipped))

    def encode_turns(self, turns: Sequence[Turn], index: GalleryIndex) -> np.ndarray:
        """(R, L) normalised evidence after each turn; example images (and confirmed references) add their vector."""
        evidence_facts = []
        image_vector = np.zeros(index.embeddings.shape[1], dtype=np.float32)  # (L,)
        out = np.zeros((len(turns), index.embeddings.shape[1]), dtype=np.float32)  # (R, L)
        for r, turn in enumerate(turns):
            evidence_facts.extend(turn_facts(turn))
            shown = None
            if isinstance(turn, ExampleTurn):
                shown = turn.image_path
            elif isinstance(turn, ReferenceTurn) and is_match(turn.feedback):
                shown = turn.reference_path
            if shown is not None:
                i = index.index_of(shown)
                if i is None:
                    raise ValueError(f"the attribute backend cannot see {shown!r}: it is not in the gallery index")
                image_vector += index.embeddings[i]
            vector = image_vector.copy()
            for slot, weights in facts_to_evidence(evidence_facts).items():
                for value, weight in weights.items():
                    vector[_COLUMN[(slot, value)]] += weight
            out[r] = vector
        return _normalise(out)
