"""Batch gallery embedding: resumable shards, one process or a Ray cluster, the same result.

``embed_gallery(RUN, images, root, OUT)`` embeds a gallery (100k-100M crops) into numbered shards
in ``OUT`` and returns the whole result in gallery order (:class:`EmbeddedGallery`: embeddings,
calibrated attribute probabilities, and the unreadable images with their reasons, never a crash).

Where the work runs is the ``executor`` (the model's own ``engine`` is the loaded run's,
:data:`minterpr.runtime.neural_backend.RUN_ENGINE`):

* ``executor="local"``: this process, one model, ``batch_size`` images per forward pass. No Ray.
* ``executor="ray"``: Ray Data, ``ray.data.from_items(rows).map_batches(EmbedActor,
  concurrency=num_actors, batch_size=batch_size)``: each actor loads the run once
  (:func:`minterpr.runtime.pipeline.load_pipeline`) and embeds batches; results stream back to this
  process, which writes each shard as soon as all its images have come back. Workers must see
  the image root (a shared file system or the same path on every node); only this process
  writes ``OUT``. Uses the running Ray (``ray.init(address=...)`` first for a cluster), else
  starts a local one.

Layout of ``OUT`` (every file through :mod:`minterpr.fileio`): ``job.json`` (the model's
fingerprint, the gallery's hash, the shard size: a rerun with another model or gallery is
refused), then per shard ``shard-00000.emb.npy`` (n, D) float32, ``.probs.npy`` (n, L),
``.errors.json`` (position in shard -> reason; its rows are zeros) and, last, the marker
``shard-00000.done``. A killed job leaves shards without a marker: the rerun (``resume=True``)
skips every shard with one and redoes the others. The concatenation is the same for both
executors (tests/test_batch_embed.py), and equal to :meth:`Pipeline.index_images`.

Example (with a trained run and images):
    >>> result = embed_gallery("runs/synth", ["a.jpg", "b.jpg"], "photos", "emb", executor="local")  # doctest: +SKIP
    >>> result.embeddings.shape, result.skipped  # doctest: +SKIP
    ((2, 256), ())
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from minterpr.data.paths import resolve_under
from minterpr.errors import DatasetError, ImageError, InputError
from minterpr.fileio import atomic_write, atomic_write_text
from minterpr.index.gallery_index import GalleryIndex
from minterpr.runtime.neural_backend import DEFAULT_BATCH_SIZE
from minterpr.runtime.pipeline import load_pipeline
from minterpr.types import GalleryImage

JOB_FILE = "job.json"
JOB_FORMAT = "minterpr-batch-embed"  # job.json "format"
EXECUTORS = ("local", "ray")  # where embed_gallery runs the model: this process, or Ray Data actors

try:
    from tqdm import tqdm
except ImportError:  # pragma: no cover - tqdm is a core dependency
    tqdm = None


@dataclass(frozen=True)
class EmbeddedGallery:
    """The readable images of a gallery, in its order, with their model outputs."""

    images: list[GalleryImage]  # the images that could be read
    embeddings: np.ndarray  # (N, D) float32, L2-normalised
    attribute_probs: np.ndarray  # (N, L) float32 calibrated attribute probabilities
    skipped: tuple[tuple[str, str], ...]  # (path, reason) of each unreadable image, gallery order

    def to_gallery_index(self, root: str | None = None) -> GalleryIndex:
        """A searchable :class:`GalleryIndex` (what ``Pipeline.index_images`` returns)."""
        return GalleryIndex(
            self.images, self.embeddings, attribute_probs=self.attribute_probs, root=root, skipped=self.skipped
        )


def encode_chunk(
    backend: Any, images: Sequence[GalleryImage], root: str | None
) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
    """(n, D) embeddings, (n, L) probabilities (zero rows where unreadable) and position -> reason."""
    dim, labels = backend.model.embed_dim, backend.model.attribute_temperature.shape[0]
    emb, probs = np.zeros((len(images), dim), np.float32), np.zeros((len(images), labels), np.float32)
    try:
        index = backend.index_images(list(images), root=root, progress=False)
    except InputError:  # none readable: each image's reason, as index_images states it
        return emb, probs, {k: _reason(backend, image, root) for k, image in enumerate(images)}
    position = {image.path: k for k, image in enumerate(images)}
    rows = [position[image.path] for image in index.images]
    emb[rows], probs[rows] = index.embeddings, index.attribute_probs
    return emb, probs, {position[path]: reason for path, reason in index.skipped}


def _reason(backend: Any, image: GalleryImage, root: str | None) -> str:
    """Why ``image`` cannot be read (the reason ``index_images`` lists in ``skipped``)."""
    try:
        backend.model.preprocess.load(resolve_under(root or None, image.path, allow_outside=backend.allow_outside_root))
    except InputError as error:
        return str(error)
    except ImageError as error:
        return error.reason
    return "unreadable"  # pragma: no cover - index_images read none of the chunk, this one loads now


# ---------------------------------------------------------------------- shards on disk
def _shard(out: Path, s: int, suffix: str) -> Path:
    return out / f"shard-{s:05d}.{suffix}"


def _save_npy(path: Path, array: np.ndarray) -> None:
    atomic_write(path, lambda f: np.save(f, array, allow_pickle=False))


def write_shard(out: Path, s: int, emb: np.ndarray, probs: np.ndarray, errors: dict[int, str]) -> None:
    """The shard's arrays and errors, then its ``done`` marker (last: its presence means whole)."""
    _save_npy(_shard(out, s, "emb.npy"), emb)
    _save_npy(_shard(out, s, "probs.npy"), probs)
    atomic_write_text(_shard(out, s, "errors.json"), json.dumps({str(k): v for k, v in sorted(errors.items())}))
    atomic_write_text(_shard(out, s, "done"), json.dumps({"count": len(emb), "failed": len(errors)}) + "\n")


def read_shard(out: Path, s: int, n: int) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
    try:
        emb = np.load(_shard(out, s, "emb.npy"), allow_pickle=False)
        probs = np.load(_shard(out, s, "probs.npy"), allow_pickle=False)
        errors = {int(k): v for k, v in json.loads(_shard(out, s, "errors.json").read_text("utf-8")).items()}
    except (OSError, ValueError) as error:
        raise DatasetError(
            _shard(out, s, "done"),
            f"shard {s} is marked done but unreadable ({error}); delete its .done file and rerun",
        ) from None
    if len(emb) != n or len(probs) != n:
        raise DatasetError(
            _shard(out, s, "emb.npy"), f"{len(emb)} rows, the shard has {n} images; delete its .done file and rerun"
        )
    return emb, probs, errors


def _job(
    out: Path, fingerprint: str, images: Sequence[GalleryImage], shard_size: int, resume: bool, precision: str = "fp32"
) -> None:
    """Write job.json, or check that the one there describes this job (else refuse: another job);
    ``precision`` is recorded when it is not fp32 (earlier jobs, all fp32, resume unchanged)."""
    digest = hashlib.sha256("\n".join(image.path for image in images).encode("utf-8")).hexdigest()[:16]
    job = {
        "format": JOB_FORMAT,
        "version": 1,
        "model_fingerprint": fingerprint,
        "images": len(images),
        "gallery_sha256": digest,
        "shard_size": shard_size,
        **({} if precision == "fp32" else {"image_precision": precision}),
    }
    path = out / JOB_FILE
    if path.is_file() and resume:
        try:
            old = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            old = None
        if old != job:
            raise InputError(
                f"{out}: holds another embedding job (model, gallery, shard size or precision differ: "
                f"{old} vs {job}); use another folder or resume=False"
            )
        return
    for marker in out.glob("shard-*.done"):  # starting over: no old shard counts as done
        marker.unlink()
    atomic_write_text(path, json.dumps(job, indent=2, sort_keys=True) + "\n")


# ---------------------------------------------------------------------- executors
def shard_done(out: Path, s: int) -> bool:
    """Whether shard ``s`` of ``out`` is whole (its marker, written last, is there)."""
    return _shard(out, s, "done").is_file()


def embed_shards(
    backend: Any,
    images: Sequence[GalleryImage],
    root: str | None,
    out: Path,
    shard_size: int,
    batch_size: int,
    on_batch: Callable[[int, int], None] | None = None,
) -> None:
    """Embed, in this process, every shard of ``images`` not yet done into ``out`` (the layout of
    the module doc). ``on_batch(done, n)`` after each batch of n images: ``done`` counts the
    images of finished shards and batches, gallery-wide."""
    done = 0
    for s, n in _shards(len(images), shard_size):
        if shard_done(out, s):
            done += n
            continue
        chunk = images[s * shard_size : (s + 1) * shard_size]
        parts = []
        for start in range(0, len(chunk), batch_size):
            parts.append(encode_chunk(backend, chunk[start : start + batch_size], root))
            done += len(chunk[start : start + batch_size])
            if on_batch is not None:
                on_batch(done, len(chunk[start : start + batch_size]))
        errors = {
            start + k: v for start, (_, _, err) in zip(range(0, len(chunk), batch_size), parts) for k, v in err.items()
        }
        write_shard(out, s, np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), errors)


class EmbedActor:
    """A Ray Data actor: loads the run once, then embeds batches of ``{"position", "path"}`` rows."""

    def __init__(self, run_dir: str, root: str | None, device: str, batch_size: int, image_precision: str) -> None:
        self.backend = load_pipeline(
            run_dir, device=device, batch_size=batch_size, image_precision=image_precision, appearance=None
        ).backend
        self.root = root

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        images = [GalleryImage(str(path), f"gallery:{int(p)}") for p, path in zip(batch["position"], batch["path"])]
        emb, probs, errors = encode_chunk(self.backend, images, self.root)
        return {
            "position": np.asarray(batch["position"], np.int64),
            "embedding": emb,
            "probs": probs,
            "error": np.array([errors.get(k, "") for k in range(len(images))], dtype=object),
        }


def _run_ray(
    run_dir: str,
    images: list[GalleryImage],
    root: str | None,
    out: Path,
    pending: list[int],
    shard_size: int,
    batch_size: int,
    num_actors: int,
    device: str,
    bar: Any,
    image_precision: str = "fp32",
) -> None:
    try:
        import ray
    except ImportError:
        raise InputError(
            "executor='ray' needs Ray Data: pip install 'minterpr[ray]' (or use executor='local')"
        ) from None
    if not ray.is_initialized():
        ray.init()
    ray.data.DataContext.get_current().enable_progress_bars = False
    rows = [
        {"position": p, "path": images[p].path}
        for s in pending
        for p in range(s * shard_size, min(len(images), (s + 1) * shard_size))
    ]
    dataset = ray.data.from_items(rows).map_batches(
        EmbedActor,
        fn_constructor_kwargs=dict(
            run_dir=run_dir, root=root, device=device, batch_size=batch_size, image_precision=image_precision
        ),
        concurrency=num_actors,
        batch_size=batch_size,
        batch_format="numpy",
        num_cpus=1,
    )
    buffers: dict[int, dict[int, tuple[np.ndarray, np.ndarray, str]]] = {}
    for batch in dataset.iter_batches(batch_size=None, batch_format="numpy"):
        for p, e, pr, err in zip(batch["position"], batch["embedding"], batch["probs"], batch["error"]):
            s = int(p) // shard_size
            buffers.setdefault(s, {})[int(p) - s * shard_size] = (e, pr, str(err))
            n = min(len(images), (s + 1) * shard_size) - s * shard_size
            if len(buffers[s]) == n:  # the shard is whole: write it now, free its rows
                done = buffers.pop(s)
                write_shard(
                    out,
                    s,
                    np.stack([done[k][0] for k in range(n)]).astype(np.float32),
                    np.stack([done[k][1] for k in range(n)]).astype(np.float32),
                    {k: done[k][2] for k in range(n) if done[k][2]},
                )
        if bar is not None:
            bar.update(len(batch["position"]))
    if buffers:
        raise DatasetError(out, f"Ray returned incomplete shards {sorted(buffers)}; rerun to finish them")


def _gallery(images: Sequence[GalleryImage | str]) -> list[GalleryImage]:
    if isinstance(images, (str, bytes, os.PathLike)) or not hasattr(images, "__iter__"):
        raise InputError(f"images must be a list of paths or GalleryImage records, got {type(images).__name__}")
    gallery = []
    for k, item in enumerate(images):
        if isinstance(item, GalleryImage):
            gallery.append(item)
        elif isinstance(item, (str, os.PathLike)):
            gallery.append(GalleryImage(os.fspath(item), f"gallery:{k}"))
        else:
            raise InputError(f"images[{k}] must be a path or a GalleryImage, got {type(item).__name__}")
    if not gallery:
        raise InputError("the gallery is empty: there are no images to embed")
    seen: dict[str, int] = {}
    for k, image in enumerate(gallery):
        if seen.setdefault(image.path, k) != k:
            raise InputError(f"gallery image {image.path!r} is listed twice (positions {seen[image.path]} and {k})")
    return gallery


def _shards(n: int, shard_size: int) -> Iterator[tuple[int, int]]:
    for s, start in enumerate(range(0, n, shard_size)):
        yield s, min(n, start + shard_size) - start


def embed_gallery(
    run_dir: str | os.PathLike[str],
    images: Sequence[GalleryImage | str],
    root: str | None,
    out_dir: str | os.PathLike[str],
    *,
    executor: str = "local",
    batch_size: int = DEFAULT_BATCH_SIZE,
    shard_size: int = 4096,
    num_actors: int = 2,
    device: str = "cpu",
    progress: bool = True,
    resume: bool = True,
    engine: str | None = None,
    image_precision: str = "fp32",
) -> EmbeddedGallery:
    """Embed ``images`` (paths relative to ``root``, or GalleryImage records) with the run in
    ``run_dir`` into shards in ``out_dir`` and return the gallery's outputs (see the module doc).

    ``batch_size``: images per forward pass (per Ray batch); ``shard_size``: images per shard
    file (the unit of resumption); ``num_actors``: Ray actors (one model each, one CPU each);
    ``resume=False`` redoes every shard. ``image_precision``: "fp32" or "int8" (the model
    directory's int8 image tower, :mod:`minterpr.models.onnx_int8`; recorded in the job, so shards
    of two precisions never mix). ``engine``: deprecated name of ``executor`` ("engine" now
    names the model's inference engine, see docs/extending.md).
    """
    if engine is not None:
        warnings.warn("embed_gallery(engine=...) is now embed_gallery(executor=...)", DeprecationWarning, stacklevel=2)
        executor = engine
    if executor not in EXECUTORS:
        raise InputError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    for name, value in (("batch_size", batch_size), ("shard_size", shard_size), ("num_actors", num_actors)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{name} must be a positive integer, got {value!r}")
    gallery = _gallery(images)
    root = None if root is None else os.fspath(root)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # the fingerprint; the local model (an unusable precision fails here, before any shard)
    pipeline = load_pipeline(run_dir, device=device, batch_size=batch_size, image_precision=image_precision)
    _job(out, pipeline.fingerprint, gallery, shard_size, resume, image_precision)
    pending = [s for s, _ in _shards(len(gallery), shard_size) if not shard_done(out, s)]
    todo = sum(n for s, n in _shards(len(gallery), shard_size) if s in set(pending))
    bar = tqdm(total=todo, desc=f"embedding ({executor})", unit="img", disable=not progress) if tqdm else None
    try:
        if executor == "local":
            embed_shards(
                pipeline.backend,
                gallery,
                root,
                out,
                shard_size,
                batch_size,
                None if bar is None else lambda _, n: bar.update(n),
            )
        elif pending:
            _run_ray(
                os.fspath(run_dir),
                gallery,
                root,
                out,
                pending,
                shard_size,
                batch_size,
                num_actors,
                device,
                bar,
                image_precision,
            )
    finally:
        if bar is not None:
            bar.close()
    return collect(out, gallery, shard_size)


def collect(out: Path, gallery: Sequence[GalleryImage], shard_size: int) -> EmbeddedGallery:
    """Concatenate the finished shards of ``out`` in gallery order (DatasetError if one is missing)."""
    embs, probs, keep, skipped = [], [], [], []
    for s, n in _shards(len(gallery), shard_size):
        if not shard_done(out, s):
            raise DatasetError(out, f"shard {s} is not finished; rerun embed_gallery to finish it")
        emb, prob, errors = read_shard(out, s, n)
        rows = np.array([k for k in range(n) if k not in errors], np.int64)
        embs.append(emb[rows])
        probs.append(prob[rows])
        keep += [gallery[s * shard_size + k] for k in rows]
        skipped += [(gallery[s * shard_size + k].path, errors[k]) for k in sorted(errors)]
    return EmbeddedGallery(keep, np.concatenate(embs), np.concatenate(probs), tuple(skipped))
