"""A gallery embedded once, saved whole, and reopened in a second without re-embedding.

:func:`save_gallery` writes a :class:`~minterpr.index.gallery_index.GalleryIndex` to a folder::

    DIR/images.json           the images, by column (see :func:`_image_columns`)
    DIR/embeddings.npy        (N, D) float32, L2-normalised rows
    DIR/attribute_probs.npy   (N, L) float32 P(label), when the model predicts attributes
    DIR/skipped.json          [[path, reason], ...] of the images that could not be read
    DIR/vectors/              a VectorIndex over the embeddings (ids = positions 0..N-1), if saved
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
from itertools import chain
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from minterpr.errors import DatasetError, InputError
from minterpr.fileio import TEMPORARY_GLOB, atomic_write, atomic_write_text, remove_stale_temporaries
from minterpr.index.store.fused_store import FUSED, load_fused, save_fused
from minterpr.index.gallery_index import GalleryIndex
from minterpr.index.npy import load_npy
from minterpr.types import GalleryImage

GALLERY_FORMAT = "minterpr-gallery"  # GalleryManifest.format
GALLERY_VERSION = 2  # bumped when the layout changes: a store of a version not in READ_VERSIONS is refused
READ_VERSIONS = (1, 2)  # versions read: 1 = before the fused index (no GalleryManifest.fused), 2 = with it
MANIFEST = "gallery.json"  # written last: its presence means the store was saved whole
IMAGES, EMBEDDINGS, PROBS, SKIPPED, VECTORS = (
    "images.json",
    "embeddings.npy",
    "attribute_probs.npy",
    "skipped.json",
    "vectors",
)
APPEARANCE = "appearance.npy"  # (N, A) float32 appearance vectors, when an appearance model embedded the gallery
STORE_FILES = (MANIFEST, IMAGES, EMBEDDINGS, PROBS, SKIPPED, VECTORS, FUSED, APPEARANCE)  # what a store folder may hold
CAPTIONS = "vlm_captions.jsonl"  # the crops' MTG captions (`minterpr vlm caption --index STORE`), if any
# what else it may hold (an ingested gallery's crops, their frames and progress, its captions): kept by saves
SIDE_ENTRIES = ("crops", "frames", "ingest", CAPTIONS)
STAGING = ".staging"  # append_gallery writes the new store here, then moves it into place
STORE_ROOT = "."  # a store's root meaning "the store's own folder" (its images inside it: the folder can move)
APPENDABLE = ("exact", "faiss_hnsw", "faiss_ivfpq")  # vector indexes append_gallery rebuilds (qdrant: a server's)
COLUMNS = ("path", "person_id", "camera_id", "view")  # GalleryImage's plain fields, one list each in images.json
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
    # the appearance vectors in appearance.npy: {"dim": A, "model_fingerprint": the appearance model's};
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


def _image_columns(images: Sequence[GalleryImage], metadata: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """``images.json``: ``{"path": [...], "person_id": [...], "camera_id": [...], "view": [...],
    "attributes": [set position or null, ...], "attribute_sets": [[pair position, ...], ...],
    "attribute_pairs": [[slot, [values]], ...], "meta": {key: [value or null, ...]}}`` (a null
    metadata value is an absent key).

    >>> _image_columns([GalleryImage("a.jpg", "x:1", attributes={"gender": ("male",)})], [{"frame": 3}])["meta"]
    {'frame': [3]}
    """
    columns: dict[str, Any] = {name: [getattr(image, name) for image in images] for name in COLUMNS}
    pairs: dict[tuple[str, tuple[str, ...]], int] = {}  # (slot, values) -> its position in attribute_pairs
    sets: dict[tuple[int, ...], int] = {}  # attribute set (pair positions) -> its position in attribute_sets
    columns["attributes"] = [
        None
        if image.attributes is None
        else sets.setdefault(
            tuple(pairs.setdefault((slot, tuple(values)), len(pairs)) for slot, values in image.attributes.items()),
            len(sets),
        )
        for image in images
    ]
    columns["attribute_sets"] = [list(key) for key in sets]
    columns["attribute_pairs"] = [[slot, list(values)] for slot, values in pairs]
    meta: dict[str, list[Any]] = {}
    for k, record in enumerate(metadata or ()):
        for key, value in record.items():
            if key not in meta:
                meta[key] = [None] * len(images)
            meta[key][k] = value
    columns["meta"] = meta
    return columns


def vector_records(index: GalleryIndex, metadata: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The metadata record of each image for a vector index (what its filters read): ``path``,
    ``person_id``, ``camera`` and ``view`` when known, then the free metadata.

    >>> index = GalleryIndex([GalleryImage("a.jpg", "x:1", "x:cam1")], np.ones((1, 2), np.float32))
    >>> vector_records(index, [{"time": 5}])
    [{'path': 'a.jpg', 'person_id': 'x:1', 'camera': 'x:cam1', 'time': 5}]
    """
    out = []
    for k, image in enumerate(index.images):
        record: dict[str, Any] = {"path": image.path, "person_id": image.person_id}
        if image.camera_id is not None:
            record["camera"] = image.camera_id
        if image.view is not None:
            record["view"] = image.view
        record.update(metadata[k] if metadata is not None else {})
        out.append(record)
    return out


def build_vector_index(
    backend: str,
    index: GalleryIndex,
    metadata: Sequence[Mapping[str, Any]] | None = None,
    *,
    model_fingerprint: str | None,
    **params: Any,
) -> Any:
    """A ``VECTOR_INDEXES`` backend over ``index``'s embeddings: ids = gallery positions 0..N-1,
    records = :func:`vector_records` (so filters read camera, path, time, ...); a backend that
    learns (IVF-PQ) is trained on the embeddings first. ``params``: the backend's own options.

    >>> index = GalleryIndex([GalleryImage("a.jpg", "x:1", "x:c1"), GalleryImage("b.jpg", "x:2", "x:c2")],
    ...                      np.eye(2, dtype=np.float32))
    >>> vectors = build_vector_index("exact", index, model_fingerprint="f00d")
    >>> vectors.search(np.array([[1.0, 0.0]], np.float32), 2, where={"camera": "x:c2"}).ids.tolist()
    [[1, -1]]
    """
    from minterpr.index.vectors.vector_index import VECTOR_INDEXES

    if backend not in VECTOR_INDEXES:
        raise InputError(f"unknown vector index {backend!r}: must be one of {', '.join(VECTOR_INDEXES.names())}")
    n, dim = index.embeddings.shape
    vectors = VECTOR_INDEXES.create(backend, dim=dim, model_fingerprint=model_fingerprint, **params)
    embeddings = np.asarray(index.embeddings, dtype=np.float32)
    if callable(getattr(vectors, "train", None)):
        vectors.train(embeddings)
    vectors.add(embeddings, np.arange(n, dtype=np.int64), vector_records(index, metadata))
    return vectors


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
) -> None:
    """Write ``index`` (and ``vector_index``, a VectorIndex over its embeddings with ids 0..N-1,
    and ``fused_index``, a FusedIVF over the same rows) to ``directory``, the manifest last (see
    the module doc). ``metadata``: free JSON metadata per image, in index order; ``rebuild``: the
    command that rebuilds the store (named when it is refused). A folder holding anything but a
    gallery store is refused (InputError). ``index.appearance``, when set, is saved with
    ``appearance_fingerprint`` (the appearance model's, required then)."""
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
    _prepare_folder(folder)
    try:
        text = json.dumps(_image_columns(index.images, metadata), ensure_ascii=False, allow_nan=False)
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
        appearance=None
        if appearance is None
        else {"dim": int(appearance.shape[1]), "model_fingerprint": appearance_fingerprint},
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


def _images(folder: Path, count: int, fail: Any) -> tuple[list[GalleryImage], dict[str, list[Any]]]:
    """The images and their free metadata columns from ``images.json`` (see :func:`_image_columns`)."""
    try:
        columns = json.loads((folder / IMAGES).read_text(encoding="utf-8"))
        pairs = [(str(slot), tuple(values)) for slot, values in columns["attribute_pairs"]]
        codes = columns["attribute_sets"]
        if min(chain.from_iterable(codes), default=0) < 0:  # too large or not a number: IndexError, TypeError
            raise ValueError("'attribute_sets' must list positions in 'attribute_pairs'")
        sets = [dict(map(pairs.__getitem__, set_codes)) for set_codes in codes]
        lists = [columns[name] for name in (*COLUMNS, "attributes")]
        meta = {key: values for key, values in columns["meta"].items()}
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
        raise fail(f"unreadable {IMAGES} ({type(err).__name__}: {err})") from None
    for name, values in [*zip((*COLUMNS, "attributes"), lists), *meta.items()]:
        if not isinstance(values, list) or len(values) != count:
            raise fail(f"{IMAGES}: {name!r} is not a list of {count} values (the manifest's image count)")
    positions = lists[-1]
    for position in positions:  # the check costs 10 ms for 100k images
        if position is not None and (type(position) is not int or not 0 <= position < len(sets)):
            raise fail(f"{IMAGES}: attribute set {position!r} is not a position in 'attribute_sets'")
    # an attribute set is shared by the images that have it: read-only, as the index is
    images = [
        GalleryImage(path, pid, camera, view, None if position is None else sets[position])
        for path, pid, camera, view, position in zip(*lists)
    ]
    return images, meta


def _array(folder: Path, name: str, shape: tuple[int, int], mmap: bool, fail: Any) -> np.ndarray:
    try:
        array = load_npy(folder / name, mmap=mmap)
    except (OSError, ValueError) as err:
        raise fail(f"unreadable {name} ({err})") from None
    if array.shape != shape or array.dtype != np.float32:
        raise fail(f"{name} holds {array.dtype} {array.shape}, the manifest says float32 {shape}")
    return array


def open_gallery(
    directory: str | os.PathLike[str], *, expected_fingerprint: str | None = None, mmap: bool = True, fused: bool = True
) -> StoredGallery:
    """Open a store whole: its index, manifest, free metadata, vector index and (``fused``) the
    saved fused index as ``index.fused`` (see the module doc)."""
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
    images, meta_columns = _images(folder, manifest.count, fail)
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
    root = os.fspath(folder.absolute()) if manifest.root == STORE_ROOT else manifest.root
    index = GalleryIndex(
        images, embeddings, attribute_probs=probs, root=root, skipped=skipped, vectors=vectors, appearance=appearance
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
