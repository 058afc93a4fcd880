"""The benchmarks' ceilings, declared, read and applied in one place.

A ceiling replaces one model's output in a gallery by what the labels know, to measure how far a
better model of that kind would take a search: the attribute reading
(:mod:`~minterpr.evaluation.label_reading`, ``--label-reading CONFIDENCE[:ERRORS]``) and the
appearance vectors (:mod:`~minterpr.evaluation.identity_appearance`, ``--identity-appearance
WEIGHT``). ``bench_scoring.py``, ``bench_presence.py`` and ``bench_street.py`` take both flags
through :func:`add_ceiling_arguments`. Measurement only: no search path reads labels or identities.

Example:
    >>> import argparse
    >>> import numpy as np
    >>> parser = argparse.ArgumentParser()
    >>> add_ceiling_arguments(parser)
    >>> Ceilings.from_args(parser.parse_args(["--label-reading", "0.9:0.25"]))
    Ceilings(label_reading=(0.9, 0.25), identity_appearance=None)
    >>> Ceilings().apply(index := GalleryIndex([], np.zeros((0, 2), np.float32))) is index  # none asked: as it was
    True
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass

from minterpr.evaluation.identity_appearance import appearance_from_identity, parse_identity_appearance
from minterpr.evaluation.label_reading import parse_label_reading, read_from_labels
from minterpr.index.gallery_index import GalleryIndex
from minterpr.types import Attributes


@dataclass(frozen=True)
class Ceilings:
    """Which ceilings a measurement applies (None: that model's own output)."""

    label_reading: tuple[float, float] | None = None  # (confidence, errors): attributes read from the labels
    identity_appearance: float | None = None  # the weight of each crop's identity in its appearance vector

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Ceilings:
        """The ceilings of :func:`add_ceiling_arguments`'s flags; InputError naming a bad flag."""
        return cls(
            None if args.label_reading is None else parse_label_reading(args.label_reading),
            None if args.identity_appearance is None else parse_identity_appearance(args.identity_appearance),
        )

    def apply(self, index: GalleryIndex, *, attributes: Mapping[str, Attributes] | None = None) -> GalleryIndex:
        """``index`` with the ceilings applied (a copy when any is; ``index`` itself otherwise).
        ``attributes``: labels by person id for galleries whose images carry none (a video's crops)."""
        if self.label_reading is not None:
            confidence, errors = self.label_reading
            index = read_from_labels(index, confidence=confidence, errors=errors, attributes=attributes)
        if self.identity_appearance is not None:
            index = appearance_from_identity(index, weight=self.identity_appearance)
        return index


def add_ceiling_arguments(parser: argparse.ArgumentParser) -> None:
    """A benchmark's ``--label-reading`` and ``--identity-appearance`` (read them with :meth:`Ceilings.from_args`)."""
    parser.add_argument(
        "--label-reading",
        metavar="CONFIDENCE[:ERRORS]",
        help="a ceiling: read the attributes from the labels, CONFIDENCE for a labelled value (1 - CONFIDENCE for "
        "the others), ERRORS the share of (person, slot) misread (minterpr.evaluation.label_reading)",
    )
    parser.add_argument(
        "--identity-appearance",
        metavar="WEIGHT",
        help="a ceiling: the gallery's appearance vectors WEIGHT their person's identity, 1 - WEIGHT the model's "
        "(minterpr.evaluation.identity_appearance; needs an appearance model)",
    )
