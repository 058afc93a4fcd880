"""Ingestion speed on a real video, and detection quality beside it on a synthetic one.

Speed: ``minterpr.ingest.ingest`` on ``vtest.avi`` (OpenCV's sample: 795 frames of 768 x 576 at
10 frames/s, 79.5 s; ``../shared/data/video/vtest.avi``) for each setting (``--every N`` or
``--settings every=2,scale=1.1``: ``every`` / ``target_fps`` are ingestion options, the other keys
options of the HOG detector), each into a fresh gallery: wall time, frames/s, real-time factor (video duration / wall time; > 1 = faster than
real time), time in detection+tracking vs embedding+indexing, detections, tracks, crops.
Quality: the same options on a rendered synthetic video with known tracks
(:mod:`minterpr.ingest.synthetic_video`): detection recall, precision, track purity, people
covered, crops per track (:mod:`minterpr.ingest.evaluate`).

    python benchmarks/bench_ingest.py --every 1 2 3 --threads 2 --json ingest.json
    taskset -c 1 env OMP_NUM_THREADS=1 python benchmarks/bench_ingest.py --threads 1 \
        --settings every=2 every=3 every=2,scale=1.1 --json ingest_1core.json   # one core
    python benchmarks/bench_ingest.py --run runs/synth --every 2      # embed with a trained model

Without ``--run`` the crops are embedded by an untrained tiny model (the embedding is a small
share of the time: a few hundred crops).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_VIDEO = REPO.parent / "shared" / "data" / "video" / "vtest.avi"


def _tiny_run(folder: Path) -> Path:
    import torch

    from minterpr.models import create_model, save_model

    torch.manual_seed(0)
    save_model(create_model("tiny"), folder / "model.pt")
    return folder


def _timed_ingest(source, gallery, pipeline, options):
    from minterpr.ingest import ingest

    marks = {}

    def progress(event):
        marks.setdefault(event.stage, time.perf_counter())

    start, cpu = time.perf_counter(), time.process_time()
    result = ingest(source, gallery, run=pipeline, options=options, progress=progress)
    end, cpu = time.perf_counter(), time.process_time() - cpu
    detect_end = marks.get("embed", marks.get("index", end))
    return result, {
        "seconds": round(end - start, 2),
        "cpu_s": round(cpu, 2),
        "detect_s": round(detect_end - marks.get("detect", start), 2),
        "embed_index_s": round(end - detect_end, 2),
    }


INGEST_KEYS = (
    "every",
    "target_fps",
    "detect_max_height",
)  # keys of a setting that are IngestOptions fields; others: detector options


def parse_setting(text: str) -> dict:
    """``every=2,scale=1.1`` -> IngestOptions keyword arguments (``detector_options`` for the rest).

    >>> parse_setting("every=2,scale=1.1")
    {'detector_options': {'scale': 1.1}, 'every': 2}
    """
    options: dict = {"detector_options": {}}
    for pair in filter(None, text.split(",")):
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--settings {text!r}: expected KEY=VALUE[,KEY=VALUE...]")
        number = json.loads(value)
        if key in INGEST_KEYS:
            options[key] = number
        else:
            options["detector_options"][key] = number
    if not options["detector_options"]:
        del options["detector_options"]
    return options


def _label(setting: dict) -> str:
    parts = {k: v for k, v in setting.items() if k != "detector_options"}
    parts.update(setting.get("detector_options", {}))
    return ",".join(f"{k}={v}" for k, v in parts.items())


def speed(video: Path, pipeline, setting: dict, work: Path) -> dict:
    from minterpr.ingest import IngestOptions

    label = _label(setting)
    result, times = _timed_ingest(video, work / f"vtest-{label}", pipeline, IngestOptions(**setting))
    seconds = times["seconds"]
    duration = result.duration_s or 0.0
    return {
        "setting": label,
        **times,
        "frames": result.frames_read,
        "processed": result.frames_processed,
        "frames_per_s": round(result.frames_read / seconds, 1),
        "real_time_factor": round(duration / seconds, 2),
        # CPU seconds / 2: the wall time on two idle cores when both are busy all along (a lower bound)
        "real_time_factor_2_idle_cores": round(duration / (times["cpu_s"] / 2), 2),
        # CPU seconds alone: the wall time on one idle core (every thread's time on that core)
        "real_time_factor_cpu": round(duration / times["cpu_s"], 2),
        "duration_s": duration,
        "detections": result.detections,
        "tracks": result.tracks,
        "crops": result.crops,
        "rows": result.rows_added,
    }


def quality(pipeline, setting: dict, work: Path, seed: int) -> dict:
    from minterpr.index.store.gallery_store import open_gallery
    from minterpr.ingest import IngestOptions
    from minterpr.ingest.evaluate import evaluate_tracking
    from minterpr.ingest.synthetic_video import SyntheticVideoConfig, render_video
    from minterpr.ingest.video import tracked_detections

    path = work / f"synthetic-{seed}.mp4"
    config = SyntheticVideoConfig(people=8, frames=120, seed=seed)
    truth = render_video(path, config)
    options = IngestOptions(**setting)
    gallery = work / f"synthetic-{seed}-{_label(setting)}"
    result, times = _timed_ingest(path, gallery, pipeline, options)
    frames, log = tracked_detections(gallery, path, options)
    rows = open_gallery(gallery).metadata
    report = evaluate_tracking(truth, frames, log, crops=[(m["frame"], m["box"], m["track"]) for m in rows])
    return {"setting": _label(setting), "seed": seed, **report.__dict__, "seconds": times["seconds"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--video", type=Path, default=DEFAULT_VIDEO)
    parser.add_argument("--run", help="trained run that embeds the crops (default: an untrained tiny model)")
    parser.add_argument("--every", type=int, nargs="+", default=[2])
    parser.add_argument(
        "--settings",
        nargs="+",
        metavar="KEY=VALUE,...",
        help="settings to compare instead of --every, e.g. every=2 every=2,scale=1.1 (HOG options)",
    )
    parser.add_argument("--threads", type=int, default=2, help="OpenCV and torch threads")
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="*",
        default=[0, 1],
        help="synthetic videos for the quality figures (none: no quality figures)",
    )
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    import cv2
    import torch

    cv2.setNumThreads(args.threads)
    torch.set_num_threads(args.threads)
    from minterpr.runtime.pipeline import load_pipeline

    settings = [parse_setting(t) for t in args.settings] if args.settings else [{"every": e} for e in args.every]

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        run = args.run or _tiny_run(work / "tiny-run")
        pipeline = load_pipeline(run)
        report = {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at start",
            "run": str(args.run or "untrained tiny model"),
            "speed": [],
            "quality": [],
        }
        if not args.skip_speed:
            if not args.video.is_file():
                print(f"no video at {args.video}: speed not measured", file=sys.stderr)
            else:
                for setting in settings:
                    row = speed(args.video, pipeline, setting, work)
                    report["speed"].append(row)
                    print(json.dumps(row), flush=True)
        for setting in settings:
            for seed in args.seeds:
                row = quality(pipeline, setting, work, seed)
                report["quality"].append(row)
                print(json.dumps(row), flush=True)
        report["machine"] += f", {os.getloadavg()[0]:.1f} at the end"
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("date", "command", "machine")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
