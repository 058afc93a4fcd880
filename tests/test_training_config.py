"""Training config: shipped files, overrides, unknown keys, the refusal to select on test."""

from __future__ import annotations

import pytest

from minterpr.training.config import (
    ConfigError,
    StageConfig,
    TrainConfig,
    load_config,
    parse_selection_metric,
    save_config,
)

SHIPPED = ("tiny", "synthetic", "synthetic_baseline", "peta", "clip")


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_configs_load_and_round_trip(name, tmp_path):
    cfg = load_config(name)
    assert isinstance(cfg, TrainConfig) and cfg.stages
    assert cfg.selection_split == "val" and cfg.device == "cpu"
    save_config(cfg, tmp_path / "config.yaml")
    assert load_config(tmp_path / "config.yaml") == cfg


def test_shipped_stage_plans():
    assert [s.name for s in load_config("synthetic").stages] == ["attributes", "alignment", "dialogue"]
    assert [s.name for s in load_config("synthetic_baseline").stages] == ["attributes", "alignment"]
    assert load_config("peta").data.kind == "peta"
    tiny = load_config("tiny")
    assert tiny.model.image_encoder == "tiny_cnn" and tiny.model.text_encoder == "tiny_text"


def test_stage_defaults():
    attributes, alignment, dialogue = (StageConfig(n) for n in ("attributes", "alignment", "dialogue"))
    assert attributes.resolved_losses() == ["attribute", "id"] and not attributes.resolved_validate()
    assert alignment.resolved_max_rounds() == 1 and "sdm" in alignment.resolved_losses()
    assert dialogue.resolved_max_rounds() is None and "reference" in dialogue.resolved_losses()
    assert StageConfig("dialogue", losses=["itc"]).resolved_losses() == ["itc"]


def test_overrides_parse_yaml_values_and_nested_paths():
    cfg = load_config(
        "tiny",
        [
            "batch_size=3",
            "stages.1.lr=1e-4",
            "stages.2.losses=[itc, reference]",
            "model.embed_dim=16",
            "data.root=/some/where",
            "augment=true",
        ],
    )
    assert cfg.batch_size == 3 and cfg.augment is True
    assert cfg.stages[1].lr == pytest.approx(1e-4)
    assert cfg.stages[2].resolved_losses() == ["itc", "reference"]
    assert cfg.model.embed_dim == 16 and cfg.model.image_encoder == "tiny_cnn"  # preset kept
    assert cfg.data.root == "/some/where"


def test_stage_names_pick_the_files_stages():
    file_stages = load_config("synthetic").stages
    cfg = load_config("synthetic", ["stages=[attributes,alignment]", "stages.1.epochs=9"])
    assert [s.name for s in cfg.stages] == ["attributes", "alignment"]
    assert cfg.stages[0] == file_stages[0]  # the file's settings, not the defaults
    assert cfg.stages[1].epochs == 9 and cfg.stages[1].warmup_steps == file_stages[1].warmup_steps


def test_unknown_key_in_file_names_key_and_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("seed: 1\nstages:\n  - name: alignment\n    epochz: 2\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml.*'stages\.0\.epochz'"):
        load_config(path)
    path.write_text("data:\n  rooot: x\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml.*'data\.rooot'"):
        load_config(path)
    path.write_text("model:\n  embed_dimm: 8\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml.*embed_dimm"):
        load_config(path)


def test_unknown_key_from_set_names_the_override():
    with pytest.raises(ConfigError, match=r"unknown key 'learning_rate'.*--set learning_rate=3"):
        load_config("tiny", ["learning_rate=3"])
    with pytest.raises(ConfigError, match="not key=value"):
        load_config("tiny", ["batch_size"])
    with pytest.raises(ConfigError, match="not an index"):
        load_config("tiny", ["stages.7.epochs=1"])


def test_wrong_types_and_values_are_errors():
    with pytest.raises(ConfigError, match=r"'stages\.0\.lr': expected float"):
        load_config("tiny", ["stages.0.lr=fast"])
    with pytest.raises(ConfigError, match="'batch_size': expected int"):
        load_config("tiny", ["batch_size=2.5"])
    with pytest.raises(ConfigError, match="must be one of attributes, alignment, dialogue"):
        load_config("tiny", ["stages.0.name=warmup"])
    with pytest.raises(ConfigError, match="unknown loss 'triplet'"):
        load_config("tiny", ["stages.0.losses=[triplet]"])
    with pytest.raises(ConfigError, match="max_rounds"):
        load_config("tiny", ["stages.2.max_rounds=0"])
    with pytest.raises(ConfigError, match="data.kind"):
        load_config("tiny", ["data.kind=market"])
    with pytest.raises(ConfigError, match="device"):
        load_config("tiny", ["device=tpu"])


def test_selection_on_test_is_refused_with_the_reason(tmp_path):
    with pytest.raises(ConfigError, match="selection_split='test' is refused: .*leaks the test set"):
        load_config("tiny", ["selection_split=test"])
    path = tmp_path / "cheat.yaml"
    path.write_text("selection_split: test\n")
    with pytest.raises(ConfigError, match="refused"):
        load_config(path)
    with pytest.raises(ConfigError, match="must be 'val'"):
        load_config("tiny", ["selection_split=train"])


def test_selection_metric_parsing():
    assert parse_selection_metric("r1@last") == ("r1", None, True)
    assert parse_selection_metric("hits10@3") == ("hits10", 3, True)
    assert parse_selection_metric("bri") == ("bri", None, False)
    for bad in ("r1", "r2@last", "mAP@first"):
        with pytest.raises(ConfigError, match="selection_metric"):
            parse_selection_metric(bad)
    with pytest.raises(ConfigError, match="selection_metric"):
        load_config("tiny", ["selection_metric=accuracy"])


def test_unknown_config_name_lists_the_shipped_ones(tmp_path):
    with pytest.raises(ConfigError, match="not one of .*synthetic.*tiny"):
        load_config("no_such_config")
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


def test_a_folder_named_like_a_shipped_config_does_not_hide_it(tmp_path, monkeypatch):
    # found when `minterpr train --config reid` ran in a folder holding runs under reid/
    monkeypatch.chdir(tmp_path)
    shipped = load_config("tiny").to_dict()
    (tmp_path / "tiny").mkdir()
    assert load_config("tiny").to_dict() == shipped
    (tmp_path / "mine").mkdir()
    with pytest.raises(ConfigError, match="'mine' is a folder, not a config file"):
        load_config("mine")


# ModelConfig's implicit layout before a bare ModelConfig() became the default model (issue 23)
OLD_IMPLICIT_LAYOUT = {
    "image_size": (128, 64),
    "frozen_image_stages": "stage5",
    "num_stripes": 4,
    "stripe_columns": 1,
    "stripe_stage": None,
    "colour_stripes": 0,
    "encoder_kwargs": {},
}


def test_bare_model_config_is_the_default_model():
    from minterpr.models.config import MODEL_CONFIGS, ModelConfig

    assert ModelConfig() == MODEL_CONFIGS.create("efficientnet_minilm") == load_config("synthetic").model
    assert ModelConfig().image_size == (256, 128) and TrainConfig().model == ModelConfig()


def test_old_saved_configs_that_omit_fields_load_as_before(tmp_path):
    """A run's config.yaml and a checkpoint's embedded config, written when the omitted fields
    had the old implicit defaults, read exactly as they were made."""
    from minterpr.models.config import LATER_FIELDS, ModelConfig
    from minterpr.models.io import V1_DEFAULTS, model_config_of

    assert V1_DEFAULTS == OLD_IMPLICIT_LAYOUT
    assert not set(LATER_FIELDS) & set(V1_DEFAULTS)
    assert all(getattr(ModelConfig(), name) == value for name, value in LATER_FIELDS.items())
    path = tmp_path / "config.yaml"
    path.write_text("seed: 3\nmodel:\n  embed_dim: 128\n  num_identities: 10\n")  # no preset
    model = load_config(path).model
    for name, value in OLD_IMPLICIT_LAYOUT.items():
        assert getattr(model, name) == value, name
    assert model.embed_dim == 128 and model.image_encoder == "efficientnet_lite0"
    path.write_text("seed: 3\n")  # no model section at all
    assert load_config(path).model == ModelConfig(**OLD_IMPLICIT_LAYOUT)
    # a checkpoint saved before the colour branch and the part grid (no such keys in its config)
    saved = {
        k: v
        for k, v in ModelConfig(**OLD_IMPLICIT_LAYOUT).to_dict().items()
        if k not in ("colour_stripes", "stripe_columns", "stripe_stage", "flip_test")
    }
    assert model_config_of({"config": saved}) == ModelConfig(**OLD_IMPLICIT_LAYOUT)
