"""Stored model configs are versioned and migrated in one place (models/io.read_model_config):
every shipped and fixture config loads through it as it did, and a dict without a version or a
preset no longer means two things (ModelConfig.from_dict fills ModelConfig()'s defaults)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minterpr.errors import RunError
from minterpr.models.config import MODEL_CONFIGS, ModelConfig
from minterpr.models.io import (
    MODEL_CONFIG_VERSION,
    V1_DEFAULTS,
    model_config_of,
    read_checkpoint,
    read_model_config,
    save_model,
)
from minterpr.models.query_model import create_model
from minterpr.training.config import load_config

ROOT = Path(__file__).resolve().parents[1]
# the retrieval model's training configs (reid.yaml trains the appearance model: tests/test_reid.py)
SHIPPED_CONFIGS = sorted(p for p in (ROOT / "src" / "minterpr" / "configs").glob("*.yaml") if p.stem != "reid")
SHIPPED_MODEL_DIRS = sorted(p.parent for p in (ROOT / "models").glob("*/config.json"))
# the input size each shipped training config builds (docs/model.md, docs/training.md)
SHIPPED_IMAGE_SIZES = {
    "clip": (384, 128),
    "peta": (160, 80),
    "synthetic": (256, 128),
    "synthetic_baseline": (256, 128),
    "tiny": (64, 32),
}


def test_one_default_per_value():
    assert ModelConfig.from_dict({}) == ModelConfig() and ModelConfig.from_dict({}).image_size == (256, 128)
    assert ModelConfig.from_dict({"embed_dim": 64}) == ModelConfig(embed_dim=64)


@pytest.mark.parametrize("path", SHIPPED_CONFIGS, ids=lambda p: p.stem)
def test_every_shipped_training_config_loads_through_the_migration(path):
    model = load_config(path).model
    assert model.image_size == SHIPPED_IMAGE_SIZES[path.stem]
    assert read_model_config(model.to_dict(), MODEL_CONFIG_VERSION) == model  # what a run stores reads back


@pytest.mark.parametrize("name", MODEL_CONFIGS.names())
def test_every_preset_survives_a_model_file(name, tmp_path):
    config = MODEL_CONFIGS.create(name)
    payload = {"config": config.to_dict(), "config_version": MODEL_CONFIG_VERSION}
    assert model_config_of(payload) == config
    if name.startswith("tiny"):  # builds without weight files
        path = tmp_path / "model.pt"
        save_model(create_model(name), path)
        stored = read_checkpoint(path)
        assert stored["config_version"] == MODEL_CONFIG_VERSION and model_config_of(stored) == config


@pytest.mark.parametrize("folder", SHIPPED_MODEL_DIRS, ids=lambda p: p.name)
def test_every_shipped_model_directory_config_reads_as_stored(folder):
    manifest = json.loads((folder / "config.json").read_text())
    if "reid_config" in manifest:  # the appearance model: its own config, read the same way
        from minterpr.models.reid import ReidModelConfig

        assert ReidModelConfig.from_dict(manifest["reid_config"]).to_dict() == manifest["reid_config"]
        return
    config = model_config_of({"config": manifest["model_config"]}, folder / "config.json")
    assert config.to_dict() == manifest["model_config"]  # nothing migrated away or filled in differently


def test_a_version_1_dict_keeps_its_meaning_and_an_unknown_version_is_one_line():
    old = {"image_encoder": "tiny_cnn", "text_encoder": "tiny_text", "embed_dim": 32, "memory_heads": 2}
    assert model_config_of({"config": old}) == ModelConfig(**old, **V1_DEFAULTS)  # no version: 1
    assert model_config_of({"config": old, "config_version": 2}) == ModelConfig(**old)
    with pytest.raises(
        RunError,
        match=r"model file: malformed embedded model config: model config version 9: "
        r"this minterpr reads versions 1 to 2",
    ):
        model_config_of({"config": old, "config_version": 9})
    with pytest.raises(RunError, match="model config version True"):
        model_config_of({"config": old, "config_version": True})


def test_a_training_yaml_may_say_its_model_config_version(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("model:\n  embed_dim: 128\n")
    assert load_config(path).model.image_size == (128, 64)  # written before the default model: as then
    path.write_text("model:\n  config_version: 2\n  embed_dim: 128\n")
    assert load_config(path).model == ModelConfig(embed_dim=128)
    path.write_text("model:\n  config_version: 7\n")
    with pytest.raises(ValueError, match="config.yaml: model: model config version 7"):
        load_config(path)


def test_presets_are_what_they_were():
    """tiny and clip spelled their layout through the old from_dict: the same configs, now explicit."""
    assert MODEL_CONFIGS.create("tiny") == read_model_config(
        dict(
            image_encoder="tiny_cnn",
            text_encoder="tiny_text",
            pretrained=False,
            embed_dim=32,
            image_size=(64, 32),
            frozen_image_stages="stem",
            colour_stripes=4,
            memory_layers=1,
            memory_heads=2,
            dropout=0.0,
        )
    )
    assert MODEL_CONFIGS.create("clip") == read_model_config(
        dict(image_encoder="clip", text_encoder="clip", image_size=(256, 128), frozen_image_stages=-2, embed_dim=256)
    )
