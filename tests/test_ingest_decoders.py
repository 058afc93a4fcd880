"""The ONNX detector's output decoders, each on a tiny constant model built here whose output holds
one person, one vehicle-like row of another class and one weak row: the person's box comes back
in frame pixels (through the letterbox), the other class and the weak row never do; and
YOLOX-nano on real frames of vtest.avi against the hand labels when ../shared is there."""

from __future__ import annotations

import numpy as np
import pytest

from minterpr.ingest import create_detector
from minterpr.ingest.onnx_decoders import DECODERS, grid_points
from support.helpers import shared_data_dir, shared_weights_dir

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from support.onnx_models import constant_output_model  # noqa: E402

# every case: a 64 x 64 input; the person is the input box [16, 24, 32, 56] (score 0.72); the frame
# is 128 wide x 256 tall, letterboxed by 1/4 into x 16..48: the frame box is (input - (16, 0)) * 4
PERSON_FRAME_BOX = [0.0, 96.0, 64.0, 224.0]
FRAME = np.zeros((256, 128, 3), np.uint8)


def _yolox():
    out = np.zeros((1, len(grid_points((64, 64), (8, 16, 32))[0]), 7), np.float32)
    out[0, 64 + 2 * 4 + 1] = [0.5, 0.5, 0.0, np.log(2), 0.9, 0.8, 0.1]  # stride 16, cell (1, 2): centre (24, 40)
    out[0, 5] = [0.5, 0.5, 1.0, 1.0, 0.99, 0.01, 0.99]  # class 1 (a car): person score 0.0099
    out[0, 70] = [0.5, 0.5, 0.0, 0.0, 0.2, 0.5, 0.0]  # a weak one: 0.1
    return out


def _yolov5():
    return np.array(
        [[[24, 40, 16, 32, 0.9, 0.8, 0.1], [40, 40, 30, 20, 0.95, 0.01, 0.99], [10, 10, 8, 8, 0.3, 0.3, 0.0]]],
        np.float32,
    )


def _yolov8():
    rows = np.zeros((10, 6), np.float32)  # more anchors than channels, as in every real export
    rows[:3] = [[24, 40, 16, 32, 0.72, 0.1], [40, 40, 30, 20, 0.01, 0.99], [10, 10, 8, 8, 0.1, 0.0]]
    return rows.T[None]  # (1, 4 + C, N) as YOLOv8 exports it


def _nanodet():
    out = np.zeros((1, len(grid_points((64, 64), (8, 16, 32, 64))[0]), 2 + 32), np.float32)

    def distances(bins):  # one-hot logits: the expected distance is exactly the bin (x stride)
        logits = np.zeros((4, 8), np.float32)
        logits[np.arange(4), bins] = 60.0
        return logits.ravel()

    # stride 8, point (3, 5) = (24, 40): left/top/right/bottom 1/2/1/2 bins of 8 px -> [16, 24, 32, 56]
    out[0, 5 * 8 + 3] = [0.72, 0.1, *distances([1, 2, 1, 2])]
    out[0, 2] = [0.01, 0.99, *distances([1, 1, 1, 1])]  # class 1
    out[0, 3] = [0.1, 0.0, *distances([1, 1, 1, 1])]  # weak
    return out


OUTPUTS = {"yolox": _yolox, "yolov5": _yolov5, "yolov8": _yolov8, "nanodet": _nanodet}


def test_every_decoder_is_tested_here():
    assert set(DECODERS.names()) == set(OUTPUTS) | {"boxes"}  # boxes: tests/test_ingest_detectors.py


@pytest.mark.parametrize("decoder", sorted(OUTPUTS))
def test_decoder_finds_the_person_only(decoder, tmp_path):
    model = constant_output_model(tmp_path / f"{decoder}.onnx", OUTPUTS[decoder]())
    found = create_detector("onnx", {"model": model, "decoder": decoder}).detect(FRAME)
    assert found.boxes.shape == (1, 4) and found.boxes[0].tolist() == pytest.approx(PERSON_FRAME_BOX, abs=1e-3)
    assert found.scores.tolist() == pytest.approx([0.72], abs=1e-6)
    # the vehicle row is another class: read as class 1 it is the only box above the threshold
    other = create_detector("onnx", {"model": model, "decoder": decoder, "person_class": 1}).detect(FRAME)
    assert len(other) == 1 and other.scores[0] > 0.9


def test_decoders_carry_their_family_input_convention(tmp_path):
    model = constant_output_model(tmp_path / "x.onnx", _yolox())
    yolox = create_detector("onnx", {"model": model, "decoder": "yolox"}).identity()
    assert (yolox["rgb"], yolox["scale"], yolox["decoder"]) == (False, 1.0, "yolox")  # BGR 0-255
    mine = create_detector("onnx", {"model": model, "decoder": "yolox", "rgb": True, "scale": 0.5}).identity()
    assert (mine["rgb"], mine["scale"]) == (True, 0.5)  # the user's settings win
    nano = create_detector(
        "onnx", {"model": constant_output_model(tmp_path / "n.onnx", _nanodet()), "decoder": "nanodet"}
    ).identity()
    assert nano["mean"] == pytest.approx([103.53, 116.28, 123.675])


YOLOX_NANO = shared_weights_dir() / "yolox_nano.onnx"
VTEST = shared_data_dir() / "video" / "vtest.avi"


@pytest.mark.shared_data
def test_yolox_nano_finds_the_labelled_walkers_of_vtest():
    if not YOLOX_NANO.is_file() or not VTEST.is_file():
        pytest.skip(f"needs {YOLOX_NANO} and {VTEST} (../shared, research-only: not in the repository)")
    from pathlib import Path

    from minterpr.ingest.labels import load_labels
    from minterpr.ingest.sources import iter_frames, open_source
    from minterpr.ingest.street_eval import detection_report

    labels = load_labels(Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "vtest_labels.json")
    wanted = sorted(labels.frames)[::4]  # 9 of the 35 labelled frames: a second on two cores
    frames = {}
    for index, frame in iter_frames(open_source(VTEST)):
        if index in wanted:
            frames[index] = frame
        if len(frames) == len(wanted):
            break
    detector = create_detector("yolox-nano", {"model": str(YOLOX_NANO)})
    subset = type(labels)(labels.video, labels.people, {f: labels.frames[f] for f in wanted})
    report = detection_report(subset, {f: detector.detect(image).boxes for f, image in frames.items()})
    # all 35 frames: recall 0.94, precision 0.90 at IoU 0.5 (docs/benchmarks.md); HOG: 0.04 / 0.07
    assert report.recall >= 0.85 and report.precision >= 0.8, report
