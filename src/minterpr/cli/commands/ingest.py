"""``minterpr ingest``: a video, a folder of frames or a folder of crops into a gallery store.

Detects people (YOLOX-nano when ``minterpr models fetch yolox-nano`` has put it in the model
cache, else OpenCV's HOG with one line saying so; ``--detector hog|yolox-nano|onnx:PATH`` picks
one, ``--detector-option decoder=yolov8`` how an ONNX model's output is read), tracks them
(ByteTrack), keeps the best crops of each track (only crops that show one person), embeds them with ``--run`` and adds them to the gallery with camera, time, frame, box, track
and source metadata (:mod:`minterpr.ingest`). Interrupted (Ctrl-C, a kill), the same command
continues where it stopped. ``minterpr chat --run RUN --index DIR`` then searches the gallery.
``--device`` picks where the crops are embedded (cpu by default); ``--json [PATH|-]`` writes the
result as JSON (``--json`` alone, as before: to stdout, and the summary lines to stderr);
``--quiet`` turns the progress bars off (and info messages), ``--verbose`` adds debug ones.

Example:
    $ minterpr ingest lobby.mp4 --gallery lobby --camera lobby:cam1 --start 2026-12-01T10:00:00 --run runs/synth --every 2
    $ minterpr ingest crops/ --gallery lobby --camera lobby:cam2 --run runs/synth --device cuda --json result.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any, TextIO

from minterpr.cli.shared.common import CLIError, add_common_options, show_progress, write_json
from minterpr.cli.shared.model_options import add_appearance_argument, add_image_precision_argument


def _detector_options(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; a VALUE that is JSON (numbers, true, [640, 640]) is read as JSON."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CLIError(f"--detector-option {pair!r}: expected KEY=VALUE (e.g. model=det.onnx)")
        try:
            options[key.strip()] = json.loads(value)
        except ValueError:
            options[key.strip()] = value
    return options


class ProgressBars:
    """One tqdm bar per stage, on stderr, from IngestProgress events."""

    def __init__(self, enabled: bool, note: str | None = None) -> None:
        self.enabled = enabled
        self.note = note  # the detector's fallback line: printed once, when ingestion has opened a video
        self.bar: Any = None
        self.stage: str | None = None

    def __call__(self, event: Any) -> None:
        if self.note is not None and event.message == self.note:
            print(self.note, file=sys.stderr)  # a warning: shown with --quiet too
            self.note = None
        if not self.enabled:
            return
        from tqdm import tqdm

        if event.stage != self.stage:
            self.close()
            self.stage = event.stage
            if event.stage in ("detect", "copy", "embed"):
                unit = {"detect": "frame", "copy": "file", "embed": "crop"}[event.stage]
                self.bar = tqdm(total=event.total, desc=event.stage, unit=unit, file=sys.stderr)
        if self.bar is not None:
            self.bar.n = event.done
            if event.stage == "detect":
                self.bar.set_postfix(dets=event.detections, tracks=event.tracks, refresh=False)
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _check_writable(gallery: Path) -> None:
    """CLIError when ``gallery`` cannot be made or written: its nearest existing folder must be writable."""
    folder = gallery.absolute()
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        what = "is not a folder" if not folder.is_dir() else "is not writable"
        raise CLIError(
            f"{gallery}: cannot create the gallery folder ({folder} {what}); give --gallery a folder "
            f"you can write, or set $MINTERPR_GALLERIES for bare names"
        )


def cmd_ingest(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from minterpr.ingest import IngestOptions, gallery_dir, ingest
    from minterpr.ingest.options import check_options
    from minterpr.ingest.sources import parse_start
    from minterpr.runtime.pipeline import load_pipeline

    from minterpr.ingest import create_detector
    from minterpr.ingest.detector_zoo import resolve_detector

    out = out or sys.stdout
    if args.every is not None and args.target_fps is not None:
        raise CLIError("give --every or --target-fps, not both")
    options = IngestOptions(
        camera=args.camera,
        start=args.start,
        every=args.every,
        target_fps=args.target_fps,
        fps=args.fps,
        frames=args.frames,
        detector=args.detector,
        detect_max_height=args.detect_max_height,
        detector_options=_detector_options(args.detector_option),
        best_k=args.best_k,
        restart=args.restart,
    )
    gallery = gallery_dir(args.gallery)
    _check_writable(gallery)  # an unwritable gallery fails before the model is loaded (and the video decoded)
    check_options(options)  # a bad option fails before the model is loaded
    name, detector_options, note = resolve_detector(options.detector, options.detector_options)
    create_detector(name, detector_options)  # so does a detector that cannot load (not fetched, a bad file)
    parse_start(options.start)
    # an unusable device: InputError; an appearance model that cannot load: RunError naming it
    pipeline = load_pipeline(
        args.run,
        device=getattr(args, "device", "cpu"),
        appearance=args.appearance,
        image_precision=getattr(args, "image_precision", "fp32"),
    )
    try:  # FFmpeg's own log lines (a damaged file) would break the one-line error
        import av.logging

        av.logging.set_level(av.logging.PANIC)
    except ImportError:
        pass
    bars = ProgressBars(enabled=show_progress(args, sys.stderr.isatty()), note=note)
    try:
        result = ingest(args.source, gallery, run=pipeline, options=options, progress=bars)
    except KeyboardInterrupt:
        bars.close()
        print("interrupted: the progress is saved; run the same command again to continue", file=sys.stderr)
        return 130
    finally:
        bars.close()
    data = {k: (str(v) if k == "gallery" else v) for k, v in result.__dict__.items()}
    if args.json:
        write_json(args.json, data)
    if result.already_done:
        print(
            f"{result.source}: already ingested into {result.gallery} ({result.rows_added} rows; --restart redoes it)",
            file=out,
        )
    elif result.kind == "crops":
        print(f"indexed {result.crops} crops of {result.source} in {result.seconds:.1f} s", file=out)
    else:
        rate = result.frames_read / max(result.seconds, 1e-9)
        speed = f", {result.duration_s / result.seconds:.2f}x real time" if result.duration_s else ""
        print(
            f"ingested {result.source}: {result.frames_read} frames ({result.frames_processed} processed) in "
            f"{result.seconds:.1f} s ({rate:.1f} frames/s{speed}){' (resumed)' if result.resumed else ''}",
            file=out,
        )
        why = ", ".join(f"{n} {reason}" for reason, n in result.rejected.items())
        print(
            f"{result.detections} detections, {result.tracks} tracks, {result.crops} crops kept"
            f"{f' (not cropped: {why})' if why else ''}",
            file=out,
        )
    if result.skipped:
        named = ", ".join(f"{p} ({r})" for p, r in result.skipped[:3])
        print(f"{len(result.skipped)} skipped (unreadable): {named}", file=out)
    if not result.already_done:
        print(f"{result.rows_added} rows added to {result.gallery} ({result.rows_total} in all)", file=out)
    print(
        f"search it with: minterpr chat --run {shlex.quote(str(args.run))} --index {shlex.quote(str(result.gallery))}",
        file=out,
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ingest",
        help="detect, track and index the people of a video (or a folder of frames or crops)",
        description="Ingest a video file, a folder of frames (--frames) or a folder of crops into a gallery store: "
        "people detected, tracked, their best crops embedded and indexed with camera, time, frame, box "
        "and track. Interrupted, the same command continues where it stopped.",
    )
    parser.add_argument("source", metavar="SOURCE", help="a video file, or a folder of crops (or of frames: --frames)")
    parser.add_argument(
        "--gallery",
        required=True,
        metavar="NAME_OR_DIR",
        help="the gallery store: a folder, or a bare name under $MINTERPR_GALLERIES (default ./galleries)",
    )
    parser.add_argument(
        "--run",
        default="shipped",
        metavar="RUN",
        help="the model that embeds the crops: a run or model directory, 'shipped[:NAME]' or "
        "'hf-hub:ORG/NAME[@REV]' (default: shipped, the real-pixel model of models/)",
    )
    add_appearance_argument(parser)
    add_image_precision_argument(parser)
    parser.add_argument("--camera", metavar="ID", help="camera id stored with every row")
    parser.add_argument(
        "--start",
        metavar="ISO-TIME",
        help="time of the first frame (ISO 8601, e.g. 2026-12-01T10:00:00); rows get start + frame/fps",
    )
    skip = parser.add_mutually_exclusive_group()
    skip.add_argument(
        "--every",
        type=int,
        metavar="N",
        help="detect and track every Nth frame (default: about 3 "
        "frames per second of video, every 3rd frame at 10 frames/s)",
    )
    skip.add_argument("--target-fps", type=float, metavar="F", help="detect and track about F frames per second")
    parser.add_argument(
        "--detect-max-height",
        type=int,
        metavar="PX",
        help="shrink taller frames to PX rows for the "
        "detector only (crops stay full size); for HD video whose people stay >= ~96 px tall",
    )
    parser.add_argument("--fps", type=float, help="the source's frame rate, if its file is wrong (frame folders: 25)")
    parser.add_argument("--frames", action="store_true", help="SOURCE is a folder of one video's frames, not crops")
    parser.add_argument(
        "--detector",
        default="auto",
        metavar="NAME",
        help="people detector: hog, yolox-nano (after `minterpr models fetch yolox-nano`), "
        "onnx:PATH (an ONNX model of yours), or auto (default: yolox-nano when fetched, else hog)",
    )
    parser.add_argument(
        "--detector-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a detector option, repeatable (onnx: decoder=yolox|yolov5|yolov8|nanodet|boxes, "
        "input_size=[640,640], score_threshold=0.4, ...)",
    )
    parser.add_argument("--best-k", type=int, default=3, metavar="K", help="crops kept per track (default 3)")
    parser.add_argument("--restart", action="store_true", help="discard this source's saved progress and redo it")
    parser.set_defaults(handler=cmd_ingest)
    # --quiet (as before: no progress bars), --device (where the crops are embedded), --json [PATH|-]
    # (the bare --json of before still prints the result to stdout, now with the summary on stderr)
    add_common_options(
        parser,
        device=True,
        json=True,
        needs=("ingest", "model"),
        json_help="write the result as JSON to PATH ('-' or no value: to stdout, the summary lines to stderr)",
    )
