"""Gallery batches run side by side on one-thread ONNX sessions ("lanes"): the same results, in order,
with unreadable files reported at their positions, as one batch at a time."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from PIL import Image  # noqa: E402

from minterpr.errors import ImageError  # noqa: E402
from minterpr.runtime.image_batches import LANE_BATCH, batch_map, encode_readable, lane_count  # noqa: E402


def test_batch_map_keeps_order_whatever_finishes_first():
    paths = [str(i) for i in range(5 * LANE_BATCH + 3)]
    seen_threads = set()

    def use(chunk):
        seen_threads.add(threading.get_ident())
        time.sleep(0.02 if chunk[0] == "0" else 0.0)  # the first chunk finishes last
        return [int(p) for p in chunk]

    results = list(batch_map(paths, 64, list, use, lanes=3))
    assert [p for loaded, _ in results for p in loaded] == paths
    assert [n for _, used in results for n in used] == list(range(len(paths)))
    assert max(len(loaded) for loaded, _ in results) == LANE_BATCH  # lanes take small batches
    assert len(seen_threads) > 1
    one_lane = list(batch_map(paths, 16, list, use, lanes=1))
    assert [len(loaded) for loaded, _ in one_lane] == [16, 16, len(paths) - 32]  # the caller's batch size
    assert [n for _, used in one_lane for n in used] == list(range(len(paths)))


def test_batch_map_raises_where_the_failing_chunk_comes():
    paths = [str(i) for i in range(10 * LANE_BATCH)]
    started = []

    def use(chunk):
        started.append(chunk[0])
        if chunk[0] == str(2 * LANE_BATCH):
            raise ValueError("third chunk")
        return len(chunk)

    got = []
    with pytest.raises(ValueError, match="third chunk"):
        for _, used in batch_map(paths, 64, list, use, lanes=2):
            got.append(used)
    assert got == [LANE_BATCH, LANE_BATCH]
    assert len(started) < 10  # chunks not yet started were dropped


def test_lane_count():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert (lane_count("onnx"), lane_count("torch")) == (2, 1)
        torch.set_num_threads(1)
        assert lane_count("onnx") == 1
    finally:
        torch.set_num_threads(before)


class _Reader:
    """A preprocess whose ``load`` fails for names starting with "bad"."""

    size = (4, 2)

    def load(self, path):
        if path.startswith("bad"):
            raise ImageError(path, "not an image")
        return torch.full((3, 4, 2), float(path.split("-")[1]))


@pytest.mark.parametrize("lanes", [1, 2])
def test_encode_readable_reports_failures_by_position(lanes):
    paths = [f"{'bad' if i in (3, 11, 12) else 'ok'}-{i}" for i in range(20)]
    done = []
    outputs, kept, failed = encode_readable(
        paths, 5, _Reader(), lambda pixels: pixels[:, 0, 0, 0].tolist(), lanes=lanes, progress=done.append
    )
    assert kept == [i for i in range(20) if i not in (3, 11, 12)]
    assert [i for i, _ in failed] == [3, 11, 12]
    assert "bad-11" in str(failed[1][1])
    assert [v for chunk in outputs for v in chunk] == [float(i) for i in kept]
    assert sum(done) == 20
    with pytest.raises(ImageError, match="bad-3"):
        encode_readable(paths, 5, _Reader(), lambda pixels: None, lanes=lanes, strict=True)


# ---------------------------------------------------------------- ONNX lanes
@pytest.fixture(scope="module")
def crops(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Twenty-one pictures of varied sizes (more than two lane batches) and one broken file."""
    root = tmp_path_factory.mktemp("lanes")
    rng = np.random.default_rng(1)
    paths = []
    for i in range(21):
        height, width = int(rng.integers(30, 90)), int(rng.integers(15, 45))
        Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(root / f"{i}.png")
        paths.append(str(root / f"{i}.png"))
    (root / "broken.png").write_bytes(b"not an image")
    paths.insert(9, str(root / "broken.png"))
    return paths


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_lane_is_a_one_thread_twin_computing_the_same(two_threads):
    pytest.importorskip("onnxruntime")
    from minterpr.models import create_model
    from minterpr.models.onnx_export import load_image_engine

    torch.manual_seed(0)
    model = create_model("tiny").eval()
    engine = load_image_engine(model)
    assert engine.threads == 2
    lanes = []
    workers = [threading.Thread(target=lambda: lanes.append(engine.lane())) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    lane = lanes[0]
    assert all(other is lane for other in lanes)  # made once, whoever asks first
    assert lane.threads == 1 and lane.lane() is lane and lane.fingerprint == engine.fingerprint
    pixels = torch.randn(5, 3, *model.config.image_size, generator=torch.Generator().manual_seed(0))
    for ours, theirs in zip(lane(pixels), engine(pixels)):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_gallery_on_lanes_matches_one_batch_at_a_time(crops, two_threads):
    pytest.importorskip("onnxruntime")
    from minterpr.models import create_model
    from minterpr.runtime.neural_backend import NeuralBackend

    torch.manual_seed(0)
    backend = NeuralBackend(create_model("tiny").eval(), batch_size=16, engine="onnx")
    assert lane_count(backend.engine_name) == 2
    embeddings, logits, kept, failed = backend._outputs(crops, progress=False, strict=False)
    torch.set_num_threads(1)  # one lane: the caller's batches, the engine's own session
    reference = NeuralBackend(backend.model, batch_size=16, engine="torch")
    ref_embeddings, ref_logits, ref_kept, ref_failed = reference._outputs(crops, progress=False, strict=False)
    assert kept == ref_kept and [i for i, _ in failed] == [i for i, _ in ref_failed] == [9]
    np.testing.assert_allclose(embeddings, ref_embeddings, atol=1e-4)
    np.testing.assert_allclose(logits, ref_logits, atol=1e-4)


def test_appearance_on_lanes_matches_torch(crops, two_threads, tmp_path: Path):
    pytest.importorskip("onnxruntime")
    from minterpr.runtime.appearance import load_appearance
    from support.web import tiny_appearance

    checkpoint = tiny_appearance(tmp_path)
    fast = load_appearance(checkpoint, engine="onnx", batch_size=16)
    vectors, kept, failed = fast.embed_files(crops)
    reference = load_appearance(checkpoint, engine="torch", batch_size=16)
    ref_vectors, ref_kept, ref_failed = reference.embed_files(crops)
    assert kept == ref_kept and [i for i, _ in failed] == [i for i, _ in ref_failed] == [9]
    np.testing.assert_allclose(vectors, ref_vectors, atol=1e-4)
