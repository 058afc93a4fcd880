"""The shipped appearance model: its directory loads and is pinned, float16 stays within its stated
tolerance, a folder with the wrong half or a missing file is one line, `minterpr models` lists it,
`index build --update` gives an older store its vectors, and the ONNX path computes torch's vectors."""

import json
import re
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from minterpr.cli.main import main
from minterpr.errors import DatasetError, RunError
from minterpr.index.gallery_index import GalleryIndex
from minterpr.index.store.appearance_store import check_appearance_match, require_appearance
from minterpr.index.store.gallery_store import STORE_ROOT, open_gallery, save_gallery
from minterpr.models.reid import ReidModel, ReidModelConfig
from minterpr.models.reid_dir import load_reid_dir, reid_half_drift, save_reid_dir
from minterpr.models.zoo import DEFAULT_APPEARANCE_MODEL, DEFAULT_REAL_MODEL, MODELS_ENV, shipped_models_dir
from minterpr.runtime.appearance import choose_appearance, load_appearance
from minterpr.types import GalleryImage

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models on a busy 2-core machine

SHIPPED = shipped_models_dir() / DEFAULT_APPEARANCE_MODEL
needs_shipped = pytest.mark.skipif(
    not (SHIPPED / "config.json").is_file(),
    reason="the shipped appearance model comes with a source checkout (models/)",
)


@pytest.fixture(autouse=True)
def torch_engine(monkeypatch):
    """Vectors from torch unless a test names the engine: an ONNX export per load would only cost time."""
    monkeypatch.setattr("minterpr.runtime.appearance.DEFAULT_APPEARANCE_ENGINE", "torch")


def tiny_model(seed: int = 0) -> ReidModel:
    torch.manual_seed(seed)
    model = ReidModel(ReidModelConfig(image_size=(64, 32))).eval()
    with torch.no_grad():  # a trained-looking neck, so float16 rounding is measured on non-trivial statistics
        model.neck.running_var.uniform_(0.5, 2.0)
        model.neck.running_mean.normal_(0, 0.1)
    return model


def tiny_checkpoint(tmp_path, seed: int = 0):
    model = tiny_model(seed)
    path = tmp_path / f"reid{seed}.pt"
    torch.save({"model": model.search_state_dict(), "config": model.config.to_dict()}, path)
    return path


def crops(folder, count: int):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(count):
        Image.fromarray(rng.integers(0, 255, (48, 24, 3), dtype=np.uint8)).save(folder / f"{i}.png")
    return [f"{i}.png" for i in range(count)]


@needs_shipped
def test_the_shipped_directory_loads_pinned_small_and_float16_within_tolerance():
    zoo = json.loads((shipped_models_dir() / "zoo.json").read_text())
    entry = zoo[DEFAULT_APPEARANCE_MODEL]
    assert entry["kind"] == "appearance"
    config = json.loads((SHIPPED / "config.json").read_text())
    rank1, cosine = config["source"]["rank1_check"], config["source"]["half_cosine_min"]
    fits = cosine >= 0.9999 and rank1["float16"] == rank1["float32"]  # the tolerance the card states (val crops)
    assert config["weights"]["precision"] == ("float16" if fits else "float32")
    assert sum(p.stat().st_size for p in SHIPPED.iterdir()) <= 10_000_000
    for note in ("MODEL_CARD.md", "LICENSE-WEIGHTS.md"):
        assert (SHIPPED / note).is_file()
    looks = load_appearance("shipped")
    assert looks.dim == 512 and looks.fingerprint == entry["fingerprint"]
    assert load_appearance(f"shipped:{DEFAULT_APPEARANCE_MODEL}").fingerprint == entry["fingerprint"]


@needs_shipped
def test_a_changed_shipped_config_is_refused_by_the_pin(tmp_path, monkeypatch):
    root = tmp_path / "models"
    shutil.copytree(shipped_models_dir(), root, ignore=shutil.ignore_patterns(DEFAULT_REAL_MODEL))
    monkeypatch.setenv(MODELS_ENV, str(root))
    assert load_appearance("shipped").dim == 512
    config = root / DEFAULT_APPEARANCE_MODEL / "config.json"
    config.write_text(config.read_text().replace('"flip_test": true', '"flip_test": false'))
    with pytest.raises(RunError, match="zoo.json pins"):
        load_appearance("shipped")


def test_float16_storage_round_trip_and_its_drift(tmp_path):
    model = tiny_model()
    save_reid_dir(model, tmp_path / "half", precision="float16")
    save_reid_dir(model, tmp_path / "full", precision="float32")
    full, half = load_reid_dir(tmp_path / "full"), load_reid_dir(tmp_path / "half")
    pixels = torch.randn(4, 3, 64, 32, generator=torch.Generator().manual_seed(3))
    assert torch.equal(full.embed(pixels), model.embed(pixels))  # float32: bit for bit
    drift = reid_half_drift(model, half, pixels=pixels)
    # float16 rounds (the vectors move), within tolerance; the cosine itself may round to 1.0 in
    # float32 on some CPUs, so the move is checked on the vectors
    assert 0.999 < drift <= 1.0 and not torch.equal(half.embed(pixels), model.embed(pixels))
    assert "classifier" not in " ".join(half.state_dict())  # the training identities never ship


def test_wrong_half_and_missing_files_are_one_line(tmp_path, tiny_run):
    from minterpr.runtime.run import load_run

    save_reid_dir(tiny_model(), tmp_path / "looks")
    with pytest.raises(RunError, match="holds the appearance model only, no attribute model") as err:
        load_run(tmp_path / "looks")
    assert "\n" not in str(err.value) and "looks" in str(err.value)
    from minterpr.runtime.run import export_model_dir

    export_model_dir(tiny_run, tmp_path / "attributes")
    with pytest.raises(RunError, match="holds the attribute model only, no appearance model"):
        load_appearance(tmp_path / "attributes")
    (tmp_path / "looks" / "model.safetensors").unlink()
    with pytest.raises(RunError, match=r"model\.safetensors: cannot be read .*incomplete") as err:
        load_appearance(tmp_path / "looks")
    assert "\n" not in str(err.value)
    assert (
        main(
            [
                "index",
                "build",
                "--run",
                str(tiny_run),
                "--images",
                str(tmp_path),
                "--out",
                str(tmp_path / "store"),
                "--appearance",
                str(tmp_path / "looks"),
            ]
        )
        == 2
    )
    assert not (tmp_path / "store").exists()  # refused before anything was embedded or written


def test_auto_is_the_shipped_model_beside_a_shipped_attribute_model_only(tmp_path, tiny_run, monkeypatch):
    root = tmp_path / "models"
    (root / "attr").mkdir(parents=True)
    (root / "attr" / "config.json").write_text("{}")
    save_reid_dir(tiny_model(), root / "looks")
    from minterpr.models.zoo import pin_shipped_model

    monkeypatch.setenv(MODELS_ENV, str(root))
    monkeypatch.setattr("minterpr.models.zoo.DEFAULT_APPEARANCE_MODEL", "looks")
    pin_shipped_model("attr", "an attribute model", "f1")
    pin_shipped_model("looks", "an appearance model", "f2", kind="appearance")
    assert choose_appearance("auto", root / "attr").dim == 512
    assert choose_appearance("auto", tiny_run) is None  # a synthetic or test run: none
    assert choose_appearance("auto", root / "looks") is None
    assert choose_appearance("none", root / "attr") is None and choose_appearance(None, root / "attr") is None
    assert choose_appearance("shipped", tiny_run).dim == 512  # asked for: given
    (root / "zoo.json").write_text(
        json.dumps({k: v for k, v in json.loads((root / "zoo.json").read_text()).items() if k == "attr"})
    )
    assert choose_appearance("auto", root / "attr") is None  # a models folder with the attribute model only
    with pytest.raises(RunError, match=r"zoo\.json: no shipped model 'looks'") as err:
        choose_appearance("shipped", root / "attr")
    assert "\n" not in str(err.value)


@needs_shipped
def test_models_lists_the_appearance_model(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    assert main(["models", str(tmp_path / "runs"), "--no-fingerprints"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if DEFAULT_APPEARANCE_MODEL in line)
    assert line.startswith("shipped") and re.search(r"\(appearance model: --appearance, \d\.\d MB\)", line)
    assert "osnet_x0_25" in line and "research" in line


def test_publish_writes_pins_and_refuses_without_a_card(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(MODELS_ENV, str(tmp_path / "models"))
    checkpoint = tiny_checkpoint(tmp_path)
    (tmp_path / "models" / "looks").mkdir(parents=True)
    argv = ["models", "publish-appearance", str(checkpoint), "--name", "looks", "--summary", "a test"]
    assert main(argv) == 2
    assert "MODEL_CARD.md: missing" in capsys.readouterr().err
    for note in ("MODEL_CARD.md", "LICENSE-WEIGHTS.md"):
        (tmp_path / "models" / "looks" / note).write_text("x")
    assert main(argv) == 0
    zoo = json.loads((tmp_path / "models" / "zoo.json").read_text())
    assert zoo["looks"]["kind"] == "appearance"
    assert load_appearance("shipped:looks").fingerprint == zoo["looks"]["fingerprint"]


def _store_without_appearance(tmp_path, count: int = 3):
    folder = tmp_path / "store"
    names = crops(folder / "crops", count)
    images = [GalleryImage(f"crops/{n}", f"p{k}") for k, n in enumerate(names)]
    embeddings = np.eye(count, 4, dtype=np.float32)
    save_gallery(GalleryIndex(images, embeddings, root=STORE_ROOT), folder, model_fingerprint="m1")
    return folder, embeddings


def test_index_build_update_adds_vectors_to_an_older_store(tmp_path, capsys):
    folder, embeddings = _store_without_appearance(tmp_path)
    with pytest.raises(DatasetError, match="index build --update --out") as err:
        require_appearance(open_gallery(folder).manifest, folder)
    assert "\n" not in str(err.value)
    checkpoint = tiny_checkpoint(tmp_path)
    assert main(["index", "build", "--update", "--out", str(folder), "--appearance", str(checkpoint)]) == 0
    stored = open_gallery(folder)
    looks = load_appearance(checkpoint, engine="torch")
    want, _, _ = looks.embed_files([str(folder / "crops" / f"{k}.png") for k in range(3)])
    assert np.allclose(stored.index.appearance, want, atol=1e-5)
    assert require_appearance(stored.manifest, folder, looks.fingerprint)["dim"] == 512
    assert np.array_equal(stored.index.embeddings, embeddings) and stored.manifest.model_fingerprint == "m1"
    assert "added appearance vectors (3 x 512" in capsys.readouterr().out
    assert main(["index", "info", str(folder)]) == 0
    assert f"appearance vectors: 3 x 512 (appearance model {looks.fingerprint})" in capsys.readouterr().out
    with pytest.raises(DatasetError, match="not other"):
        require_appearance(stored.manifest, folder, "other")


def test_update_with_a_lost_crop_changes_nothing(tmp_path, capsys):
    folder, _ = _store_without_appearance(tmp_path)
    (folder / "crops" / "1.png").unlink()
    assert (
        main(["index", "build", "--update", "--out", str(folder), "--appearance", str(tiny_checkpoint(tmp_path))]) == 2
    )
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and "1.png" in errors[0] and "nothing was changed" in errors[0]
    assert open_gallery(folder).manifest.appearance is None and not (folder / "appearance.npy").exists()


def test_adding_rows_checks_the_appearance_model_first(tmp_path):
    folder, _ = _store_without_appearance(tmp_path)
    manifest = open_gallery(folder).manifest
    check_appearance_match(manifest, folder, None)
    with pytest.raises(DatasetError, match="has no appearance vectors.*index build --update --out"):
        check_appearance_match(manifest, folder, "a1")


def test_onnx_engine_gives_torch_vectors_and_reuses_its_cache(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    checkpoint = tiny_checkpoint(tmp_path)
    names = crops(tmp_path / "c", 5)
    paths = [str(tmp_path / "c" / n) for n in names]
    cache = tmp_path / "appearance.onnx"
    onnx = load_appearance(checkpoint, engine="onnx", onnx_cache=cache)
    torch_looks = load_appearance(checkpoint, engine="torch")
    fast, _, _ = onnx.embed_files(paths)
    assert onnx.engine_name == "onnx" and torch_looks.engine_name == "torch" and cache.is_file()
    assert np.abs(fast - torch_looks.embed_files(paths)[0]).max() < 1e-5
    stamp = cache.stat().st_mtime_ns
    again = load_appearance(checkpoint, engine="onnx", onnx_cache=cache)
    assert again.engine_name == "onnx" and cache.stat().st_mtime_ns == stamp  # reused, not re-exported
    other = tiny_checkpoint(tmp_path, seed=1)
    assert load_appearance(other, engine="onnx", onnx_cache=cache).engine_name == "onnx"
    assert cache.stat().st_mtime_ns != stamp  # another model's export replaced it


def test_ingest_of_crops_keeps_appearance_vectors_and_refuses_a_mixed_store_first(tmp_path, tiny_run):
    from minterpr.ingest import ingest
    from minterpr.runtime.pipeline import load_pipeline

    checkpoint = tiny_checkpoint(tmp_path)
    crops(tmp_path / "cam1", 3)
    with_looks = load_pipeline(tiny_run, appearance=checkpoint, engine="torch")
    result = ingest(tmp_path / "cam1", tmp_path / "g", run=with_looks)
    stored = open_gallery(tmp_path / "g")
    assert (
        result.rows_added == 3 and stored.manifest.appearance["model_fingerprint"] == with_looks.appearance_fingerprint
    )
    want, _, _ = with_looks.appearance.embed_files([str(tmp_path / "g" / i.path) for i in stored.index.images])
    assert np.allclose(stored.index.appearance, want, atol=1e-6)
    crops(tmp_path / "cam2", 2)
    plain = load_pipeline(tiny_run, appearance=None, engine="torch")
    ingest(tmp_path / "cam2", tmp_path / "plain", run=plain)
    with pytest.raises(DatasetError, match="has no appearance vectors.*index build --update --out") as err:
        ingest(tmp_path / "cam1", tmp_path / "plain", run=with_looks)
    assert "\n" not in str(err.value)
    assert len(open_gallery(tmp_path / "plain").index) == 2  # nothing added, nothing lost


def test_the_service_loads_each_run_with_its_appearance_setting(tmp_path, tiny_run):
    from minterpr.serving.galleries import Galleries
    from minterpr.serving.settings import ServeSettings

    assert ServeSettings(data_dir=tmp_path).appearance == "auto"
    checkpoint = tiny_checkpoint(tmp_path)
    assert Galleries(None, appearance=str(checkpoint)).pipeline(str(tiny_run)).appearance.dim == 512
    assert Galleries(None).pipeline(str(tiny_run)).appearance is None  # auto beside a test run: none


def test_commands_that_keep_no_gallery_load_no_appearance_model(tmp_path, tiny_run, monkeypatch):
    import argparse

    from minterpr.cli.shared.model_options import load_pipeline_of
    from minterpr.models.zoo import pin_shipped_model

    root = tmp_path / "models"
    save_reid_dir(tiny_model(), root / "looks")
    monkeypatch.setenv(MODELS_ENV, str(root))
    monkeypatch.setattr("minterpr.models.zoo.DEFAULT_APPEARANCE_MODEL", "looks")
    pin_shipped_model("looks", "an appearance model", "f2", kind="appearance")
    monkeypatch.setattr("minterpr.runtime.appearance.is_shipped_attribute_model", lambda path: True)
    with_option = argparse.Namespace(run=str(tiny_run), appearance="auto")
    assert load_pipeline_of(with_option).appearance.dim == 512  # ingest, index build: auto = the shipped one
    assert load_pipeline_of(argparse.Namespace(run=str(tiny_run))).appearance is None  # eval, chat, calibrate
