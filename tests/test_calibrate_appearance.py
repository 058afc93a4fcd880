"""`minterpr calibrate appearance`: the appearance model's same-person probability fitted on a val
re-id manifest and stored beside the model; bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from minterpr.cli.main import main  # noqa: E402
from minterpr.data.reid import read_cuhk03, write_manifest  # noqa: E402
from minterpr.interaction.appearance import read_same_person, same_person_path  # noqa: E402
from minterpr.models.reid import ReidModel, ReidModelConfig  # noqa: E402
from minterpr.runtime.appearance import load_appearance  # noqa: E402
from support.datasets import make_cuhk03  # noqa: E402


def _model(tmp_path):
    torch.manual_seed(0)
    model = ReidModel(ReidModelConfig(image_size=(32, 16))).eval()
    path = tmp_path / "run" / "best.pt"
    path.parent.mkdir()
    torch.save({"model": model.search_state_dict(), "config": model.config.to_dict()}, path)
    return path


def test_calibrate_appearance_stores_what_load_appearance_reads(tmp_path, capsys):
    model = _model(tmp_path)
    write_manifest(read_cuhk03(make_cuhk03(tmp_path / "cuhk03", people=5)), tmp_path / "val.jsonl")
    args = ["calibrate", "appearance", "--model", str(model), "--data", str(tmp_path / "val.jsonl")]
    assert main([*args, "--dry-run", "--json", "-"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert not same_person_path(model).exists()
    assert main(args) == 0
    assert "AUC" in capsys.readouterr().out
    stored = read_same_person(model)
    assert stored is not None and stored.split == "val" and stored.to_dict() == dry
    # 5 people x 2 cameras x 2 shots: 4 cross-camera pairs each = 20 positives among 180 kept pairs
    assert stored.base_rate == pytest.approx(20 / 180) and 0 <= stored.auc <= 100
    assert load_appearance(model).same_person == stored


def test_calibrate_appearance_on_a_model_directory(tmp_path, capsys):
    """The shipped model is a directory (safetensors + config.json): calibrated in place, as its card says."""
    from minterpr.models.reid_dir import load_reid_any, save_reid_dir

    folder = tmp_path / "looks"
    save_reid_dir(load_reid_any(_model(tmp_path)), folder)
    write_manifest(read_cuhk03(make_cuhk03(tmp_path / "cuhk03", people=4)), tmp_path / "val.jsonl")
    assert main(["calibrate", "appearance", "--model", str(folder), "--data", str(tmp_path / "val.jsonl")]) == 0
    assert str(folder / "same_person.json") in capsys.readouterr().out
    assert load_appearance(folder).same_person == read_same_person(folder) is not None


def test_calibrate_appearance_bad_input_is_one_line(tmp_path, capsys):
    model = _model(tmp_path)
    assert main(["calibrate", "appearance", "--model", str(model), "--data", str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "none.jsonl" in err[0]
    write_manifest(read_cuhk03(make_cuhk03(tmp_path / "c", people=3)), tmp_path / "t.jsonl")
    assert (
        main(["calibrate", "appearance", "--model", str(model), "--data", str(tmp_path / "t.jsonl"), "--split", "test"])
        == 2
    )
    assert "--split test" in capsys.readouterr().err
    assert not same_person_path(model).exists()


def test_simulate_with_an_appearance_model(tmp_path, capsys):
    import random

    from PIL import Image

    from support.helpers import random_attributes
    from minterpr.data.build import mark_dataset
    from minterpr.data.formats.gallery import write_gallery
    from minterpr.interaction.appearance import SamePersonCalibration, write_same_person
    from minterpr.types import GalleryImage

    root = tmp_path / "data"
    root.mkdir()
    rng, gallery = random.Random(0), []
    for pid in range(6):
        attributes = random_attributes(rng, unknown_rate=0.0)
        for view in range(2):
            Image.new("RGB", (16, 32), (40 * pid, 100, 30 * view)).save(root / f"p{pid}_{view}.png")
            gallery.append(
                GalleryImage(f"p{pid}_{view}.png", f"toy:{pid}", camera_id=f"c{view}", attributes=attributes)
            )
    write_gallery(gallery, root / "gallery_test.jsonl")
    mark_dataset(root)
    model = _model(tmp_path)
    args = ["simulate", "--backend", "attribute", "--data", str(root), "--rounds", "2", "--limit", "4", "--quiet"]
    assert main([*args, "--appearance", str(tmp_path / "none.pt")]) == 2  # a missing model: one line
    assert "none.pt" in capsys.readouterr().err
    write_same_person(model, SamePersonCalibration(10.0, -7.0, 0.1, 100, "val", 90.0))
    assert main([*args, "--appearance", str(model), "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["protocol"]["appearance"] == str(model)


def test_calibrate_appearance_centred_fits_about_the_centre(tmp_path, capsys):
    """--centred (opt-in): fitted on the crops less their centre, recorded, and said in the report line."""
    model = _model(tmp_path)
    write_manifest(read_cuhk03(make_cuhk03(tmp_path / "cuhk03", people=5)), tmp_path / "val.jsonl")
    args = ["calibrate", "appearance", "--model", str(model), "--data", str(tmp_path / "val.jsonl")]
    assert main([*args, "--centred"]) == 0
    assert "about their gallery's centre" in capsys.readouterr().out
    centred = read_same_person(model)
    assert centred.centred and centred.reranked is not None and centred.reranked.centred
    assert main(args) == 0
    plain = read_same_person(model)
    assert not plain.centred and (plain.scale, plain.bias) != (centred.scale, centred.bias)
