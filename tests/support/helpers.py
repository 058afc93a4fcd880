"""Plain helpers several test modules share (no fixtures: those are in ``tests/conftest.py``)."""

from __future__ import annotations

import importlib.util
import os
import random
from pathlib import Path
from types import ModuleType

from minterpr.language.ontology import ONTOLOGY
from minterpr.types import GalleryImage

REPO_ROOT = Path(__file__).resolve().parents[2]


def load_benchmark(name: str) -> ModuleType:
    """The script ``benchmarks/<name>.py`` as a module (benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shared_data_dir() -> Path:
    """Where the research-only real data lies (never copied into the repository)."""
    return Path(os.environ.get("MINTERPR_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def shared_weights_dir() -> Path:
    """Where the small third-party weights lie (research-only terms: never copied into the repository)."""
    return Path(os.environ.get("MINTERPR_SHARED_WEIGHTS", shared_data_dir().parent / "weights"))


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
