"""Ingesting OpenCV's ``vtest.avi`` (795 frames of 768 x 576 at 10 frames/s, people walking in a
square) from ../shared/data/video: HOG finds and tracks its people, the gallery holds their
crops with times on the video's clock. Skipped when the file is absent."""

from __future__ import annotations

import pytest
import torch

from support.helpers import shared_data_dir
from minterpr.index.store.gallery_store import open_gallery
from minterpr.ingest import IngestOptions, ingest
from minterpr.models import create_model, save_model

VTEST = shared_data_dir() / "video" / "vtest.avi"
pytestmark = [
    pytest.mark.shared_data,
    pytest.mark.slow,
    pytest.mark.usefixtures("one_torch_thread"),
    pytest.mark.skipif(not VTEST.is_file(), reason=f"{VTEST} is absent"),
]


def test_vtest_is_ingested_with_tracks_and_times(tmp_path):
    torch.manual_seed(0)
    save_model(create_model("tiny"), tmp_path / "run" / "model.pt")
    options = IngestOptions(camera="vtest", start="2026-12-01T08:00:00", every=8)
    result = ingest(VTEST, tmp_path / "vtest", run=tmp_path / "run", options=options)
    assert result.frames_read == 795 and result.frames_processed == 100 and result.video_fps == 10
    assert result.duration_s == pytest.approx(79.5)
    # every 2 gives 1292 detections, 34 tracks, 88 crops (benchmarks/bench_ingest.py, docs/ingest.md)
    assert result.detections >= 150 and result.tracks >= 4 and result.crops >= result.tracks
    stored = open_gallery(tmp_path / "vtest")
    assert len(stored.index) == result.rows_added == result.crops
    for meta in stored.metadata:
        x1, y1, x2, y2 = meta["box"]
        assert 0 <= x1 < x2 <= 768 and 0 <= y1 < y2 <= 576 and y2 - y1 >= 90  # HOG's smallest person ~96 px
        assert meta["frame"] % 8 == 0 and meta["time"].startswith("2026-12-01T08:01:") == (meta["frame"] >= 600)
    assert len({m["track"] for m in stored.metadata}) == result.tracks
