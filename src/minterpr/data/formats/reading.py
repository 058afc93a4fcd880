"""The typing of whole-file dialogue readers, written once: ``strict=True`` returns a list of
samples, ``strict=False`` a :class:`ReadResult`. A reader is declared one with
:func:`sample_reader`, which keeps the function as it is at run time.
"""

from __future__ import annotations

import inspect
import os
from typing import Any, Callable, Literal, Protocol, overload

from minterpr.data.formats.jsonl import ReadResult
from minterpr.types import RetrievalSample


class SampleReader(Protocol):
    """A reader of a dialogue dataset file into :class:`RetrievalSample` s (``read_minterpedes``,
    ``read_chatpedes``): a list when strict, a :class:`ReadResult` with ``strict=False``."""

    @overload
    def __call__(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str = ...,
        strict: Literal[True] = ...,
        image_root: str | os.PathLike[str] | None = ...,
        check_images: bool = ...,
        allow_outside_root: bool = ...,
    ) -> list[RetrievalSample]: ...
    @overload
    def __call__(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str = ...,
        strict: Literal[False],
        image_root: str | os.PathLike[str] | None = ...,
        check_images: bool = ...,
        allow_outside_root: bool = ...,
    ) -> ReadResult[RetrievalSample]: ...
    def __call__(self, path, *, namespace=..., strict=..., image_root=..., check_images=..., allow_outside_root=...):
        """The parameters a reader declared a SampleReader takes (:func:`sample_reader` checks them)."""


def _parameters(function: Callable[..., Any]) -> list[tuple[str, Any]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values() if p.name != "self"]


def sample_reader(read: Callable[..., Any]) -> SampleReader:
    """Declare ``read`` a :class:`SampleReader`, so type checkers see its two return types; the
    function is returned unchanged (name, signature, docstring). Its parameters must be the
    protocol's, else TypeError: the declaration cannot drift from the code.

    >>> sample_reader(lambda path, *, strict=True: [])
    Traceback (most recent call last):
    TypeError: <lambda> takes path, strict; a SampleReader takes path, namespace, strict, image_root, check_images, allow_outside_root
    """
    names, expected = _parameters(read), _parameters(SampleReader.__call__)
    if names != expected:
        shown, wanted = (", ".join(name for name, _ in params) for params in (names, expected))
        raise TypeError(f"{read.__qualname__} takes {shown}; a SampleReader takes {wanted}")
    return read
