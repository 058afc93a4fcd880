"""Reading gallery images in batches for a network: decode the next batch while this one runs.

Both run-time models read crops this way (the attribute model in
:class:`~minterpr.runtime.neural_backend.NeuralBackend`, the appearance model in
:mod:`minterpr.runtime.appearance`): an unreadable file is reported by position, never fatal
unless the caller says so.

Example:
    >>> list(prefetched(["a", "b", "c"], 2, lambda chunk: "+".join(chunk)))
    ['a+b', 'c']
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

from minterpr.errors import ImageError

if TYPE_CHECKING:
    import torch

T = TypeVar("T")


def prefetched(paths: Sequence[str], batch_size: int, load: Callable[[Sequence[str]], T]) -> Iterator[T]:
    """``load(chunk)`` for each chunk of ``batch_size`` paths; chunk i + 1 is decoded while i is used."""
    chunks = [paths[i : i + batch_size] for i in range(0, len(paths), batch_size)]
    if not chunks:
        return
    with ThreadPoolExecutor(max_workers=1) as pool:  # decoding releases the GIL in PIL
        pending = pool.submit(load, chunks[0])
        for next_chunk in chunks[1:] + [None]:
            batch = pending.result()
            if next_chunk is not None:
                pending = pool.submit(load, next_chunk)
            yield batch


def load_readable(
    preprocess: Any, paths: Sequence[str]
) -> tuple["torch.Tensor", list[int], list[tuple[int, ImageError]]]:
    """(b, 3, H, W) pixels of the readable ``paths`` (``preprocess.load`` each), their positions in
    ``paths``, and the ImageError of each other one (by position)."""
    import torch

    tensors, kept, failed = [], [], []
    for i, path in enumerate(paths):
        try:
            tensors.append(preprocess.load(path))
        except ImageError as exc:
            failed.append((i, exc))
            continue
        kept.append(i)
    pixels = torch.stack(tensors) if tensors else torch.empty(0, 3, *preprocess.size)
    return pixels, kept, failed
