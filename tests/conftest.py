"""Shared fixtures: a random attribute gallery and the location of ../shared/data."""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from minterpr.language.ontology import ONTOLOGY
from minterpr.types import GalleryImage

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """Where the research-only real data lies (never copied into the repository)."""
    return Path(os.environ.get("MINTERPR_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def random_attributes(rng: random.Random, unknown_rate: float = 0.1) -> dict[str, tuple[str, ...]]:
    """A valid attribute dict with every slot known except a random few."""
    attributes = {}
    for slot in ONTOLOGY.slots:
        if rng.random() < unknown_rate:
            continue
        names = [v.name for v in slot.values]
        attributes[slot.name] = (rng.choice(names),)
    return ONTOLOGY.validate(attributes)


def near_duplicate_gallery(people_seed: int, backend_seed: int):
    """(backend, index, images): 500 identities x 3 near-duplicate images with noisy attribute
    predictions (an AttributeBackend), the gallery the shortlist tests rank."""
    from minterpr.interaction.attribute_backend import AttributeBackend

    rng = random.Random(people_seed)
    images = []
    for pid in range(500):
        attributes = random_attributes(rng)
        images += [GalleryImage(f"{pid}_{k}.jpg", f"t:{pid}", attributes=attributes) for k in range(3)]
    backend = AttributeBackend(noise=1.5, seed=backend_seed)
    return backend, backend.index_images(images), images


@pytest.fixture(scope="session")
def attribute_gallery() -> list[GalleryImage]:
    """300 identities x 3 images with random (full-coverage) attributes."""
    rng = random.Random(0)
    gallery = []
    for pid in range(300):
        attributes = random_attributes(rng)
        gallery += [GalleryImage(f"{pid}_{k}.jpg", f"test:{pid}", camera_id=f"test:cam{k}", attributes=attributes)
                    for k in range(3)]
    return gallery


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op torch thread for a test module: tiny models gain nothing from threads, on a
    busy 2-core machine spinning OpenMP threads make them many times slower, and one thread
    fixes the float reduction order, so in-process and subprocess runs compute the same numbers."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_model(seed: int = 0):
    """The untrained ``tiny`` retrieval model, seeded, in eval mode (the fast-path agreement tests)."""
    import torch

    from minterpr.models import create_model

    torch.manual_seed(seed)
    return create_model("tiny").eval()


def two_image_index():
    """A gallery index of g0.jpg and g1.jpg with fixed random unit 32-d embeddings (``tiny``'s D)."""
    import numpy as np

    from minterpr.index.gallery_index import GalleryIndex

    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(2, 32)).astype(np.float32)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    return GalleryIndex([GalleryImage("g0.jpg", "p:0"), GalleryImage("g1.jpg", "p:1")], embeddings)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A run folder holding a freshly initialised tiny model (the commands' smallest real run)."""
    pytest.importorskip("torch")
    from minterpr.models import create_model, save_model

    run = tmp_path_factory.mktemp("tiny_run")
    save_model(create_model("tiny"), run / "model.pt")
    return run
