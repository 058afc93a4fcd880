"""A gallery store's fused index: the :class:`~minterpr.index.fused_ivf.FusedIVF` saved beside the store.

Building the lists costs a k-means and an N × nlist × D assignment (about 6 s for 100k images
on one loaded core with faiss, minutes at 1M), so :mod:`minterpr.index.store.gallery_store` saves them::

    DIR/fused/<part>.npy   one file per FusedIVF part (FusedIVF.parts(): centroids, perm,
                           offsets, radius, list-contiguous embeddings and probabilities, bounds)

and records them in the store's manifest (``GalleryManifest.fused``: this part's format version,
the search settings, the parts saved; the files' sizes in ``files``, the model fingerprint the
store's own), which is written last: a save killed before it leaves the old store, and a
changed or missing part is refused like any changed store file. Opened again, every part is
memory-mapped (the list-contiguous copies cost page cache, not a second copy in each process)
and the index is set as ``GalleryIndex.fused``, so every session over the store takes its
shortlist from it (:mod:`minterpr.interaction.shortlist`).

A store saved before the fused index existed (format version 1) has none: it opens as before,
its sessions rank the fused score by one exact scan (or take the cosine shortlist from an ANN
vector index); :func:`~minterpr.index.store.gallery_append.add_fused` adds one without re-embedding (``minterpr index fused DIR``).

Example:
    >>> import tempfile
    >>> from minterpr.index.store.gallery_store import open_gallery, save_gallery
    >>> from minterpr.types import GalleryImage
    >>> rng = np.random.default_rng(0)
    >>> emb = rng.normal(size=(40, 4)).astype(np.float32); emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    >>> index = GalleryIndex([GalleryImage(f"{i}.jpg", f"x:{i}") for i in range(40)], emb)
    >>> folder = tempfile.mkdtemp()
    >>> save_gallery(index, folder, model_fingerprint="f00d", fused_index=build_fused(index, nlist=4))
    >>> opened = open_gallery(folder).index
    >>> opened.fused.nlist, opened.fused.search(emb[5], (), 0.0, 0.02, 1).rows.tolist()
    (4, [5])
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from minterpr.errors import InputError
from minterpr.fileio import atomic_write
from minterpr.index.fused_ivf import PARTS, FusedIVF
from minterpr.index.gallery_index import GalleryIndex
from minterpr.index.npy import load_npy

__all__ = [
    "FUSED",
    "FUSED_MIN_IMAGES",
    "FUSED_VERSION",
    "build_fused",
    "load_fused",
    "save_fused",
    "wants_fused",
]

FUSED = "fused"  # the folder of the parts, inside the store
FUSED_VERSION = 1  # GalleryManifest.fused["version"]: bumped when the parts change; another is refused
FUSED_MIN_IMAGES = 20_000  # "auto" builds one from this size (ShortlistConfig.min_gallery: smaller ones rank whole)
SEARCH_SETTINGS = ("nprobe", "max_probe")  # what a rebuilt fused index keeps of the one it replaces
FUSED_CHOICES = ("auto", "yes", "no")  # whether a save builds one: auto = from FUSED_MIN_IMAGES images


def wants_fused(choice: str, count: int) -> bool:
    """Whether a store of ``count`` images gets a fused index for ``choice`` (auto / yes / no).

    >>> wants_fused("auto", 19_999), wants_fused("auto", 20_000), wants_fused("yes", 3), wants_fused("no", 10**6)
    (False, True, True, False)
    """
    if choice not in FUSED_CHOICES:
        raise InputError(f"fused must be one of {', '.join(FUSED_CHOICES)}, got {choice!r}")
    return choice == "yes" or (choice == "auto" and count >= FUSED_MIN_IMAGES)


def build_fused(index: GalleryIndex, like: Mapping[str, Any] | None = None, **options: Any) -> FusedIVF:
    """The :class:`FusedIVF` over ``index``'s embeddings and probabilities (``options``: its own).
    ``like``: the params of the fused index it replaces (a manifest entry, :meth:`FusedIVF.params`),
    whose search settings (``nprobe``, ``max_probe``) it keeps; its lists are made anew for the rows."""
    kept = {key: like[key] for key in SEARCH_SETTINGS if like and key in like}
    return FusedIVF(np.asarray(index.embeddings), index.attribute_probs, **{**kept, **options})


def save_fused(ivf: FusedIVF, folder: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """Write ``ivf``'s parts under ``folder/fused/`` (each atomically): (the manifest entry, file -> size)."""
    (folder / FUSED).mkdir(parents=True, exist_ok=True)
    files = {}
    for name, array in ivf.parts().items():
        path = folder / FUSED / f"{name}.npy"
        atomic_write(path, lambda f, a=array: np.save(f, np.ascontiguousarray(a)))
        files[f"{FUSED}/{name}.npy"] = path.stat().st_size
    entry = {"version": FUSED_VERSION, **ivf.params(), "parts": sorted(ivf.parts())}
    return entry, files


def load_fused(
    folder: Path, entry: Mapping[str, Any], index: GalleryIndex, mmap: bool, fail: Callable[[str], Exception]
) -> FusedIVF:
    """The saved fused index of the store in ``folder`` (manifest ``entry``) over its opened ``index``;
    ``fail(reason)`` is raised for another version or parts that do not fit the store."""
    redo = f"rebuild that part alone with `minterpr index fused {os.fspath(folder)}`"
    if not isinstance(entry, Mapping) or entry.get("version") != FUSED_VERSION:
        version = entry.get("version") if isinstance(entry, Mapping) else entry
        raise fail(
            f"its fused index is of format version {version!r}; this minterpr reads version "
            f"{FUSED_VERSION}: {redo}, or the whole store"
        )
    parts = {}
    for name in entry.get("parts", ()):
        if name not in PARTS:
            raise fail(f"its fused index names an unknown part {name!r}: {redo}, or the whole store")
        try:
            parts[name] = load_npy(folder / FUSED / f"{name}.npy", mmap=mmap)
        except (OSError, ValueError) as err:
            raise fail(f"unreadable {FUSED}/{name}.npy ({err})") from None
    try:
        ivf = FusedIVF.from_parts(parts, index.attribute_probs, entry)
    except (InputError, KeyError, TypeError, ValueError) as err:
        raise fail(f"its fused index does not fit the store ({err}): {redo}, or the whole store") from None
    if len(ivf) != len(index) or ivf.embeddings.shape[1] != index.embeddings.shape[1]:
        raise fail(f"its fused index holds {ivf.embeddings.shape} rows, the store {index.embeddings.shape}")
    return ivf
