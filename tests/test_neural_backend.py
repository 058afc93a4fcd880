"""The neural backend: indexing image files and encoding conversations with the tiny model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from PIL import Image  # noqa: E402

from minterpr.language.ontology import ONTOLOGY  # noqa: E402
from minterpr.errors import ImageError, InputError  # noqa: E402
from minterpr.index.gallery_index import GalleryIndex  # noqa: E402
from minterpr.runtime.neural_backend import NeuralBackend, qa_text  # noqa: E402
from minterpr.models import create_model  # noqa: E402
from minterpr.types import DescriptionTurn, ExampleTurn, GalleryImage, QATurn, ReferenceTurn  # noqa: E402

COLOURS = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (220, 220, 40), (90, 90, 90)]


# One intra-op thread (see conftest.one_torch_thread).
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def image_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five 40x20 PNGs with a coloured upper and lower half, plus one outside the gallery."""
    root = tmp_path_factory.mktemp("gallery")
    (root / "cam1").mkdir()
    for i, colour in enumerate(COLOURS + [(10, 160, 160)]):
        image = Image.new("RGB", (20, 40), colour)
        image.paste(COLOURS[(i + 2) % len(COLOURS)], (0, 20, 20, 40))
        image.save(root / "cam1" / f"{i}.png")
    return root


@pytest.fixture(scope="module")
def backend() -> NeuralBackend:
    torch.manual_seed(0)
    return NeuralBackend(create_model("tiny"), batch_size=2)  # batch 2: several loading batches


@pytest.fixture(scope="module")
def gallery() -> list[GalleryImage]:
    return [GalleryImage(f"cam1/{i}.png", f"test:{i // 2}", camera_id="test:cam1") for i in range(5)]


@pytest.fixture(scope="module")
def index(backend: NeuralBackend, gallery, image_root: Path) -> GalleryIndex:
    return backend.index_images(gallery, str(image_root))


def test_index_images(backend: NeuralBackend, index: GalleryIndex, gallery, image_root: Path):
    assert index.images == gallery and index.root == str(image_root)
    assert index.embeddings.shape == (5, 32) and index.embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(index.embeddings, axis=1), 1.0, rtol=1e-5)
    assert index.attribute_probs.shape == (5, len(ONTOLOGY.flat_labels()))
    assert ((index.attribute_probs > 0) & (index.attribute_probs < 1)).all()
    # same as running the model on the preprocessed files directly
    pixels = backend.model.preprocess.load_batch([image_root / g.path for g in gallery])
    with torch.no_grad():
        out = backend.model.encode_images(pixels)
    np.testing.assert_allclose(index.embeddings, out["embedding"].numpy(), atol=1e-5)
    np.testing.assert_allclose(index.attribute_probs, torch.sigmoid(out["attribute_logits"]).numpy(), atol=1e-5)
    # absolute paths work without a root; an empty gallery is refused (describe() would fail later)
    absolute = [GalleryImage(str(image_root / g.path), g.person_id) for g in gallery[:2]]
    np.testing.assert_allclose(backend.index_images(absolute).embeddings, index.embeddings[:2], atol=1e-5)
    with pytest.raises(InputError, match="the gallery is empty"):
        backend.index_images([])
    assert index.skipped == () and index.skipped_summary() == ""


def test_progress_bar_is_optional(backend: NeuralBackend, gallery, image_root: Path, capsys):
    backend.index_images(gallery[:3], str(image_root), progress=True)
    assert "indexing" in capsys.readouterr().err


def conversation(reference: str) -> list:
    return [
        DescriptionTurn("a woman in a red coat and green trousers"),
        QATurn("What colour were her shoes?", "white"),
        ReferenceTurn(reference, "no, her coat is longer"),
        ExampleTurn("cam1/3.png"),
    ]


def test_encode_turns_rows_are_normalised_and_causal(backend: NeuralBackend, index: GalleryIndex):
    turns = conversation("cam1/1.png")
    queries = backend.encode_turns(turns, index)
    assert queries.shape == (4, 32) and queries.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, rtol=1e-5)
    # row r only depends on turns 0..r
    np.testing.assert_allclose(backend.encode_turns(turns[:2], index), queries[:2], atol=1e-6)
    assert not np.allclose(queries[1], queries[2])
    assert backend.encode_turns([], index).shape == (0, 32)


def test_reference_in_index_uses_its_embedding(backend: NeuralBackend, index: GalleryIndex, image_root: Path):
    indexed = backend.encode_turns(conversation("cam1/1.png"), index)
    # the same file under an absolute path is not in the index, so it is loaded and embedded
    loaded = backend.encode_turns(conversation(str(image_root / "cam1" / "1.png")), index)
    np.testing.assert_allclose(loaded, indexed, atol=1e-5)
    # the stored row is what is used: changing it changes the query from the reference turn on
    changed = GalleryIndex(index.images, index.embeddings[[0, 2, 1, 3, 4]], root=index.root)
    swapped = backend.encode_turns(conversation("cam1/1.png"), changed)
    np.testing.assert_allclose(swapped[:2], indexed[:2], atol=1e-6)
    assert not np.allclose(swapped[2], indexed[2])
    # a reference outside the gallery is loaded from index.root
    outside = backend.encode_turns(conversation("cam1/5.png"), index)
    assert not np.allclose(outside[2], indexed[2])


def test_batch_encoding_matches_one_by_one(backend: NeuralBackend, index: GalleryIndex):
    dialogues = [conversation("cam1/1.png"), conversation("cam1/0.png")[:2], [DescriptionTurn("a man")]]
    together = backend.encode_dialogues(dialogues, index)  # batch_size 2: two batches, padded
    assert [q.shape for q in together] == [(4, 32), (2, 32), (1, 32)]
    for turns, queries in zip(dialogues, together):
        np.testing.assert_allclose(queries, backend.encode_turns(turns, index), atol=1e-5)


def test_dialogue_batch_layout(backend: NeuralBackend, index: GalleryIndex):
    batch = backend.dialogue_batch([conversation("cam1/1.png"), [DescriptionTurn("a man")]], index)
    assert batch["turn_types"].tolist() == [[0, 1, 2, 3], [0, -1, -1, -1]]
    assert batch["turn_mask"].tolist() == [[True] * 4, [True, False, False, False]]
    torch.testing.assert_close(batch["turn_image"][0, 2], torch.from_numpy(index.embeddings[1]))
    torch.testing.assert_close(batch["turn_image"][0, 3], torch.from_numpy(index.embeddings[3]))
    assert not batch["turn_image"][0, :2].any() and not batch["turn_text"][0, 3].any()
    expected = backend.model.text_features([qa_text(QATurn("What colour were her shoes?", "white"))])[0]
    torch.testing.assert_close(batch["turn_text"][0, 1], expected)
    with pytest.raises(TypeError, match="unknown turn type"):
        backend.dialogue_batch([["not a turn"]], index)


def test_ranking_is_deterministic(backend: NeuralBackend, index: GalleryIndex, gallery, image_root: Path):
    turns = conversation("cam1/1.png")
    first = [index.rank(q).tolist() for q in backend.encode_turns(turns, index)]
    again = [index.rank(q).tolist() for q in backend.encode_turns(turns, index)]
    assert first == again
    torch.manual_seed(0)
    fresh = NeuralBackend(create_model("tiny"), batch_size=3)  # same seed: same model
    fresh_index = fresh.index_images(gallery, str(image_root))
    assert [fresh_index.rank(q).tolist() for q in fresh.encode_turns(turns, fresh_index)] == first


def test_text_cache_is_bounded(index: GalleryIndex):
    torch.manual_seed(0)
    small = NeuralBackend(create_model("tiny"), text_cache_size=2)
    turns = [DescriptionTurn("a"), QATurn("b", "c"), DescriptionTurn("d")]
    queries = small.encode_turns(turns, index)
    assert len(small._text_cache) == 2
    np.testing.assert_allclose(small.encode_turns(turns, index), queries, atol=1e-6)


def test_index_of_other_width_is_rejected(backend: NeuralBackend, gallery):
    wrong = GalleryIndex(gallery, np.eye(5, 8, dtype=np.float32))
    with pytest.raises(ValueError, match="D=8"):
        backend.encode_turns(conversation("cam1/1.png"), wrong)


@pytest.fixture(scope="module")
def broken_root(image_root: Path) -> Path:
    """Beside the good PNGs: a truncated PNG, a text file named .png, and a 16-bit greyscale PNG."""
    good = (image_root / "cam1" / "0.png").read_bytes()
    (image_root / "cam1" / "truncated.png").write_bytes(good[: len(good) // 2])
    (image_root / "cam1" / "text.png").write_text("not an image")
    Image.fromarray(np.full((40, 20), 40000, np.uint16)).save(image_root / "cam1" / "grey16.png")
    return image_root


def test_unreadable_images_are_skipped_and_listed(backend: NeuralBackend, gallery, broken_root: Path):
    images = [
        gallery[0],
        GalleryImage("cam1/truncated.png", "test:9"),
        gallery[1],
        GalleryImage("cam1/text.png", "test:9"),
        GalleryImage("cam1/missing.png", "test:9"),
        GalleryImage("../outside.png", "test:9"),
        GalleryImage("cam1/grey16.png", "test:8"),
    ]
    index = backend.index_images(images, str(broken_root))
    assert [image.path for image in index.images] == ["cam1/0.png", "cam1/1.png", "cam1/grey16.png"]
    reasons = dict(index.skipped)
    assert list(reasons) == ["cam1/truncated.png", "cam1/text.png", "cam1/missing.png", "../outside.png"]
    assert "truncated" in reasons["cam1/truncated.png"] and "not an image" in reasons["cam1/text.png"]
    assert "not found" in reasons["cam1/missing.png"] and "leaves its root" in reasons["../outside.png"]
    summary = index.skipped_summary()
    assert summary.startswith("4 of 7 images skipped") and "and 1 more" in summary and "\n" not in summary
    # the kept rows are the same as indexing the readable images alone
    alone = backend.index_images([gallery[0], gallery[1]], str(broken_root))
    np.testing.assert_allclose(index.embeddings[:2], alone.embeddings, atol=1e-5)
    # strict: the first unreadable image raises, naming the file (paths are checked before any is read)
    with pytest.raises(ImageError, match="truncated.png: truncated"):
        backend.index_images(images[:5], str(broken_root), strict=True)
    with pytest.raises(InputError, match="leaves its root"):
        backend.index_images([gallery[0], GalleryImage("../outside.png", "x:1")], str(broken_root), strict=True)
    # nothing readable at all is an error, not an empty index
    with pytest.raises(InputError, match="no gallery image could be read: 2 of 2"):
        backend.index_images(images[3:5], str(broken_root))


def test_duplicate_paths_and_escaping_references_are_refused(
    backend: NeuralBackend, gallery, index: GalleryIndex, image_root: Path
):
    with pytest.raises(InputError, match="'cam1/1.png' is listed twice"):
        backend.index_images([gallery[0], gallery[1], gallery[1]], str(image_root))
    with pytest.raises(InputError, match="listed twice"):
        GalleryIndex([gallery[0], gallery[0]], np.eye(2, 4, dtype=np.float32))
    outside = image_root.parent / f"{image_root.name}_outside.png"
    Image.new("RGB", (20, 40), (1, 2, 3)).save(outside)
    escaping = f"../{outside.name}"
    with pytest.raises(InputError, match="leaves its root"):
        backend.encode_turns(conversation(escaping), index)
    with pytest.raises(ImageError, match="cam1/missing.png: image not found"):
        backend.encode_turns(conversation("cam1/missing.png"), index)
    trusting = NeuralBackend(backend.model, allow_outside_root=True)
    assert trusting.encode_turns(conversation(escaping), index).shape == (4, 32)
    assert len(backend.index_images([GalleryImage(escaping, "x:1")], str(image_root), allow_outside_root=True)) == 1


def test_text_cache_is_safe_across_threads(index: GalleryIndex):
    import threading

    torch.manual_seed(0)
    small = NeuralBackend(create_model("tiny"), text_cache_size=3)
    texts = [
        f"a person in {colour} {garment}"
        for colour in ("red", "blue", "green", "black")
        for garment in ("coat", "shirt", "trousers")
    ]
    expected = {text: small.model.text_features([text])[0] for text in texts}
    errors: list[BaseException] = []

    def hammer(offset: int) -> None:
        try:
            for k in range(40):
                chosen = [texts[(offset + k + j) % len(texts)] for j in range(4)]
                features = small._text_features(chosen)
                for text, row in zip(chosen, features):
                    torch.testing.assert_close(row, expected[text], atol=1e-5, rtol=1e-5)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(offset,)) for offset in (0, 5, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(small._text_cache) <= 3


def test_pipeline_passes_strict_through(backend: NeuralBackend, broken_root: Path):
    from minterpr.runtime.pipeline import Pipeline
    from minterpr.runtime.run import RunExtras, TrainedRun

    pipe = Pipeline(TrainedRun(backend.model, Path("model.pt"), None, RunExtras()), backend)
    paths = ["cam1/0.png", "cam1/text.png"]
    index = pipe.index_images(paths, root=str(broken_root), progress=False)
    assert len(index) == 1 and index.skipped[0][0] == "cam1/text.png"
    with pytest.raises(ImageError, match="text.png: not an image"):
        pipe.index_images(paths, root=str(broken_root), progress=False, strict=True)
