"""Shared fixtures: a random attribute gallery and one torch thread per module (plain helpers: support.helpers)."""

from __future__ import annotations

import random

import pytest

from minterpr.types import GalleryImage
from support.helpers import random_attributes


@pytest.fixture(scope="session", autouse=True)
def empty_model_cache(tmp_path_factory):
    """An empty detector model cache: ingestion's `auto` detector is HOG in every test, whatever the
    developer has fetched (tests that want YOLOX-nano point MINTERPR_MODEL_CACHE at a copy)."""
    import os

    before = os.environ.get("MINTERPR_MODEL_CACHE")
    os.environ["MINTERPR_MODEL_CACHE"] = str(tmp_path_factory.mktemp("model_cache"))
    yield
    if before is None:
        os.environ.pop("MINTERPR_MODEL_CACHE", None)
    else:
        os.environ["MINTERPR_MODEL_CACHE"] = before


@pytest.fixture(scope="session")
def attribute_gallery() -> list[GalleryImage]:
    """300 identities x 3 images with random (full-coverage) attributes."""
    rng = random.Random(0)
    gallery = []
    for pid in range(300):
        attributes = random_attributes(rng)
        gallery += [
            GalleryImage(f"{pid}_{k}.jpg", f"test:{pid}", camera_id=f"test:cam{k}", attributes=attributes)
            for k in range(3)
        ]
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


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A run folder holding a freshly initialised tiny model (the commands' smallest real run)."""
    pytest.importorskip("torch")
    from minterpr.models import create_model, save_model

    run = tmp_path_factory.mktemp("tiny_run")
    save_model(create_model("tiny"), run / "model.pt")
    return run
