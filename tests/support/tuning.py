"""A tiny image tuning for the tests of the tuning loop and its recipe options."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from minterpr.models import create_model
from minterpr.training.config import ImageTuningConfig, load_config
from minterpr.training.image_tuning import ImageTuner
from minterpr.training.labelled_images import labelled_images

from support.datasets import make_tiny_dataset


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> Path:
    return make_tiny_dataset(tmp_path_factory.mktemp("tune") / "data")


def make_tuner(tiny_data: Path, out: Path, **overrides) -> ImageTuner:
    cfg = load_config("tiny", [f"data.root={tiny_data}"])
    from minterpr.training.data import identity_index, load_split

    train, val = load_split(cfg.data, "train"), load_split(cfg.data, "val")
    torch.manual_seed(0)
    model = create_model("tiny", num_identities=len({i.person_id for i in train.gallery}))
    ids = identity_index([i.person_id for i in train.gallery])
    tuning = ImageTuningConfig(
        **{
            "epochs": 2,
            "batch_size": 8,
            "warmup_steps": 2,
            "checkpoint_every_steps": 2,
            "frozen_image_stages": "stem",
            **overrides,
        }
    )
    return ImageTuner(
        model,
        tuning,
        out,
        train=labelled_images(train.gallery, train.image_root, model, ids, desc="", progress=False),
        val=labelled_images(val.gallery, val.image_root, model, ids, desc="", progress=False),
        seed=0,
        progress=False,
        log=lambda _: None,
    )
