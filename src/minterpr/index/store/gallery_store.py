"""A gallery embedded once, saved whole, and reopened in a second without re-embedding.

:func:`save_gallery` writes a :class:`~minterpr.index.gallery_index.GalleryIndex` to a folder::

    DIR/images.json           the images, by column (:mod:`minterpr.index.store.image_columns`)
    DIR/embeddings.npy        (N, D) float32, L2-normalised rows
    DIR/attribute_probs.npy   (N, L) float32 P(label), when the model predicts attributes
    DIR/skipped.json          [[path, reason], ...] of the images that could not be read
    DIR/vectors/              a VectorIndex over the embeddings (ids = positions 0..N-1), if saved
    DIR/appearance.npy        (N, A) float32 appearance vectors, if an appearance model embedded the gallery
    DIR/appearance_vectors/   a VectorIndex of the same backend over them, if both are saved (version 3)
    DIR/fused/                the fused index (:mod:`minterpr.index.store.fused_store`), if saved
    DIR/gallery.json          the manifest (:class:`GalleryManifest`), written last

The images are stored by column — one list per field (path, person_id, camera_id, view),
the distinct attribute sets listed once (as positions in a list of distinct ``(slot, values)``
pairs) with each image's position among them (the images of one person share theirs), and the
free metadata one list per key — because parsing 100k JSON records of 20 fields each takes
seconds, and a few long lists of strings and numbers a tenth of that.

Every file goes through :mod:`minterpr.fileio` (a temporary renamed into place); the manifest is
removed first and written last, with the size of every file, so a store whose save was killed,
or whose files were replaced since, is refused. ``meta`` is free per-image metadata (time,
source, frame, box, track: plain JSON), kept beside the images (:attr:`StoredGallery.metadata`)
and in the vector index's records, where filters read it.

:func:`~minterpr.index.store.gallery_append.append_gallery` adds rows to a store (creating it when absent), first dropping the rows
whose metadata matches a filter (the rows of an ingestion job that is being redone): the whole
store is written into ``DIR/.staging/`` and then moved into place file by file, the manifest
last, so a kill at any moment leaves the old store or the new one (an interrupted move is
finished by the next append). The cost is a rewrite of the store (O(N)).
A store folder may also hold ``crops/`` (an ingested gallery's images) and ``ingest/``
(ingestion progress); saves leave them alone. A store whose root is ``"."`` (:data:`STORE_ROOT`)
keeps its images inside its own folder: it is reopened with that folder as its root, wherever
the folder has been moved.

:func:`load_gallery` reads it back: the arrays memory-mapped (``mmap=True``, the default: the
pages are read when a search touches them; a 100k × 256 gallery reopens in under a second) and
its saved fused index set as ``GalleryIndex.fused`` (memory-mapped too), refusing with a
:class:`~minterpr.errors.DatasetError` that names the folder and the command that rebuilds it a
folder that is not a finished store, a store of another format version, or — given
``expected_fingerprint`` — one built by another model.

Example:
    >>> import tempfile
    >>> import numpy as np
    >>> from minterpr.types import GalleryImage
    >>> index = GalleryIndex([GalleryImage("a.jpg", "x:1", "x:cam1"), GalleryImage("b.jpg", "x:2")],
    ...                      np.eye(2, dtype=np.float32), root="/photos")
    >>> folder = tempfile.mkdtemp()
    >>> save_gallery(index, folder, model_fingerprint="0123abcd", metadata=[{"time": "2026-12-01T10:00:00"}, {}])
    >>> again = load_gallery(folder, expected_fingerprint="0123abcd")
    >>> again.images == index.images, again.root, again.embeddings.tolist()
    (True, '/photos', [[1.0, 0.0], [0.0, 1.0]])
    >>> open_gallery(folder).metadata
    [{'time': '2026-12-01T10:00:00'}, {}]
    >>> load_gallery(folder, expected_fingerprint="feedbeef")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    minterpr.errors.DatasetError: ...: built by another model (fingerprint 0123abcd, this model's is feedbeef); rebuild it with `minterpr index build --run RUN --images IMAGES --out ...`
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.errors import DatasetError, InputError
from minterpr.fileio import TEMPORARY_GLOB, atomic_write, atomic_write_text, remove_stale_temporaries
from minterpr.index.store.fused_store import FUSED, load_fused, save_fused
from minterpr.index.gallery_index import GalleryIndex
from minterpr.index.npy import load_npy
from minterpr.index.store.image_columns import IMAGES, image_columns, read_image_columns
from minterpr.index.store.store_vectors import APPEARANCE_VECTORS, appearance_entry, open_appearance_index

GALLERY_FORMAT = "minterpr-gallery"  # GalleryManifest.format
GALLERY_VERSION = 3  # bumped when the layout changes: a store of a version not in READ_VERSIONS is refused
# versions read: 1 = before the fused index (no GalleryManifest.fused), 2 = with it, 3 = with appearance_vectors/
READ_VERSIONS = (1, 2, 3)
MANIFEST = "gallery.json"  # written last: its presence means the store was saved whole
EMBEDDINGS, PROBS, SKIPPED, VECTORS = (
    "embeddings.npy",
    "attribute_probs.npy",
    "skipped.json",
    "vectors",
)
APPEARANCE = "appearance.npy"  # (N, A) float32 appearance vectors, when an appearance model embedded the gallery
# what a store folder may hold
STORE_FILES = (MANIFEST, IMAGES, EMBEDDINGS, PROBS, SKIPPED, VECTORS, FUSED, APPEARANCE, APPEARANCE_VECTORS)
CAPTIONS = "vlm_captions.jsonl"  # the crops' MTG captions (`minterpr vlm caption --index STORE`), if any
# what else it may hold (an ingested gallery's crops, their frames and progress, its captions): kept by saves
SIDE_ENTRIES = ("crops", "frames", "ingest", CAPTIONS)
STAGING = ".staging"  # append_gallery writes the new store here, then moves it into place
STORE_ROOT = "."  # a store's root meaning "the store's own folder" (its images inside it: the folder can move)
APPENDABLE = ("exact", "faiss_hnsw", "faiss_ivfpq")  # vector indexes append_gallery rebuilds (qdrant: a server's)
REBUILD = "minterpr index build --run RUN --images IMAGES --out {dir}"  # default rebuild command


@dataclass(frozen=True)
class GalleryManifest:
    """``DIR/gallery.json``: what the store holds and which model made it."""

    count: int  # images stored N
    dim: int  # embedding width D
    labels: int | None  # attribute labels L of attribute_probs.npy; None = no attribute probabilities
    model_fingerprint: str | None  # of the model that made the embeddings; None = unknown
    root: str | None  # image root the paths are relative to
    skipped: int  # images that could not be read (listed in skipped.json)
    vector_backend: str | None  # VECTOR_INDEXES name of vectors/; None = no vector index saved
    files: Mapping[str, int]  # file name -> size in bytes when written (a changed size = a changed store)
    rebuild: str  # the command that rebuilds the store
    created: str  # ISO 8601 UTC time of the save
    # the fused index saved in fused/ (its version, search settings and parts: fused_store.save_fused);
    #   None = none saved (and always None in a version-1 store)
    fused: Mapping[str, Any] | None = None
    # the appearance vectors in appearance.npy: {"dim": A, "model_fingerprint": the appearance model's, and
    #   "vector_backend": the VECTOR_INDEXES name of appearance_vectors/ when saved (version 3)};
    #   None = none (a gallery built without an appearance model: `minterpr index build --update` adds them)
    appearance: Mapping[str, Any] | None = None
    format: str = GALLERY_FORMAT
    version: int = GALLERY_VERSION


@dataclass
class StoredGallery:
    """A store as opened: the index, its manifest, the free metadata and the vector index."""

    index: GalleryIndex  # images, embeddings (memory-mapped or in memory), probabilities, root, skipped
    manifest: GalleryManifest
    meta_columns: dict[str, list[Any]] = field(default_factory=dict, repr=False)  # key -> (N,) values, None = absent
    vectors: Any = None  # the saved VectorIndex (ids = positions), None when none was saved

    @cached_property
    def metadata(self) -> list[dict[str, Any]]:
        """Each image's free metadata, in index order (built on first use: ``load_gallery`` skips it)."""
        records: list[dict[str, Any]] = [{} for _ in range(len(self.index))]
        for key, values in self.meta_columns.items():
            for record, value in zip(records, values):
                if value is not None:
                    record[key] = value
        return records


def check_store_folder(folder: str | os.PathLike[str]) -> None:
    """InputError unless ``folder`` is absent, empty, or holds only what a store holds."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{folder}: exists and is not a folder; give a new or empty folder for the gallery store")
    if folder.is_dir():
        foreign = sorted(
            p.name
            for p in folder.iterdir()
            if p.name not in (*STORE_FILES, *SIDE_ENTRIES, STAGING) and not p.match(TEMPORARY_GLOB)
        )
        if foreign:
            raise InputError(
                f"{folder}: not empty and not a gallery store (it holds {foreign[0]!r}); "
                "give a new or empty folder for the gallery store"
            )


def _prepare_folder(folder: Path) -> None:
    """Make ``folder`` ready for a new store: refuse a folder holding anything else, then remove
    the old manifest first (a save killed from now on leaves a store that is refused)."""
    check_store_folder(folder)
    if folder.is_dir():
        remove_stale_temporaries(folder)
        (folder / MANIFEST).unlink(missing_ok=True)
        shutil.rmtree(folder / VECTORS, ignore_errors=True)
        shutil.rmtree(folder / FUSED, ignore_errors=True)
        shutil.rmtree(folder / APPEARANCE_VECTORS, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)


def save_gallery(
    index: GalleryIndex,
    directory: str | os.PathLike[str],
    *,
    model_fingerprint: str | None,
    vector_index: Any = None,
    metadata: Sequence[Mapping[str, Any]] | None = None,
    rebuild: str | None = None,
    fused_index: Any = None,
    appearance_fingerprint: str | None = None,
    appearance_index: Any = None,
) -> None:
    """Write ``index`` (and ``vector_index``, a VectorIndex over its embeddings with ids 0..N-1,
    and ``fused_index``, a FusedIVF over the same rows) to ``directory``, the manifest last (see
    the module doc). ``metadata``: free JSON metadata per image, in index order; ``rebuild``: the
    command that rebuilds the store (named when it is refused). A folder holding anything but a
    gallery store is refused (InputError). ``index.appearance``, when set, is saved with
    ``appearance_fingerprint`` (the appearance model's, required then) and ``appearance_index``
    (a VectorIndex over them: :func:`~minterpr.index.store.store_vectors.build_appearance_index`)."""
    folder = Path(directory)
    n, dim = index.embeddings.shape
    if metadata is not None and len(metadata) != n:
        raise InputError(f"save_gallery: {len(metadata)} metadata records for {n} images")
    if vector_index is not None and (len(vector_index) != n or vector_index.dim != dim):
        raise InputError(
            f"save_gallery: the vector index holds {len(vector_index)} vectors of width "
            f"{vector_index.dim}, the gallery {n} of width {dim}"
        )
    if vector_index is not None and getattr(vector_index, "model_fingerprint", None) != model_fingerprint:
        raise InputError(
            f"save_gallery: the vector index was made by model {vector_index.model_fingerprint!r}, "
            f"the gallery by {model_fingerprint!r}"
        )
    if fused_index is not None and (
        len(fused_index) != n
        or fused_index.embeddings.shape[1] != dim
        or (fused_index.probs is None) != (index.attribute_probs is None)
    ):
        raise InputError(
            f"save_gallery: the fused index holds {fused_index.embeddings.shape} rows, the gallery "
            f"{(n, dim)} (or one has attribute probabilities and the other not)"
        )
    appearance = index.appearance
    if appearance is not None and not appearance_fingerprint:
        raise InputError("save_gallery: appearance vectors need the fingerprint of the appearance model that made them")
    if appearance_index is not None and appearance is None:
        raise InputError("save_gallery: an appearance vector index without the appearance vectors")
    looks = None if appearance is None else appearance_entry(appearance, appearance_fingerprint, appearance_index)
    _prepare_folder(folder)
    try:
        text = json.dumps(image_columns(index.images, metadata), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InputError(f"save_gallery: the metadata must be plain JSON data ({err})") from None
    atomic_write_text(folder / IMAGES, text + "\n")
    atomic_write(folder / EMBEDDINGS, lambda f: np.save(f, np.asarray(index.embeddings, dtype=np.float32)))
    probs = index.attribute_probs
    if probs is not None:
        atomic_write(folder / PROBS, lambda f: np.save(f, np.asarray(probs, dtype=np.float32)))
    else:
        (folder / PROBS).unlink(missing_ok=True)
    if appearance is not None:
        atomic_write(folder / APPEARANCE, lambda f: np.save(f, np.asarray(appearance, dtype=np.float32)))
    else:
        (folder / APPEARANCE).unlink(missing_ok=True)
    atomic_write_text(folder / SKIPPED, json.dumps([list(s) for s in index.skipped], ensure_ascii=False) + "\n")
    if vector_index is not None:
        vector_index.save(folder / VECTORS)
    if appearance_index is not None:
        appearance_index.save(folder / APPEARANCE_VECTORS)
    entry, fused_files = save_fused(fused_index, folder) if fused_index is not None else (None, {})
    written = (
        [IMAGES, EMBEDDINGS, SKIPPED]
        + ([PROBS] if probs is not None else [])
        + ([APPEARANCE] if appearance is not None else [])
    )
    manifest = GalleryManifest(
        count=n,
        dim=dim,
        labels=None if probs is None else int(probs.shape[1]),
        model_fingerprint=model_fingerprint,
        root=index.root,
        skipped=len(index.skipped),
        vector_backend=None if vector_index is None else str(vector_index.name),
        files={**{name: (folder / name).stat().st_size for name in written}, **fused_files},
        rebuild=rebuild or REBUILD.format(dir=shlex.quote(os.fspath(folder))),
        created=datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        fused=entry,
        appearance=looks,
    )
    write_manifest(folder, manifest)


def write_manifest(folder: Path, manifest: GalleryManifest) -> None:
    """Write ``folder/gallery.json`` atomically (the last step of every save)."""
    atomic_write_text(folder / MANIFEST, json.dumps(asdict(manifest), indent=2, ensure_ascii=False) + "\n")


def read_manifest(directory: str | os.PathLike[str]) -> GalleryManifest:
    """The manifest of a finished store of this version; DatasetError naming the folder otherwise."""
    folder = Path(directory)
    command = REBUILD.format(dir=shlex.quote(os.fspath(folder)))
    hint = f"rebuild it with `{command}`"
    if not folder.is_dir():
        raise DatasetError(folder, f"no such gallery store; build one with `{command}`")
    path = folder / MANIFEST
    if not path.is_file():
        present = [name for name in STORE_FILES if (folder / name).exists()]
        what = "a half-written gallery store (the save did not finish)" if present else "not a gallery store"
        raise DatasetError(folder, f"{what}: no {MANIFEST}; {hint}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeError, json.JSONDecodeError) as err:
        raise DatasetError(folder, f"unreadable {MANIFEST} ({err}); {hint}") from None
    if not isinstance(raw, dict) or raw.get("format") != GALLERY_FORMAT:
        raise DatasetError(folder, f"{MANIFEST} is not a minterpr gallery manifest; {hint}")
    rebuild = raw.get("rebuild") if isinstance(raw.get("rebuild"), str) else None
    hint = f"rebuild it with `{rebuild}`" if rebuild else hint
    if raw.get("version") not in READ_VERSIONS or (raw.get("version") == 1 and "fused" in raw):
        raise DatasetError(
            folder,
            f"a gallery store of format version {raw.get('version')!r}; this minterpr reads "
            f"version {' or '.join(map(str, READ_VERSIONS))}: {hint}",
        )
    try:
        return GalleryManifest(**raw)
    except TypeError as err:
        raise DatasetError(folder, f"malformed {MANIFEST} ({err}); {hint}") from None


def _array(folder: Path, name: str, shape: tuple[int, int], mmap: bool, fail: Any) -> np.ndarray:
    try:
        array = load_npy(folder / name, mmap=mmap)
    except (OSError, ValueError) as err:
        raise fail(f"unreadable {name} ({err})") from None
    if array.shape != shape or array.dtype != np.float32:
        raise fail(f"{name} holds {array.dtype} {array.shape}, the manifest says float32 {shape}")
    return array


def open_gallery(
    directory: str | os.PathLike[str],
    *,
    expected_fingerprint: str | None = None,
    mmap: bool = True,
    fused: bool = True,
    appearance_index: bool = True,
) -> StoredGallery:
    """Open a store whole: its index, manifest, free metadata, vector index, (``fused``) the saved
    fused index as ``index.fused`` and (``appearance_index``) the appearance vector index as
    ``index.appearance_vectors`` (see the module doc)."""
    folder = Path(directory)
    manifest = read_manifest(folder)
    hint = f"rebuild it with `{manifest.rebuild}`"

    def fail(reason: str) -> DatasetError:
        return DatasetError(folder, f"{reason}; {hint}")

    if expected_fingerprint is not None and manifest.model_fingerprint != expected_fingerprint:
        made_by = (
            f"fingerprint {manifest.model_fingerprint}"
            if manifest.model_fingerprint
            else "an unknown model: no fingerprint recorded"
        )
        raise fail(f"built by another model ({made_by}, this model's is {expected_fingerprint})")
    for name, size in manifest.files.items():
        try:
            actual = (folder / name).stat().st_size
        except OSError:
            raise fail(f"{name} is missing (the store is incomplete)") from None
        if actual != size:
            raise fail(f"{name} has {actual} bytes, the save wrote {size} (changed since)")
    images, meta_columns = read_image_columns(folder / IMAGES, manifest.count, fail)
    embeddings = _array(folder, EMBEDDINGS, (manifest.count, manifest.dim), mmap, fail)
    probs = None if manifest.labels is None else _array(folder, PROBS, (manifest.count, manifest.labels), mmap, fail)
    appearance = None
    if manifest.appearance is not None:
        appearance = _array(folder, APPEARANCE, (manifest.count, int(manifest.appearance["dim"])), mmap, fail)
    try:
        skipped = tuple(tuple(item) for item in json.loads((folder / SKIPPED).read_text(encoding="utf-8")))
    except (OSError, ValueError) as err:
        raise fail(f"unreadable {SKIPPED} ({err})") from None
    vectors = None
    if manifest.vector_backend is not None:
        from minterpr.index.vectors.vector_index import load_vector_index

        vectors = load_vector_index(folder / VECTORS, expected_fingerprint=manifest.model_fingerprint, mmap=mmap)
    looks = open_appearance_index(folder, manifest.appearance, manifest.count, mmap, fail) if appearance_index else None
    root = os.fspath(folder.absolute()) if manifest.root == STORE_ROOT else manifest.root
    index = GalleryIndex(
        images,
        embeddings,
        attribute_probs=probs,
        root=root,
        skipped=skipped,
        vectors=vectors,
        appearance=appearance,
        appearance_vectors=looks,
    )
    if fused and manifest.fused is not None:
        index.fused = load_fused(folder, manifest.fused, index, mmap, fail)
    return StoredGallery(index, manifest, meta_columns, vectors)


def load_gallery(
    directory: str | os.PathLike[str], *, expected_fingerprint: str | None = None, mmap: bool = True, fused: bool = True
) -> GalleryIndex:
    """The stored :class:`GalleryIndex` (its ``vectors`` set to the saved vector index, its ``fused``
    to the saved fused index, if any); see :func:`open_gallery` and the module doc for what is refused."""
    return open_gallery(directory, expected_fingerprint=expected_fingerprint, mmap=mmap, fused=fused).index
