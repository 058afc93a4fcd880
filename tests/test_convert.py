"""`minterpr data convert`: each source layout -> the training layout -> a tiny run that trains and evaluates.

Every dataset here is written by the test in the source's own layout (annotation file names,
fields, image folders), with images the test draws.
"""

from __future__ import annotations

import json

import pytest
from PIL import Image

from support.datasets import LAYOUTS, captions_of, chatpedes, convert_args, cuhk_pedes, icfg_pedes, rstpreid, tbps
from support.helpers import shared_data_dir
from minterpr.cli.main import main
from minterpr.data.build import require_built_dataset
from minterpr.data.convert import ConvertConfig, convert_dataset
from minterpr.data.errors import DataError
from minterpr.data.formats.gallery import read_gallery
from minterpr.data.formats.minterpedes import read_minterpedes
from minterpr.errors import DatasetError, InputError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_each_layout_converts_identity_disjoint_and_valid(name, tmp_path, capsys):
    fmt, annotations, images = LAYOUTS[name](tmp_path)
    out = tmp_path / "out"
    assert main(convert_args(fmt, annotations, images, out)) == 0
    marker = require_built_dataset(out)  # finished, fingerprinted: training reads it
    assert marker["name"] == fmt and set(marker["splits"]) == {"train", "val", "test"}
    owners: dict[str, str] = {}
    for split in ("train", "val", "test"):
        gallery = read_gallery(out / f"gallery_{split}.jsonl", check_images=True)
        samples = read_minterpedes(out / f"{split}.jsonl", check_images=True)
        assert {g.path for g in gallery} == {s.target_path for s in samples}
        assert all(g.path.startswith("images/") and g.attributes is None for g in gallery)
        for image in gallery:
            assert owners.setdefault(image.person_id, split) == split  # identity-disjoint
        if fmt == "chatpedes":
            assert all(len(s.dialogue.qa_turns) == 1 for s in samples)
        else:  # one round-0 sample per caption
            assert len(samples) == 2 * len(gallery) and all(s.dialogue.num_rounds == 1 for s in samples)
    official = fmt not in ("icfg-pedes", "chatpedes")
    assert (marker["val_split"] == "official") is official
    if official:  # the official splits are kept as they are
        assert {g.person_id.split(":")[1] for g in read_gallery(out / "gallery_val.jsonl")} == {"7", "8", "9"}
    assert "dataset written to" in capsys.readouterr().out


def test_converted_dataset_trains_and_evaluates(tmp_path, capsys):
    """Convert (captions synthesised into dialogues), train the tiny config, evaluate on test."""
    fmt, annotations, images = cuhk_pedes(tmp_path)
    data, run = tmp_path / "data", tmp_path / "run"
    assert main(convert_args(fmt, annotations, images, data, "--synthesise-dialogues")) == 0
    samples = read_minterpedes(data / "train.jsonl")
    assert any(s.dialogue.qa_turns for s in samples) and any(s.dialogue.reference_turns for s in samples)
    assert {s.dialogue.description for s in samples} <= {
        c for pid in range(1, 13) for k in range(2) for c in captions_of(pid, k)
    }
    assert read_gallery(data / "gallery_train.jsonl")[0].attributes["upper_colour"]  # parsed from the captions
    train = [
        "train",
        "--config",
        "tiny",
        "--data",
        str(data),
        "--out",
        str(run),
        "--set",
        "data.kind=custom",
        "--set",
        "stages.2.epochs=1",
        "--set",
        "batch_size=16",
    ]
    assert main(train) == 0
    report = tmp_path / "eval.json"
    assert main(["eval", "--run", str(run), "--data", str(data / "test.jsonl"), "--json", str(report), "--quiet"]) == 0
    result = json.loads(report.read_text())
    assert result["protocol"]["num_gallery"] == 6 and result["num_queries"] == 12
    assert 0.0 <= result["rounds"][0]["r1"] <= 100.0 and len(result["rounds"]) > 1


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_each_converted_layout_trains_and_evaluates(name, tmp_path):
    fmt, annotations, images = LAYOUTS[name](tmp_path)
    data, run = tmp_path / "data", tmp_path / "run"
    assert main(convert_args(fmt, annotations, images, data)) == 0
    assert (
        main(
            [
                "train",
                "--config",
                "tiny",
                "--data",
                str(data),
                "--out",
                str(run),
                "--set",
                "data.kind=custom",
                "--set",
                "stages=[alignment]",
                "--set",
                "batch_size=16",
            ]
        )
        == 0
    )
    report = tmp_path / "eval.json"
    assert main(["eval", "--run", str(run), "--data", str(data / "test.jsonl"), "--json", str(report), "--quiet"]) == 0
    assert json.loads(report.read_text())["num_rounds"] == (2 if fmt == "chatpedes" else 1)


def test_identity_in_two_splits_is_refused(tmp_path):
    fmt, annotations, images = cuhk_pedes(tmp_path)
    rows = json.loads(annotations[0].read_text())
    rows[0]["split"] = "test"  # identity 1 now has one image in test, one in train
    annotations[0].write_text(json.dumps(rows))
    with pytest.raises(DatasetError, match="identity cuhk-pedes:1 is in the train and the test split"):
        convert_dataset(ConvertConfig(fmt, tuple(map(str, annotations)), str(images)), tmp_path / "out")
    assert main(convert_args(fmt, annotations, images, tmp_path / "out")) == 2


def test_bad_record_and_missing_image_name_file_and_field(tmp_path):
    fmt, annotations, images = rstpreid(tmp_path)
    rows = json.loads(annotations[0].read_text())
    (images / rows[3]["img_path"]).unlink()
    annotations[0].write_text(json.dumps(rows))
    with pytest.raises(DataError, match=r"data_captions\.json:4: img_path: image not found"):
        convert_dataset(ConvertConfig(fmt, (str(annotations[0]),), str(images)), tmp_path / "out")
    rows[3] = {"id": 1, "img_path": rows[2]["img_path"], "captions": [], "split": "train"}
    annotations[0].write_text(json.dumps(rows))
    with pytest.raises(DataError, match=r":4: captions: expected a non-empty list"):
        convert_dataset(ConvertConfig(fmt, (str(annotations[0]),), str(images)), tmp_path / "out")


def test_chatpedes_without_split_and_bad_options_are_refused(tmp_path):
    fmt, annotations, images = chatpedes(tmp_path)
    unnamed = annotations[0].with_name("dialogues.json")
    annotations[0].rename(unnamed)
    with pytest.raises(DatasetError, match="cannot tell the split"):
        convert_dataset(ConvertConfig(fmt, (str(unnamed),), str(images)), tmp_path / "out")
    with pytest.raises(InputError, match="already holds dialogues"):
        ConvertConfig(fmt, (str(unnamed),), str(images), synthesise_dialogues=True)
    with pytest.raises(DatasetError, match="no such image folder"):
        convert_dataset(ConvertConfig(fmt, (str(unnamed),), str(tmp_path / "nowhere")), tmp_path / "out")


def test_rerun_is_deterministic_and_an_edit_is_caught(tmp_path):
    fmt, annotations, images = icfg_pedes(tmp_path)
    config = ConvertConfig(fmt, tuple(map(str, annotations)), str(images), synthesise_dialogues=True)
    first = convert_dataset(config, tmp_path / "a")
    second = convert_dataset(config, tmp_path / "b")
    assert first["fingerprint"]["files"] == second["fingerprint"]["files"]
    assert first["val_split"]["identities"] == 1  # 10 % of 9 training identities, at least one
    (images / "train" / "0001" / "extra.jpg").write_bytes(b"x")  # the linked image folder changed
    with pytest.raises(DatasetError, match="images/ changed since the build"):
        require_built_dataset(tmp_path / "a")


@pytest.mark.shared_data
@pytest.mark.slow
def test_real_cuhk_pedes_captions_convert(tmp_path):
    """The real CUHK-PEDES val and test rows (../shared/data; no images there: the test draws a
    placeholder for each path) keep their official splits; synthesised dialogues open with the
    real captions and the labels parsed from them cover most images."""
    source = shared_data_dir() / "cuhk_pedes_captions"
    if not source.is_dir():
        pytest.skip(f"{source} is absent (research-only data, see ../shared/data/README.md)")
    files = [source / "val_reid_no_images.json", source / "test_reid_no_images.json"]
    rows = {f.name: json.loads(f.read_text()) for f in files}
    placeholder = Image.new("RGB", (8, 16), (90, 90, 90))
    for row in (r for split_rows in rows.values() for r in split_rows):
        (tmp_path / "imgs" / row["file_path"]).parent.mkdir(parents=True, exist_ok=True)
        placeholder.save(tmp_path / "imgs" / row["file_path"])
    marker = convert_dataset(
        ConvertConfig("cuhk-pedes", tuple(map(str, files)), str(tmp_path / "imgs")), tmp_path / "all"
    )
    for split, name in (("val", files[0].name), ("test", files[1].name)):
        assert marker["splits"][split]["images"] == len(rows[name])
        assert marker["splits"][split]["records"] == sum(len(r["captions"]) for r in rows[name])
    # synthesised dialogues on the first 150 real test rows
    subset = tmp_path / "test_subset.json"
    subset.write_text(json.dumps(rows[files[1].name][:150]))
    convert_dataset(
        ConvertConfig("cuhk-pedes", (str(subset),), str(tmp_path / "imgs"), synthesise_dialogues=True),
        tmp_path / "synth",
    )
    gallery = read_gallery(tmp_path / "synth" / "gallery_test.jsonl")
    assert sum("gender" in g.attributes and "upper_colour" in g.attributes for g in gallery) > 0.8 * len(gallery)
    captions = {c for r in rows[files[1].name][:150] for c in r["captions"]}
    samples = read_minterpedes(tmp_path / "synth" / "test.jsonl")
    assert {s.dialogue.description for s in samples} == captions
    assert sum(bool(s.dialogue.qa_turns) for s in samples) > len(samples) / 2


def test_reconverting_a_folder_with_fewer_splits_removes_the_old_ones(tmp_path):
    fmt, annotations, images = tbps(tmp_path)
    out = tmp_path / "out"
    convert_dataset(ConvertConfig(fmt, tuple(map(str, annotations)), str(images)), out)
    test_only = ConvertConfig(fmt, (str(annotations[0] / "test_reid.json"),), str(images))
    marker = convert_dataset(test_only, out)  # the same folder, the same linked images
    assert set(marker["splits"]) == {"test"}
    assert sorted(p.name for p in out.glob("*.jsonl")) == ["gallery_test.jsonl", "test.jsonl"]
    assert marker["rebuild"][:5] == ["data", "convert", "--from", "tbps", "--annotations"]
