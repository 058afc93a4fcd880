"""The neural retrieval backend: a :class:`~minterpr.models.RetrievalModel` behind ``RetrievalBackend``.

Gallery images are loaded in batches with the model's own preprocessing and embedded once (on ONNX
Runtime one lane per core, each decoding and running its own batch; on torch the next batch decoded
while this one runs: :mod:`minterpr.runtime.image_batches`); conversations
are encoded as a batch in one pass, giving the query after every turn. Reference and example images
are looked up in the index by path (their stored embedding), loaded from ``index.root`` only when
absent. Text features of the frozen text encoder are cached (a growing conversation only encodes its
new turn), on the same ``engine`` (:class:`minterpr.models.onnx_text.TextFeaturizer`).

The image network runs on ``engine`` ``"torch"``, the model itself in eager float32 (the reference),
or ``"onnx"``, its image tower on ONNX Runtime (:mod:`minterpr.models.onnx_export`; BatchNorm folded,
the same results to ~1e-6, 2.5-4x faster on CPU); ``"auto"`` takes ONNX Runtime on a CPU device when
installed and the export passes its check, else torch. On CPU the network sees at most
``forward_batch`` images per call (8 by default: small batches stay in cache; the decode batch stays
``batch_size``); each image's result does not depend on its batch.

Image paths stay inside the index root (:func:`minterpr.data.paths.resolve_under`) unless the
backend is made with ``allow_outside_root=True``. An unreadable gallery image is skipped and
listed in ``GalleryIndex.skipped`` (``strict=True`` raises its ImageError instead).

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
import threading
from collections import OrderedDict
from functools import partial
from typing import TYPE_CHECKING, Sequence

import numpy as np

from minterpr.data.paths import resolve_under
from minterpr.errors import ImageError, InputError
from minterpr.index.gallery_index import GalleryIndex, summarise_skipped
from minterpr.runtime.image_batches import encode_readable, lane_count
from minterpr.types import DescriptionTurn, ExampleTurn, GalleryImage, QATurn, ReferenceTurn, Turn

CPU_FORWARD_BATCH = 8  # images per network call on CPU: fastest of 8..64 on 2 cores (bench_encode.py)
DEFAULT_BATCH_SIZE = 64  # images per batch of index_images (and per shard batch of batch_embed)
# The two defaults of ``engine`` (one of minterpr.models.onnx_export.ENGINES), each held here only.
# A NeuralBackend built by hand runs the reference unless told: the trainer validates through one
# while the weights change (an export would go stale), and every fast path is tested against it
REFERENCE_ENGINE = "torch"
# a loaded run's backend (load_pipeline, TrainedRun.backend, hence every command and the service):
# ONNX Runtime on CPU when installed, the same results as the reference to ~1e-6, faster
RUN_ENGINE = "auto"

if TYPE_CHECKING:  # torch stays an optional dependency of minterpr.index
    import torch

    from minterpr.models import RetrievalModel

from tqdm import tqdm  # a core dependency


def qa_text(turn: QATurn) -> str:
    """The text a Q&A turn is encoded from: question then answer (the answer alone is often "no")."""
    return f"{turn.question} {turn.answer}"


class NeuralBackend:
    """Index gallery images and encode conversations with a retrieval model.

    ``device``: where the model runs ("cpu" by default; any torch device string).
    ``batch_size``: images per forward pass when indexing, dialogues per pass in
    :meth:`encode_dialogues`. ``text_cache_size``: texts whose features are kept.
    ``allow_outside_root``: read image paths that leave the index root (``../x.jpg``,
    absolute paths); off by default, so a downloaded manifest cannot make minterpr read
    files elsewhere. ``engine``: "torch" (the reference, :data:`REFERENCE_ENGINE`), "onnx" or
    "auto" (see the module doc; a loaded run's backend defaults to :data:`RUN_ENGINE`, "auto");
    the ONNX export is made at the first image encoding (weights changed later need a new
    backend). ``onnx_cache``: an ``.onnx`` file to
    keep that export in (reused only for the same weights); None exports in memory.
    ``forward_batch``: most images per network call (default 8 on CPU, ``batch_size`` elsewhere).
    ``text_precision`` / ``image_precision``: "fp32" (default) or "int8" (opt-in, ONNX Runtime) for the
    query text encoder (:class:`~minterpr.models.onnx_text.TextFeaturizer`) and the image tower (the int8
    file of ``model_dir``, the model directory the model came from: :mod:`minterpr.models.onnx_int8`).

    Threads: a backend and the indices it built may be shared by any number of threads (the
    model only runs inference, an index is read-only, and the text-feature cache is guarded by
    a lock). A :class:`~minterpr.interaction.session.Session` holds one conversation's state:
    use one per thread (or per user), never one from two threads at once.
    """

    def __init__(
        self,
        model: "RetrievalModel",
        *,
        device: "str | torch.device" = "cpu",
        batch_size: int = DEFAULT_BATCH_SIZE,
        text_cache_size: int = 4096,
        allow_outside_root: bool = False,
        engine: str = REFERENCE_ENGINE,
        onnx_cache: "str | os.PathLike[str] | None" = None,
        forward_batch: int | None = None,
        text_precision: str = "fp32",
        image_precision: str = "fp32",
        model_dir: "str | os.PathLike[str] | None" = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if forward_batch is not None and forward_batch < 1:
            raise ValueError(f"forward_batch must be >= 1, got {forward_batch}")
        self.model = model.to(device).eval()
        self.device = model.device
        self.batch_size = batch_size
        self.text_cache_size = text_cache_size
        self.allow_outside_root = allow_outside_root
        self._text_cache: OrderedDict[str, "torch.Tensor"] = OrderedDict()
        self._cache_lock = threading.Lock()  # two threads encoding at once must not evict under each other
        self.engine = engine  # as asked; engine_name says what runs once resolved
        self.onnx_cache = onnx_cache
        on_cpu = str(self.device) == "cpu"
        self.forward_batch = forward_batch or (min(batch_size, CPU_FORWARD_BATCH) if on_cpu else batch_size)
        from minterpr.models.image_engine import ImageTowerEngine  # torch: loaded with the model
        from minterpr.models.onnx_query import QueryEncoder, query_cache_path
        from minterpr.models.onnx_text import TextFeaturizer, text_cache_path

        self._images = ImageTowerEngine(
            self.model, engine, cache=onnx_cache, precision=image_precision, model_dir=model_dir
        )
        self._featurize = TextFeaturizer(
            self.model, engine, cache=text_cache_path(onnx_cache, text_precision), precision=text_precision
        )
        self._encode_queries = QueryEncoder(self.model, engine, cache=query_cache_path(onnx_cache))

    @property
    def text_precision(self) -> str:
        """ "fp32" or "int8": the precision the query text features are computed in (resolves the engine)."""
        return self._featurize.precision_name

    @property
    def image_precision(self) -> str:
        """ "fp32" or "int8": the precision images are encoded in (resolves the engine)."""
        return self._images.precision_name

    # ------------------------------------------------------------------ image engine
    @property
    def engine_name(self) -> str:
        """The engine that encodes images: "torch" or "onnx" (resolving "auto" builds the export)."""
        return self._images.engine_name

    def _forward(self, pixels: "torch.Tensor", *, lane: bool = False) -> tuple["torch.Tensor", "torch.Tensor"]:
        """(b, 3, H, W) -> float32 CPU (b, D) embeddings and (b, L) logits, ``forward_batch`` at a time
        (``lane``: on the ONNX engine's one-thread twin, for batches run side by side)."""
        import torch

        engine = self.engine_name
        onnx = self._images.onnx.lane() if lane and engine == "onnx" else self._images.onnx
        embeddings, logits = [], []
        for start in range(0, len(pixels), self.forward_batch):
            chunk = pixels[start : start + self.forward_batch]
            if engine == "onnx":
                embedding, logit = onnx(chunk)
                embeddings.append(torch.from_numpy(embedding))
                logits.append(torch.from_numpy(logit))
            else:
                out = self.model.encode_images(chunk.to(self.device))
                embeddings.append(out["embedding"].float().cpu())
                logits.append(out["attribute_logits"].float().cpu())
        return torch.cat(embeddings), torch.cat(logits)

    # ------------------------------------------------------------------ gallery
    def _outputs(
        self, paths: Sequence[str], *, progress: bool, strict: bool
    ) -> tuple[np.ndarray, np.ndarray, list[int], list[tuple[int, ImageError]]]:
        """Embeddings and logits of the readable ``paths``, their positions, and the failures
        (``strict``: the first failure is raised)."""
        import torch

        lanes = lane_count(self.engine_name)  # resolve (and export) outside inference mode, before the first batch
        bar = tqdm(total=len(paths), desc="indexing", unit="img", disable=not progress)
        try:
            with torch.inference_mode():
                outputs, kept, failed = encode_readable(
                    list(paths),
                    self.batch_size,
                    self.model.preprocess,
                    partial(self._forward, lane=lanes > 1),
                    lanes=lanes,
                    strict=strict,
                    progress=bar.update,
                )
        finally:
            bar.close()
        embeddings, logits = [e for e, _ in outputs], [lo for _, lo in outputs]
        if not embeddings:
            labels = self.model.attribute_temperature.shape[0]
            return np.zeros((0, self.model.embed_dim), np.float32), np.zeros((0, labels), np.float32), kept, failed
        return torch.cat(embeddings).numpy(), torch.cat(logits).numpy(), kept, failed

    def image_outputs(self, paths: Sequence[str], *, progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Image files -> (N, D) L2-normalised embeddings and (N, L) raw attribute logits (float32);
        every file must be readable (the first that is not raises its :class:`~minterpr.errors.ImageError`)."""
        return self._outputs(paths, progress=progress, strict=True)[:2]

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
        self,
        images: Sequence[GalleryImage],
        root: str | None = None,
        *,
        progress: bool = False,
        strict: bool = False,
        allow_outside_root: bool | None = None,
    ) -> GalleryIndex:
        """Embed ``images`` (paths relative to ``root``, or absolute when ``root`` is None) into a
        :class:`GalleryIndex`.

        An image that cannot be read (missing, not an image, truncated, too large, or a path
        that leaves ``root``) is left out and listed in the index's ``skipped`` with the reason
        (``index.skipped_summary()`` says it in one line); ``strict=True`` raises the first
        such error instead (:class:`~minterpr.errors.ImageError`, or InputError for a path
        outside the root). An empty list, a path listed twice, or no readable image at all
        raise :class:`~minterpr.errors.InputError`. ``allow_outside_root`` overrides the
        backend's setting for this call.
        """
        images = list(images)
        if not images:
            raise InputError("the gallery is empty: there are no images to index")
        first: dict[str, int] = {}
        for k, image in enumerate(images):
            if first.setdefault(image.path, k) != k:
                raise InputError(
                    f"gallery image {image.path!r} is listed twice (positions {first[image.path]} "
                    f"and {k}); each path may appear once in a gallery"
                )
        outside = self.allow_outside_root if allow_outside_root is None else allow_outside_root
        reasons: dict[int, str] = {}  # position -> why the image was skipped
        candidates: list[int] = []
        paths: list[str] = []
        for k, image in enumerate(images):
            try:
                paths.append(resolve_under(root or None, image.path, allow_outside=outside))
            except InputError as exc:
                if strict:
                    raise
                reasons[k] = str(exc)
                continue
            candidates.append(k)
        embeddings, logits, kept, failed = self._outputs(paths, progress=progress, strict=strict)
        reasons.update({candidates[i]: exc.reason for i, exc in failed})
        skipped = tuple((images[k].path, reasons[k]) for k in sorted(reasons))
        if not kept:
            raise InputError(f"no gallery image could be read: {summarise_skipped(skipped, len(images))}")
        return GalleryIndex(
            [images[candidates[i]] for i in kept],
            embeddings,
            attribute_probs=self.attribute_probabilities(logits),
            root=root,
            skipped=skipped,
        )

    # ------------------------------------------------------------------ queries
    def _text_features(self, texts: Sequence[str]) -> "torch.Tensor":
        """(n, Dt) features, computing only the texts not cached yet.

        The cache is read and updated under a lock; the text encoder runs outside it, so two
        threads may encode the same new text once each (same result), never fail. Each missing
        text is encoded on its own: in a batch it would be padded to its longest text, which moves
        its features by an ulp, so a cached row would depend on the batch that first computed it
        (a replay from an empty cache would then rank differently from the live session).
        """
        import torch

        if not texts:
            return torch.zeros(0, self.model.text_dim, device=self.device)
        unique = list(dict.fromkeys(texts))
        with self._cache_lock:
            rows = {text: self._text_cache[text] for text in unique if text in self._text_cache}
            for text in rows:  # least recently used first, so eviction drops the stalest
                self._text_cache.move_to_end(text)
        missing = [text for text in unique if text not in rows]
        if missing:
            features = torch.cat([self._featurize([text]) for text in missing])  # (m, Dt), one text per call
            computed = dict(zip(missing, features))
            rows.update(computed)
            with self._cache_lock:
                self._text_cache.update(computed)
                while len(self._text_cache) > self.text_cache_size:
                    self._text_cache.popitem(last=False)
        return torch.stack([rows[text] for text in texts])

    def _image_embeddings(self, paths: Sequence[str], index: GalleryIndex) -> "torch.Tensor":
        """(n, D) embeddings of reference/example images: index rows, else files under ``index.root``
        (InputError for a path that leaves it, unless ``allow_outside_root``; ImageError for an
        unreadable file)."""
        import torch

        if len(index) and index.embeddings.shape[1] != self.model.embed_dim:
            raise ValueError(
                f"index embeddings have D={index.embeddings.shape[1]} but the model embeds to D={self.model.embed_dim}"
            )
        rows = torch.zeros(len(paths), self.model.embed_dim)
        to_load = []
        for i, path in enumerate(paths):
            position = index.index_of(path)
            if position is not None:
                rows[i] = torch.from_numpy(np.array(index.embeddings[position]))  # a copy: a store's rows are read-only
            else:
                to_load.append((i, path))
        if to_load:
            files = [resolve_under(index.root or None, p, allow_outside=self.allow_outside_root) for _, p in to_load]
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
        """Many conversations at once -> one (R_i, D) array per conversation (batched by ``batch_size``).

        On the ONNX query engine, conversations of one length are batched together (its graph
        takes no padding), so a conversation's queries never depend on the others in its batch.
        """
        out: list[np.ndarray] = [np.zeros((0, self.model.embed_dim), np.float32)] * len(dialogues)
        by_length = self._encode_queries.needs_equal_lengths
        order = list(range(len(dialogues)))
        if by_length:
            order.sort(key=lambda i: len(dialogues[i]))  # stable: input order within a length
        start = 0
        while start < len(order):
            rows = order[start : start + self.batch_size]
            if by_length:
                rows = [i for i in rows if len(dialogues[i]) == len(dialogues[rows[0]])]
            start += len(rows)
            chunk = [dialogues[i] for i in rows]
            if not any(chunk):
                continue  # empty conversations: no query
            queries = self._encode_queries(self.dialogue_batch(chunk, index))  # (b, R, D)
            for j, i in enumerate(rows):
                out[i] = np.ascontiguousarray(queries[j, : len(dialogues[i])])
        return out

    def encode_turns(self, turns: Sequence[Turn], index: GalleryIndex) -> np.ndarray:
        """(R, D) L2-normalised query after each of the R turns (row r sees turns 0..r)."""
        if not turns:
            return np.zeros((0, self.model.embed_dim), np.float32)
        return self.encode_dialogues([turns], index)[0]
