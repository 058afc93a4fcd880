"""Fast queries: the turn encoder + dialogue memory on ONNX Runtime agree with the fp32 torch path."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from minterpr.errors import RunError  # noqa: E402
from minterpr.runtime.neural_backend import NeuralBackend  # noqa: E402
from minterpr.models.onnx_query import (
    QueryEncoder,
    check_dialogues,
    query_cache_path,  # noqa: E402
    query_fingerprint,
)
from minterpr.types import DescriptionTurn, ExampleTurn, QATurn, ReferenceTurn  # noqa: E402

from support.helpers import tiny_model, two_image_index  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DIALOGUES = [
    [DescriptionTurn("a woman in a long red coat"), QATurn("Shoes?", "white"), QATurn("A hat?", "no")],
    [DescriptionTurn("a man"), ReferenceTurn("g0.jpg", "taller, no backpack"), ExampleTurn("g1.jpg")],
    [DescriptionTurn("a")],
    [],
    [DescriptionTurn("a child"), QATurn("Bag?", "yes")],
    [DescriptionTurn("a woman"), QATurn("Hair?", "long"), ReferenceTurn("g1.jpg", "yes, her"), QATurn("Coat?", "red")],
]


tiny = tiny_model


@pytest.fixture(scope="module")
def index():
    return two_image_index()


def test_unmasked_memory_is_the_all_true_mask_bit_for_bit():
    model = tiny()
    for batch in check_dialogues(model, seed=3):
        with torch.inference_mode():
            turns = model.turn_encoder(batch["turn_types"], batch["turn_text"], batch["turn_image"])
            masked = model.memory(turns, batch["turn_types"], torch.ones_like(batch["turn_types"], dtype=torch.bool))
            unmasked = model.memory(turns, batch["turn_types"], None)
        assert torch.equal(masked, unmasked)


def test_engine_is_checked():
    with pytest.raises(ValueError, match="engine must be one of"):
        QueryEncoder(tiny(), "tensorrt")


def test_onnx_queries_agree_with_torch():
    pytest.importorskip("onnxruntime")
    model = tiny()
    onnx, reference = QueryEncoder(model, "onnx"), QueryEncoder(model, "torch")
    assert onnx.engine_name == "onnx" and reference.engine_name == "torch" and reference._onnx is None
    for batch in check_dialogues(model, seed=7):
        got, want = onnx(batch), reference(batch)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=1e-5)
    # a padded batch is not for the graph: it runs on torch, the same as the reference
    padded = {**check_dialogues(model)[-1]}
    padded["turn_mask"] = torch.ones_like(padded["turn_types"], dtype=torch.bool)
    padded["turn_mask"][0, 1:] = False
    padded["turn_types"] = torch.where(padded["turn_mask"], padded["turn_types"], -1)
    np.testing.assert_array_equal(onnx(padded), reference(padded))


def test_backend_queries_agree_with_torch_whatever_the_batch(index):
    pytest.importorskip("onnxruntime")
    model = tiny()
    reference = NeuralBackend(model, engine="torch")
    for batch_size in (64, 2, 1):  # mixed lengths grouped by length, and one conversation at a time
        fast = NeuralBackend(model, engine="onnx", batch_size=batch_size)
        got, want = fast.encode_dialogues(DIALOGUES, index), reference.encode_dialogues(DIALOGUES, index)
        assert fast._encode_queries.engine_name == "onnx"
        assert [g.shape for g in got] == [w.shape for w in want] == [(len(d), 32) for d in DIALOGUES]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, atol=1e-4)
        # a conversation's queries do not depend on the batch it came in: the same as alone
        for dialogue, g in zip(DIALOGUES, got):
            np.testing.assert_array_equal(fast.encode_turns(dialogue, index), g)


def test_too_many_turns_are_refused_by_both_engines():
    pytest.importorskip("onnxruntime")
    model = tiny()
    rounds = model.memory.max_turns + 1
    batch = {
        "turn_types": torch.zeros(1, rounds, dtype=torch.long),
        "turn_text": torch.zeros(1, rounds, 32),
        "turn_image": torch.zeros(1, rounds, 32),
    }
    for engine in ("onnx", "torch"):
        with pytest.raises(ValueError, match="max_turns"):
            QueryEncoder(model, engine)(batch)


def test_encoder_is_thread_safe():
    pytest.importorskip("onnxruntime")
    model = tiny()
    encode = QueryEncoder(model, "auto")  # resolved by whichever thread comes first
    batches = check_dialogues(model)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: encode(batches[i % len(batches)]), range(8)))
    assert encode.engine_name == "onnx"
    for i, got in enumerate(results):
        np.testing.assert_array_equal(got, results[i % len(batches)])


def test_export_cache_is_reused_only_for_the_same_weights(tmp_path: Path):
    pytest.importorskip("onnxruntime")
    from minterpr.models.onnx_query import load_query_engine

    model = tiny()
    cache = query_cache_path(tmp_path / "run" / "image_tower.onnx")
    assert cache == tmp_path / "run" / "image_tower.query.onnx"
    first = load_query_engine(model, cache)
    assert cache.is_file() and first.fingerprint == query_fingerprint(model)
    stamp = cache.stat().st_mtime_ns
    assert load_query_engine(model, cache).fingerprint == first.fingerprint
    assert cache.stat().st_mtime_ns == stamp  # reused, not rewritten

    with torch.no_grad():  # the memory changes: the stale export is refused and rebuilt
        model.memory.output.weight.add_(0.5)
    changed = load_query_engine(model, cache)
    assert changed.fingerprint == query_fingerprint(model) != first.fingerprint
    batch = check_dialogues(model)[0]
    with torch.inference_mode():
        expected = model.encode_dialogues(batch).numpy()
    np.testing.assert_allclose(changed(batch), expected, atol=1e-5)

    cache.write_bytes(b"garbage")  # a corrupt file is rebuilt too
    assert load_query_engine(model, cache).fingerprint == query_fingerprint(model)


def test_check_refuses_an_export_of_other_weights():
    pytest.importorskip("onnxruntime")
    from minterpr.models.onnx_query import OnnxQueryEngine, check_query_engine, export_onnx_query_model

    other = tiny(seed=1)
    engine = OnnxQueryEngine(export_onnx_query_model(other), max_turns=other.memory.max_turns)
    with pytest.raises(RunError, match="differs from the PyTorch model"):
        check_query_engine(engine, tiny(seed=2))
