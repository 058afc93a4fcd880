"""The public entry point: load_pipeline -> index_images -> session, with the stored re-ranking weight."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from minterpr import load_pipeline
from minterpr.errors import InputError, RunError
from minterpr.interaction.reranking import RerankConfig
from minterpr.models import create_model, save_model, update_extra


@pytest.fixture()
def run_dir(tmp_path):
    save_model(create_model("tiny"), tmp_path / "run" / "model.pt")
    rng = np.random.default_rng(0)
    for k in range(4):
        pixels = rng.integers(0, 255, size=(64, 32, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(tmp_path / f"{k}.png")
    return tmp_path / "run"


def test_pipeline_indexes_and_converses(run_dir):
    pipe = load_pipeline(run_dir)
    gallery = pipe.index_images(
        [f"{k}.png" for k in range(4)],
        person_ids=["p:1", "p:1", "p:2", "p:3"],
        root=str(run_dir.parent),
        progress=False,
    )
    assert len(gallery) == 4 and gallery.person_ids[0] == "p:1"
    session = pipe.session(gallery)
    step = session.describe("a man in a red jacket")
    assert sorted(step.ranking.tolist()) == [0, 1, 2, 3]
    assert pipe.extras.scoring is None and session.reranking == RerankConfig()  # nothing stored: defaults


def test_sessions_use_the_weight_chosen_at_training_time(run_dir):
    update_extra(run_dir / "model.pt", {"scoring": {"attribute_weight": 0.2, "prob_floor": 0.02}})
    pipe = load_pipeline(run_dir)
    assert pipe.rerank_config().attribute_weight == 0.2
    gallery = pipe.index_images([f"{k}.png" for k in range(4)], root=str(run_dir.parent), progress=False)
    assert pipe.session(gallery).reranking.attribute_weight == 0.2
    explicit = RerankConfig(attribute_weight=0.01)
    assert pipe.session(gallery, reranking=explicit).reranking is explicit


def test_the_pipeline_reads_its_run_never_a_copy(run_dir):
    """One object for a loaded model: the pipeline holds the run and the backend and delegates."""
    update_extra(run_dir / "model.pt", {"scoring": {"attribute_weight": 0.2}})
    pipe = load_pipeline(run_dir)
    assert pipe.model is pipe.run.model is pipe.backend.model
    assert pipe.extras is pipe.run.extras and pipe.rerank_config() == pipe.run.rerank_config()
    assert (pipe.run_dir, pipe.model_path) == (run_dir, run_dir / "model.pt")
    assert pipe.fingerprint == pipe.run.fingerprint and not hasattr(pipe, "attribute_weight")


def test_missing_run_names_the_fix(tmp_path):
    with pytest.raises(RunError, match="nothing: no such run directory.*minterpr train"):
        load_pipeline(tmp_path / "nothing")


def test_the_whole_stored_scoring_reaches_sessions(run_dir):
    """The stored prob_floor (not only the weight) is what sessions score with; a model file
    path loads like its run directory."""
    update_extra(run_dir / "model.pt", {"scoring": {"attribute_weight": 0.2, "prob_floor": 0.1}})
    for path in (run_dir, run_dir / "model.pt"):
        pipe = load_pipeline(path)
        reranking = pipe.session(
            pipe.index_images(["0.png", "1.png"], root=str(run_dir.parent), progress=False)
        ).reranking
        assert (reranking.attribute_weight, reranking.prob_floor) == (0.2, 0.1)
    assert load_pipeline(run_dir).run_dir == run_dir and load_pipeline(run_dir / "model.pt").run_dir is None


@pytest.mark.parametrize(
    "paths, person_ids, camera_ids, message",
    [
        ("0.png", None, None, "paths must be a list of image paths"),
        ([], None, None, "no images given"),
        (["0.png", "1.png"], ["p:1"], None, "1 person_ids for 2 images"),
        (["0.png", "1.png"], "p1", None, "person_ids must be a list"),
        (["0.png", "1.png"], ["p:1", 2], None, r"person_ids\[1\] must be a string, got int"),
        (["0.png", "1.png"], None, ["c1", "c2", "c3"], "3 camera_ids for 2 images"),
        (["0.png", "1.png"], None, ["c1", 5], r"camera_ids\[1\] must be a string or None"),
        (["0.png", 1.5], None, None, r"paths\[1\] must be an image path or a GalleryImage, got float"),
    ],
)
def test_index_images_checks_its_arguments_before_reading_any_image(run_dir, paths, person_ids, camera_ids, message):
    pipe = load_pipeline(run_dir)
    read = []
    pipe.backend.index_images = lambda *a, **k: read.append(a)  # nothing may be indexed
    with pytest.raises(InputError, match=message):
        pipe.index_images(paths, person_ids, camera_ids, root=str(run_dir.parent), progress=False)
    assert read == []
