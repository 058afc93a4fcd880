"""Appearance vectors beside the embeddings: the pipeline computes them, the store keeps them,
appending keeps both halves in step, and a gallery without them says how to add them."""

import numpy as np
import pytest
import torch
from PIL import Image

from minterpr.errors import DatasetError, InputError, RunError
from minterpr.index.gallery_index import GalleryIndex
from minterpr.index.store.gallery_append import append_gallery
from minterpr.index.store.gallery_store import load_gallery, open_gallery, save_gallery
from minterpr.models.reid import ReidModel, ReidModelConfig
from minterpr.runtime.appearance import load_appearance, with_appearance
from minterpr.types import GalleryImage


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models on a busy 2-core machine


@pytest.fixture(autouse=True)
def torch_engine(monkeypatch):
    """Vectors from torch: the ONNX path has its own agreement test (test_appearance_ship.py)."""
    monkeypatch.setattr("minterpr.runtime.appearance.DEFAULT_APPEARANCE_ENGINE", "torch")


def tiny_reid(tmp_path, seed: int = 0):
    torch.manual_seed(seed)
    model = ReidModel(ReidModelConfig(image_size=(64, 32))).eval()
    path = tmp_path / f"reid{seed}.pt"
    torch.save({"model": model.search_state_dict(), "config": model.config.to_dict()}, path)
    return path


def crops(folder, count: int):
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    names = []
    for i in range(count):
        Image.fromarray(rng.integers(0, 255, (48, 24, 3), dtype=np.uint8)).save(folder / f"{i}.png")
        names.append(f"{i}.png")
    return names


def rows(names, appearance=None):
    emb = np.eye(4, dtype=np.float32)[: len(names)]
    return GalleryIndex([GalleryImage(n, n) for n in names], emb, root="/crops", appearance=appearance)


def test_embed_files_matches_the_model_one_crop_at_a_time(tmp_path):
    looks = load_appearance(tiny_reid(tmp_path))
    names = crops(tmp_path / "c", 3)
    paths = [str(tmp_path / "c" / n) for n in names] + [str(tmp_path / "missing.png")]
    vectors, kept, failed = looks.embed_files(paths)
    assert kept == [0, 1, 2] and [i for i, _ in failed] == [3]
    assert vectors.shape == (3, 512) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    with torch.inference_mode():
        one = looks.model.embed(looks.model.preprocess.load(paths[1])[None]).numpy()[0]
    assert np.allclose(vectors[1], one, atol=1e-5)  # batching changes nothing (eval-mode BN)
    with pytest.raises(Exception, match="missing.png"):
        looks.embed_files(paths, strict=True)


def test_store_round_trip_keeps_vectors_and_fingerprint(tmp_path):
    vectors = np.random.default_rng(1).normal(size=(2, 5)).astype(np.float32)
    save_gallery(rows(["a", "b"], vectors), tmp_path / "g", model_fingerprint="f", appearance_fingerprint="ap")
    stored = open_gallery(tmp_path / "g")
    assert stored.manifest.appearance == {"dim": 5, "model_fingerprint": "ap"}
    assert np.array_equal(stored.index.appearance, vectors)
    assert np.array_equal(stored.index.subset(np.array([1])).appearance, vectors[1:])
    save_gallery(rows(["a", "b"]), tmp_path / "h", model_fingerprint="f")  # without: none kept, none claimed
    assert load_gallery(tmp_path / "h").appearance is None and open_gallery(tmp_path / "h").manifest.appearance is None
    with pytest.raises(InputError, match="fingerprint of the appearance model"):
        save_gallery(rows(["a"], vectors[:1]), tmp_path / "i", model_fingerprint="f")


def test_a_changed_appearance_file_is_refused(tmp_path):
    save_gallery(
        rows(["a", "b"], np.ones((2, 3), np.float32)),
        tmp_path / "g",
        model_fingerprint="f",
        appearance_fingerprint="ap",
    )
    np.save(tmp_path / "g" / "appearance.npy", np.ones((2, 4), np.float32))
    with pytest.raises(DatasetError, match="appearance.npy"):
        load_gallery(tmp_path / "g")


def test_append_keeps_appearance_in_step_and_refuses_a_mix(tmp_path):
    folder = tmp_path / "g"
    a = np.eye(3, dtype=np.float32)
    append_gallery(rows(["a", "b"], a[:2]), folder, model_fingerprint="f", appearance_fingerprint="ap")
    append_gallery(rows(["c"], a[2:]), folder, model_fingerprint="f", appearance_fingerprint="ap")
    assert np.array_equal(load_gallery(folder).appearance, a)
    with pytest.raises(DatasetError, match="index build --update"):
        append_gallery(rows(["d"]), folder, model_fingerprint="f")
    with pytest.raises(DatasetError, match="appearance model other"):
        append_gallery(rows(["d"], a[:1]), folder, model_fingerprint="f", appearance_fingerprint="other")
    assert len(load_gallery(folder)) == 3  # nothing lost


def test_pipeline_adds_vectors_for_the_images_it_kept(tmp_path, tiny_run):
    from minterpr.runtime.pipeline import load_pipeline

    names = crops(tmp_path / "c", 3)
    pipe = load_pipeline(tiny_run, appearance=tiny_reid(tmp_path), engine="torch")
    index = pipe.index_images(names + ["gone.png"], root=str(tmp_path / "c"), progress=False)
    assert len(index) == 3 and index.appearance.shape == (3, 512)
    alone, _, _ = pipe.appearance.embed_files([str(tmp_path / "c" / n) for n in names])
    assert np.allclose(index.appearance, alone, atol=1e-6)
    assert load_pipeline(tiny_run).appearance is None


def test_load_appearance_bad_paths_are_one_line(tmp_path):
    with pytest.raises(RunError, match="no appearance model here"):
        load_appearance(tmp_path)
    (tmp_path / "x.pt").write_bytes(b"not a model")
    with pytest.raises(RunError, match="x.pt"):
        load_appearance(tmp_path / "x.pt")


def test_with_appearance_checks_shape():
    with pytest.raises(ValueError, match="appearance must be"):
        with_appearance(rows(["a", "b"]), np.ones((3, 2), np.float32))


def test_same_person_fit_is_calibrated_and_read_back(tmp_path):
    from minterpr.interaction.appearance import fit_same_person, read_same_person, write_same_person

    rng = np.random.default_rng(3)
    people = np.repeat(np.arange(40), 4)
    cameras = np.tile(["a", "b"], 80)
    vectors = rng.normal(size=(40, 16))[people] + 0.6 * rng.normal(size=(160, 16))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    fit = fit_same_person(vectors, people.astype(str), cameras, split="val", max_negatives=3000)
    sims = vectors @ vectors.T
    i, j = np.triu_indices(160, 1)
    keep = (people[i] != people[j]) | (cameras[i] != cameras[j])
    cos, same = sims[i, j][keep], (people[i] == people[j])[keep]
    p = fit.probability(cos)
    assert abs(p.mean() - same.mean()) < 0.01  # calibrated in the large (all pairs, not only the sample)
    assert 90 < fit.auc <= 100 and fit.scale > 0
    high = p > 0.5
    assert same[high].mean() > 0.5  # the pairs it calls likely are mostly the same person
    assert fit.probability(0.5, base_rate=0.5) > fit.probability(0.5)  # a higher prior, higher odds
    (tmp_path / "m.pt").write_bytes(b"")
    write_same_person(tmp_path / "m.pt", fit)
    assert read_same_person(tmp_path / "m.pt") == fit
    (tmp_path / "same_person.json").write_text('{"scale": 1}')
    with pytest.raises(ValueError, match="same_person.json.*base_rate"):
        read_same_person(tmp_path)
    with pytest.raises(ValueError, match="needs pairs"):
        fit_same_person(vectors[:4], ["a", "b", "c", "d"], split="val")


def test_load_appearance_reads_the_calibration_beside_it(tmp_path):
    from minterpr.interaction.appearance import SamePersonCalibration, write_same_person

    path = tiny_reid(tmp_path)
    assert load_appearance(path).same_person is None
    record = SamePersonCalibration(10.0, -6.0, 0.01, 100, "val", 95.0)
    write_same_person(path, record)
    assert load_appearance(path).same_person == record
    (tmp_path / "same_person.json").write_text("{")
    with pytest.raises(RunError, match="same_person.json"):
        load_appearance(path)
