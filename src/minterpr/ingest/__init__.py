"""Ingestion: videos, frame folders and crop folders into searchable gallery stores.

``ingest(SOURCE, GALLERY, run=RUN)`` decodes, detects people (:mod:`minterpr.ingest.detectors`:
OpenCV's HOG by default, any ONNX detection model as a plug-in), tracks them (ByteTrack),
keeps the best crops of each track, embeds them and adds them to a gallery store with camera,
time, frame, box, track and source metadata; resumable after a kill, with progress events and
a cancellation hook (:mod:`minterpr.ingest.runner`, :mod:`minterpr.ingest.progress`).
The command line is ``minterpr ingest`` (docs/ingest.md).
"""

from minterpr.ingest.options import IngestOptions, IngestResult, create_detector, gallery_dir
from minterpr.ingest.progress import IngestCancelled, IngestProgress
from minterpr.ingest.runner import ingest

__all__ = [
    "IngestCancelled",
    "IngestOptions",
    "IngestProgress",
    "IngestResult",
    "create_detector",
    "gallery_dir",
    "ingest",
]
