"""The street benchmark: detection, tracking and search on a real video with hand labels.

The labels (``benchmarks/data/vtest_labels.json``, :mod:`minterpr.ingest.labels`) box every
person on 35 frames of ``vtest.avi`` (OpenCV's sample, 795 frames of 768 x 576 at 10 frames/s),
link them across the video and describe 13 of them as a witness would. This script reports:

* **detection** on the labelled frames (:func:`minterpr.ingest.street_eval.detection_report`):
  recall and precision at IoU 0.5, on the boxes as drawn and Caltech-standardised (0.41 aspect),
  for HOG, YOLOX-nano (``--yolox-nano [PATH]``: from the model cache, or that file) and, with
  ``--detector-onnx PATH``, another ONNX model (the ``onnx`` plug-in); and how many labelled
  people the detections show before and after ingestion's crop filter (crowded, small,
  blurry: :func:`~minterpr.ingest.street_eval.crop_people_report`);
* **tracking** of a real ingestion (``minterpr.ingest.ingest`` at its default ~3 processed
  frames/s, into a temporary gallery): its speed against real time, track purity,
  fragmentation (tracks per person), crops per identity
  (:func:`~minterpr.ingest.street_eval.track_report`), and the people the kept crops on
  labelled frames show;
* **search** with ``--run RUN`` (a run or exported model dir) over a gallery of the labelled
  boxes: R@1 / R@5 after the description and after two more turns of a simulated witness who
  answers and corrects from the labels (:func:`minterpr.ingest.street_search.witness_search`),
  and the system's moves by kind (attribute questions / reference images); with
  ``--search-detectors`` the same searches over the gallery each measured detector cuts on the
  labelled frames (:func:`~minterpr.ingest.street_search.detector_gallery`: crops the crop filter
  keeps, identities by IoU >= 0.5 with the labels after Caltech standardisation, the rest distractors).

    python benchmarks/bench_street.py --run outputs/demo/run
    python benchmarks/bench_street.py --run outputs/demo/run --hog-option upscale=1.5 --skip-tracking
    python benchmarks/bench_street.py --run shipped --detector-onnx det.onnx --json street.json
    python benchmarks/bench_street.py --run shipped --yolox-nano ../shared/weights/yolox_nano.onnx --skip-search
    python benchmarks/bench_street.py --run shipped --yolox-nano ../shared/weights/yolox_nano.onnx \
        --hog-option upscale=1.5 --skip-tracking --search-detectors
    python benchmarks/bench_street.py --run shipped --skip-tracking --appearance runs/reid/best.pt
    python benchmarks/bench_street.py --run shipped --skip-tracking --appearance none   # the attribute model alone
    python benchmarks/bench_street.py --run shipped --skip-tracking --seeds 0 1 2 3 4   # 65 searches, pooled
    python benchmarks/bench_street.py --run shipped --skip-tracking --ranks   # each person's rank by round

The searches use the appearance model the page would (``--appearance auto``, the default: the
shipped one beside a shipped attribute model, none beside other runs).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from minterpr.evaluation.ceilings import add_ceiling_arguments

REPO = Path(__file__).resolve().parents[1]
LABELS = REPO / "benchmarks" / "data" / "vtest_labels.json"
VIDEOS = (
    REPO.parent / "shared" / "data" / "video" / "vtest.avi",
    Path("/usr/share/doc/opencv-doc/examples/data/vtest.avi"),
)


def _labelled_frames(video, labels):
    """frame index -> BGR frame, for the labelled frames."""
    from minterpr.ingest.sources import iter_frames, open_source

    wanted, out = set(labels.frames), {}
    for index, frame in iter_frames(open_source(video)):
        if index in wanted:
            out[index] = frame
        if len(out) == len(wanted):
            break
    return out


def _detection(detector, frames, labels):
    from dataclasses import asdict

    import numpy as np

    from minterpr.ingest.street_eval import crop_people_report, detection_report
    from minterpr.ingest.tracking import CropFilter, covered_share, crop_flags, measure_sharpness

    start = time.perf_counter()
    detections = {f: detector.detect(image) for f, image in frames.items()}
    seconds = time.perf_counter() - start
    found = {f: d.boxes for f, d in detections.items()}
    crops = [(f, box) for f, boxes in found.items() for box in boxes]
    passing = [
        (f, box)
        for f, d in detections.items()  # the crop filter of ingestion (video.Tracking.step)
        for box, covered in zip(d.boxes, np.maximum(covered_share(d.boxes), d.crowd))
        if not crop_flags(box, measure_sharpness(frames[f], box), float(covered), CropFilter())
    ]
    return {
        "detector": detector.identity(),
        "s_per_frame": round(seconds / max(1, len(frames)), 3),
        "drawn": asdict(detection_report(labels, found)),
        "standardised": asdict(detection_report(labels, found, standardise=True)),
        "people_per_detection": asdict(crop_people_report(labels, crops)),
        "people_per_filtered_detection": asdict(crop_people_report(labels, passing)),
    }


def _tracking(video, labels, run, detector, detector_options):
    from dataclasses import asdict

    from minterpr.index.store.gallery_store import open_gallery
    from minterpr.ingest import IngestOptions, ingest
    from minterpr.ingest.video import tracked_detections
    from minterpr.ingest.street_eval import crop_people_report, track_report

    options = IngestOptions(detector=detector, detector_options=detector_options)
    with tempfile.TemporaryDirectory() as tmp:
        result = ingest(video, Path(tmp) / "g", run=run, options=options)
        frames, log = tracked_detections(Path(tmp) / "g", video, options)
        meta = open_gallery(Path(tmp) / "g").meta_columns
        crops = list(zip(meta["frame"], meta["box"], meta["track"]))
    missing = sorted(set(labels.frames) - set(frames))
    out = {
        "frames_processed": result.frames_processed,
        "tracks_kept": result.tracks,
        "ingest_s": round(result.seconds, 1),
        "video_s": result.duration_s,
        "x_real_time": round(result.duration_s / result.seconds, 2),
        "crops": result.crops,
        "rejected": dict(result.rejected),
        "labelled_frames_not_processed": missing,
        "people_per_crop_on_labelled_frames": asdict(crop_people_report(labels, [(f, b) for f, b, _ in crops])),
    }
    for name, standardise in (("drawn", False), ("standardised", True)):
        out[name] = asdict(track_report(labels, log, crops, standardise=standardise))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, help="trained run or exported model dir (search, and crop embedding)")
    parser.add_argument(
        "--video", help="vtest.avi (default: ../shared/data/video/vtest.avi, then Debian's opencv-doc copy)"
    )
    parser.add_argument("--labels", default=str(LABELS), help=f"label file (default {LABELS.relative_to(REPO)})")
    parser.add_argument(
        "--detector-onnx", metavar="PATH", help="also measure this ONNX detection model (the onnx plug-in)"
    )
    parser.add_argument(
        "--yolox-nano",
        nargs="?",
        const="",
        metavar="PATH",
        help="also measure YOLOX-nano: from the model cache (`minterpr models fetch yolox-nano`), or PATH",
    )
    parser.add_argument("--skip-search", action="store_true", help="no search (detection and tracking only)")
    parser.add_argument(
        "--hog-option",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="an option of the HOG detector (repeatable), e.g. upscale=1.5 for people under ~96 px",
    )
    parser.add_argument(
        "--onnx-option",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="an option of the ONNX detector (repeatable), e.g. input_size=[640,640]",
    )
    parser.add_argument("--rounds", type=int, default=2, help="witness turns after the description (default 2)")
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[0],
        help="the witnesses' seeds (their wording, the system's draws): each a full set of searches, the "
        "figures pooled over them (default: 0, the recorded figures; one search of 13 is 7.7 points)",
    )
    parser.add_argument("--skip-tracking", action="store_true", help="no ingestion (detection and search only)")
    parser.add_argument(
        "--ranks",
        action="store_true",
        help="also print each described person's rank (0-based, best crop) after each round, by seed "
        "(always in --json): which searches are missed, and whether they fell or never came near",
    )
    parser.add_argument(
        "--search-detectors",
        action="store_true",
        help="also search the gallery each detector cuts on the labelled frames",
    )
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument(
        "--appearance",
        default="auto",
        metavar="auto|shipped|none|PATH",
        help="the appearance model searched with beside the run (calibrated: minterpr calibrate appearance); "
        "default auto: the shipped one beside a shipped attribute model, as ingestion and the page use it",
    )
    parser.add_argument(
        "--policy-temperature",
        metavar="T|fitted",
        help="the policies' temperature in the searches: a number, or 'fitted' (the run's match temperature)",
    )
    add_ceiling_arguments(parser)
    args = parser.parse_args(argv)
    if min(args.seeds) < 0 or len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds: distinct integers >= 0, got {' '.join(map(str, args.seeds))}")

    from minterpr.errors import InputError, MinterprError
    from minterpr.evaluation.ceilings import Ceilings
    from minterpr.ingest.detectors import DETECTORS
    from minterpr.ingest.labels import load_labels
    from minterpr.ingest.street_search import detector_gallery, label_gallery, witness_search
    from minterpr.interaction.policies import policy_temperature
    from minterpr.runtime.pipeline import load_pipeline

    try:
        ceilings = Ceilings.from_args(args)
        labels = load_labels(args.labels)
        video = Path(args.video) if args.video else next((v for v in VIDEOS if v.is_file()), None)
        if video is None or not video.is_file():
            print(f"bench_street: no video (tried {args.video or ', '.join(map(str, VIDEOS))})", file=sys.stderr)
            return 2
        hog_options, onnx_options = (
            {k: json.loads(v) for k, v in (o.split("=", 1) for o in given)}
            for given in (args.hog_option, args.onnx_option)
        )
        pipeline = load_pipeline(args.run, appearance=args.appearance)
        if ceilings.identity_appearance is not None and pipeline.appearance is None:
            raise InputError("--identity-appearance needs an appearance model (--appearance)")
        run = pipeline.run  # one loaded model: the pipeline's
        temperature = (
            None
            if args.policy_temperature is None
            else policy_temperature(args.policy_temperature, run.extras.match_temperature())
        )
        figures = {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": platform.platform(),
            "video": str(video),
            "labels": {
                "frames": len(labels.frames),
                "boxes": labels.box_count(),
                "ignore_boxes": labels.box_count(ignored=True) - labels.box_count(),
                "people": len(labels.people),
                "described": len(labels.described()),
            },
            "run": args.run,
            "policy_temperature": args.policy_temperature,
            "label_reading": args.label_reading,
            "identity_appearance": args.identity_appearance,
            "detection": {},
            "tracking": {},
        }
        frames = _labelled_frames(video, labels)
        detectors = {"hog": ("hog", hog_options)}
        if args.yolox_nano is not None:
            detectors["yolox-nano"] = ("yolox-nano", {"model": args.yolox_nano} if args.yolox_nano else {})
        if args.detector_onnx:
            detectors["onnx"] = ("onnx", {"model": args.detector_onnx, **onnx_options})
        for name, (kind, options) in detectors.items():
            print(f"measuring {name} ...", file=sys.stderr)
            figures["detection"][name] = _detection(DETECTORS.create(kind, **options), frames, labels)
            if not args.skip_tracking:
                figures["tracking"][name] = _tracking(video, labels, pipeline, kind, options)
        figures["search"] = None
        if not args.skip_search:
            figures["search"] = {}
            cuts = {
                "labels": None,
                **({name: spec for name, spec in detectors.items()} if args.search_detectors else {}),
            }
            for name, spec in cuts.items():
                print(f"searching the {name} gallery ...", file=sys.stderr)
                with tempfile.TemporaryDirectory() as tmp:
                    if spec is None:
                        images, heights = label_gallery(labels, video, tmp), None
                    else:
                        # identities at IoU of standardised boxes: HOG's carry a third of margin (the crop still shows the person)
                        images, heights = detector_gallery(
                            labels, video, DETECTORS.create(spec[0], **spec[1]), tmp, standardise=True
                        )
                    reports = [
                        witness_search(
                            run,
                            labels,
                            images,
                            tmp,
                            rounds=args.rounds,
                            seed=seed,
                            heights=heights,
                            appearance=pipeline.appearance,
                            policy_temperature=temperature,
                            label_reading=ceilings.label_reading,
                            identity_appearance=ceilings.identity_appearance,
                        )
                        for seed in args.seeds
                    ]
                report = reports[0]  # the seeds search the same targets: their figures are pooled below
                pooled = [
                    {k: sum(r.rounds[i][k] for r in reports) / len(reports) for k in ("r1", "r5")}
                    for i in range(len(report.rounds))
                ]
                figures["search"][name] = {
                    "gallery": len(images),
                    "appearance": args.appearance,  # as asked; the model searched with:
                    "appearance_fingerprint": pipeline.appearance_fingerprint,
                    "identities": len({i.person_id for i in images if ":" not in i.person_id}),
                    "targets": report.extra.get("num_queries"),
                    "described": len(labels.described()),
                    "seeds": args.seeds,
                    "moves": {k: sum(r.extra["moves"][k] for r in reports) for k in report.extra["moves"]},
                    "r1_by_seed": {seed: [row["r1"] for row in r.rounds] for seed, r in zip(args.seeds, reports)},
                    "ranks_by_seed": {seed: r.extra["ranks"] for seed, r in zip(args.seeds, reports)},
                    "rounds": [
                        {
                            "round": r,
                            "r1": row["r1"],
                            "r5": row["r5"],  # of the targets; of the described:
                            "r1_described": round(row["r1"] * report.extra["num_queries"] / len(labels.described()), 1),
                        }
                        for r, row in enumerate(pooled)
                    ],
                }
    except MinterprError as err:
        print(f"bench_street: {err}", file=sys.stderr)
        return 2
    _print(figures, ranks=args.ranks)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


def _print(figures, *, ranks: bool = False) -> None:
    lab = figures["labels"]
    print(
        f"labels: {lab['boxes']} boxes (+{lab['ignore_boxes']} ignore) on {lab['frames']} frames, "
        f"{lab['people']} people, {lab['described']} described"
    )
    for name, d in figures["detection"].items():
        for kind in ("drawn", "standardised"):
            r = d[kind]
            print(
                f"detection {name:5s} IoU 0.5 {kind:12s}: recall {r['recall']:.3f} precision {r['precision']:.3f} "
                f"({r['matched']}/{r['people_boxes']} boxes, {r['detections']} detections; {d['s_per_frame']} s/frame)"
            )
    for name, d in figures["detection"].items():
        for kind in ("people_per_detection", "people_per_filtered_detection"):
            r = d[kind]
            print(
                f"crops     {name:5s} {kind:30s}: {r['one_share']:.3f} show exactly one labelled person "
                f"({r['one']}/{r['crops']}; {r['none']} nobody, {r['several']} two or more)"
            )
    for name, t in figures["tracking"].items():
        r = t["people_per_crop_on_labelled_frames"]
        print(
            f"ingest    {name:5s}: {t['ingest_s']} s for {t['video_s']} s of video ({t['x_real_time']}x real time), "
            f"{t['crops']} crops, not cropped: {t['rejected']}; kept crops on labelled frames: "
            f"{r['one']}/{r['crops']} show exactly one labelled person"
        )
        for kind in ("drawn", "standardised"):
            r = t[kind]
            print(
                f"tracking  {name:5s} {kind:12s}: purity {r['purity']:.3f}, {r['fragmentation']:.2f} tracks/person "
                f"({r['people']} people, {r['tracks']} tracks), {r['crops_per_identity']:.2f} crops/identity "
                f"({r['people_with_crops']} people with crops)"
            )
    kinds = ("label_reading", "identity_appearance")
    ceilings = ", ".join(f"{k.replace('_', ' ')} {figures[k]}" for k in kinds if figures.get(k) is not None)
    for name, s in (figures["search"] or {}).items():
        print(
            f"search over the {name} gallery: {s['gallery']} crops of {s['identities']} labelled people, "
            f"{s['targets']} of {s['described']} described people have a crop ({figures['run']}, appearance "
            f"{s['appearance_fingerprint'] or 'none'}); "
            + (f"ceilings: {ceilings}; " if ceilings else "")
            + f"moves {s['moves']}"
            + (f", pooled over witness seeds {s['seeds']}:" if len(s["seeds"]) > 1 else ":")
        )
        for row in s["rounds"]:
            print(
                f"  round {row['round']}: R@1 {row['r1']:.1f}%  R@5 {row['r5']:.1f}%  "
                f"(R@1 of the described people, one without a crop a miss: {row['r1_described']:.1f}%)"
            )
        if len(s["seeds"]) > 1:
            finals = ", ".join(f"{seed}: {r1[-1]:.1f}" for seed, r1 in s["r1_by_seed"].items())
            print(f"  R@1 after the last turn by seed: {finals}")
        if ranks:
            for seed, by_person in s["ranks_by_seed"].items():
                line = ", ".join(f"{who} {' → '.join(map(str, r))}" for who, r in by_person.items())
                print(f"  ranks by round, seed {seed}: {line}")


if __name__ == "__main__":
    sys.exit(main())
