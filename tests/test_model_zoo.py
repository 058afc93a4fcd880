"""The model zoo: shipped models (pinned by zoo.json), models by Hugging Face Hub id (offline, on a
cache the test builds), float16 model directories, and ``minterpr models``."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from minterpr.errors import InputError, RunError  # noqa: E402
from minterpr.models import create_model, save_model  # noqa: E402
from minterpr.models.zoo import MODELS_ENV, parse_hub_ref, resolve_model  # noqa: E402
from minterpr.runtime import export_model_dir  # noqa: E402
from minterpr.runtime.run import load_run  # noqa: E402
from minterpr.runtime.catalogue import describe_models  # noqa: E402

from support.hub import COMMIT, export_tiny, hub_cache, offline_python  # noqa: E402


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Path, str]:
    """A tiny model exported as a model directory, and its fingerprint."""
    return export_tiny(tmp_path)


def make_zoo(root: Path, name: str, model_dir: Path) -> Path:
    shutil.copytree(model_dir, root / name)
    digest = hashlib.sha256((root / name / "config.json").read_bytes()).hexdigest()
    (root / "zoo.json").write_text(json.dumps({name: {"config_sha256": digest, "summary": "a test model"}}))
    return root


def test_shipped_models_load_by_name_and_are_pinned(exported, tmp_path, monkeypatch):
    model_dir, fingerprint = exported
    monkeypatch.setenv(MODELS_ENV, str(make_zoo(tmp_path / "zoo", "tiny-test", model_dir)))
    run = load_run("shipped:tiny-test")
    assert run.fingerprint == fingerprint and run.extras.scoring.attribute_weight == 0.2
    with pytest.raises(RunError, match="no shipped model 'other' .shipped here: tiny-test"):
        load_run("shipped:other")
    config = tmp_path / "zoo" / "tiny-test" / "config.json"
    config.write_text(config.read_text().replace('"version"', '"version" ', 1))  # any edit at all
    with pytest.raises(RunError, match="is not the .* that zoo.json pins"):
        load_run("shipped:tiny-test")


def test_without_a_shipped_model_the_default_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv(MODELS_ENV, str(tmp_path))
    with pytest.raises(RunError, match="no shipped model 'peta-pa100k-lite2' .shipped here: none"):
        load_run("shipped")


def test_hub_references_are_parsed_strictly():
    assert parse_hub_ref("hf-hub:org/name") == ("org/name", None)
    assert parse_hub_ref("hf-hub:org/name@" + COMMIT) == ("org/name", COMMIT)
    for bad in ("hf-hub:", "hf-hub:org", "hf-hub:org/name@", "hf-hub:/name", "hf-hub:a/b/c"):
        with pytest.raises(InputError, match="hf-hub:ORG/NAME"):
            resolve_model(bad)


def test_a_model_by_hub_id_loads_offline_from_the_cache(exported, tmp_path):
    model_dir, fingerprint = exported
    cache = hub_cache(tmp_path / "hub", "minterpr/tiny-test", model_dir)
    code = (
        "from minterpr.runtime.run import load_run\n"
        "print(load_run('hf-hub:minterpr/tiny-test').fingerprint)\n"
        f"print(load_run('hf-hub:minterpr/tiny-test@{COMMIT}').fingerprint)\n"
        "try:\n    load_run('hf-hub:minterpr/absent')\n"
        "except Exception as err:\n    print(type(err).__name__, str(err).splitlines()[0])\n"
    )
    result = offline_python(code, cache)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[:2] == [fingerprint, fingerprint]
    assert lines[2].startswith("RunError hf-hub:minterpr/absent: not in the Hugging Face cache")


def test_clip_weights_by_hub_id(tmp_path):
    pytest.importorskip("transformers")
    from minterpr.models.encoders.tiny import save_tiny_clip

    cache = hub_cache(tmp_path / "hub", "openai/clip-tiny", save_tiny_clip(tmp_path / "clip"))
    code = (
        "import torch\nfrom minterpr.models.encoders import create_image_encoder, create_text_encoder\n"
        "enc = create_image_encoder('clip', model_dir='hf-hub:openai/clip-tiny', image_size=(64, 32)).eval()\n"
        "print(tuple(enc(torch.zeros(1, 3, 64, 32))['global'].shape))\n"
        "print(create_text_encoder('clip', model_dir='hf-hub:openai/clip-tiny').encode(['a man']).shape[0])\n"
    )
    result = offline_python(code, cache)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-1] == "1"


def test_float16_directory_halves_the_weights_within_tolerance(tmp_path):
    torch.manual_seed(0)
    save_model(create_model("tiny"), tmp_path / "run" / "model.pt")
    full = export_model_dir(tmp_path / "run", tmp_path / "fp32")
    half = export_model_dir(tmp_path / "run", tmp_path / "fp16", precision="float16")
    assert half["weights"]["precision"] == "float16" and half["weights"]["bytes"] < 0.6 * full["weights"]["bytes"]
    drift = half["half_precision_drift"]
    assert drift["image_cosine_min"] > 0.999 and drift["attribute_prob_max_abs"] < 0.01
    loaded = load_run(tmp_path / "fp16").model
    assert all(p.dtype == torch.float32 for p in loaded.parameters())  # computes at float32
    with pytest.raises(ValueError, match="must be one of float32, float16"):
        export_model_dir(tmp_path / "run", tmp_path / "bf", precision="bfloat16")


def test_float16_is_refused_beyond_the_tolerance(tmp_path, monkeypatch):
    import minterpr.runtime.run as trained_run

    save_model(create_model("tiny"), tmp_path / "run" / "model.pt")
    monkeypatch.setattr(trained_run, "HALF_COSINE_MIN", 1.5)  # no cosine reaches it
    with pytest.raises(RunError, match="float16 storage changes this model too much"):
        export_model_dir(tmp_path / "run", tmp_path / "fp16", precision="float16")


def test_models_lists_shipped_runs_and_exports(exported, tmp_path, monkeypatch, capsys):
    model_dir, fingerprint = exported
    monkeypatch.setenv(MODELS_ENV, str(make_zoo(tmp_path / "zoo", "tiny-test", model_dir)))
    (tmp_path / "runs" / "broken").mkdir(parents=True)
    (tmp_path / "runs" / "broken" / "model.pt").write_bytes(b"not a model")
    shutil.copytree(tmp_path / "run", tmp_path / "runs" / "good")
    entries = {e.name: e for e in describe_models([tmp_path / "runs", tmp_path / "export"])}
    assert entries["shipped:tiny-test"].fingerprint == fingerprint
    assert entries[str(tmp_path / "runs" / "good")].fingerprint == fingerprint
    assert entries[str(tmp_path / "export")].kind == "export"
    assert "not a PyTorch file" in entries[str(tmp_path / "runs" / "broken")].problem

    from minterpr.cli.main import main

    assert main(["models", str(tmp_path / "runs"), "--json", str(tmp_path / "models.json")]) == 0
    out = capsys.readouterr().out
    assert f"shipped   shipped:tiny-test  tiny_cnn  fingerprint {fingerprint}" in out
    assert {e["kind"] for e in json.loads((tmp_path / "models.json").read_text())} == {"shipped", "run"}


def test_real_footage_commands_default_to_the_shipped_model():
    from minterpr.cli.main import build_parser

    parser = build_parser()
    assert parser.parse_args(["ingest", "clip.mp4", "--gallery", "g"]).run == "shipped"
    assert parser.parse_args(["index", "build", "--images", "d", "--out", "o"]).run == "shipped"
    assert parser.parse_args(["chat", "--images", "d"]).run == "shipped"
    assert parser.parse_args(["chat", "--images", "d", "--backend", "attribute"]).backend == "attribute"


def test_models_finds_the_demo_run_under_the_default_outputs(exported, tmp_path, monkeypatch, capsys):
    model_dir, fingerprint = exported
    monkeypatch.setenv(MODELS_ENV, str(make_zoo(tmp_path / "zoo", "tiny-test", model_dir)))
    work = tmp_path / "work"
    shutil.copytree(tmp_path / "run", work / "outputs" / "demo" / "run")  # where `serve --demo` trains
    monkeypatch.chdir(work)
    from minterpr.cli.main import main

    assert main(["models", "--no-fingerprints"]) == 0
    out = capsys.readouterr().out
    assert "run       outputs/demo/run  tiny_cnn" in out, out


def test_models_names_a_missing_folder(tmp_path, capsys):
    from minterpr.cli.main import main

    assert main(["models", str(tmp_path / "absent")]) == 2
    assert "absent: no such folder" in capsys.readouterr().err


def test_the_commands_that_take_a_run_take_a_shipped_name(exported, tmp_path, monkeypatch, capsys):
    """``eval`` once read --run as a plain path ('shipped: no such run directory'); every command
    that scores with a model resolves the name the same way."""
    from minterpr.cli.main import main

    from support.datasets import make_tiny_dataset

    model_dir, _ = exported
    zoo = make_zoo(tmp_path / "zoo", "tiny-test", model_dir)
    monkeypatch.setenv(MODELS_ENV, str(zoo))
    data = make_tiny_dataset(tmp_path / "data")
    run = ["--run", "shipped:tiny-test"]
    assert main(["eval", *run, "--data", str(data / "test.jsonl"), "--json", str(tmp_path / "eval.json")]) == 0
    assert json.loads((tmp_path / "eval.json").read_text())["protocol"]["model"].startswith(str(zoo / "tiny-test"))
    assert main(["eval-attributes", *run, "--gallery", str(data / "gallery_test.jsonl")]) == 0
    assert main(["simulate", *run, "--data", str(data), "--split", "test", "--rounds", "1"]) == 0
    capsys.readouterr()
