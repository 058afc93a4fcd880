"""Fast gallery encoding: ONNX Runtime and micro-batched forwards agree with the plain fp32 torch path."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from PIL import Image  # noqa: E402

from minterpr.errors import RunError  # noqa: E402
from minterpr.runtime.neural_backend import NeuralBackend  # noqa: E402
from minterpr.models import create_model  # noqa: E402
from minterpr.types import GalleryImage  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny(seed: int = 0, **overrides):
    torch.manual_seed(seed)
    return create_model("tiny", **overrides).eval()


@pytest.fixture(scope="module")
def gallery(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[GalleryImage]]:
    """Eleven generated pictures of varied sizes and colours (one JPEG), and one broken file."""
    root = tmp_path_factory.mktemp("fast")
    rng = np.random.default_rng(0)
    images = []
    for i in range(11):
        height, width = int(rng.integers(30, 90)), int(rng.integers(15, 45))
        pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        pixels[: height // 2] = rng.integers(0, 256, 3, dtype=np.uint8)  # a plain upper garment
        name = f"{i}.jpg" if i == 0 else f"{i}.png"
        Image.fromarray(pixels).save(root / name)
        images.append(GalleryImage(name, f"p:{i // 2}"))
    (root / "broken.png").write_bytes(b"not an image")
    images.insert(5, GalleryImage("broken.png", "p:x"))
    return str(root), images


@pytest.fixture(scope="module")
def reference(gallery):
    """The reference: eager fp32 torch, every image of a decode batch in one forward."""
    root, images = gallery
    return NeuralBackend(tiny(), batch_size=4, engine="torch", forward_batch=4).index_images(images, root)


def test_options_are_checked():
    model = tiny()
    with pytest.raises(ValueError, match="engine must be one of"):
        NeuralBackend(model, engine="tensorrt")
    with pytest.raises(ValueError, match="forward_batch"):
        NeuralBackend(model, forward_batch=0)
    assert NeuralBackend(model, batch_size=64).forward_batch == 8  # CPU default
    assert NeuralBackend(model, batch_size=4).forward_batch == 4
    assert NeuralBackend(model, batch_size=64, forward_batch=32).forward_batch == 32


def test_micro_batched_torch_agrees(gallery, reference):
    root, images = gallery
    index = NeuralBackend(tiny(), batch_size=4, engine="torch", forward_batch=3).index_images(images, root)
    assert index.images == reference.images and index.skipped == reference.skipped
    np.testing.assert_allclose(index.embeddings, reference.embeddings, atol=1e-5)
    np.testing.assert_allclose(index.attribute_probs, reference.attribute_probs, atol=1e-5)


def test_onnx_engine_agrees_with_torch(gallery, reference):
    pytest.importorskip("onnxruntime")
    root, images = gallery
    backend = NeuralBackend(tiny(), batch_size=4, engine="onnx")
    index = backend.index_images(images, root)
    assert backend.engine_name == "onnx"
    assert index.images == reference.images and index.skipped == reference.skipped  # the broken file
    assert [path for path, _ in index.skipped] == ["broken.png"]
    np.testing.assert_allclose(index.embeddings, reference.embeddings, atol=1e-4)
    np.testing.assert_allclose(index.attribute_probs, reference.attribute_probs, atol=1e-4)
    # same argmax of every attribute slot, and the single-file path used for example images
    from minterpr.language.ontology import ONTOLOGY

    for columns in ONTOLOGY.slot_columns().values():
        np.testing.assert_array_equal(
            index.attribute_probs[:, columns].argmax(1), reference.attribute_probs[:, columns].argmax(1)
        )
    embedding, _ = backend.embed_image_files([os.path.join(root, "3.png")])
    np.testing.assert_allclose(embedding[0], reference.embeddings[reference.index_of("3.png")], atol=1e-4)


def test_auto_picks_onnx_or_falls_back_to_torch(gallery, monkeypatch):
    pytest.importorskip("onnxruntime")
    from minterpr.models import onnx_export

    assert NeuralBackend(tiny(), engine="auto").engine_name == "onnx"
    # 3 stripes over a 4-row map: uneven adaptive-pooling windows, exported as averaging matrices
    awkward = tiny(num_stripes=3)
    assert NeuralBackend(awkward, engine="auto").engine_name == "onnx"
    assert onnx_export.check_engine(onnx_export.load_image_engine(awkward.eval(), None), awkward) < 1e-4

    def failing_export(*args, **kwargs):
        raise RunError("onnx export", "this model cannot be exported")

    monkeypatch.setattr(onnx_export, "export_onnx_image_tower", failing_export)
    assert NeuralBackend(tiny(num_stripes=2), engine="auto").engine_name == "torch"
    with pytest.raises(RunError, match="cannot be exported"):
        _ = NeuralBackend(tiny(num_stripes=2), engine="onnx").engine_name


def test_export_cache_is_reused_only_for_the_same_weights(tmp_path: Path):
    pytest.importorskip("onnxruntime")
    from minterpr.models.onnx_export import image_fingerprint, load_image_engine

    model = tiny()
    cache = tmp_path / "run" / "image_tower.onnx"
    first = load_image_engine(model, cache)
    assert cache.is_file() and first.fingerprint == image_fingerprint(model)
    stamp = cache.stat().st_mtime_ns
    assert load_image_engine(model, cache).fingerprint == first.fingerprint
    assert cache.stat().st_mtime_ns == stamp  # reused, not rewritten

    with torch.no_grad():  # the model changes: the stale export is refused and rebuilt
        model.image_head.attributes.label_bias.add_(1.0)
    changed = load_image_engine(model, cache)
    assert changed.fingerprint == image_fingerprint(model) != first.fingerprint
    pixels = torch.randn(2, 3, *model.config.image_size)
    with torch.inference_mode():
        expected = model.encode_images(pixels)["attribute_logits"].numpy()
    np.testing.assert_allclose(changed(pixels)[1], expected, atol=1e-4)

    cache.write_bytes(b"garbage")  # a corrupt file is rebuilt too
    assert load_image_engine(model, cache).fingerprint == image_fingerprint(model)


def test_check_refuses_an_export_of_other_weights():
    pytest.importorskip("onnxruntime")
    from minterpr.models.onnx_export import OnnxImageEngine, check_engine, export_onnx_image_tower

    engine = OnnxImageEngine(export_onnx_image_tower(tiny(seed=1)))
    with pytest.raises(RunError, match="differs from the PyTorch model"):
        check_engine(engine, tiny(seed=2))
