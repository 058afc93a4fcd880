"""Reading the ``.npy`` parts of stored indexes: memory-mapped, as plain read-only arrays.

``np.load(path, mmap_mode="r")`` returns a ``np.memmap``, a subclass whose every slice goes
through Python-level ``__getitem__`` and ``__array_finalize__`` (~15 µs each). A session slices
a stored index dozens of times a turn (the lists a FusedIVF probes, a shortlist's rows), which
cost ~1 ms a turn at 1M rows; a plain ``ndarray`` view of the same mapping slices in C. The view
keeps the mapping (the pages stay on disk until read) and stays read-only.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "x.npy"
    >>> np.save(path, np.arange(6, dtype=np.float32).reshape(3, 2))
    >>> array = load_npy(path, mmap=True)
    >>> type(array).__name__, array.flags.writeable, array[1:].tolist()
    ('ndarray', False, [[2.0, 3.0], [4.0, 5.0]])
"""

from __future__ import annotations

import os

import numpy as np


def load_npy(path: str | os.PathLike[str], *, mmap: bool) -> np.ndarray:
    """The array in ``path`` (never unpickled): memory-mapped read-only when ``mmap``, as a plain
    ``ndarray`` view; read into memory otherwise. OSError / ValueError as ``np.load`` raises them."""
    array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    return array.view(np.ndarray) if isinstance(array, np.memmap) else array
