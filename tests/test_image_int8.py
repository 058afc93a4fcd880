"""The int8 image tower of a model directory (models.onnx_int8): made by `minterpr models quantize`,
pinned in config.json, used by image_precision="int8" and refused, one line each, when it cannot be."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime.quantization")
pytest.importorskip("onnx")

import torch  # noqa: E402

from minterpr.cli.main import main as cli  # noqa: E402
from minterpr.errors import InputError, RunError  # noqa: E402
from minterpr.models.onnx_int8 import INT8_FILE, INT8_KEY, drift  # noqa: E402
from minterpr.runtime.pipeline import load_pipeline  # noqa: E402
from minterpr.runtime.run import export_model_dir  # noqa: E402
from support.datasets import make_tiny_dataset  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_tiny_dataset(tmp_path_factory.mktemp("int8_data"))


def folder_of_crops(data, crops, count):
    """A plain folder (no manifest) holding the dataset's first ``count`` crops: a user's own."""
    crops.mkdir()
    for image in sorted((data / "images").rglob("*.jpg"))[:count]:
        shutil.copy(image, crops / image.name)
    return crops


@pytest.fixture(scope="module")
def quantised(data, tmp_path_factory):
    """A model directory of a seeded tiny model with its int8 image tower, and the command's JSON
    (seeded: the drift checks below hold for seeds 0-5 with a margin, measured)."""
    from minterpr.models import create_model, save_model

    root = tmp_path_factory.mktemp("int8")
    torch.manual_seed(0)
    save_model(create_model("tiny"), root / "run" / "model.pt")
    folder = root / "model"
    export_model_dir(root / "run", folder)
    report = folder.parent / "entry.json"
    argv = ["models", "quantize", str(folder), "--data", str(data), "--calibration", "6", "--held-out", "6"]
    assert cli([*argv, "--json", str(report)]) == 0
    return folder, json.loads(report.read_text())


def test_quantize_pins_the_file_and_records_how_it_was_made(quantised):
    folder, entry = quantised
    manifest = json.loads((folder / "config.json").read_text())
    assert manifest[INT8_KEY] == entry and entry["file"] == INT8_FILE
    assert (folder / INT8_FILE).stat().st_size == entry["bytes"] and oct((folder / INT8_FILE).stat().st_mode)[
        -3:
    ] == "644"
    assert entry["calibration"]["crops"] == 6 and entry["calibration"]["held_out_crops"] == 6
    assert 0.98 <= entry["drift"]["cosine_mean"] <= 1.0001 and entry["drift"]["decisions_kept"] >= 0.95


def test_int8_pipeline_encodes_close_to_fp32(quantised, data):
    folder, _ = quantised
    fp32 = load_pipeline(folder, appearance="none")
    int8 = load_pipeline(folder, image_precision="int8", appearance="none")
    assert int8.backend.image_precision == "int8" and int8.backend.engine_name == "onnx"
    assert fp32.backend.image_precision == "fp32"
    from minterpr.data.dataset import BuiltDataset

    images = BuiltDataset(data).gallery("test")
    a = fp32.index_images(images, root=str(data), progress=False)
    b = int8.index_images(images, root=str(data), progress=False)
    # probabilities above 0.5 are logits above 0: the same decisions
    summary = drift((a.embeddings, a.attribute_probs - 0.5), (b.embeddings, b.attribute_probs - 0.5))
    assert summary["cosine_mean"] > 0.95 and summary["decisions_kept"] > 0.9
    assert not np.allclose(a.embeddings, b.embeddings)  # int8 did run


def test_int8_is_refused_in_one_line_where_it_cannot_run(quantised, tiny_run, tmp_path):
    folder, _ = quantised
    with pytest.raises(InputError, match="needs the model as an exported model directory"):
        load_pipeline(tiny_run, image_precision="int8", appearance="none")  # a run, not a directory
    plain = tmp_path / "plain"
    export_model_dir(tiny_run, plain)
    with pytest.raises(InputError, match="no int8 image tower .*minterpr models quantize"):
        load_pipeline(plain, image_precision="int8", appearance="none")
    with pytest.raises(ValueError, match="runs on ONNX Runtime"):
        load_pipeline(folder, engine="torch", image_precision="int8", appearance="none")
    with pytest.raises(ValueError, match="image precision must be one of fp32, int8"):
        load_pipeline(folder, image_precision="fp16", appearance="none")


def test_a_changed_or_foreign_file_is_refused_naming_it(quantised, tiny_run, tmp_path):
    folder, _ = quantised
    edited = tmp_path / "edited"
    shutil.copytree(folder, edited)
    with open(edited / INT8_FILE, "ab") as f:
        f.write(b"\0")
    with pytest.raises(RunError, match=rf"{INT8_FILE}.*differ from the .* pinned"):
        load_pipeline(edited, image_precision="int8", appearance="none").backend.engine_name
    # another model's weights under the same pinned file: the fingerprint says so
    other = tmp_path / "other"
    shutil.copytree(folder, other)
    from minterpr.models import create_model, save_model

    run = tmp_path / "other_run"
    save_model(create_model("tiny"), run / "model.pt")
    export_model_dir(run, tmp_path / "fresh")
    manifest = json.loads((other / "config.json").read_text())
    fresh = json.loads((tmp_path / "fresh" / "config.json").read_text())
    shutil.copy(tmp_path / "fresh" / "model.safetensors", other / "model.safetensors")
    (other / "config.json").write_text(json.dumps({**fresh, INT8_KEY: manifest[INT8_KEY]}))
    with pytest.raises(RunError, match="made from other weights"):
        load_pipeline(other, image_precision="int8", appearance="none").backend.engine_name


def test_quantize_refuses_bad_requests_before_writing(quantised, tiny_run, data, tmp_path, capsys):
    folder, _ = quantised
    before = (folder / "config.json").read_bytes()
    assert cli(["models", "quantize", str(folder), "--data", str(data), "--calibration", "0"]) == 2
    assert "--calibration must be >= 1, got 0" in capsys.readouterr().err
    assert cli(["models", "quantize", str(folder), "--data", str(data), "--calibration", "9000"]) == 2
    assert "fewer than --calibration + --held-out" in capsys.readouterr().err
    assert cli(["models", "quantize", str(tiny_run), "--data", str(data)]) == 2
    assert "not an exported model directory" in capsys.readouterr().err
    assert cli(["models", "quantize", "shipped", "--data", str(data)]) == 2  # in place: refused
    assert "a shipped model is pinned by zoo.json" in capsys.readouterr().err
    assert cli(["models", "quantize", str(folder), "--data", str(tmp_path / "absent")]) == 2
    assert "no such folder" in capsys.readouterr().err
    small = ["--calibration", "2", "--held-out", "2"]
    assert cli(["models", "quantize", str(folder), "--data", str(data), *small, "--out", str(folder.parent)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert (folder / "config.json").read_bytes() == before


def test_a_copy_calibrated_on_a_folder_of_crops(quantised, data, tmp_path, capsys):
    """--out leaves the source as it is; --data may be any folder of crops (a user's own cameras)."""
    folder, _ = quantised
    crops = folder_of_crops(data, tmp_path / "crops", 10)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    copy = tmp_path / "copy"
    assert (
        cli(
            [
                "models",
                "quantize",
                str(folder),
                "--data",
                str(crops),
                "--calibration",
                "5",
                "--held-out",
                "5",
                "--out",
                str(copy),
            ]
        )
        == 0
    )
    assert "--image-precision int8" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    entry = json.loads((copy / "config.json").read_text())[INT8_KEY]
    assert entry["calibration"]["source"] == "5 + 5 crops of crops"
    assert load_pipeline(copy, image_precision="int8", appearance="none").backend.image_precision == "int8"


def test_too_much_drift_is_refused_and_nothing_written(tiny_run, tmp_path, monkeypatch):
    from minterpr.models import onnx_int8

    folder = tmp_path / "model"
    export_model_dir(tiny_run, folder)
    before = (folder / "config.json").read_bytes()
    monkeypatch.setattr(onnx_int8, "MIN_MEAN_COSINE", 1.01)  # no quantisation can meet it
    pixels = torch.randn(4, 3, 64, 32)
    with pytest.raises(RunError, match="int8 changes this model too much"):
        onnx_int8.quantize_model_dir(folder, pixels, pixels, source="test")
    assert (folder / "config.json").read_bytes() == before and not (folder / INT8_FILE).exists()


def test_commands_take_image_precision(quantised, tiny_run, data, tmp_path, capsys):
    folder, _ = quantised
    store = tmp_path / "store"
    argv = ["index", "build", "--images", str(data), "--split", "test", "--run", str(folder), "--appearance", "none"]
    assert cli([*argv, "--out", str(store), "--image-precision", "int8"]) == 0
    capsys.readouterr()
    argv[argv.index("--run") + 1] = str(tiny_run)
    assert cli([*argv, "--out", str(tmp_path / "other"), "--image-precision", "int8"]) == 2
    assert "needs the model as an exported model directory" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()
    assert cli(["simulate", "--backend", "attribute", "--data", str(data), "--image-precision", "int8"]) == 2
    assert "--image-precision needs --run" in capsys.readouterr().err


def test_exporting_the_same_model_again_keeps_its_int8_tower(quantised, tiny_run, tmp_path):
    folder, entry = quantised
    again = tmp_path / "again"
    shutil.copytree(folder, again)
    export_model_dir(again, again)  # the same weights: the entry stays
    assert json.loads((again / "config.json").read_text())[INT8_KEY] == entry
    from minterpr.models import create_model, save_model

    run = tmp_path / "other_run"
    save_model(create_model("tiny"), run / "model.pt")
    export_model_dir(run, again)  # other weights: the entry goes, the load says how to make one
    assert INT8_KEY not in json.loads((again / "config.json").read_text())
    with pytest.raises(InputError, match="no int8 image tower"):
        load_pipeline(again, image_precision="int8", appearance="none")


def test_an_int8_ingestion_records_its_precision(quantised, data, tmp_path, capsys):
    """The job records int8, so resuming it at fp32 is a change of settings, said in one line."""
    folder, _ = quantised
    crops = folder_of_crops(data, tmp_path / "crops", 4)
    gallery = tmp_path / "gallery"
    argv = ["ingest", str(crops), "--gallery", str(gallery), "--run", str(folder), "--appearance", "none"]
    assert cli([*argv, "--image-precision", "int8"]) == 0
    (job,) = gallery.rglob("job.json")
    assert json.loads(job.read_text())["image_precision"] == "int8"
    capsys.readouterr()
    assert cli(argv) == 2  # the same source at fp32
    assert "image_precision" in capsys.readouterr().err


def test_a_refused_copy_is_not_left_behind(quantised, data, tmp_path, monkeypatch, capsys):
    from minterpr.models import onnx_int8

    folder, _ = quantised
    monkeypatch.setattr(onnx_int8, "MIN_MEAN_COSINE", 1.01)
    copy = tmp_path / "copy"
    argv = ["models", "quantize", str(folder), "--data", str(data), "--calibration", "6", "--held-out", "6"]
    assert cli([*argv, "--out", str(copy)]) == 2
    assert "int8 changes this model too much" in capsys.readouterr().err and not copy.exists()


def test_a_hub_snapshot_is_quantised_into_a_copy_only(quantised, data, tmp_path):
    from support.hub import hub_cache, offline_python

    folder, _ = quantised
    cache = hub_cache(tmp_path / "hub", "minterpr/tiny-test", folder)
    code = (
        "from minterpr.cli.main import main\n"
        f"print(main(['models', 'quantize', 'hf-hub:minterpr/tiny-test', '--data', {str(data)!r}, "
        "'--calibration', '2', '--held-out', '2']))\n"
    )
    result = offline_python(code, cache)
    assert result.stdout.strip() == "2" and "cached snapshot stays as it is" in result.stderr, result.stderr[-2000:]


def test_sharded_embedding_at_int8_matches_the_pipeline_and_keeps_its_precision(quantised, data, tmp_path):
    from minterpr.data.dataset import BuiltDataset
    from minterpr.runtime.batch_embed import JOB_FILE, embed_gallery

    folder, _ = quantised
    images = BuiltDataset(data).gallery("test")
    out = tmp_path / "shards"
    result = embed_gallery(folder, images, str(data), out, shard_size=4, progress=False, image_precision="int8")
    reference = load_pipeline(folder, image_precision="int8", appearance="none").index_images(
        images, root=str(data), progress=False
    )
    np.testing.assert_allclose(result.embeddings, reference.embeddings, atol=1e-5)
    assert json.loads((out / JOB_FILE).read_text())["image_precision"] == "int8"
    with pytest.raises(InputError, match="precision differ"):  # the fp32 shards would mix with these
        embed_gallery(folder, images, str(data), out, shard_size=4, progress=False)


def test_models_list_says_which_directories_hold_an_int8_tower(quantised, tiny_run, tmp_path, capsys):
    folder, _ = quantised
    export_model_dir(tiny_run, tmp_path / "plain")
    shutil.copytree(folder, tmp_path / "int8")
    assert cli(["models", "list", str(tmp_path), "--no-fingerprints"]) == 0
    lines = {line.split()[1]: line for line in capsys.readouterr().out.splitlines() if line.startswith("export")}
    assert "int8 image tower" in lines[str(tmp_path / "int8")]
    assert "int8" not in lines[str(tmp_path / "plain")]
