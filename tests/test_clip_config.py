"""The shipped ``clip`` training config: IRRA-like settings read from clip.yaml, a missing CLIP
directory named with the ``--set`` that supplies it, and the config end to end on CPU: a tiny
random CLIP directory, a tiny CUHK-PEDES-layout dataset converted by ``minterpr data convert``,
trained (scaled down by overrides), evaluated single-shot, with 248 text positions."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from minterpr.cli.main import main  # noqa: E402
from minterpr.training.config import load_config, save_config  # noqa: E402
from support.datasets import convert_args, cuhk_pedes  # noqa: E402  (the converter tests' CUHK-PEDES writer)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# the shipped config scaled down for a CPU: the tiny CLIP's 8-px patches, one short epoch
SMALL = [
    "model.image_size=[64,32]",
    "stages.0.epochs=1",
    "stages.0.warmup_steps=1",
    "batch_size=8",
    "workers=0",
    "progress=false",
]


def test_clip_config_maps_irra_settings(tmp_path):
    cfg = load_config("clip")
    save_config(cfg, tmp_path / "config.yaml")  # what a run stores and --resume reads back
    assert load_config(tmp_path / "config.yaml") == cfg
    assert cfg.device == "cpu" and cfg.data.kind == "custom"  # a GPU only when asked for
    assert load_config("clip", ["device=cuda"]).device == "cuda"  # what --device cuda sets
    model = cfg.model
    assert (model.image_encoder, model.text_encoder) == ("clip", "clip")
    assert model.image_size == (384, 128) and model.frozen_image_stages == 0 and model.freeze_text is False
    assert model.text_kwargs()["max_positions"] == 248 and model.init_temperature == 0.02
    assert "model_dir" not in model.image_kwargs()  # machine-specific: given with --set
    alignment, dialogue = cfg.stages
    assert alignment.name == "alignment" and alignment.epochs == 60 and cfg.batch_size == 64
    assert alignment.lr * alignment.encoder_lr_scale == pytest.approx(1e-5)  # IRRA's CLIP learning rate
    assert alignment.lr == pytest.approx(5e-5) and alignment.weight_decay == pytest.approx(4e-5)
    assert alignment.warmup_steps == 5 * -(-68126 // 64)  # 5 epochs of CUHK-PEDES's training captions
    assert dialogue.name == "dialogue" and dialogue.epochs == 0  # off unless --set stages.1.epochs=N
    assert cfg.selection_metric == "r1@0" and cfg.augment and not cfg.cache_features


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    from minterpr.models.encoders.tiny import save_tiny_clip

    return save_tiny_clip(tmp_path_factory.mktemp("tiny_clip"))


@pytest.fixture(scope="module")
def cuhk_data(tmp_path_factory):
    """CUHK-PEDES as released (reid_raw.json + drawn images; 6/3/3 identities) -> training layout."""
    root = tmp_path_factory.mktemp("cuhk")
    fmt, annotations, images = cuhk_pedes(root)
    assert main(convert_args(fmt, annotations, images, root / "data")) == 0
    return root / "data"


def test_missing_clip_directory_names_the_key(cuhk_data, tmp_path, capsys):
    assert (
        main(
            [
                "train",
                "--config",
                "clip",
                "--data",
                str(cuhk_data),
                "--out",
                str(tmp_path / "run"),
                *sum((["--set", item] for item in SMALL), []),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("minterpr train: error: ")
        and "--set model.encoder_kwargs.model_dir=" in err
        and len(err.splitlines()) == 1
    )
    assert not (tmp_path / "run" / "model.pt").exists()


def test_clip_config_trains_and_evaluates_on_cpu(cuhk_data, tiny_clip, tmp_path, capsys):
    from minterpr.runtime.run import load_run

    run = tmp_path / "run"
    overrides = [*SMALL, f"model.encoder_kwargs.model_dir={tiny_clip}"]
    argv = ["train", "--config", "clip", "--data", str(cuhk_data), "--out", str(run), "--device", "cpu", "--quiet"]
    assert main([*argv, *sum((["--set", item] for item in overrides), [])]) == 0
    assert (run / "model.pt").is_file() and "best r1@0" in capsys.readouterr().out
    model = load_run(run).model
    assert model.text_encoder.num_positions == 248 and model.text_encoder.max_length == 248
    assert model.config.embed_dim == 512 and model.config.image_size == (64, 32)
    report = tmp_path / "single_shot.json"
    assert (
        main(
            [
                "eval",
                "--run",
                str(run),
                "--data",
                str(cuhk_data / "test.jsonl"),
                "--device",
                "cpu",
                "--max-rounds",
                "1",
                "--attribute-weight",
                "0",
                "--json",
                str(report),
                "--quiet",
            ]
        )
        == 0
    )
    result = json.loads(report.read_text())
    assert result["num_queries"] == 12 and result["protocol"]["num_gallery"] == 6  # a query per caption
    assert result["protocol"]["image_encoder"] == "clip" and len(result["rounds"]) == 1
    round0 = result["rounds"][0]
    assert 0.0 <= round0["r1"] <= round0["r5"] <= round0["r10"] <= 100.0 and 0.0 < round0["mAP"] <= 100.0
