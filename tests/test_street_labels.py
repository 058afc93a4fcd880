"""The street video's hand labels (benchmarks/data/vtest_labels.json) and the metrics over them."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import numpy as np
import pytest

from minterpr.errors import DatasetError
from minterpr.ingest.detection import iou_matrix
from minterpr.ingest.evaluate import standard_boxes
from minterpr.ingest.labels import LabelBox, StreetLabels, load_labels, parse_labels
from minterpr.ingest.street_eval import detection_report, match_boxes, match_boxes_reference, track_report

REPO = Path(__file__).resolve().parents[1]
LABELS = REPO / "benchmarks" / "data" / "vtest_labels.json"
VIDEOS = [
    REPO.parent / "shared" / "data" / "video" / "vtest.avi",
    Path("/usr/share/doc/opencv-doc/examples/data/vtest.avi"),
]


def _doc():
    return json.loads(LABELS.read_text(encoding="utf-8"))


def test_the_label_file_is_valid_and_big_enough():
    labels = load_labels(LABELS)
    assert labels.box_count() >= 200
    frames = sorted(labels.frames)
    assert len(frames) >= 25
    assert frames[0] <= 30 and frames[-1] >= labels.video["frames"] - 60  # spread over the whole video
    assert len(labels.described()) >= 12
    seen = {}
    for f, boxes in labels.frames.items():
        for b in boxes:
            seen.setdefault(b.person, []).append(f)
    linked = [p for p, fs in seen.items() if max(fs) - min(fs) >= 100]  # followed for 10 s or more
    assert len(linked) >= 10
    for person in labels.described():
        assert labels.people[person].attributes, person  # the witness answers from them
        assert person in seen


def _error(doc) -> str:
    with pytest.raises(DatasetError) as err:
        parse_labels(doc, "labels.json")
    return str(err.value)


def test_bad_label_files_name_the_field():
    doc = _doc()
    bad = copy.deepcopy(doc)
    bad["frames"][3]["boxes"][1]["box"] = [50, 10, 40, 90]
    assert "frames[3].boxes[1].box" in _error(bad)
    bad = copy.deepcopy(doc)
    bad["frames"][0]["boxes"][0]["person"] = "nobody"
    assert "frames[0].boxes[0].person: 'nobody' is not in people" in _error(bad)
    bad = copy.deepcopy(doc)
    bad["frames"][2]["frame"] = bad["frames"][1]["frame"]
    assert "frames[2].frame" in _error(bad) and "twice" in _error(bad)
    bad = copy.deepcopy(doc)
    first = next(iter(bad["people"]))
    bad["people"][first]["attributes"] = {"upper_colour": ["mauve"]}
    assert f"people.{first}.attributes.upper_colour" in _error(bad)
    bad = copy.deepcopy(doc)
    bad["frames"][0]["boxes"][0]["box"] = [0, 0, 10, 9999]
    assert "frames[0].boxes[0].box" in _error(bad) and "576" in _error(bad)
    assert "schema" in _error({**doc, "schema": "other/1"})
    bad = copy.deepcopy(doc)
    bad["frames"][0]["boxes"][0]["ignore"] = "yes"
    assert "frames[0].boxes[0].ignore" in _error(bad)


def test_a_missing_or_broken_file_is_one_error(tmp_path):
    with pytest.raises(DatasetError, match="not found"):
        load_labels(tmp_path / "none.json")
    (tmp_path / "x.json").write_text("{", encoding="utf-8")
    with pytest.raises(DatasetError, match="not JSON"):
        load_labels(tmp_path / "x.json")


def _random_boxes(rng, n):
    out = []
    for _ in range(n):
        x, y = rng.uniform(0, 100), rng.uniform(0, 100)
        out.append([x, y, x + rng.uniform(5, 30), y + rng.uniform(10, 60)])
    return out


@pytest.mark.parametrize("standardise", [False, True])
def test_matching_agrees_with_the_exhaustive_reference(standardise):
    rng = random.Random(0)
    for _ in range(150):
        gt, dets = _random_boxes(rng, rng.randint(0, 4)), _random_boxes(rng, rng.randint(0, 4))
        threshold = rng.choice([0.1, 0.3, 0.5])
        fast = match_boxes(gt, dets, threshold, standardise=standardise)
        slow = match_boxes_reference(gt, dets, threshold, standardise=standardise)
        assert len(fast) == len(slow)
        if gt and dets:
            a, b = np.asarray(dets, float), np.asarray(gt, float)
            iou = iou_matrix(standard_boxes(a), standard_boxes(b)) if standardise else iou_matrix(a, b)
            total = lambda m: sum(iou[d, g] for d, g in m.items())  # noqa: E731
            assert total(fast) == pytest.approx(total(slow))
        assert len(set(fast.values())) == len(fast)  # one-to-one


def test_matching_prefers_more_pairs_to_a_larger_overlap():
    # one detection overlaps A very well; taking it for A leaves B unmatched; the best is two pairs
    gt = [[0, 0, 10, 10], [5, 0, 15, 10]]
    dets = [[4, 0, 14, 10], [0, 0, 9, 10]]
    assert match_boxes(gt, dets, 0.5) == {0: 1, 1: 0} == match_boxes_reference(gt, dets, 0.5)


def _labels():
    people = {k: None for k in "abc"}
    return StreetLabels(
        {},
        people,
        {
            0: (
                LabelBox("a", (0, 0, 10, 30)),
                LabelBox("b", (50, 0, 60, 30)),
                LabelBox("c", (90, 0, 99, 30), ignore=True),
            ),
            3: (LabelBox("a", (2, 0, 12, 30)), LabelBox("b", (52, 0, 62, 30))),
            6: (LabelBox("a", (4, 0, 14, 30)), LabelBox("b", (54, 0, 64, 30))),
        },
    )


def test_detection_report_counts_ignore_boxes_on_neither_side():
    labels = _labels()
    found = {0: [[0, 0, 10, 30], [90, 0, 99, 30], [200, 0, 210, 30]], 3: [[2, 0, 12, 30]]}  # frame 6: nothing
    r = detection_report(labels, found)
    assert (r.people_boxes, r.detections, r.matched) == (6, 3, 2)
    assert (r.recall, r.precision) == (round(2 / 6, 4), round(2 / 3, 4))


def test_track_report_against_hand_counts():
    labels = _labels()
    a0, b0, a3, b3, a6, b6 = (
        [0, 0, 10, 30],
        [50, 0, 60, 30],
        [2, 0, 12, 30],
        [52, 0, 62, 30],
        [4, 0, 14, 30],
        [54, 0, 64, 30],
    )
    log = [
        (0, a0, 0.9, 0),
        (0, b0, 0.9, 1),
        (3, a3, 0.9, 0),
        (3, b3, 0.9, 0),  # track 0 takes b at frame 3
        (6, a6, 0.9, 0),
        (6, b6, 0.9, 2),
        (6, [300, 0, 310, 30], 0.9, 2),
        (1, a0, 0.9, 5),
    ]  # frame 1: unlabelled
    crops = [(0, a0, 0), (6, a6, 0), (0, b0, 1), (6, b6, 2)]
    r = track_report(labels, log, crops)
    # track 0: a a b a -> 3/4; track 1: b -> 1/1; track 2: b + nobody -> 1/2; purity 5/7
    assert r.tracks == 3 and r.purity == round(5 / 7, 4)
    # a: track 0; b: tracks 0, 1, 2 -> (1 + 3) / 2
    assert r.people == 2 and r.fragmentation == 2.0
    # majority: track 0 -> a (2 crops), track 1 -> b, track 2 -> b: a 2, b 2
    assert (r.crops, r.people_with_crops, r.crops_per_identity) == (4, 2, 2.0)


def _video():
    for path in VIDEOS:
        if path.is_file():
            return path
    pytest.skip("vtest.avi not found (../shared/data/video or Debian's opencv-doc)")


def test_hog_on_a_short_clip_of_the_labelled_video():
    pytest.importorskip("cv2")
    pytest.importorskip("av")
    from minterpr.ingest.detectors import DETECTORS
    from minterpr.ingest.sources import iter_frames, open_source

    video = _video()
    labels = load_labels(LABELS)
    clip = {f: b for f, b in labels.frames.items() if f <= 60}
    short = StreetLabels(labels.video, labels.people, clip)
    detector, found = DETECTORS.create("hog"), {}
    for index, frame in iter_frames(open_source(video)):
        if index in clip:
            found[index] = detector.detect(frame).boxes
        if index >= max(clip):
            break
    assert set(found) == set(clip)
    drawn = detection_report(short, found)
    standard = detection_report(short, found, standardise=True)
    assert drawn.people_boxes == sum(1 for b in clip.values() for x in b if not x.ignore)
    assert 0 < standard.recall <= 1 and standard.matched >= drawn.matched  # HOG's loose boxes fit better standardised
    assert 0 < standard.precision <= 1


def test_label_gallery_cuts_the_labelled_boxes(tmp_path):
    pytest.importorskip("av")
    from PIL import Image

    from minterpr.ingest.street_search import label_gallery, witness_targets

    video = _video()
    labels = load_labels(LABELS)
    short = StreetLabels(labels.video, labels.people, {f: b for f, b in labels.frames.items() if f <= 30})
    images = label_gallery(short, video, tmp_path)
    boxes = [b for bs in short.frames.values() for b in bs if not b.ignore]
    assert len(images) == len(boxes)
    for image, box in zip(images, boxes):
        with Image.open(tmp_path / image.path) as crop:
            assert abs(crop.height - (box.box[3] - box.box[1])) <= 2 and image.person_id == box.person
        assert (image.attributes or {}) == dict(labels.people[box.person].attributes)
    targets = witness_targets(short, images)
    assert {t.person_id for t in targets} <= set(short.described()) and targets
    again = label_gallery(short, video, tmp_path)  # cached: the same images, nothing decoded
    assert again == images
    np.testing.assert_equal(len(list(tmp_path.iterdir())), len(images))


def test_a_witness_told_what_it_remembers_answers_from_that():
    from minterpr.index.gallery_index import GalleryIndex
    from minterpr.interaction.session import AskQuestion
    from minterpr.interaction.simulators import WitnessSimulator
    from minterpr.types import GalleryImage

    target = GalleryImage("a.jpg", "p1")
    index = GalleryIndex([target], np.ones((1, 2), np.float32))
    caption = "A man in a black coat."
    knows = {"lower_type": ("jeans",), "upper_colour": ("black",)}
    user = WitnessSimulator(captions={"a.jpg": caption}, knowledge={"a.jpg": knows}).user(
        target, index, query=0, seed=0
    )
    assert user.describe() == caption
    turn = user.respond(AskQuestion("lower_type", "What was he wearing on his legs?"))
    assert "jeans" in turn.answer.lower()
    plain = WitnessSimulator(captions={"a.jpg": caption}).user(target, index, query=0, seed=0)
    plain.describe()
    assert "jeans" not in plain.respond(AskQuestion("lower_type", "What was he wearing on his legs?")).answer.lower()


def test_detector_gallery_names_crops_by_iou_with_the_labels(tmp_path):
    pytest.importorskip("av")
    from minterpr.ingest.detection import Detections
    from minterpr.ingest.street_search import detector_gallery, witness_targets

    video = _video()
    labels = load_labels(LABELS)
    frame = min(labels.frames)
    short = StreetLabels(labels.video, labels.people, {frame: labels.frames[frame]})
    boxes = short.frames[frame]
    lone = max((b for b in boxes if not b.ignore), key=lambda b: b.box[3] - b.box[1])
    x1, y1, x2, y2 = lone.box
    shifted = (x1 + 0.6 * (x2 - x1), y1, x2 + 0.6 * (x2 - x1), y2)  # IoU 0.25 with the person: a distractor

    class Found:  # a detector returning the boxes it is given on every frame
        def __init__(self, *found):
            self.found = np.array(found, np.float64)

        def detect(self, image):
            return Detections(self.found, np.linspace(0.9, 0.5, len(self.found)))

    # the tallest labelled person and a 10 px speck
    images, heights = detector_gallery(short, video, Found(lone.box, (0, 0, 10, 10)), tmp_path / "a")
    names = {i.path: i.person_id for i in images}
    assert names == {f"f{frame:04d}_d00.jpg": lone.person}  # matched at IoU >= 0.5; the speck is too small to crop
    assert images[0].attributes == (dict(labels.people[lone.person].attributes) or None)
    assert heights[f"f{frame:04d}_d00.jpg"] == pytest.approx(y2 - y1) and (tmp_path / "a" / images[0].path).is_file()
    targets = witness_targets(short, images, heights)
    assert [t.person_id for t in targets] == ([lone.person] if lone.person in short.described() else [])
    # the same box moved 60 % of its width aside: IoU 0.25 with the person, a distractor (if the filter keeps it)
    images, _ = detector_gallery(short, video, Found(shifted), tmp_path / "b")
    assert all(i.person_id == f"unmatched:{frame}:0" and i.attributes is None for i in images)


def test_witness_search_on_a_gallery_with_appearance_vectors(tmp_path, tiny_run, one_torch_thread):
    """The street benchmark's searches with an appearance model: the gallery carries its vectors."""
    pytest.importorskip("av")
    import torch

    from minterpr.ingest.street_search import label_gallery, witness_search
    from minterpr.models.reid import ReidModel, ReidModelConfig
    from minterpr.runtime.appearance import load_appearance
    from minterpr.runtime.run import load_run

    labels = load_labels(LABELS)
    short = StreetLabels(labels.video, labels.people, {f: b for f, b in labels.frames.items() if f <= 30})
    images = label_gallery(short, _video(), tmp_path / "crops")
    torch.manual_seed(0)
    model = ReidModel(ReidModelConfig(image_size=(32, 16))).eval()
    torch.save({"model": model.search_state_dict(), "config": model.config.to_dict()}, tmp_path / "best.pt")
    looks = load_appearance(tmp_path / "best.pt", engine="torch")
    report = witness_search(load_run(tiny_run), short, images, tmp_path / "crops", rounds=1, appearance=looks)
    assert report.protocol["appearance"] == looks.fingerprint and report.extra["num_queries"] >= 1
    # each described person's rank by round: the R@1 of each round is the share at rank 0
    ranks = report.extra["ranks"]
    assert len(ranks) == report.extra["num_queries"] and all(len(r) == 2 for r in ranks.values())
    for r, row in enumerate(report.rounds):
        assert row["r1"] == pytest.approx(100.0 * np.mean([by_round[r] == 0 for by_round in ranks.values()]))
    plain = witness_search(load_run(tiny_run), short, images, tmp_path / "crops", rounds=1)
    assert plain.protocol["appearance"] is None and plain.protocol["label_reading"] is None
    read = witness_search(load_run(tiny_run), short, images, tmp_path / "crops", rounds=1, label_reading=(0.9, 0.0))
    assert read.protocol["label_reading"] == (0.9, 0.0)
    ceiling = witness_search(
        load_run(tiny_run), short, images, tmp_path / "crops", rounds=1, appearance=looks, identity_appearance=1.0
    )
    assert ceiling.protocol["identity_appearance"] == 1.0 and plain.protocol["identity_appearance"] is None
