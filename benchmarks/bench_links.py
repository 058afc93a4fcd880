"""Tracklet links on the street video: do linked tracks show one person? (link precision and recall)

Ingests ``vtest.avi`` (OpenCV's sample, one camera, hand labels in ``benchmarks/data/vtest_labels.json``)
with the shipped attribute model and an appearance model (``--appearance``, a re-id run's ``best.pt``),
whose same-person calibration is fitted here on the re-id val manifest (``--val``; never the street
video) unless the model has one. Each ingested track gets its labelled person (the majority of its
detections on labelled frames, :func:`minterpr.ingest.street_eval.track_majority`); over the pairs of
tracks that have crops and a labelled person:

* **precision**: of the pairs in one link group, the share showing one person;
* **recall**: of the pairs showing one person (the tracker's fragments), the share in one link group.

Reported for the default :class:`~minterpr.ingest.links.LinkConfig` and a few within-camera
probability thresholds (the street video has one camera: no cross-camera links are measured).

**Across tracks** (``across_tracks``): every crop of a labelled track as a query against the crops
of all *other* tracks (the field's protocol with the track in place of the camera: finding the same
person after the tracker lost them), rank-1/5/10, mAP and mINP by cosine and after k-reciprocal
re-ranking of the gallery's crops among themselves (:mod:`minterpr.index.reciprocal`), and the ROC
AUC of "same person" over every pair of crops from two tracks (how well the similarity separates
one person from another, which is what the same-person probability and the links rest on).

**Follow** (``follow_*``): "follow this person" from every labelled crop with its own track left out,
the candidates offered (:class:`~minterpr.interaction.follow.FollowConfig`'s defaults) scored by
precision and recall, with the cosine's same-person probability and with the re-ranked one, beside
the mean probability shown with them (a calibrated one is near the precision).

    python benchmarks/bench_links.py --appearance /root/minterpr-long/reid/r1/best.pt --json links.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from dataclasses import asdict, replace
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
LABELS = REPO / "benchmarks" / "data" / "vtest_labels.json"
VIDEOS = (
    REPO.parent / "shared" / "data" / "video" / "vtest.avi",
    Path("/usr/share/doc/opencv-doc/examples/data/vtest.avi"),
)
VAL = Path("/root/minterpr-long/data/reid/val.jsonl")


def fit_on_val(appearance, manifest: Path):
    from minterpr.interaction.appearance import fit_same_person

    rows = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    vectors, kept, _ = appearance.embed_files([r["path"] for r in rows])
    rows = [rows[k] for k in kept]
    return fit_same_person(vectors, [r["person_id"] for r in rows], [r.get("camera") for r in rows], split="val")


def pair_scores(links: dict[int, str], person: dict[int, str]) -> dict[str, float]:
    """Precision / recall of "same link group" against "same labelled person" over track pairs."""
    tracks = sorted(t for t in links if person.get(t) is not None)
    linked = same = both = 0
    for a, b in combinations(tracks, 2):
        is_linked, is_same = links[a] == links[b], person[a] == person[b]
        linked += is_linked
        same += is_same
        both += is_linked and is_same
    return {
        "tracks": len(tracks),
        "same_person_pairs": same,
        "linked_pairs": linked,
        "correct_links": both,
        "precision": round(both / linked, 4) if linked else None,
        "recall": round(both / same, 4) if same else None,
    }


def across_tracks(metadata, vectors, majority, settings) -> dict:
    """Crop-level re-identification across tracks, by cosine and re-ranked (see the module doc)."""
    from minterpr.evaluation.attribute_metrics import auc_scores
    from minterpr.evaluation.reid import reid_metrics, reid_metrics_from_distances
    from minterpr.index.reciprocal import k_reciprocal_distances

    rows = [i for i, m in enumerate(metadata) if majority.get(m["track"]) is not None]
    people = [majority[metadata[i]["track"]] for i in rows]
    tracks = [str(metadata[i]["track"]) for i in rows]
    x = np.asarray(vectors, np.float32)[rows]
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    labels = (people, people, tracks, tracks)  # each crop once; its own track's crops are left out
    upper = np.triu_indices(len(rows), 1)
    other_track = np.asarray(tracks)[upper[0]] != np.asarray(tracks)[upper[1]]
    same = (np.asarray(people)[upper[0]] == np.asarray(people)[upper[1]])[other_track]

    def scores(metrics, similarity) -> dict:
        pair_auc = auc_scores(similarity[upper][other_track][:, None], same[:, None], np.ones((len(same), 1), bool))[0]
        return {**{k: round(v, 1) for k, v in metrics.to_dict().items()}, "pair_auc": round(pair_auc, 1)}

    out = {"crops": len(rows), "people": len(set(people)), "tracks": len(set(tracks)), "pairs": len(same)}
    out["cosine"] = scores(reid_metrics(x, x, *labels), x @ x.T)
    for config in settings:
        dist = k_reciprocal_distances(x, None, config)  # (N, N)
        out[f"rerank_{config.label()}"] = scores(reid_metrics_from_distances(dist, *labels), -dist)
    return out


def follow_offers(metadata, vectors, majority, calibration) -> dict:
    """ "Follow this person" from every labelled crop: of the crops offered (its own track and the tracks
    seen at the same time left out, as the follow panel does), the
    share showing its person (precision) and of its person's crops in other tracks, the share offered
    (recall); by the cosine's calibration and by the re-ranked one (interaction.pair_scores)."""
    from dataclasses import replace as with_fields

    from minterpr.ingest.links import seen_at_once
    from minterpr.interaction.follow import follow
    from minterpr.interaction.pair_scores import GalleryPairs

    x = np.asarray(vectors, np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    person = [majority.get(m["track"]) for m in metadata]
    cameras, times = [m.get("camera") for m in metadata], [float(m.get("offset_s", 0.0)) for m in metadata]
    ways = {"cosine": GalleryPairs(x, with_fields(calibration, reranked=None))}
    if calibration.reranked is not None:
        ways["reranked"] = GalleryPairs(x, calibration)
    out = {}
    for name, pairs in ways.items():
        offered = right = wanted = 0
        shown_p = 0.0  # the probabilities the analyst would read beside the offered crops
        for anchor, who in enumerate(person):
            if who is None:
                continue
            own = [i for i, m in enumerate(metadata) if m["track"] == metadata[anchor]["track"]]
            skip = own + seen_at_once(metadata, anchor)  # as the follow panel: tracks seen at once are others
            lanes = follow(x, anchor, pairs.calibration, cameras=cameras, times=times, exclude=skip, pairs=pairs)
            shown = [c.row for lane in lanes for c in lane.candidates]
            shown_p += sum(c.probability for lane in lanes for c in lane.candidates)
            offered += len(shown)
            right += sum(person[r] == who for r in shown)
            wanted += sum(person[r] == who for r in range(len(person)) if r not in own)
        out[name] = {
            "offered_per_anchor": round(offered / max(sum(p is not None for p in person), 1), 2),
            "precision": round(right / offered, 3) if offered else None,
            "mean_probability_shown": round(shown_p / offered, 3) if offered else None,
            "recall": round(right / wanted, 3) if wanted else None,
        }
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appearance", required=True, help="appearance model (a re-id run's best.pt)")
    parser.add_argument("--val", default=str(VAL), help="re-id val manifest to fit the same-person calibration on")
    parser.add_argument("--video", help="vtest.avi (default: ../shared/data/video/vtest.avi, then opencv-doc's)")
    parser.add_argument("--yolox-nano", metavar="PATH", help="detect with YOLOX-nano from this file (default: auto)")
    parser.add_argument("--gallery", help="ingest into this folder and keep it (a rerun reuses the finished job)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    from minterpr.index.reciprocal import ReciprocalConfig
    from minterpr.index.store.gallery_store import open_gallery
    from minterpr.ingest import IngestOptions, ingest
    from minterpr.ingest.labels import load_labels
    from minterpr.ingest.links import LinkConfig, link_tracklets
    from minterpr.ingest.street_eval import track_majority
    from minterpr.ingest.video import tracked_detections
    from minterpr.runtime.pipeline import load_pipeline

    video = Path(args.video) if args.video else next((v for v in VIDEOS if v.is_file()), None)
    if video is None or not video.is_file():
        print("no vtest.avi: give --video", file=sys.stderr)
        return 2
    labels = load_labels(LABELS)
    pipeline = load_pipeline("shipped", appearance=args.appearance)
    started = time.perf_counter()
    fitted_here = pipeline.appearance.same_person is None
    if fitted_here:
        pipeline.appearance.same_person = fit_on_val(pipeline.appearance, Path(args.val))
    fit_s = time.perf_counter() - started
    options = IngestOptions(
        **({"detector": "yolox-nano", "detector_options": {"model": args.yolox_nano}} if args.yolox_nano else {})
    )
    with tempfile.TemporaryDirectory() as tmp:
        gallery = Path(args.gallery) if args.gallery else Path(tmp) / "g"
        started = time.perf_counter()
        result = ingest(video, gallery, run=pipeline, options=options)
        ingest_s = time.perf_counter() - started
        _, log = tracked_detections(gallery, video, options)
        stored = open_gallery(gallery)
        metadata, vectors = stored.metadata, stored.index.appearance.copy()
    calibration = pipeline.appearance.same_person
    if calibration.centred:  # compared as the calibration was fitted: about the gallery's centre
        from minterpr.index.appearance_space import appearance_centre, centre_vectors

        vectors = centre_vectors(vectors, appearance_centre(vectors))
    out = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()} 2-core CPU",
        "command": "python benchmarks/bench_links.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "detector": options.detector,
        "appearance": args.appearance,
        "calibration": {**asdict(calibration), "fitted_here": fitted_here, "fit_s": round(fit_s, 1)},
        "ingest": {"rows": result.rows_total, "tracks": result.tracks, "seconds": round(ingest_s, 1)},
    }
    for boxes, standardise in (("drawn", False), ("standardised", True)):  # labels as drawn, or Caltech 0.41
        _, majority = track_majority(labels, log, standardise=standardise)
        # the val choice, it without query expansion, and the paper's settings
        settings = (ReciprocalConfig(), ReciprocalConfig(qe_k=0), ReciprocalConfig(20, 6, 0.3, qe_k=0))
        out[f"across_tracks_{boxes}"] = across_tracks(metadata, vectors, majority, settings)
        out[f"follow_{boxes}"] = follow_offers(metadata, vectors, majority, calibration)
        unlinked = {m["track"]: f"t{m['track']}" for m in metadata}
        out[boxes] = {"no_links": pair_scores(unlinked, majority)}  # the tracker alone: every fragment its own group
        for name, config in (
            ("default", LinkConfig()),
            *((f"occlusion_p{p}", replace(LinkConfig(), occlusion_probability=p)) for p in (0.3, 0.7)),
            ("gap_8s_move_3", replace(LinkConfig(), occlusion_gap_s=8.0, occlusion_move=3.0)),
        ):
            linked = link_tracklets(metadata, vectors, calibration, config)
            out[boxes][name] = {
                **pair_scores({m["track"]: m["link"] for m in linked}, majority),
                **({} if name == "default" else {"config": asdict(config)}),
            }
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
