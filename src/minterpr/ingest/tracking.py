"""Tracks from detections (ByteTrack from the ``trackers`` library) and the best crops of each.

:class:`Tracker` wraps ``trackers.ByteTrackTracker`` (Kalman-filtered boxes, two-stage IoU
association of high- then low-score detections; no weights): it takes one processed frame's
boxes and scores and returns each detection's track id (-1: none yet — a track gets its id on
its ``minimum_consecutive_frames``-th detection). Ids are renumbered 0, 1, 2, ... in order of
first appearance, so they do not depend on other trackers in the process (the library counts
ids in a class attribute) and a replay of the same detections gives the same ids.

:class:`BestCrops` keeps, per track, the ``k`` detections of highest :func:`crop_quality`
that lie at least ``min_gap`` frames apart (near-identical neighbouring frames would waste
the gallery's rows). It decides online, at each detection's frame — the only moment its
pixels exist — and a detection it drops never comes back, so a crop written when it is
accepted is all the final selection ever needs.

Only crops that show one person are offered (:class:`CropFilter`, :func:`crop_flags`): a
detection that another detection of the same frame covers by more than ``crowded_overlap`` of
its area, or whose detector suppressed a box beside it (:attr:`Detections.crowd
<minterpr.ingest.detection.Detections>`: two people, one box), is ``crowded`` (two people in one
crop mix their attributes), one under
``min_height`` pixels is ``small``, one whose sharpness is under ``min_sharpness`` is
``blurry``. Flagged detections are still tracked; they never become crops, and the reasons
are counted (the ingestion's ``rejected``).

Example:
    >>> picker = BestCrops(k=2, min_gap=5)
    >>> [picker.offer(Candidate(track=0, frame=f, det=0, box=(0, 0, 10, 20), score=s, sharpness=100.0,
    ...                         quality=s)) for f, s in ((0, 0.5), (2, 0.6), (10, 0.4), (20, 0.7))]
    [True, True, True, True]
    >>> [(c.frame, c.score) for c in picker.selection(min_detections=1)]
    [(2, 0.6), (20, 0.7)]
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from minterpr.errors import InputError

TRACKERS_HINT = "tracking needs the trackers library: pip install 'minterpr[ingest]' (trackers, supervision)"
_ID_LOCK = threading.Lock()  # trackers numbers new tracks from a class attribute shared by every tracker


@dataclass(frozen=True)
class TrackerConfig:
    """ByteTrack's settings (``trackers.ByteTrackTracker``), in processed frames. The defaults were
    chosen on synthetic videos (seeds 0-2, 8 people, every 2nd frame): track purity 0.95 against
    0.91 with the library's IoU 0.1 / buffer 30 / 2 frames (docs/ingest.md)."""

    lost_track_buffer: int = 60  # frames a lost track is kept, at 30 frames/s (scaled to the processed rate)
    track_activation_threshold: float = 0.5  # least score of a detection that starts a track
    high_conf_det_threshold: float = 0.5  # detections at or above it are matched first
    minimum_consecutive_frames: int = 3  # detections before a track gets an id (filters short noise)
    minimum_iou_threshold: float = 0.3  # least IoU between a track's predicted box and its detection


class Tracker:
    """ByteTrack over processed frames at ``frame_rate`` frames/s (see the module doc)."""

    def __init__(self, config: TrackerConfig = TrackerConfig(), frame_rate: float = 30.0) -> None:
        try:
            import supervision as sv
            from trackers import ByteTrackTracker
        except ImportError:
            raise InputError(TRACKERS_HINT) from None
        self._sv = sv
        self._tracker = ByteTrackTracker(
            lost_track_buffer=config.lost_track_buffer,
            frame_rate=max(1.0, float(frame_rate)),
            track_activation_threshold=config.track_activation_threshold,
            minimum_consecutive_frames=config.minimum_consecutive_frames,
            minimum_iou_threshold=config.minimum_iou_threshold,
            high_conf_det_threshold=config.high_conf_det_threshold,
        )
        self._local: dict[int, int] = {}  # the library's track id -> ours (0, 1, ... by first appearance)

    def update(self, boxes: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """(n, 4) xyxy boxes and (n,) scores of one frame -> (n,) int64 track ids, -1 = none."""
        n = len(scores)
        detections = self._sv.Detections(
            xyxy=np.asarray(boxes, np.float64).reshape(n, 4),
            confidence=np.asarray(scores, np.float64).reshape(n),
            data={"det": np.arange(n)},
        )
        with _ID_LOCK:
            out = self._tracker.update(detections)
        ids = np.full(n, -1, np.int64)
        if len(out) and out.tracker_id is not None:
            for det, raw in sorted(zip(out.data["det"].tolist(), np.asarray(out.tracker_id).astype(int).tolist())):
                if raw >= 0:
                    ids[det] = self._local.setdefault(raw, len(self._local))
        return ids


def sharpness(gray: np.ndarray) -> float:
    """Variance of the 4-neighbour Laplacian of a 2-D grey image (higher = sharper).

    >>> flat, edge = np.zeros((8, 8)), np.zeros((8, 8))
    >>> edge[:, 4:] = 255
    >>> sharpness(flat), sharpness(edge) > 1000
    (0.0, True)
    """
    g = np.asarray(gray, np.float64)
    if g.shape[0] < 3 or g.shape[1] < 3:
        return 0.0
    lap = g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:] - 4.0 * g[1:-1, 1:-1]
    return float(lap.var())


SHARPNESS_SIZE = (128, 64)  # (H, W) a crop is resized to before its sharpness is measured (scale-free)
SHARP_HALF = 100.0  # the Laplacian variance at which the sharpness term is 1/2
FULL_HEIGHT = 256.0  # crops this tall (the model's input height) or taller get the full size term


def crop_box(box: Any, width: int, height: int) -> tuple[int, int, int, int]:
    """Integer pixel box of a float box, inside the frame and at least 1 px wide and tall."""
    x1, y1, x2, y2 = (float(v) for v in box)
    x1, y1 = min(max(0, int(np.floor(x1))), width - 1), min(max(0, int(np.floor(y1))), height - 1)
    x2, y2 = max(x1 + 1, min(width, int(np.ceil(x2)))), max(y1 + 1, min(height, int(np.ceil(y2))))
    return x1, y1, x2, y2


def measure_sharpness(frame: np.ndarray, box: Any) -> float:
    """Sharpness of the crop ``box`` of a BGR frame, measured at :data:`SHARPNESS_SIZE`."""
    from PIL import Image

    x1, y1, x2, y2 = crop_box(box, frame.shape[1], frame.shape[0])
    crop = frame[y1:y2, x1:x2]
    gray = crop[..., 0] * 0.114 + crop[..., 1] * 0.587 + crop[..., 2] * 0.299
    small = Image.fromarray(gray.astype(np.float32), "F").resize(SHARPNESS_SIZE[::-1], Image.BILINEAR)
    return sharpness(np.asarray(small))


def crop_quality(box: Any, score: float, sharp: float, width: int, height: int) -> float:
    """score x size x sharpness x edge, each in [0, 1]: size = height / 256 (capped at 1),
    sharpness = s / (s + 100), edge = 1/2 for a box touching the frame's border (likely cut).

    >>> crop_quality((10, 10, 60, 138), 0.9, 100.0, 640, 480)
    0.225
    """
    x1, y1, x2, y2 = (float(v) for v in box)
    size = min(1.0, (y2 - y1) / FULL_HEIGHT)
    edge = 0.5 if x1 <= 1 or y1 <= 1 or x2 >= width - 1 or y2 >= height - 1 else 1.0
    return round(float(score) * size * (sharp / (sharp + SHARP_HALF)) * edge, 12)


@dataclass(frozen=True)
class CropFilter:
    """When a tracked detection may become a crop (measured on the street video's labels with
    YOLOX-nano, docs/ingest.md "Crops that show one person")."""

    # share of a box covered by another detection of its frame above which it is "crowded" (a crowd
    # mark counts as 1): 0.1 leaves 5 of 179 boxes showing two labelled people (13 of 232 unfiltered,
    # 0.3: 11), 1 of 136 with the crowd marks
    crowded_overlap: float = 0.1
    # least box height in pixels: all 17 detections showing no labelled person were a ~31 px
    # static object, and a person under ~48 px shows no colour or garment a witness could name
    min_height: float = 48.0
    # least sharpness (Laplacian variance at SHARPNESS_SIZE): a typical crop measures ~230, blurred
    # with a 5 x 5 Gaussian ~30; 25 drops about 1 % of the real crops >= 48 px
    min_sharpness: float = 25.0


def covered_share(boxes: Any) -> np.ndarray:
    """(n,) for (n, 4) xyxy boxes: the largest share of each box's area that another box covers.

    >>> covered_share(np.array([[0, 0, 10, 10], [5, 0, 15, 10], [30, 0, 40, 10]], float)).tolist()
    [0.5, 0.5, 0.0]
    """
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    if len(b) < 2:
        return np.zeros(len(b))
    w = np.clip(np.minimum(b[:, None, 2], b[None, :, 2]) - np.maximum(b[:, None, 0], b[None, :, 0]), 0, None)
    h = np.clip(np.minimum(b[:, None, 3], b[None, :, 3]) - np.maximum(b[:, None, 1], b[None, :, 1]), 0, None)
    area = np.clip((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]), 1e-9, None)
    share = w * h / area[:, None]
    np.fill_diagonal(share, 0.0)
    return share.max(axis=1)


def crop_flags(box: Any, sharp: float, covered: float, rules: CropFilter = CropFilter()) -> tuple[str, ...]:
    """Why a detection may not become a crop: () when it may (see :class:`CropFilter`).

    >>> crop_flags((0, 0, 30, 40), 10.0, 0.5)
    ('crowded', 'small', 'blurry')
    >>> crop_flags((0, 0, 30, 90), 200.0, 0.05)
    ()
    """
    flags = []
    if covered > rules.crowded_overlap:
        flags.append("crowded")
    if float(box[3]) - float(box[1]) < rules.min_height:
        flags.append("small")
    if sharp < rules.min_sharpness:
        flags.append("blurry")
    return tuple(flags)


@dataclass(frozen=True)
class Candidate:
    """One tracked detection that may become a gallery crop."""

    track: int  # our track id
    frame: int  # frame index in the source
    det: int  # position among the frame's detections
    box: tuple[float, float, float, float]  # x1, y1, x2, y2 in frame pixels
    score: float  # detector score
    sharpness: float  # Laplacian variance at SHARPNESS_SIZE
    quality: float  # crop_quality
    covered: float = 0.0  # the largest share of its box another detection of the frame covers

    @property
    def name(self) -> str:
        """The crop's file name."""
        return f"f{self.frame:07d}_d{self.det:02d}_t{self.track:05d}.jpg"


class BestCrops:
    """The ``k`` best crops per track, ``min_gap`` frames apart (see the module doc)."""

    def __init__(self, k: int = 3, min_gap: int = 0) -> None:
        if k < 1:
            raise InputError(f"best_k must be >= 1, got {k}")
        self.k, self.min_gap = int(k), int(min_gap)
        self.kept: dict[int, list[Candidate]] = {}
        self.detections: dict[int, int] = {}  # track -> detections seen

    def count(self, track: int) -> None:
        """A detection of ``track`` that may not become a crop (:func:`crop_flags`): the track was seen."""
        self.detections[track] = self.detections.get(track, 0) + 1

    def offer(self, candidate: Candidate) -> bool:
        """Whether ``candidate`` is kept now (then write its crop); it may evict earlier ones."""
        self.count(candidate.track)
        kept = self.kept.setdefault(candidate.track, [])
        near = [c for c in kept if abs(c.frame - candidate.frame) < self.min_gap]
        if near:
            if candidate.quality <= max(c.quality for c in near):
                return False
            kept[:] = [c for c in kept if c not in near]
        elif len(kept) >= self.k:
            worst = min(kept, key=lambda c: (c.quality, -c.frame))
            if candidate.quality <= worst.quality:
                return False
            kept.remove(worst)
        kept.append(candidate)
        return True

    def selection(self, min_detections: int = 2) -> list[Candidate]:
        """The kept crops of the tracks seen at least ``min_detections`` times, by track then frame."""
        return [
            c
            for track in sorted(self.kept)
            if self.detections[track] >= min_detections
            for c in sorted(self.kept[track], key=lambda c: c.frame)
        ]

    def kept_count(self) -> int:
        """Crops kept now, all tracks together."""
        return sum(len(kept) for kept in self.kept.values())

    def tracks(self, min_detections: int = 2) -> int:
        """How many tracks were seen at least ``min_detections`` times."""
        return sum(1 for n in self.detections.values() if n >= min_detections)
