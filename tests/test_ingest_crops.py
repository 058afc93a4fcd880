"""Crops that show one person: on frames where a constant ONNX detector finds two overlapping
people, one person alone and one too small, only the lone person becomes crops; the others are
still tracked and counted under their reason (crowded, small); a blurred frame's crops are
refused as blurry; and the filter's pieces on their own."""

from __future__ import annotations

import numpy as np
import pytest

from minterpr.ingest import IngestOptions, ingest
from minterpr.ingest.tracking import CropFilter, covered_share, crop_flags

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
from support.onnx_models import constant_detector_model  # noqa: E402

# frame = model input (96 x 128): rows are in frame pixels. A and B overlap (A: 31 % of it
# covered by B), C stands alone, D is 30 px tall.
ROWS = [[8, 4, 40, 60, 0.9, 0], [30, 2, 60, 62, 0.85, 0], [70, 2, 100, 62, 0.8, 0], [104, 40, 120, 70, 0.95, 0]]
LONE = [70.0, 2.0, 100.0, 62.0]


def _frames(folder, count=10, blur=False):
    from PIL import Image, ImageFilter

    folder.mkdir()
    rng = np.random.default_rng(0)
    for k in range(count):
        image = Image.fromarray(rng.integers(0, 255, (96, 128, 3), dtype=np.uint8))
        if blur:
            image = image.filter(ImageFilter.GaussianBlur(4))
        image.save(folder / f"{k:03d}.png")
    return folder


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    from minterpr.models import create_model, save_model
    from minterpr.runtime.pipeline import load_pipeline

    folder = tmp_path_factory.mktemp("run")
    torch.manual_seed(0)
    save_model(create_model("tiny"), folder / "model.pt", extra={"epoch": 1})
    return load_pipeline(folder)


def _ingest(tmp_path, pipeline, frames):
    model = constant_detector_model(tmp_path / "det.onnx", ROWS, size=(96, 128))
    options = IngestOptions(
        frames=True, every=1, fps=10, min_gap_s=0.0, detector=f"onnx:{model}", detector_options={"letterbox": False}
    )
    return ingest(frames, tmp_path / "g", run=pipeline, options=options)


def test_only_the_lone_person_becomes_crops(tmp_path, pipeline, one_torch_thread):
    from minterpr.index.store.gallery_store import open_gallery

    result = _ingest(tmp_path, pipeline, _frames(tmp_path / "frames"))
    assert result.tracks == 4 and result.crops == 3  # four people tracked, three crops of one of them
    meta = open_gallery(tmp_path / "g").meta_columns
    assert [box for box in meta["box"]] == [LONE] * 3 and set(meta["covered"]) == {0.0}
    tracked = result.detections // 4  # detections per person that had a track id
    assert set(result.rejected) == {"crowded", "small"}
    assert result.rejected["crowded"] == 2 * result.rejected["small"] and result.rejected["small"] >= tracked - 3


def test_a_blurred_video_gives_no_crops_and_says_why(tmp_path, pipeline, one_torch_thread):
    result = _ingest(tmp_path, pipeline, _frames(tmp_path / "frames", blur=True))
    assert result.crops == 0 and result.rejected["blurry"] > 0


def test_the_filter_pieces():
    assert covered_share(np.array(ROWS, float)[:, :4]).round(3).tolist() == [0.312, 0.311, 0.0, 0.0]
    assert covered_share(np.zeros((1, 4))).tolist() == [0.0]
    assert crop_flags(LONE, 100.0, 0.0) == ()
    assert crop_flags(LONE, 100.0, 0.2, CropFilter(crowded_overlap=0.3)) == ()  # the threshold is a setting
    assert crop_flags(LONE, 100.0, 0.2) == ("crowded",)
