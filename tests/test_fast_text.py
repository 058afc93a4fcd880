"""Fast text encoding: the ONNX Runtime text encoder agrees with the plain fp32 torch path."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from minterpr.errors import RunError  # noqa: E402
from minterpr.runtime.neural_backend import NeuralBackend  # noqa: E402
from minterpr.models.onnx_text import TextFeaturizer, text_cache_path  # noqa: E402
from minterpr.types import DescriptionTurn, QATurn, ReferenceTurn  # noqa: E402

from support.helpers import tiny_model, two_image_index  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LONG = " ".join(f"word{i}" for i in range(90))  # beyond tiny_text's 64 tokens: truncated the same way
TEXTS = ["no", "a man in a red jacket and blue jeans", "what shoes? white", LONG, "a", "Is there a bag? yes"]
DIALOGUES = [
    [DescriptionTurn("a woman in a long red coat"), QATurn("Shoes?", "white"), QATurn("A hat?", "no")],
    [DescriptionTurn(LONG), ReferenceTurn("g0.jpg", "taller, no backpack"), QATurn("Bag?", "yes")],
    [DescriptionTurn("a")],
]


tiny = tiny_model


@pytest.fixture(scope="module")
def index():
    return two_image_index()


def test_engine_is_checked():
    with pytest.raises(ValueError, match="engine must be one of"):
        TextFeaturizer(tiny(), "tensorrt")


def test_torch_featurizer_is_the_model():
    model = tiny()
    featurize = TextFeaturizer(model, "torch", batch_size=2)
    with torch.inference_mode():
        expected = model.text_features(TEXTS)
    torch.testing.assert_close(featurize(TEXTS), expected, atol=1e-6, rtol=0)
    assert featurize.engine_name == "torch" and featurize._onnx is None  # nothing exported
    assert featurize([]).shape == (0, model.text_dim)


def test_onnx_features_agree_with_torch():
    pytest.importorskip("onnxruntime")
    model = tiny()
    with torch.inference_mode():
        expected = model.text_features(TEXTS).numpy()
    for batch_size in (256, 2, 1):  # padded batches of mixed lengths, and one text at a time
        featurize = TextFeaturizer(model, "onnx", batch_size=batch_size)
        got = featurize(TEXTS).numpy()
        assert featurize.engine_name == "onnx"
        np.testing.assert_allclose(got, expected, atol=1e-4)


def test_onnx_backend_queries_agree_with_torch(index):
    pytest.importorskip("onnxruntime")
    model = tiny()
    reference = NeuralBackend(model, engine="torch")
    fast = NeuralBackend(model, engine="onnx")
    assert fast._featurize.engine_name == "onnx" and reference._featurize.engine_name == "torch"
    for want, got in zip(reference.encode_dialogues(DIALOGUES, index), fast.encode_dialogues(DIALOGUES, index)):
        assert got.shape == want.shape
        cosine = (want * got).sum(1) / np.linalg.norm(want, axis=1) / np.linalg.norm(got, axis=1)
        assert cosine.min() >= 0.9999
        np.testing.assert_allclose(got, want, atol=1e-4)
    # a growing conversation: the cached turns and the new one still give the reference queries
    for r in range(1, 4):
        np.testing.assert_allclose(
            fast.encode_turns(DIALOGUES[0][:r], index), reference.encode_turns(DIALOGUES[0][:r], index), atol=1e-4
        )


def test_onnx_featurizer_is_thread_safe():
    pytest.importorskip("onnxruntime")
    model = tiny()
    featurize = TextFeaturizer(model, "auto")  # resolved by whichever thread comes first
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: featurize(TEXTS[i % 3 :]).numpy(), range(8)))
    assert featurize.engine_name == "onnx"
    for i, got in enumerate(results):
        np.testing.assert_allclose(got, results[i % 3], atol=1e-6)


def test_auto_is_onnx_on_cpu_and_the_backend_follows_its_engine():
    pytest.importorskip("onnxruntime")
    model = tiny()
    assert NeuralBackend(model, engine="auto")._featurize.engine_name == "onnx"
    assert NeuralBackend(model)._featurize.engine_name == "torch"  # the backend's default engine


def test_export_cache_is_reused_only_for_the_same_weights(tmp_path: Path):
    pytest.importorskip("onnxruntime")
    from minterpr.models.onnx_text import load_text_engine, text_fingerprint

    model = tiny()
    cache = text_cache_path(tmp_path / "run" / "image_tower.onnx")
    assert cache == tmp_path / "run" / "image_tower.text.onnx"
    first = load_text_engine(model, cache)
    assert cache.is_file() and first.fingerprint == text_fingerprint(model)
    stamp = cache.stat().st_mtime_ns
    assert load_text_engine(model, cache).fingerprint == first.fingerprint
    assert cache.stat().st_mtime_ns == stamp  # reused, not rewritten

    with torch.no_grad():  # the text encoder changes: the stale export is refused and rebuilt
        model.text_encoder.model.embeddings.word_embeddings.weight.add_(0.5)
    changed = load_text_engine(model, cache)
    assert changed.fingerprint == text_fingerprint(model) != first.fingerprint
    tokens = model.text_encoder.tokenize(TEXTS)
    with torch.inference_mode():
        expected = model.text_encoder(tokens)["global"].numpy()
    np.testing.assert_allclose(changed(tokens), expected, atol=1e-4)

    cache.write_bytes(b"garbage")  # a corrupt file is rebuilt too
    assert load_text_engine(model, cache).fingerprint == text_fingerprint(model)


def test_check_refuses_an_export_of_other_weights():
    pytest.importorskip("onnxruntime")
    from minterpr.models.onnx_text import OnnxTextEngine, check_text_engine, export_onnx_text_encoder

    engine = OnnxTextEngine(export_onnx_text_encoder(tiny(seed=1)))
    with pytest.raises(RunError, match="differs from the PyTorch model"):
        check_text_engine(engine, tiny(seed=2))


def test_int8_precision_is_opt_in_checked_and_cached_apart(tmp_path: Path, index):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxruntime.quantization")
    from minterpr.models.onnx_text import INT8_MIN_COSINE, load_text_engine, text_fingerprint

    model = tiny()
    with pytest.raises(ValueError, match="text precision must be one of"):
        TextFeaturizer(model, "onnx", precision="fp16")
    with pytest.raises(ValueError, match="runs on ONNX Runtime"):
        TextFeaturizer(model, "torch", precision="int8")
    featurize = TextFeaturizer(model, "onnx", precision="int8")
    with torch.inference_mode():
        expected = model.text_features(TEXTS).numpy()
    got = featurize(TEXTS).numpy()
    assert featurize.precision_name == "int8" and got.shape == expected.shape
    cosine = (got * expected).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(expected, axis=1)
    assert cosine.min() >= INT8_MIN_COSINE and np.abs(got - expected).max() > 1e-6  # close, and not fp32
    # its export is kept beside the fp32 one, never mistaken for it
    fp32_cache, int8_cache = (text_cache_path(tmp_path / "image.onnx", p) for p in ("fp32", "int8"))
    assert int8_cache.name == "image.text-int8.onnx" and fp32_cache.name == "image.text.onnx"
    int8 = load_text_engine(model, int8_cache, precision="int8")
    fp32 = load_text_engine(model, fp32_cache)
    assert int8.fingerprint == text_fingerprint(model) + "+int8" and fp32.fingerprint == text_fingerprint(model)
    int8_cache.write_bytes(fp32_cache.read_bytes())  # an fp32 export where the int8 one belongs: rebuilt
    assert load_text_engine(model, int8_cache, precision="int8").fingerprint.endswith("+int8")
    assert int8_cache.stat().st_size < fp32_cache.stat().st_size  # rebuilt as int8: smaller weights
    # the backend and the pipeline option: queries close to fp32's, the precision reported
    reference = NeuralBackend(model, engine="onnx")
    fast = NeuralBackend(model, engine="onnx", text_precision="int8")
    assert fast.text_precision == "int8" and reference.text_precision == "fp32"
    for want, got in zip(reference.encode_dialogues(DIALOGUES, index), fast.encode_dialogues(DIALOGUES, index)):
        assert ((want * got).sum(1)).min() >= 0.9  # both L2-normalised


def test_int8_falls_back_to_fp32_where_onnx_runtime_does_not_run():
    model = tiny()
    featurize = TextFeaturizer(model, "auto", precision="int8")
    featurize._resolved, featurize._onnx = "torch", None  # what "auto" resolves to off the CPU
    assert featurize.precision_name == "fp32"
