"""Follow this person: after the analyst confirmed a crop, the crops that may show the same person.

Every other crop the search may show is scored by its same-person probability with the confirmed
one (:meth:`SamePersonCalibration.probability
<minterpr.interaction.appearance.SamePersonCalibration.probability>` of the two appearance
vectors' cosine); the most probable (at least :attr:`FollowConfig.min_probability`, at most
:attr:`FollowConfig.per_camera` per camera) are grouped per camera, each camera's in time order,
the cameras in the order the person may have passed them (their earliest candidate first). A
probability says how alike two crops look to the appearance model — never who anyone is: each
candidate needs the analyst's own confirmation.

Example:
    >>> import numpy as np
    >>> from minterpr.interaction.appearance import SamePersonCalibration
    >>> fit = SamePersonCalibration(scale=20.0, bias=-14.0, base_rate=0.01, pairs=100, split="val", auc=95.0)
    >>> vectors = np.array([[1, 0], [0.8, 0.6], [0.6, 0.8], [1, 0]], np.float32)
    >>> lanes = follow(vectors, 0, fit, cameras=["a", "b", "b", "a"], times=[0.0, 50.0, 40.0, 30.0])
    >>> [(lane.camera, [(c.row, round(c.probability, 2)) for c in lane.candidates]) for lane in lanes]
    [('a', [(3, 1.0)]), ('b', [(1, 0.88)])]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Collection, Sequence

import numpy as np

from minterpr.errors import InputError

if TYPE_CHECKING:
    from minterpr.interaction.appearance import SamePersonCalibration
    from minterpr.interaction.pair_scores import GalleryPairs


@dataclass(frozen=True)
class FollowConfig:
    """Which candidates are offered."""

    # least same-person probability offered: below it the crop is almost surely someone else, and a long
    # list of unlikely crops costs the analyst time and shows bystanders for nothing
    min_probability: float = 0.2
    per_camera: int = 8  # most candidates per camera (the most probable), shown in time order
    # the prior that two crops of this footage show one person; None: the calibration's own (its val split's)
    base_rate: float | None = None


@dataclass(frozen=True)
class FollowCandidate:
    """A crop that may show the same person as the confirmed one."""

    row: int  # its row in the gallery
    probability: float  # same-person probability with the confirmed crop
    time: float  # UNIX seconds (NaN: unknown)


@dataclass(frozen=True)
class CameraLane:
    """One camera's candidates, in time order."""

    camera: str | None
    candidates: tuple[FollowCandidate, ...]


def same_person_probabilities(
    vectors: np.ndarray,
    anchor: int,
    rows: Sequence[int],
    calibration: "SamePersonCalibration",
    base_rate: float | None = None,
) -> np.ndarray:
    """The same-person probability of each of ``rows`` with row ``anchor`` (vectors L2-normalised)."""
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or not 0 <= anchor < len(vectors):
        raise InputError(f"follow: anchor row {anchor} is not a row of appearance vectors of shape {vectors.shape}")
    picked = np.asarray(list(rows), np.int64)
    if len(picked) == 0:
        return np.zeros(0)
    cosine = vectors[picked].astype(np.float64) @ vectors[anchor].astype(np.float64)
    return np.asarray(calibration.probability(cosine, base_rate=base_rate))


def follow(
    vectors: np.ndarray,
    anchor: int,
    calibration: "SamePersonCalibration",
    *,
    cameras: Sequence[str | None],
    times: Sequence[float],
    rows: Sequence[int] | None = None,
    exclude: Collection[int] = (),
    config: FollowConfig = FollowConfig(),
    pairs: "GalleryPairs | None" = None,
) -> list[CameraLane]:
    """The crops among ``rows`` (default: every row) that may show the person of row ``anchor``,
    per camera (see the module doc); the anchor and ``exclude`` (e.g. its own track) are left out.
    ``pairs``: the gallery's :class:`~minterpr.interaction.pair_scores.GalleryPairs` (re-ranked
    same-person probabilities, with their own fit); None: ``calibration`` of the cosine."""
    if len(cameras) != len(vectors) or len(times) != len(vectors):
        raise InputError(f"follow: {len(cameras)} cameras and {len(times)} times for {len(vectors)} rows")
    skip = set(exclude) | {anchor}
    pool = [int(r) for r in (range(len(vectors)) if rows is None else rows) if int(r) not in skip]
    if pairs is None:
        probs = same_person_probabilities(vectors, anchor, pool, calibration, config.base_rate)
    else:
        probs = pairs.probability([anchor], base_rate=config.base_rate)[0][np.asarray(pool, np.int64)]
    lanes: dict[str | None, list[FollowCandidate]] = {}
    for k in np.argsort(-probs, kind="stable").tolist():
        if probs[k] < config.min_probability:
            break
        row = pool[k]
        lane = lanes.setdefault(cameras[row], [])
        if len(lane) < config.per_camera:
            lane.append(FollowCandidate(row, float(probs[k]), float(times[row])))

    def when(c: FollowCandidate) -> tuple[bool, float, int]:
        return (math.isnan(c.time), 0.0 if math.isnan(c.time) else c.time, c.row)

    out = [CameraLane(camera, tuple(sorted(found, key=when))) for camera, found in lanes.items()]
    return sorted(out, key=lambda lane: (when(lane.candidates[0]), str(lane.camera)))
