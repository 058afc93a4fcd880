"""What the service's captioning job costs beyond captioning itself (issue 27, MTG as a job).

A gallery store of ``--crops`` small generated crops (the tiny model, untrained: captioning does
not read the embeddings) is captioned twice against the same scripted local endpoint
(:class:`~minterpr.vlm.testing.ScriptedServer`, in this process, answering each body part's
question at once with a few values):

1. ``library``: :func:`minterpr.vlm.caption.caption_gallery` alone (what ``minterpr vlm caption
   --index STORE`` runs);
2. ``job``: ``POST /api/ingest/caption`` through the service (a TestClient), waited for: the same
   function plus one audit entry per call, the job's progress, its end, and the gallery opened
   again with the captions (``vlm_captions`` on).

Printed: seconds and milliseconds per crop of each, the job's overhead per crop (split into the
captioning loop, where each crop's calls are audited and its progress reported, and what comes
around it: queueing, opening the gallery again, the job's end), the calls, and the ``vlm_call``
entries the job wrote (one per call). The endpoint's own answer time is in both.

Usage:
    OMP_NUM_THREADS=1 taskset -c 0 python benchmarks/bench_caption_job.py --crops 200
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

SEEN = {"gender": ["female"], "upper_colour": ["red"], "lower_type": ["jeans"], "hair_length": ["long"]}


def answer(body):
    from minterpr.vlm.testing import reply

    slots = body["response_format"]["json_schema"]["schema"]["properties"]
    return reply(json.dumps({s: v for s, v in SEEN.items() if s in slots}))


def build(folder: Path, crops: int) -> tuple[Path, Path]:
    """(run, store): the tiny model and a store of ``crops`` generated 64 x 32 crops."""
    import torch
    from PIL import Image

    from minterpr.index.store.gallery_store import save_gallery
    from minterpr.index.store.store_vectors import build_vector_index
    from minterpr.models import create_model, save_model
    from minterpr.runtime.pipeline import load_pipeline
    from minterpr.types import GalleryImage

    rng = np.random.default_rng(0)
    images = []
    (folder / "crops").mkdir(parents=True)
    for i in range(crops):
        Image.fromarray(rng.integers(0, 255, (64, 32, 3), dtype=np.uint8)).save(folder / "crops" / f"{i:05d}.png")
        images.append(GalleryImage(f"{i:05d}.png", f"bench:{i // 3}", camera_id="cam:0"))
    torch.manual_seed(0)
    save_model(create_model("tiny"), folder / "run" / "model.pt", extra={"epoch": 0})
    pipeline = load_pipeline(folder / "run", engine="torch")
    index = pipeline.index_images(images, root=str(folder / "crops"), progress=False)
    metadata = [{} for _ in images]
    vectors = build_vector_index("exact", index, metadata, model_fingerprint=pipeline.fingerprint)
    save_gallery(
        index, folder / "store", model_fingerprint=pipeline.fingerprint, vector_index=vectors, metadata=metadata
    )
    return folder / "run", folder / "store"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crops", type=int, default=200)
    args = parser.parse_args()
    import shutil

    from fastapi.testclient import TestClient

    from minterpr.index.store.gallery_store import load_gallery
    from minterpr.serving.app import create_app
    from minterpr.serving.service import build_services
    from minterpr.serving.settings import ServeSettings
    from minterpr.vlm.caption import CAPTIONS_FILE, caption_gallery
    from minterpr.vlm.client import VLMClient
    from minterpr.vlm.config import VLMConfig
    from minterpr.vlm.testing import ScriptedServer

    folder = Path(tempfile.mkdtemp(prefix="bench_caption_job_"))
    run, store = build(folder, args.crops)
    shutil.copytree(store, folder / "store_job")
    with ScriptedServer([answer], repeat=True) as endpoint:
        config = VLMConfig(endpoint.url, "scripted", uses=("caption",), max_calls=10**9, max_total_tokens=10**12)
        index = load_gallery(store, fused=False)
        start = time.perf_counter()
        with VLMClient(config) as client:
            report = caption_gallery(index.images, index.root, client, os.path.join(store, CAPTIONS_FILE))
        library = time.perf_counter() - start
        settings = ServeSettings(data_dir=folder / "state", vlm=config, vlm_captions=True, torch_threads=1)
        services = build_services(settings)
        services.accounts.create_user("root", "a long bench passphrase", "admin")
        services.galleries.register("bench", folder / "store_job", run, by="root")
        with TestClient(create_app(settings, services)) as http:
            token = http.post("/api/auth/login", json={"username": "root", "password": "a long bench passphrase"})
            headers = {"X-CSRF-Token": token.json()["csrf_token"]}
            start = time.perf_counter()
            job = http.post("/api/ingest/caption", json={"gallery": "bench"}, headers=headers).json()
            view = services.jobs.wait(job["id"], timeout=3600)
            job_s = time.perf_counter() - start
        calls = sum(e["action"] == "vlm_call" for e in services.audit.entries(limit=10**7))
        services.close()
    n = args.crops
    print(f"{n} crops, {report['usage']['calls']} calls each way; job status {view.status}: {view.message}")
    print(f"library  {library:7.2f} s  {1000 * library / n:6.2f} ms/crop")
    print(f"job      {job_s:7.2f} s  {1000 * job_s / n:6.2f} ms/crop  ({calls} vlm_call audit entries)")
    print(
        f"overhead {job_s - library:7.2f} s  {1000 * (job_s - library) / n:6.2f} ms/crop "
        f"({1000 * (job_s - library) / max(1, calls):.2f} ms/call)"
    )
    loop = view.progress["result"]["seconds"]  # the job's own captioning loop (audit and progress included)
    print(
        f"  of which in the captioning loop (a crop's audit entries, progress): {loop - library:.2f} s "
        f"({1000 * (loop - library) / n:.2f} ms/crop); queueing, opening the gallery again, the end: "
        f"{job_s - loop:.2f} s"
    )
    shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
