"""Reading gallery images in batches for a network: decode the next batch while this one runs, or
run several batches side by side.

Both run-time models read crops this way (the attribute model in
:class:`~minterpr.runtime.neural_backend.NeuralBackend`, the appearance model in
:mod:`minterpr.runtime.appearance`): an unreadable file is reported by position, never fatal
unless the caller says so. Where ONNX Runtime encodes, :func:`batch_map` gives each core a lane
(a thread that decodes its batch and runs it through a one-thread session,
:meth:`minterpr.models.onnx_session.ImageSession.lane`); torch spreads one batch over its threads
itself, so it keeps one lane, with the next batch decoded ahead (:func:`prefetched`).

Example:
    >>> list(prefetched(["a", "b", "c"], 2, lambda chunk: "+".join(chunk)))
    ['a+b', 'c']
    >>> list(batch_map(["a", "b", "c"], 2, len, lambda n: n * 10, lanes=2))
    [(2, 20), (1, 10)]
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

from minterpr.errors import ImageError

if TYPE_CHECKING:
    import torch

T = TypeVar("T")
R = TypeVar("R")

LANE_BATCH = 8  # crops per batch when lanes run side by side: each lane's batch stays in its core's cache


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


def lane_count(engine_name: str) -> int:
    """How many batches run side by side for a model on ``engine_name``: one per torch thread on
    "onnx" (each lane a one-thread session), 1 on "torch" (its threads share each batch).

    Example:
        >>> lane_count("torch")
        1
    """
    import torch

    return max(1, torch.get_num_threads()) if engine_name == "onnx" else 1


def batch_map(
    paths: Sequence[str],
    batch_size: int,
    load: Callable[[Sequence[str]], T],
    use: Callable[[T], R],
    *,
    lanes: int = 1,
) -> Iterator[tuple[T, R]]:
    """``(load(chunk), use(load(chunk)))`` for each chunk of ``paths``, in order.

    ``lanes`` 1: chunks of ``batch_size``, ``use`` in the caller's thread while the next chunk is
    decoded (:func:`prefetched`). ``lanes`` n > 1: chunks of at most :data:`LANE_BATCH`, each
    loaded and used on one of n threads (``use`` must be thread-safe), at most 2n chunks in flight;
    an exception is raised where its chunk comes in order, and the chunks not started are dropped.
    """
    if lanes <= 1:
        for loaded in prefetched(paths, batch_size, load):
            yield loaded, use(loaded)
        return
    size = max(1, min(batch_size, LANE_BATCH))
    chunks = (paths[i : i + size] for i in range(0, len(paths), size))

    def run(chunk: Sequence[str]) -> tuple[T, R]:
        loaded = load(chunk)
        return loaded, use(loaded)

    pool = ThreadPoolExecutor(max_workers=lanes)
    pending: deque[Future[tuple[T, R]]] = deque()
    try:
        for chunk in chunks:
            pending.append(pool.submit(run, chunk))
            if len(pending) >= 2 * lanes:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


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


def encode_readable(
    paths: Sequence[str],
    batch_size: int,
    preprocess: Any,
    use: Callable[["torch.Tensor"], R],
    *,
    lanes: int = 1,
    strict: bool = False,
    progress: Callable[[int], Any] | None = None,
) -> tuple[list[R], list[int], list[tuple[int, ImageError]]]:
    """``use(pixels)`` on each batch of the readable ``paths`` (``preprocess.load`` each; batches run
    by :func:`batch_map` on ``lanes``): the outputs in order, the readable positions and the
    ImageError of each other one (by position; ``strict``: the first is raised). ``progress(n)``
    is told how many paths each batch covered."""
    outputs: list[R] = []
    kept: list[int] = []
    failed: list[tuple[int, ImageError]] = []
    start = 0
    for (pixels, ok, bad), output in batch_map(
        paths,
        batch_size,
        partial(load_readable, preprocess),
        lambda loaded: use(loaded[0]) if len(loaded[0]) else None,
        lanes=lanes,
    ):
        if bad and strict:
            raise bad[0][1]
        kept += [start + i for i in ok]
        failed += [(start + i, exc) for i, exc in bad]
        if output is not None:
            outputs.append(output)
        start += len(ok) + len(bad)
        if progress is not None:
            progress(len(ok) + len(bad))
    return outputs, kept, failed
