"""Caption dataset readers (CUHK-PEDES, ICFG-PEDES, RSTPReid, TBPS-CLIP) on synthetic files,
plus a check on the real CUHK-PEDES rows when ../shared/data is present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.helpers import shared_data_dir
from minterpr.data.errors import DataError
from minterpr.data.formats.captions import (
    CaptionRecord,
    caption_stats,
    captions_to_samples,
    detect_caption_format,
    read_caption_dataset,
)


def write(path: Path, rows: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def cuhk_row(pid: int = 1, path: str = "CUHK01/0001.png", split: str = "train", captions=("A man in red.",)) -> dict:
    return {
        "id": pid,
        "file_path": path,
        "split": split,
        "captions": list(captions),
        "processed_tokens": [c.split() for c in captions],
    }


def test_reads_cuhk_pedes_and_filters_split(tmp_path):
    path = write(
        tmp_path / "reid_raw.json",
        [cuhk_row(1, "a.jpg", "train"), cuhk_row(2, "b.jpg", "test", ("x y", "z")), cuhk_row(2, "c.jpg", "test")],
    )
    records = read_caption_dataset(path)
    assert [r.person_id for r in records] == ["cuhk-pedes:1", "cuhk-pedes:2", "cuhk-pedes:2"]
    assert records[1] == CaptionRecord("b.jpg", "cuhk-pedes:2", "test", ("x y", "z"))
    assert [r.path for r in read_caption_dataset(path, split="test")] == ["b.jpg", "c.jpg"]
    assert read_caption_dataset(path, namespace="mine")[0].person_id == "mine:1"


def test_format_detection():
    assert detect_caption_format("reid_raw.json", [cuhk_row()]) == "cuhk-pedes"
    assert detect_caption_format("ICFG-PEDES.json", [cuhk_row()]) == "icfg-pedes"
    icfg = cuhk_row(path="test/0953/0953_010_05_0303afternoon_1622_0.jpg")
    assert detect_caption_format("annotations.json", [icfg]) == "icfg-pedes"
    assert (
        detect_caption_format("x.json", [{"img_path": "a.jpg", "id": 1, "split": "val", "captions": ["a"]}])
        == "rstpreid"
    )
    assert detect_caption_format("val_reid.json", [{"file_path": "a.jpg", "id": 1, "captions": ["a"]}]) == "tbps"
    assert detect_caption_format("data_captions.json", []) == "rstpreid"


def test_rstpreid_uses_img_path(tmp_path):
    path = write(
        tmp_path / "data_captions.json",
        [
            {
                "id": 5,
                "img_path": "0005_c14_0031.jpg",
                "split": "val",
                "captions": ["A woman with a bag.", "She wears black."],
            }
        ],
    )
    (record,) = read_caption_dataset(path)
    assert (record.path, record.person_id, record.split) == ("0005_c14_0031.jpg", "rstpreid:5", "val")
    with pytest.raises(DataError, match="img_path: missing field"):
        read_caption_dataset(write(tmp_path / "b.json", [cuhk_row()]), format="rstpreid")


def test_tbps_split_from_file_name_and_namespace_from_path(tmp_path):
    rows = [
        {"file_path": "CUHK01/1.png", "id": 3, "captions": ["a", "b"], "captions_bt": ["a'", "b'"]},
        {"file_path": "CUHK01/2.png", "id": 4, "captions": ["c"], "captions_bt": []},
    ]
    path = write(tmp_path / "CUHK-PEDES" / "test_reid.json", rows)
    records, report = read_caption_dataset(path, strict=False)
    assert [(r.person_id, r.split) for r in records] == [("cuhk-pedes:3", "test"), ("cuhk-pedes:4", "test")]
    # A captions_bt list of the wrong length is unused here: a warning, not a skip.
    assert report.ok and [(w.line, w.field) for w in report.warnings] == [(2, "captions_bt")]
    other = write(tmp_path / "elsewhere" / "anno.json", rows[:1])
    assert read_caption_dataset(other, format="tbps", split="val")[0].person_id == "tbps:3"
    with pytest.raises(DataError, match="split: missing field"):
        read_caption_dataset(other, format="tbps")


@pytest.mark.parametrize(
    "row, field, reason",
    [
        ([1, 2], "<record>", "expected an object, got array"),
        ({"id": 1, "split": "train", "captions": ["a"]}, "file_path", "missing field"),
        ({"id": True, "file_path": "a.jpg", "split": "train", "captions": ["a"]}, "id", "expected an integer"),
        ({"id": 1, "file_path": "", "split": "train", "captions": ["a"]}, "file_path", "non-empty string"),
        ({"id": 1, "file_path": "a.jpg", "split": "train", "captions": "a man"}, "captions", "expected a list"),
        ({"id": 1, "file_path": "a.jpg", "split": "train", "captions": []}, "captions", "non-empty list"),
        ({"id": 1, "file_path": "a.jpg", "split": "train", "captions": ["ok", "  "]}, "captions", "item 1 is empty"),
        ({"id": 1, "file_path": "a.jpg", "split": "train", "captions": ["ok", 3]}, "captions", "item 1 is integer"),
        (
            {"id": 1, "file_path": "a.jpg", "split": "dev", "captions": ["a"]},
            "split",
            "must be one of train, val, test",
        ),
    ],
)
def test_bad_records_name_record_number_and_field(tmp_path, row, field, reason):
    path = write(tmp_path / "reid_raw.json", [cuhk_row(9, "ok.jpg"), row])
    with pytest.raises(DataError) as info:
        read_caption_dataset(path, format="cuhk-pedes")
    assert (info.value.file, info.value.line, info.value.field) == (str(path), 2, field)
    assert reason in info.value.reason
    records, report = read_caption_dataset(path, format="cuhk-pedes", strict=False)
    assert [r.path for r in records] == ["ok.jpg"] and report.skipped == 1 and report.records_read == 1


def test_lenient_mode_collects_every_problem(tmp_path):
    rows = [cuhk_row(1, "a.jpg"), {"id": 2}, cuhk_row(3, "c.jpg", "nope"), cuhk_row(4, "d.jpg")]
    result = read_caption_dataset(write(tmp_path / "reid_raw.json", rows), strict=False)
    assert [r.person_id for r in result.records] == ["cuhk-pedes:1", "cuhk-pedes:4"]
    assert [(p.line, p.field) for p in result.report.problems] == [(2, "file_path"), (3, "split")]


def test_duplicate_images(tmp_path):
    rows = [cuhk_row(1, "a.jpg"), cuhk_row(1, "a.jpg"), cuhk_row(2, "a.jpg")]
    records, report = read_caption_dataset(write(tmp_path / "reid_raw.json", rows), strict=False)
    assert len(records) == 2  # the same image for the same person is kept, with a warning
    assert [(w.line, w.reason) for w in report.warnings] == [(2, "image repeats record 1")]
    assert [(p.line, p.reason) for p in report.problems] == [(3, "image already given to cuhk-pedes:1 by record 1")]


def test_broken_json_and_wrong_root(tmp_path):
    bad = tmp_path / "reid_raw.json"
    bad.write_text('[{"id": 1,\n "file_path": }]', encoding="utf-8")
    with pytest.raises(DataError) as info:
        read_caption_dataset(bad)
    assert info.value.line == 2 and "invalid JSON" in info.value.reason
    assert read_caption_dataset(bad, strict=False).report.skipped == 1
    with pytest.raises(DataError, match="expected a JSON array of records, got object"):
        read_caption_dataset(write(tmp_path / "o.json", {"images": []}))


def test_check_images(tmp_path):
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "a.jpg").write_bytes(b"x")
    path = write(tmp_path / "reid_raw.json", [cuhk_row(1, "a.jpg"), cuhk_row(2, "b.jpg")])
    records, report = read_caption_dataset(path, strict=False, check_images=True, image_root=tmp_path / "imgs")
    assert [r.path for r in records] == ["a.jpg"]
    assert report.problems[0].line == 2 and "image not found" in report.problems[0].reason
    # Without image_root the paths are relative to the file's own folder.
    (tmp_path / "a.jpg").write_bytes(b"x")
    assert len(read_caption_dataset(path, strict=False, check_images=True).records) == 1


def test_bad_arguments(tmp_path):
    path = write(tmp_path / "reid_raw.json", [cuhk_row()])
    with pytest.raises(ValueError, match="unknown caption format 'coco'"):
        read_caption_dataset(path, format="coco")
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        read_caption_dataset(path, split="dev")


def test_captions_to_samples_and_stats():
    records = [
        CaptionRecord("a.jpg", "cuhk-pedes:1", "test", ("a man in red", "red coat")),
        CaptionRecord("b.jpg", "cuhk-pedes:2", "test", ("a woman",)),
    ]
    samples = captions_to_samples(records)
    assert [(s.target_path, s.person_id, s.dialogue.description) for s in samples] == [
        ("a.jpg", "cuhk-pedes:1", "a man in red"),
        ("a.jpg", "cuhk-pedes:1", "red coat"),
        ("b.jpg", "cuhk-pedes:2", "a woman"),
    ]
    assert all(s.dialogue.num_rounds == 1 for s in samples)
    assert samples[1].extra == {"split": "test", "caption_index": 1}
    assert caption_stats(records) == {
        "records": 2,
        "identities": 2,
        "captions": 3,
        "splits": {"test": 2},
        "captions_per_record": {"min": 1, "mean": 1.5, "median": 1.5, "max": 2},
        "caption_words": {"min": 2, "mean": 2.67, "median": 2, "max": 4},
    }
    assert caption_stats([])["caption_words"] is None


@pytest.mark.shared_data
@pytest.mark.parametrize("split", ["val", "test"])
def test_real_cuhk_pedes_rows(split):
    path = shared_data_dir() / "cuhk_pedes_captions" / f"{split}_reid_no_images.json"
    if not path.is_file():
        pytest.skip(f"real CUHK-PEDES rows not found at {path} (set MINTERPR_SHARED_DATA)")
    records, report = read_caption_dataset(path, strict=False)
    assert report.ok and report.records_read == len(records) > 2000
    assert {r.split for r in records} == {split}
    assert all(r.person_id.startswith("cuhk-pedes:") and r.captions for r in records)
    stats = caption_stats(records)
    assert stats["identities"] < stats["records"] < stats["captions"] and stats["splits"] == {split: len(records)}
    words = stats["caption_words"]
    assert 5 < words["min"] <= words["median"] <= words["max"]
    assert len(captions_to_samples(records)) == stats["captions"]
