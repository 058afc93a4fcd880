"""Ingestion with an appearance model: every crop's appearance vector stored beside its embedding,
track spans kept, tracklets linked within a camera across occlusions and across cameras (and only
where time, place and the same-person probability allow), a gallery whose vectors ingestion
cannot continue refused in one line before any work."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from minterpr.errors import DatasetError, InputError
from minterpr.index.store.gallery_append import rewrite_metadata
from minterpr.index.store.gallery_store import open_gallery
from minterpr.ingest import IngestOptions, ingest
from minterpr.ingest.links import LinkConfig, link_tracklets, linked_rows, relink
from minterpr.ingest.synthetic_video import SyntheticVideoConfig, render_video
from minterpr.interaction.appearance import SamePersonCalibration, write_same_person
from minterpr.models import create_model, save_model
from minterpr.models.reid import ReidModel, ReidModelConfig
from minterpr.runtime.pipeline import load_pipeline

pytestmark = pytest.mark.usefixtures("one_torch_thread")
VIDEO = SyntheticVideoConfig(people=3, frames=24, size=(300, 400), person_height=150, seed=2)
OPTIONS = IngestOptions(camera="test:cam1", start="2026-12-01T10:00:00", every=2, chunk_frames=8)
# every pair "probably the same person": the links then follow time and place alone
SURE = SamePersonCalibration(scale=0.0, bias=5.0, base_rate=0.01, pairs=10, split="val", auc=50.0)
# P = sigmoid(20 c - 14): 0.5 at cosine 0.7, 0.88 at 0.8, 0.998 at 1
FIT = SamePersonCalibration(scale=20.0, bias=-14.0, base_rate=0.01, pairs=10, split="val", auc=90.0)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    save_model(create_model("tiny"), folder / "model.pt", extra={"epoch": 1})
    reid = ReidModel(ReidModelConfig(image_size=(64, 32))).eval()
    (folder / "reid").mkdir()
    torch.save({"model": reid.search_state_dict(), "config": reid.config.to_dict()}, folder / "reid" / "best.pt")
    write_same_person(folder / "reid" / "best.pt", SURE)
    return folder


@pytest.fixture(scope="module")
def ingested(models, tmp_path_factory):
    video = tmp_path_factory.mktemp("video") / "walk.mp4"
    render_video(video, VIDEO)
    pipeline = load_pipeline(models, appearance=models / "reid" / "best.pt")
    gallery = tmp_path_factory.mktemp("galleries") / "walk"
    return gallery, ingest(video, gallery, run=pipeline, options=OPTIONS), pipeline, video


def test_crops_get_appearance_vectors_spans_and_link_groups(ingested):
    gallery, result, pipeline, _ = ingested
    stored = open_gallery(gallery)
    assert result.rows_added > 0 and stored.index.appearance.shape == (result.rows_total, 512)
    fingerprint = pipeline.appearance.fingerprint  # searched through the store's backend, as the embeddings are
    assert stored.manifest.appearance == {"dim": 512, "model_fingerprint": fingerprint, "vector_backend": "exact"}
    assert len(stored.index.appearance_vectors) == result.rows_total
    paths = [str(gallery / image.path) for image in stored.index.images]
    direct, _, _ = pipeline.appearance.embed_files(paths)
    assert np.allclose(stored.index.appearance, direct, atol=1e-5)  # the stored row is the crop's own vector
    for meta in stored.metadata:
        t0, t1 = meta["track_span"][:2]
        assert t0 <= meta["offset_s"] <= t1 and meta["link"].startswith(f"{result.job}:t")
    # no group holds two tracks that were on screen at once
    spans: dict[str, dict[int, list[float]]] = {}
    for meta in stored.metadata:
        spans.setdefault(meta["link"], {})[meta["track"]] = meta["track_span"][:2]
    for tracks in spans.values():
        ordered = sorted(tracks.values())
        assert all(a[1] < b[0] for a, b in zip(ordered, ordered[1:]))


def test_a_gallery_ingestion_cannot_continue_is_refused_before_any_work(ingested, models, tmp_path):
    gallery, _, _, video = ingested
    plain = load_pipeline(models)
    with pytest.raises(DatasetError, match="has appearance vectors .*ingest with that appearance model"):
        ingest(video, gallery, run=plain, options=OPTIONS)
    bare = tmp_path / "bare"
    ingest(video, bare, run=plain, options=OPTIONS)
    jobs_before = sorted(p.name for p in (bare / "ingest").iterdir())
    with pytest.raises(DatasetError, match=r"no appearance vectors.*`minterpr index build --update --out "):
        ingest(video, bare, run=ingested[2], options=OPTIONS)
    assert sorted(p.name for p in (bare / "ingest").iterdir()) == jobs_before
    with pytest.raises(DatasetError, match=r"linking tracklets needs: add them with `minterpr index build --update`"):
        relink(bare, SURE)
    with pytest.raises(InputError, match="metadata records for a store of"):
        rewrite_metadata(bare, [])


def _row(job, camera, track, t0, t1, x, start="2026-12-01T10:00:00"):
    box = [x, 0.0, x + 20.0, 60.0]
    return {
        "job": job,
        "camera": camera,
        "track": track,
        "offset_s": t0,
        "time": start,
        "track_span": [t0, t1, *box, *box],
    }


def _unit(angle_deg):
    a = np.radians(angle_deg)
    return [np.cos(a), np.sin(a)]


def test_occlusion_links_need_a_short_gap_a_near_box_and_a_likely_same_person():
    rows = [
        _row("j", "c", 0, 0.0, 2.0, 0.0),
        _row("j", "c", 1, 3.0, 5.0, 30.0),  # 1 s later, half a box height away, cosine 0.98: linked
        _row("j", "c", 2, 6.0, 8.0, 400.0),  # right after track 1 but far away
        _row("j", "c", 3, 20.0, 22.0, 30.0),  # near, but 15 s later
        _row("j", "c", 4, 5.5, 7.0, 30.0),
    ]  # near and soon, but cosine 0.5 with track 1
    vectors = np.array([_unit(0), _unit(10), _unit(12), _unit(12), _unit(70)], np.float32)
    linked = link_tracklets(rows, vectors, FIT)
    assert [m["link"] for m in linked] == ["j:t0", "j:t0", "j:t2", "j:t3", "j:t4"]
    assert linked[0]["link_p"] == linked[1]["link_p"] > 0.9 and "link_p" not in linked[2]
    assert linked_rows(linked, 1) == [0, 1] and linked_rows(linked, 3) == [3]
    assert link_tracklets(rows, vectors, FIT, LinkConfig(occlusion_gap_s=20.0))[3]["link"] == "j:t0"


def test_camera_links_need_known_times_a_plausible_gap_and_a_higher_probability():
    rows = [
        _row("a", "cam1", 0, 0.0, 10.0, 0.0),
        _row("b", "cam2", 0, 0.0, 10.0, 0.0, start="2026-12-01T10:01:00"),  # 50 s after, cosine 0.99
        _row("c", "cam3", 0, 0.0, 10.0, 0.0, start="2026-12-01T12:00:00"),  # two hours after
        _row("d", "cam4", 0, 0.0, 60.0, 0.0, start="2026-12-01T10:00:05"),
    ]  # overlaps cam1's and cam2's
    vectors = np.array([_unit(0), _unit(5), _unit(5), _unit(5)], np.float32)
    linked = link_tracklets(rows, vectors, FIT)
    assert [m["link"] for m in linked] == ["a:t0", "a:t0", "c:t0", "d:t0"]
    assert link_tracklets(rows, vectors, FIT, LinkConfig(camera_probability=0.9999))[1]["link"] == "b:t0"
    no_time = [{k: v for k, v in r.items() if k != "time"} for r in rows]
    assert [m["link"] for m in link_tracklets(no_time, vectors, FIT)] == ["a:t0", "b:t0", "c:t0", "d:t0"]


def test_a_group_never_holds_two_tracks_on_screen_at_once():
    # track 2 fits after track 0 and track 1 fits after track 2 in time, but 0 and 1 overlap: two people
    rows = [_row("j", "c", 0, 0.0, 4.0, 0.0), _row("j", "c", 1, 3.0, 9.0, 10.0), _row("j", "c", 2, 5.0, 6.0, 10.0)]
    vectors = np.array([_unit(0), _unit(1), _unit(2)], np.float32)
    groups = [m["link"] for m in link_tracklets(rows, vectors, FIT)]
    assert groups[0] != groups[1]
    with pytest.raises(InputError, match="3 metadata records for appearance vectors of shape"):
        link_tracklets(rows, vectors[:2], FIT)


def test_relink_links_the_vectors_as_the_calibration_compares_them(tmp_path, monkeypatch):
    """A calibration fitted about the centre (opt-in) links tracklets by the vectors less the gallery's
    centre; any other by the vectors as stored."""
    from dataclasses import replace
    from types import SimpleNamespace

    from minterpr.index.appearance_space import appearance_centre, centre_vectors
    from minterpr.index.store import gallery_append, gallery_store
    from minterpr.ingest import links

    looks = np.array([_unit(a) for a in (0, 10, 40, 80)], np.float32)
    rows = [_row("j", "c", k, 3.0 * k, 3.0 * k + 2, 0.0) for k in range(4)]
    monkeypatch.setattr(
        gallery_store,
        "open_gallery",
        lambda *a, **k: SimpleNamespace(index=SimpleNamespace(appearance=looks), metadata=rows),
    )
    monkeypatch.setattr(gallery_append, "rewrite_metadata", lambda folder, metadata: None)
    seen = []
    monkeypatch.setattr(links, "link_tracklets", lambda metadata, vectors, *rest: seen.append(vectors) or metadata)
    relink(tmp_path, SURE)
    relink(tmp_path, replace(SURE, centred=True))
    np.testing.assert_array_equal(seen[0], looks)
    np.testing.assert_allclose(seen[1], centre_vectors(looks, appearance_centre(looks)))
    assert not np.allclose(seen[1], looks)
