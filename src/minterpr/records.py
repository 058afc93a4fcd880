"""Reading a stored record back: each check names the field and what is wrong with it, in one line.

A fitted record stored with a model (:mod:`minterpr.interaction.fitted`: the attribute calibration,
the match temperature, the presence model, ...) is plain JSON data; its ``from_dict`` reads it with
these checks, which raise ``ValueError`` (the reader of the model file adds the file and the
entry). :class:`Unusable` is a record that is well formed but written for another version of
minterpr: kept as written, unused, with a warning saying how to refit it.

Example:
    >>> finite(0.5, "bias"), count(3, "steps"), split_name("val")
    (0.5, 3, 'val')
    >>> number_map({"gender": 1.5}, "temperatures", "slot names")
    {'gender': 1.5}
    >>> finite(float("nan"), "weights.top_match")
    Traceback (most recent call last):
    ValueError: 'weights.top_match': nan is not a finite number
    >>> mapping([1.0])
    Traceback (most recent call last):
    ValueError: a list, not a dict
"""

from __future__ import annotations

import math
from typing import Any, Mapping


class Unusable(ValueError):
    """A record that is well formed but unusable by this minterpr (fitted on another feature set, ...)."""


def mapping(value: Any, name: str | None = None) -> dict[str, Any]:
    """``value`` as a dict; ValueError "'name': a list, not a dict" (without the name: the record itself)."""
    if not isinstance(value, Mapping):
        where = "" if name is None else f"{name!r}: "
        raise ValueError(f"{where}a {type(value).__name__}, not a dict")
    return dict(value)


def finite(value: Any, name: str) -> float:
    """``value`` as a float; ValueError unless it is a finite number (a bool is not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name!r}: {value!r} is not a finite number")
    return float(value)


def count(value: Any, name: str) -> int:
    """``value`` unless it is not a non-negative int (a bool is not)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name!r}: {value!r} is not a count")
    return value


def flag(value: Any, name: str) -> bool:
    """``value`` unless it is not a bool (1 and "yes" are not)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name!r}: must be true or false, got {value!r}")
    return value


def split_name(value: Any, name: str = "split") -> str:
    """``value`` unless it is not a string (the name of the split a record was fitted on)."""
    if not isinstance(value, str):
        raise ValueError(f"{name!r}: {value!r} is not a split name")
    return value


def number_map(value: Any, name: str, keys: str) -> dict[str, float]:
    """``value`` as {str: float}: ValueError "'name': ... must map ``keys`` to numbers", or naming the
    entry (``name.key``) that is not a finite number."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"{name!r}: {value!r} must map {keys} to numbers")
    return {k: finite(v, f"{name}.{k}") for k, v in value.items()}
