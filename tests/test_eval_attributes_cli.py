"""``minterpr eval-attributes``: the report on a tiny world with a tiny model, and bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from minterpr.cli.main import main
from minterpr.data.formats.gallery import read_gallery, write_gallery
from minterpr.data.synthetic.dataset import SyntheticDatasetConfig, build_synthetic_dataset
from minterpr.data.synthetic.world import SyntheticWorldConfig
from minterpr.evaluation.attribute_metrics import attribute_metrics
from minterpr.evaluation.attribute_thresholds import balanced_thresholds
from minterpr.models import create_model, save_model
from minterpr.runtime.run import load_run

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> tuple[Path, Path]:
    """(dataset folder, run folder): a tiny synthetic world and an untrained tiny model."""
    root = tmp_path_factory.mktemp("ea")
    config = SyntheticWorldConfig(
        train_identities=2, val_identities=4, test_identities=4, image_size=(64, 32), workers=1
    )
    build_synthetic_dataset(root / "data", SyntheticDatasetConfig(world=config), progress=False)
    save_model(create_model("tiny"), root / "run" / "model.pt")
    return root / "data", root / "run"


def probs_of(run: Path, data: Path, split: str) -> tuple[list, np.ndarray]:
    images = read_gallery(data / f"gallery_{split}.jsonl")
    index = load_run(run).backend().index_images(images, root=str(data))
    return index.images, index.attribute_probs


def test_report_matches_the_metrics_of_the_model(world, tmp_path, capsys):
    data, run = world
    out = tmp_path / "report.json"
    assert (
        main(
            [
                "eval-attributes",
                "--run",
                str(run),
                "--gallery",
                str(data / "gallery_test.jsonl"),
                "--json",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()  # the table on stdout; "wrote" is a log line (stderr), silenced by --quiet
    assert "mA " in captured.out and "majority" in captured.out and "wrote" not in captured.out + captured.err
    report = json.loads(out.read_text())
    images, probs = probs_of(run, data, "test")
    expected = attribute_metrics(probs, images).to_dict()
    assert report["label_based"]["mA"] == pytest.approx(expected["label_based"]["mA"])
    assert report["instance_based"] == pytest.approx(expected["instance_based"])
    assert report["images"] == len(images) and report["threshold"] == 0.5
    assert set(report) == {
        "protocol",
        "images",
        "instances",
        "threshold",
        "label_based",
        "instance_based",
        "slots",
        "slot_mean",
        "labels",
    }
    assert report["protocol"]["thresholds"] == {"mode": "fixed", "value": 0.5}
    assert len(report["labels"]) == 120 and set(report["slots"]["gender"]) == {
        "multi",
        "images",
        "accuracy",
        "majority_value",
        "majority_accuracy",
    }


def test_val_thresholds_come_from_the_val_gallery_and_json_to_stdout(world, capsys):
    data, run = world
    assert (
        main(
            [
                "eval-attributes",
                "--run",
                str(run),
                "--gallery",
                str(data / "gallery_test.jsonl"),
                "--json",
                "-",
                "--thresholds",
                "val",
                "--quiet",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    report = json.loads(captured.out)  # stdout is the JSON alone; the table went to stderr
    assert "mA " in captured.err
    assert report["threshold"] == "per_label" and report["protocol"]["thresholds"]["mode"] == "val"
    val_images, val_probs = probs_of(run, data, "val")
    thresholds = balanced_thresholds(val_probs, val_images)
    assert [row["threshold"] for row in report["labels"]] == pytest.approx(thresholds.tolist())
    images, probs = probs_of(run, data, "test")
    assert report["label_based"]["mA"] == pytest.approx(attribute_metrics(probs, images, thresholds).mA)


def one_line_error(capsys, argv: list[str], *fragments: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("minterpr eval-attributes: error:"), err
    for fragment in fragments:
        assert fragment in err, err


def test_bad_input_is_one_line_exit_2(world, tmp_path, capsys):
    data, run = world
    base = ["eval-attributes", "--run", str(run), "--quiet", "--gallery"]
    one_line_error(
        capsys,
        ["eval-attributes", "--run", str(tmp_path / "none"), "--gallery", str(data / "gallery_test.jsonl")],
        "no such run directory",
    )
    one_line_error(capsys, base + [str(tmp_path / "missing.jsonl")], "no such gallery manifest")
    one_line_error(
        capsys,
        base
        + [str(data / "gallery_test.jsonl"), "--thresholds", "val", "--val-gallery", str(data / "gallery_test.jsonl")],
        "would see the answers",
    )
    own = tmp_path / "own"
    own.mkdir()
    images = read_gallery(data / "gallery_test.jsonl")
    write_gallery([type(im)(im.path, im.person_id) for im in images], own / "gallery_test.jsonl")
    one_line_error(
        capsys, base + [str(own / "gallery_test.jsonl"), "--image-root", str(data)], "no image has attribute labels"
    )
    one_line_error(capsys, base + [str(own / "gallery_test.jsonl"), "--thresholds", "val"], "gallery_val.jsonl")
    write_gallery(
        images[:2] + [type(images[0])("images/none.jpg", "x:9", attributes=images[0].attributes)],
        own / "gallery_test.jsonl",
    )
    one_line_error(
        capsys,
        base + [str(own / "gallery_test.jsonl"), "--image-root", str(data)],
        "needs every gallery image",
        "none.jpg",
    )
    (own / "gallery_test.jsonl").write_text('{"path": 3}\n')
    one_line_error(capsys, base + [str(own / "gallery_test.jsonl")], "gallery_test.jsonl:1")
    with pytest.raises(SystemExit) as exit_info:
        main(base + [str(data / "gallery_test.jsonl"), "--thresholds", "2"])
    assert exit_info.value.code == 2 and "between 0 and 1" in capsys.readouterr().err


def test_a_changed_build_is_refused(world, tmp_path, capsys):
    data, run = world
    copy = tmp_path / "copy"
    shutil.copytree(data, copy)
    with open(copy / "gallery_test.jsonl", "a") as f:
        f.write("\n")
    one_line_error(
        capsys, ["eval-attributes", "--run", str(run), "--gallery", str(copy / "gallery_test.jsonl")], "rebuild it with"
    )


def test_calibrated_slot_answers_are_reported_beside_the_raw_ones(world, tmp_path, capsys):
    """`minterpr calibrate slots` stores the record with the model; eval-attributes then reports raw and
    calibrated slot accuracy, the calibrated one never under the majority on the split it was fitted on."""
    data, run = world
    own = tmp_path / "run"
    shutil.copytree(run, own)
    calibrate = ["calibrate", "slots", "--run", str(own), "--data", str(data), "--quiet"]
    assert main(calibrate + ["--split", "test"]) == 2 and "test measures it" in capsys.readouterr().err
    assert main(calibrate) == 0
    assert "slot answers fitted on val" in capsys.readouterr().out
    record = load_run(own).extras.slot_answers
    assert record is not None and record.split == "val" and record.slots
    for split in ("val", "test"):
        out = tmp_path / f"{split}.json"
        assert (
            main(
                [
                    "eval-attributes",
                    "--run",
                    str(own),
                    "--gallery",
                    str(data / f"gallery_{split}.jsonl"),
                    "--json",
                    str(out),
                    "--quiet",
                ]
            )
            == 0
        )
        assert "slot answers (calibrated on val)" in capsys.readouterr().out
        report = json.loads(out.read_text())
        mean = report["slot_answers"]["mean"]
        assert mean["raw"] == pytest.approx(report["slot_mean"]["accuracy"])  # the same slots, the same argmax
        assert mean["majority"] == pytest.approx(report["slot_mean"]["majority_accuracy"])
        if split == "val":
            assert mean["calibrated"] >= mean["majority"] - 1e-9
            assert all(s["calibrated"] >= s["majority"] - 1e-9 for s in report["slot_answers"]["slots"].values())
    assert (
        main(
            [
                "eval-attributes",
                "--run",
                str(run),
                "--gallery",
                str(data / "gallery_val.jsonl"),
                "--json",
                "-",
                "--quiet",
            ]
        )
        == 0
    )
    assert "slot_answers" not in json.loads(capsys.readouterr().out)  # a model without the record: raw only
