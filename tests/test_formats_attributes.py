"""Attribute dataset readers (PETA, PA-100K, Market-1501 attributes) on synthetic files, plus
checks on the real PETA and PA-100K copies when ../shared/data is present."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import numpy as np
import pytest

from support.helpers import shared_data_dir
from minterpr.data.errors import DataError
from minterpr.data.formats.market import market_images, parse_market_name, read_market_attributes
from minterpr.data.formats.pa100k import read_pa100k
from minterpr.data.formats.peta import peta_namespace, peta_subsets, read_peta
from minterpr.data.label_maps import PA100K_LABELS, market1501_codes
from minterpr.language.ontology import ONTOLOGY


def savemat(path: Path, variables: dict) -> None:
    """scipy.io.savemat, skipping the test when scipy (the [mat] extra) is not installed."""
    pytest.importorskip("scipy.io").savemat(path, variables)


# ---------------------------------------------------------------------------------------- PETA
def make_subset(base: Path, subset: str, labels: str, files: list[str], newline: str = "\n") -> None:
    archive = base / "PETA dataset" / subset / "archive"
    archive.mkdir(parents=True)
    (archive / "Label.txt").write_bytes(labels.replace("\n", newline).encode())
    for name in files:
        (archive / name).write_bytes(b"")  # the reader never opens the images


@pytest.fixture
def peta(tmp_path: Path) -> Path:
    make_subset(
        tmp_path,
        "3DPeS",
        "1 personalMale upperBodyRed\n2 personalFemale\n",
        ["001_3_FRAME_26_RGB.bmp", "001_B_12_FRAME_2_RGB.bmp", "2_4_FRAME_1_RGB.bmp"],
    )
    make_subset(
        tmp_path,
        "GRID",
        "0001 hairLong\n0002 carryingBackpack\n0003 hairShort\n",
        [
            "0001_1_25004_107_32_106_221.jpeg",
            "0001_5_25023_1_2_3_4.jpeg",
            "0002_2_1_2_3_4_5.jpeg",
            "0004_3_1_2_3_4_5.jpeg",
        ],
        newline="\r\n",
    )
    make_subset(
        tmp_path, "MIT", "00001 personalMale\n00002 personalFemale\n", ["00001_male_back.jpg", "00002_female_fore.jpg"]
    )
    make_subset(tmp_path, "SARC3D", "001 personalMale\n", ["001_front.bmp", "001_Right.bmp", "001_left.bmp"])
    make_subset(tmp_path, "TownCentre", "7 carryingNothing\n", ["7_16.jpg", "7_8.jpg"])
    make_subset(tmp_path, "CUHK", "0005.jpg upperBodyBlue\n0006.png hairLong\n", ["0005.jpg", "0006.jpg"])
    return tmp_path


# PETA's closed slots: a label row that names none of their values states the default
CLOSED = {"headwear": ("none",), "lower_pattern": ("plain",), "upper_pattern": ("plain",)}


def by_path(images):
    return {Path(im.path).name: im for im in images}


def test_peta_identities_cameras_views(peta):
    images, report = read_peta(peta, strict=False)
    assert peta_subsets(peta) == ["3DPeS", "CUHK", "GRID", "MIT", "SARC3D", "TownCentre"]
    found = by_path(images)
    im = found["001_3_FRAME_26_RGB.bmp"]
    # Label key "1" matches file prefix "001": ids are compared as numbers.
    assert (im.person_id, im.camera_id, im.path) == ("peta-3dpes:001", None, "3DPeS/archive/001_3_FRAME_26_RGB.bmp")
    assert im.attributes == {**CLOSED, "gender": ("male",), "upper_colour": ("red",)}
    assert found["001_B_12_FRAME_2_RGB.bmp"].person_id == "peta-3dpes:001"
    assert found["2_4_FRAME_1_RGB.bmp"].attributes == {**CLOSED, "gender": ("female",)}
    assert found["0001_5_25023_1_2_3_4.jpeg"].camera_id == "peta-grid:cam5"
    assert found["0002_2_1_2_3_4_5.jpeg"].attributes == {**CLOSED, "carried": ("backpack",)}  # CRLF label file
    assert (found["00002_female_fore.jpg"].view, found["00001_male_back.jpg"].view) == ("front", "back")
    assert [found[n].view for n in ("001_front.bmp", "001_Right.bmp", "001_left.bmp")] == ["front", "side", "side"]
    assert found["7_8.jpg"].camera_id == "peta-towncentre:cam1"
    # CUHK: one identity per image, keyed by file name (a .png key still finds the .jpg).
    assert (found["0005.jpg"].person_id, found["0006.jpg"].attributes) == (
        "peta-cuhk:0005",
        {**CLOSED, "hair_length": ("long",)},
    )
    # GRID 0004 has no label row: kept without attributes; GRID 0003 has no image.
    assert found["0004_3_1_2_3_4_5.jpeg"].attributes is None
    assert sorted((Path(w.file).name, w.line, w.field) for w in report.warnings) == [
        ("0004_3_1_2_3_4_5.jpeg", 0, "labels"),
        ("Label.txt", 3, "id"),
    ]
    assert report.ok and report.records_read == len(images) == 16


def test_peta_root_forms_and_subset_choice(peta):
    images = read_peta(peta / "PETA dataset", subsets=["MIT"])
    assert [im.person_id for im in images] == ["peta-mit:00001", "peta-mit:00002"]
    with pytest.raises(ValueError, match="unknown PETA subset 'VIPeR'"):
        read_peta(peta, subsets=["VIPeR"])
    with pytest.raises(FileNotFoundError):
        read_peta(peta / "nowhere")
    assert peta_namespace("i-LID") == "peta-ilid"


def test_peta_unknown_label_and_duplicate_key(tmp_path):
    make_subset(
        tmp_path,
        "i-LID",
        "0001 personalMale\n\n0002 upperBodyTartan\n0001 hairLong\n",
        ["0001_001.jpg", "0002_001.jpg"],
    )
    with pytest.raises(DataError) as info:
        read_peta(tmp_path)
    assert (info.value.line, info.value.field) == (3, "labels") and "'upperBodyTartan'" in info.value.reason
    images, report = read_peta(tmp_path, strict=False)
    assert [(p.line, p.field) for p in report.problems] == [(3, "labels"), (4, "id")]
    assert by_path(images)["0001_001.jpg"].attributes == {**CLOSED, "gender": ("male",)}
    assert by_path(images)["0002_001.jpg"].attributes is None  # its row was rejected


def test_peta_bad_file_name_and_unknown_subset(tmp_path):
    make_subset(tmp_path, "CAVIAR4REID", "0001 personalMale\n", ["0001_001.jpg", "photo.jpg", "notes.txt"])
    make_subset(tmp_path, "PRID", "3 personalFemale\n", ["0003_c1_x.png"])
    with pytest.raises(DataError, match="photo.jpg:0: file name: does not follow the CAVIAR4REID naming rule"):
        read_peta(tmp_path)
    images, report = read_peta(tmp_path, strict=False)
    assert sorted(im.person_id for im in images) == ["peta-caviar4reid:0001", "peta-prid:0003"]
    assert report.skipped == 1 and any("no file-name rule for 'PRID'" in w.reason for w in report.warnings)


@pytest.mark.shared_data
def test_real_peta():
    root = shared_data_dir() / "peta"
    if not root.is_dir():
        pytest.skip(f"real PETA not found at {root} (set MINTERPR_SHARED_DATA)")
    images, report = read_peta(root, strict=False)
    assert report.ok, report.problems[:3]
    counts = collections.Counter(im.path.split("/")[0] for im in images)
    # Image counts of shared/data/README.md.
    assert counts == {
        "3DPeS": 1012,
        "CAVIAR4REID": 1220,
        "GRID": 1275,
        "MIT": 888,
        "SARC3D": 200,
        "TownCentre": 6967,
        "i-LID": 477,
        "CUHK": 4563,
    }
    assert all(im.attributes for im in images)  # every image got its identity's labels
    assert {w.field for w in report.warnings} <= {"id"}  # only label rows without images
    for im in images[::97]:
        assert ONTOLOGY.validate(dict(im.attributes)) == im.attributes


# ---------------------------------------------------------------------------------------- PA-100K
def cells(strings) -> np.ndarray:
    out = np.empty((len(strings), 1), dtype=object)
    for i, s in enumerate(strings):
        out[i, 0] = s if s else np.zeros((0, 0))
    return out


NAMES = list(PA100K_LABELS)  # the 26 attributes in the release's order


def pa_row(**on: int) -> list[int]:
    return [on.get(n, 0) for n in NAMES]


def write_pa100k(path: Path, **overrides) -> Path:
    mat = {
        "attributes": cells(NAMES),
        "train_images_name": cells(["000001.jpg", "000002.jpg"]),
        "train_label": np.array(
            [pa_row(Female=1, Front=1, Backpack=1, **{"Age18-60": 1}), pa_row(Back=1, Side=1)], dtype=np.uint8
        ),
        "val_images_name": cells(["000003.jpg"]),
        "val_label": np.array([pa_row(Side=1)], dtype=np.uint8),
        "test_images_name": cells(["", "000004.jpg"]),
        "test_label": np.array([pa_row(), pa_row(Hat=1)], dtype=np.uint8),
    }
    mat.update(overrides)
    savemat(path, mat)
    return path


def test_pa100k_attributes_views_negatives(tmp_path):
    images, report = read_pa100k(write_pa100k(tmp_path / "annotation.mat"), strict=False)
    found = by_path(images)
    assert list(found) == ["000001.jpg", "000002.jpg", "000003.jpg", "000004.jpg"]
    first = found["000001.jpg"]
    assert (first.person_id, first.view, first.camera_id) == ("pa100k:000001", "front", None)
    assert first.attributes == {"gender": ("female",), "age": ("adult",), "carried": ("backpack",)}
    assert found["000002.jpg"].view is None  # two view labels: unknown
    assert found["000002.jpg"].attributes == {"gender": ("male",)}  # Female = 0 means male
    assert found["000003.jpg"].view == "side"
    assert [(w.line, w.field) for w in report.warnings] == [(1, "test_images_name")]  # the empty name
    assert [im.path for im in read_pa100k(tmp_path / "annotation.mat", splits=["val"])] == ["000003.jpg"]


def test_pa100k_image_root(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    for name in ("000001.jpg", "000003.jpg", "000099.jpg"):
        (root / name).write_bytes(b"")
    images, report = read_pa100k(write_pa100k(tmp_path / "annotation.mat"), image_root=root, strict=False)
    assert [im.path for im in images] == ["000001.jpg", "000003.jpg"]
    reasons = [w.reason for w in report.warnings]
    assert sum("image not found" in r for r in reasons) == 2 and sum("not listed" in r for r in reasons) == 1


def test_pa100k_errors(tmp_path):
    bad = write_pa100k(tmp_path / "a.mat", val_label=np.array([pa_row(Side=2)], dtype=np.uint8))
    with pytest.raises(DataError, match=r"a.mat:1: val_label: labels must be 0 or 1, got \[0, 2\]"):
        read_pa100k(bad)
    images, report = read_pa100k(bad, strict=False)
    assert len(images) == 3 and report.skipped == 1
    with pytest.raises(DataError, match=r"train_label: expected shape \(2, 26\)"):
        read_pa100k(write_pa100k(tmp_path / "b.mat", train_label=np.zeros((2, 25), dtype=np.uint8)))
    with pytest.raises(DataError, match="unknown PA-100K attribute 'Tattoo'"):
        read_pa100k(write_pa100k(tmp_path / "c.mat", attributes=cells(NAMES[:-1] + ["Tattoo"])))
    with pytest.raises(ValueError, match="unknown PA-100K split 'dev'"):
        read_pa100k(bad, splits=["dev"])


def test_mat_readers_name_the_extra_without_scipy(tmp_path, monkeypatch):
    path = write_pa100k(tmp_path / "annotation.mat")
    monkeypatch.setitem(sys.modules, "scipy.io", None)  # makes "from scipy.io import ..." fail
    with pytest.raises(ImportError, match=r"pip install 'minterpr\[mat\]'"):
        read_pa100k(path)


@pytest.mark.shared_data
def test_real_pa100k():
    root = shared_data_dir() / "pa100k"
    if not (root / "annotation.mat").is_file():
        pytest.skip(f"real PA-100K not found at {root} (set MINTERPR_SHARED_DATA)")
    images, report = read_pa100k(root / "annotation.mat", image_root=root / "data", strict=False)
    assert report.ok and len(images) == len({im.person_id for im in images}) > 1900
    assert any(w.field == "test_images_name" and "empty" in w.reason for w in report.warnings)
    assert all(im.view in ("front", "side", "back") and "gender" in im.attributes for im in images)


# ---------------------------------------------------------------------------------------- Market
def market_split(ids, codes=None, **fields):
    codes = codes or {}
    split = {n: np.array([[codes.get(n, 1) for _ in ids]], dtype=np.uint8) for n in market1501_codes()}
    split["image_index"] = np.array([list(ids)], dtype=object)
    split.update(fields)
    return split


def write_market(path: Path, train=None, test=None) -> Path:
    train = (
        train
        if train is not None
        else market_split(["0002", "0007"], {"gender": 2, "age": 2, "upred": 2, "clothes": 2})
    )
    test = test if test is not None else market_split(["0001"], {"backpack": 2, "hat": 2, "age": 4})
    savemat(path, {"market_attribute": {"train": train, "test": test}})
    return path


def test_market_attributes(tmp_path):
    attrs = read_market_attributes(write_market(tmp_path / "market_attribute.mat"))
    assert sorted(attrs) == ["market1501:0001", "market1501:0002", "market1501:0007"]
    assert attrs["market1501:0002"] == {
        "age": ("young",),
        "gender": ("female",),
        "hair_length": ("short",),
        "headwear": ("none",),
        "lower_length": ("long",),
        "lower_type": ("trousers",),
        "sleeve_length": ("long",),
        "upper_colour": ("red",),
    }
    assert attrs["market1501:0001"]["carried"] == ("backpack",) and attrs["market1501:0001"]["headwear"] == ("hat",)
    assert list(read_market_attributes(tmp_path / "market_attribute.mat", splits=["test"])) == ["market1501:0001"]


def test_market_attribute_errors(tmp_path):
    bad_code = write_market(tmp_path / "a.mat", test=market_split(["0001", "0003"], {"age": 5}))
    with pytest.raises(DataError, match=r"a.mat:1: test.age: code must be one of \[1, 2, 3, 4\], got 5"):
        read_market_attributes(bad_code)
    attrs, report = read_market_attributes(bad_code, strict=False)
    assert len(attrs) == 2 and [(p.line, p.field) for p in report.problems] == [(1, "test.age"), (2, "test.age")]
    short = market_split(["0001", "0003"])
    short["hair"] = np.array([[1]], dtype=np.uint8)
    with pytest.raises(DataError, match="test.hair: has 1 entries, image_index has 2"):
        read_market_attributes(write_market(tmp_path / "b.mat", test=short))
    missing = market_split(["0001"])
    del missing["gender"]
    with pytest.raises(DataError, match="test.gender: missing attribute field"):
        read_market_attributes(write_market(tmp_path / "c.mat", test=missing))
    with pytest.raises(DataError, match="identity 0002 listed twice"):
        read_market_attributes(write_market(tmp_path / "d.mat", test=market_split(["0002"])))
    extra = write_market(tmp_path / "e.mat", test=market_split(["0001"], shoes=np.array([[1]])))
    assert [w.field for w in read_market_attributes(extra, strict=False)[1].warnings] == ["test.shoes"]


def test_market_images(tmp_path):
    attrs = read_market_attributes(write_market(tmp_path / "m.mat"))
    folder = tmp_path / "bounding_box_test"
    folder.mkdir()
    for name in (
        "0002_c1s1_000451_03.jpg",
        "0000_c3s1_000151_01.jpg",
        "-1_c1s1_000401_03.jpg",
        "0009_c6s2_000001_01.jpg",
    ):
        (folder / name).write_bytes(b"")
    images, report = market_images(folder, attrs, strict=False)
    found = by_path(images)
    assert sorted(found) == ["0000_c3s1_000151_01.jpg", "0002_c1s1_000451_03.jpg", "0009_c6s2_000001_01.jpg"]
    assert (found["0002_c1s1_000451_03.jpg"].camera_id, found["0002_c1s1_000451_03.jpg"].attributes) == (
        "market1501:c1",
        attrs["market1501:0002"],
    )
    assert found["0000_c3s1_000151_01.jpg"].person_id == "market1501:distractor-c3s1_000151_01"
    assert found["0009_c6s2_000001_01.jpg"].attributes is None
    assert sorted(w.field for w in report.warnings) == ["pid", "pid"]  # junk skipped, 0009 unlabelled
    assert parse_market_name("x/0002_c1s1_000451_03.jpg") == {"pid": 2, "cam": 1, "seq": 1, "frame": 451, "box": 3}
    with pytest.raises(DataError, match="expected <pid>_c<cam>s<seq>_<frame>_<n>.jpg"):
        market_images(["a/b/0002.jpg"])
