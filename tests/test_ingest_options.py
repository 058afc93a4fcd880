"""Ingestion's speed options: the default frame step (about DEFAULT_TARGET_FPS processed frames
per second of video), ``every`` / ``target_fps`` and their checks, and ``detect_max_height``: the detector
sees a shrunk frame, the boxes come back in full-frame pixels and the crops are cut from the full
frame, in agreement with detection at full size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from minterpr.errors import InputError
from minterpr.index.store.gallery_store import open_gallery
from minterpr.ingest import IngestOptions, ingest
from minterpr.ingest.detection import Detections
from minterpr.ingest.detectors import DETECTORS
from minterpr.ingest.options import DEFAULT_TARGET_FPS, check_options, every_of
from minterpr.ingest.sources import SourceInfo
from minterpr.ingest.synthetic_video import SyntheticVideoConfig, render_video
from minterpr.ingest.video import detect_people
from minterpr.models import create_model, save_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _info(fps: float) -> SourceInfo:
    return SourceInfo("video", Path("cam.mp4"), fps, 100, 768, 576, "pyav")


@pytest.mark.parametrize("fps, every", [(10.0, 3), (25.0, 8), (30.0, 10), (5.0, 2), (2.0, 1)])
def test_the_default_step_processes_about_the_default_rate(fps, every):
    assert DEFAULT_TARGET_FPS == 3.0
    assert every_of(IngestOptions(), _info(fps)) == every
    assert every_of(IngestOptions(every=3), _info(fps)) == 3  # an explicit step wins
    assert every_of(IngestOptions(target_fps=fps), _info(fps)) == 1
    assert every_of(IngestOptions(every=3, target_fps=fps), _info(fps)) == 1  # target_fps wins, as before


@pytest.mark.parametrize(
    "options, message",
    [
        (IngestOptions(every=0), "every must be a positive integer"),
        (IngestOptions(target_fps=0.0), "target_fps must be a positive number"),
        (IngestOptions(detect_max_height=64), "detect_max_height must be at least 128"),
        (IngestOptions(detect_max_height=300.5), "detect_max_height must be a positive integer"),  # type: ignore[arg-type]
    ],
)
def test_bad_speed_options_are_refused(options, message):
    with pytest.raises(InputError, match=message):
        check_options(options)


class BrightBox:
    """A plain detector: the bounding box of the pixels brighter than 200 (one person at most);
    records the frame sizes it was given."""

    name = "bright"

    def __init__(self) -> None:
        self.sizes: list[tuple[int, int]] = []

    def identity(self) -> dict:
        return {"detector": self.name}

    def detect(self, frame: np.ndarray) -> Detections:
        self.sizes.append(frame.shape[:2])
        ys, xs = np.nonzero(frame.min(axis=2) > 200)
        if not len(xs):
            return Detections.empty()
        return Detections(np.array([[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]], np.float64), np.array([0.9]))


def test_a_shrunk_detection_agrees_with_the_full_size_one():
    frame = np.zeros((720, 1280, 3), np.uint8)
    frame[203:563, 601:741] = 255  # a 140 x 360 "person"
    detector = BrightBox()
    full = detect_people(detector, frame, None)
    small = detect_people(detector, frame, 360)
    same = detect_people(detector, frame, 720)  # not taller than the limit: untouched
    assert detector.sizes == [(720, 1280), (360, 640), (720, 1280)]
    assert full.boxes.tolist() == [[601, 203, 741, 563]] == same.boxes.tolist()
    assert np.abs(small.boxes - full.boxes).max() <= 2.0  # one shrunk pixel is two full ones
    assert small.scores.tolist() == full.scores.tolist()
    assert len(detect_people(detector, np.zeros((720, 1280, 3), np.uint8), 360)) == 0


def test_ingestion_with_a_shrunk_detector_input_cuts_full_size_crops(tmp_path):
    torch.manual_seed(0)
    save_model(create_model("tiny"), tmp_path / "run" / "model.pt")
    video = tmp_path / "walk.mp4"
    render_video(video, SyntheticVideoConfig(people=2, frames=30, size=(480, 640), person_height=320, seed=2))
    seen: list[tuple[int, int]] = []
    hog = DETECTORS.create("hog")
    shrunk_box = np.array([[100.0, 60.0, 180.0, 300.0]])  # where the "person" stands in the 360 x 480 frame

    class Spy:  # a detector that always finds one person at the same place: HOG's recall is not under test
        name = "hog"
        identity = hog.identity

        def detect(self, frame):
            seen.append(frame.shape[:2])
            return Detections(shrunk_box.copy(), np.array([0.9]))

    import minterpr.ingest.runner as runner

    options = IngestOptions(every=2, detect_max_height=360)
    original = runner.create_detector
    runner.create_detector = lambda name, opts: Spy()
    try:
        result = ingest(video, tmp_path / "g", run=tmp_path / "run", options=options)
    finally:
        runner.create_detector = original
    assert result.frames_processed == 15 and set(seen) == {(360, 480)}
    assert result.detections == 15 and result.crops > 0
    stored = open_gallery(tmp_path / "g")
    full_box = shrunk_box[0] * 480 / 360  # mapped back to the 480 x 640 frame
    for image, meta in zip(stored.index.images, stored.metadata):
        x1, y1, x2, y2 = meta["box"]
        assert np.abs(np.array([x1, y1, x2, y2]) - full_box).max() <= 2.0 and meta["frame"] % 2 == 0
        with Image.open(tmp_path / "g" / image.path) as crop:  # cut from the full frame
            assert abs(crop.size[0] - (x2 - x1)) <= 2 and abs(crop.size[1] - (y2 - y1)) <= 2
