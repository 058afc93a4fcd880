"""Tracklet links: one person's tracks joined across occlusions in a camera and across cameras.

ByteTrack loses a person behind a lamp post or a passer-by and starts a new track when they
come back; a person who leaves one camera and enters another is another track again. With
appearance vectors (:mod:`minterpr.runtime.appearance`) and the appearance model's same-person
calibration (:class:`~minterpr.interaction.appearance.SamePersonCalibration`) those tracklets
are linked:

* **within a camera** (one ingested video): a track that ends and another that starts at most
  :attr:`LinkConfig.occlusion_gap_s` later, its first box within :attr:`LinkConfig.occlusion_move`
  box heights of the first one's last box, with a same-person probability of at least
  :attr:`LinkConfig.occlusion_probability`;
* **across cameras**: tracklets of two cameras whose times (both known: ingested with a start)
  do not overlap and lie at most :attr:`LinkConfig.camera_gap_s` apart, with a probability of
  at least :attr:`LinkConfig.camera_probability` (higher: many more people to mistake).

A tracklet's appearance is the mean of its crops' vectors; its probability is the calibration's
at the fit's base rate. Links are taken greedily, most probable first; a tracklet keeps at most
one link to an earlier and one to a later tracklet, and no group may hold two tracklets of one
camera that overlap in time (one person is never in two places at once). The link groups are
stored per crop in the gallery's metadata (``link``: the group's name, the first tracklet's
``JOB:tTRACK``; ``link_p``: the weakest link's probability, absent for a tracklet linked to
nothing) by :func:`relink`, which ingestion calls after each job. A link is a hint for the
analyst, never an identification: acting on a whole group needs the analyst to ask for it.

Example:
    >>> import numpy as np
    >>> from minterpr.interaction.appearance import SamePersonCalibration
    >>> fit = SamePersonCalibration(scale=20.0, bias=-14.0, base_rate=0.01, pairs=100, split="val", auc=95.0)
    >>> rows = [{"job": "j", "camera": "c", "track": 0, "offset_s": 1.0, "box": [0, 0, 10, 40],
    ...          "track_span": [0.0, 1.0, 0, 0, 10, 40, 0, 0, 10, 40]},
    ...         {"job": "j", "camera": "c", "track": 1, "offset_s": 2.0, "box": [5, 0, 15, 40],
    ...          "track_span": [2.0, 3.0, 5, 0, 15, 40, 5, 0, 15, 40]}]
    >>> vectors = np.array([[1.0, 0.0], [0.8, 0.6]], np.float32)
    >>> [(m["link"], round(m["link_p"], 2)) for m in link_tracklets(rows, vectors, fit)]
    [('j:t0', 0.88), ('j:t0', 0.88)]
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from minterpr.errors import DatasetError, InputError
from minterpr.index.appearance_space import appearance_centre, centre_vectors

if TYPE_CHECKING:
    from minterpr.interaction.appearance import SamePersonCalibration

LINK_KEY, LINK_P_KEY, SPAN_KEY = "link", "link_p", "track_span"  # the metadata keys links read and write
UPDATE_HINT = "`minterpr index build --update`"  # what adds appearance vectors to a gallery without them


@dataclass(frozen=True)
class LinkConfig:
    """When two tracklets are linked (see the module doc; measured on the street video, docs/ingest.md)."""

    occlusion_gap_s: float = 4.0  # longest time between a track's end and the next track's start in one camera
    occlusion_move: float = 2.0  # farthest the person may move over that gap, in box heights (centre to centre)
    occlusion_probability: float = 0.5  # least same-person probability of a link within a camera
    camera_gap_s: float = 600.0  # longest time between leaving one camera and appearing in another
    camera_probability: float = 0.8  # least same-person probability of a link across cameras (more look-alikes)


@dataclass
class _Tracklet:
    key: str  # "JOB:tTRACK"
    rows: list[int]  # its crops (gallery rows)
    job: str
    camera: str | None
    start: float  # seconds from the job's start (offset_s)
    end: float
    base: float  # UNIX seconds of the job's start (NaN: no start given: no cross-camera link)
    first: np.ndarray  # first and last box (x1, y1, x2, y2)
    last: np.ndarray
    vector: np.ndarray  # mean appearance, L2-normalised


def _seconds(value: Any) -> float:
    from datetime import datetime, timezone

    if not isinstance(value, str):
        return math.nan
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return math.nan
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


def tracklets(metadata: Sequence[Mapping[str, Any]], appearance: np.ndarray) -> list[_Tracklet]:
    """The tracklets of a gallery's rows: the crops of one ``(job, track)``; rows without a track
    (folders of crops) belong to none. A crop's span comes from ``track_span`` when ingestion
    stored it (the whole track, not just its kept crops), else from its kept crops' times."""
    groups = _track_groups(metadata)
    out = []
    for (job, track), rows in groups.items():
        metas = [metadata[i] for i in rows]
        start, end, first, last = _span(metas)
        base = _seconds(metas[0].get("time")) - float(metas[0]["offset_s"])
        vector = np.asarray(appearance[rows], np.float64).mean(axis=0)
        vector /= max(float(np.linalg.norm(vector)), 1e-12)
        out.append(
            _Tracklet(f"{job}:t{track}", rows, str(job), metas[0].get("camera"), start, end, base, first, last, vector)
        )
    return sorted(out, key=lambda t: (t.job, t.start, t.key))


def _track_groups(metadata: Sequence[Mapping[str, Any]]) -> dict[tuple[Any, Any], list[int]]:
    """(job, track) -> its rows, for rows with a track and a time."""
    groups: dict[tuple[Any, Any], list[int]] = {}
    for i, meta in enumerate(metadata):
        if meta.get("track") is not None and meta.get("offset_s") is not None:
            groups.setdefault((meta.get("job"), meta["track"]), []).append(i)
    return groups


def _span(metas: Sequence[Mapping[str, Any]]) -> tuple[float, float, np.ndarray, np.ndarray]:
    """(start, end, first box, last box) of one track's crops: from ``track_span`` when ingestion
    stored it (the whole track), else from its kept crops' times (a job ingested before spans)."""
    span = metas[0].get(SPAN_KEY)
    if isinstance(span, (list, tuple)) and len(span) == 10:
        return float(span[0]), float(span[1]), np.asarray(span[2:6], np.float64), np.asarray(span[6:10], np.float64)
    order = sorted(range(len(metas)), key=lambda k: float(metas[k]["offset_s"]))
    start, end = float(metas[order[0]]["offset_s"]), float(metas[order[-1]]["offset_s"])
    first, last = (np.asarray(metas[order[k]].get("box", [0, 0, 0, 0]), np.float64) for k in (0, -1))
    return start, end, first, last


def seen_at_once(metadata: Sequence[Mapping[str, Any]], row: int) -> list[int]:
    """The rows of other tracks of ``row``'s video whose time spans overlap its track's: people seen
    at the same time as this one in the same footage, so never the same person ("follow this person"
    leaves them out). [] for a crop without a track.

    >>> rows = [{"job": "j", "track": t, "offset_s": s, "track_span": [a, b] + [0] * 8}
    ...         for t, s, a, b in [(0, 1.0, 0.0, 5.0), (1, 2.0, 4.0, 9.0), (2, 7.0, 6.0, 8.0), (0, 3.0, 0.0, 5.0)]]
    >>> seen_at_once(rows, 0), seen_at_once(rows, 2)
    ([1], [1])
    """
    meta = metadata[row]
    if meta.get("track") is None or meta.get("offset_s") is None:
        return []
    groups = _track_groups(metadata)
    own = (meta.get("job"), meta["track"])
    start, end, _, _ = _span([metadata[i] for i in groups[own]])
    out: list[int] = []
    for key, rows in groups.items():
        if key[0] != own[0] or key == own:
            continue
        other_start, other_end, _, _ = _span([metadata[i] for i in rows])
        if other_start <= end and start <= other_end:
            out += rows
    return sorted(out)


def _centre_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Distance between two boxes' centres in their mean height."""
    height = max(1.0, 0.5 * ((a[3] - a[1]) + (b[3] - b[1])))
    return float(np.hypot((a[0] + a[2] - b[0] - b[2]) / 2, (a[1] + a[3] - b[1] - b[3]) / 2) / height)


def _window(starts: np.ndarray, order: np.ndarray, low: float, high: float) -> np.ndarray:
    """The tracklets (indices into ``order``'s list) whose start lies in [low, high]; ``starts`` sorted."""
    return order[np.searchsorted(starts, low, side="left") : np.searchsorted(starts, high, side="right")]


def candidate_links(
    found: Sequence[_Tracklet], calibration: "SamePersonCalibration", config: LinkConfig = LinkConfig()
) -> list[tuple[float, int, int, str]]:
    """Every allowed link ``(probability, earlier, later, "occlusion" | "camera")``, most probable first.
    Only the tracklets starting inside a tracklet's time window are compared with it (sorted starts and
    a binary search): the work grows with the tracklets times those nearby in time, not their square."""
    if not found:
        return []
    vectors = np.stack([t.vector for t in found])
    out = []
    by_job: dict[str, list[int]] = {}
    for k, t in enumerate(found):
        by_job.setdefault(t.job, []).append(k)
    for members in by_job.values():  # within a camera (one job): the next tracks to start after one ends
        order = np.asarray(sorted(members, key=lambda k: found[k].start), np.int64)
        starts = np.asarray([found[k].start for k in order])
        for a in members:
            ta = found[a]
            near = [
                b
                for b in _window(starts, order, ta.end, ta.end + config.occlusion_gap_s).tolist()
                if found[b].start > ta.end and _centre_distance(ta.last, found[b].first) <= config.occlusion_move
            ]
            if near:
                probs = calibration.probability(vectors[near] @ vectors[a])
                out += [(float(p), a, b, "occlusion") for b, p in zip(near, probs) if p >= config.occlusion_probability]
    timed = [k for k, t in enumerate(found) if math.isfinite(t.base)]  # across cameras: both times known
    order = np.asarray(sorted(timed, key=lambda k: found[k].base + found[k].start), np.int64)
    starts = np.asarray([found[k].base + found[k].start for k in order])
    for a in timed:
        ta = found[a]
        end = ta.base + ta.end
        near = [
            b
            for b in _window(starts, order, end, end + config.camera_gap_s).tolist()
            if found[b].camera != ta.camera and found[b].job != ta.job
        ]
        if near:
            probs = calibration.probability(vectors[near] @ vectors[a])
            out += [(float(p), a, b, "camera") for b, p in zip(near, probs) if p >= config.camera_probability]
    return sorted(out, key=lambda link: (-link[0], link[1], link[2]))


def link_tracklets(
    metadata: Sequence[Mapping[str, Any]],
    appearance: np.ndarray,
    calibration: "SamePersonCalibration",
    config: LinkConfig = LinkConfig(),
) -> list[dict[str, Any]]:
    """``metadata`` (copies) with each tracked crop's ``link`` group and ``link_p`` (see the module doc);
    earlier ``link``/``link_p`` values are replaced, rows without a track carry none."""
    appearance = np.asarray(appearance)
    if appearance.ndim != 2 or len(appearance) != len(metadata):
        raise InputError(
            f"link_tracklets: {len(metadata)} metadata records for appearance vectors of shape {appearance.shape}"
        )
    found = tracklets(metadata, appearance)
    group = list(range(len(found)))  # union-find parent
    members = {k: [k] for k in range(len(found))}
    weakest: dict[int, float] = {}
    before: set[int] = set()  # tracklets that already have a link to an earlier one
    after: set[int] = set()  # ... to a later one

    def root(k: int) -> int:
        while group[k] != k:
            group[k] = group[group[k]]
            k = group[k]
        return k

    def clash(x: int, y: int) -> bool:  # one camera, overlapping times: two people
        return any(
            found[i].job == found[j].job and found[i].start <= found[j].end and found[j].start <= found[i].end
            for i in members[x]
            for j in members[y]
        )

    for p, a, b, _ in candidate_links(found, calibration, config):
        ra, rb = root(a), root(b)
        if a in after or b in before or ra == rb or clash(ra, rb):
            continue
        after.add(a)
        before.add(b)
        group[rb] = ra
        members[ra] += members.pop(rb)
        weakest[ra] = min(p, weakest.get(ra, 1.0), weakest.pop(rb, 1.0))
    out = [{k: v for k, v in m.items() if k not in (LINK_KEY, LINK_P_KEY)} for m in metadata]
    for r, ks in members.items():
        name = min(
            (found[k] for k in ks), key=lambda t: (t.base + t.start if math.isfinite(t.base) else t.start, t.key)
        ).key
        for k in ks:
            for i in found[k].rows:
                out[i][LINK_KEY] = name
                if r in weakest:
                    out[i][LINK_P_KEY] = round(weakest[r], 4)
    return out


def linked_rows(metadata: Sequence[Mapping[str, Any]], row: int) -> list[int]:
    """The rows in ``row``'s link group (itself included; its track's crops when it has no group).

    >>> linked_rows([{"link": "a"}, {"link": "b"}, {"link": "a"}, {}], 2), linked_rows([{}, {}], 1)
    ([0, 2], [1])
    """
    name = metadata[row].get(LINK_KEY)
    if name is None:
        return [row]
    return [i for i, m in enumerate(metadata) if m.get(LINK_KEY) == name]


def relink(
    gallery: str | os.PathLike[str], calibration: "SamePersonCalibration | None", config: LinkConfig = LinkConfig()
) -> int:
    """Recompute the link groups of the stored gallery at ``gallery`` and store them in its
    metadata; the number of groups that link two or more tracklets. The caller holds the
    gallery's ingestion lock (:func:`minterpr.ingest.job.gallery_lock`) or knows nobody writes it.
    A gallery without appearance vectors raises DatasetError naming ``minterpr index build --update``;
    an appearance model without a same-person calibration, InputError."""
    from minterpr.index.store.gallery_append import rewrite_metadata
    from minterpr.index.store.gallery_store import open_gallery

    folder = Path(gallery)
    stored = open_gallery(folder, fused=False)
    if stored.index.appearance is None:
        raise DatasetError(
            folder, f"has no appearance vectors, which linking tracklets needs: add them with {UPDATE_HINT}"
        )
    if calibration is None:
        raise InputError(
            "linking tracklets needs the appearance model's same-person calibration (same_person.json "
            "beside it): fit it with `minterpr calibrate appearance`"
        )
    vectors = np.asarray(stored.index.appearance)
    if calibration.centred:  # compared as the calibration was fitted: about the gallery's centre
        vectors = centre_vectors(vectors, appearance_centre(vectors))
    linked = link_tracklets(stored.metadata, vectors, calibration, config)
    rewrite_metadata(folder, linked)
    return len({m[LINK_KEY] for m in linked if LINK_P_KEY in m})
