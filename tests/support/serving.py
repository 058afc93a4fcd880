"""What the service tests share: a tiny model, a small stored gallery over three cameras with
capture times, a service data folder with one user per role, and logged-in test clients.

It holds no tests: the ``tests/test_serving_*.py`` modules import it (``support.serving``).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np

PASSWORD = "correct horse battery staple"
USERS = {"root": "admin", "ana": "analyst", "bob": "analyst", "vic": "viewer", "aud": "auditor"}
CAMERAS = ("cam:north", "cam:south", "cam:east")
START = dt.datetime(2026, 3, 2, 8, 0, 0, tzinfo=dt.timezone.utc)


_WORLDS: dict[tuple[int, int, int], tuple[Path, Path]] = {}


def shared_world(tmp_path_factory, people: int = 8, views: int = 3, seed: int = 0) -> tuple[Path, Path]:
    """:func:`build_world` once per test run (the tiny model takes seconds to create on a busy machine);
    tests must not change it."""
    key = (people, views, seed)
    if key not in _WORLDS:
        _WORLDS[key] = build_world(tmp_path_factory.mktemp("serving_world"), people, views, seed)
    return _WORLDS[key]


def build_world(folder: Path, people: int = 8, views: int = 3, seed: int = 0) -> tuple[Path, Path]:
    """A tiny model run and a gallery store of ``people`` x ``views`` generated crops; returns (run, store).
    Image k of person p is on camera (p + k) % 3 at START + 10 p + 3 k minutes, track "t{p}"; the crops of
    person 0 come with the frame they were "cut from" (a 128 x 96 frame holding the crop at its box:
    ``frames/p0_k``, without a suffix, so a folder ingestion of ``crops`` does not take it for a crop)."""
    import torch
    from PIL import Image

    from minterpr.index.store.gallery_store import save_gallery
    from minterpr.index.store.store_vectors import build_vector_index
    from minterpr.models import create_model, save_model
    from minterpr.runtime.pipeline import load_pipeline
    from minterpr.types import GalleryImage

    rng = np.random.default_rng(seed)
    crops = folder / "crops"
    (crops / "frames").mkdir(parents=True, exist_ok=True)
    images, metadata = [], []
    for p in range(people):
        colour = rng.integers(0, 255, size=3)
        for k in range(views):
            pixels = np.clip(colour + rng.normal(0, 40, size=(64, 32, 3)), 0, 255).astype(np.uint8)
            name = f"p{p}_{k}.png"
            Image.fromarray(pixels).save(crops / name)
            camera = CAMERAS[(p + k) % len(CAMERAS)]
            images.append(GalleryImage(name, f"test:{p}", camera_id=camera))
            when = START + dt.timedelta(minutes=10 * p + 3 * k)
            metadata.append({"time": when.isoformat(), "track": f"t{p}", "source": "test.mp4"})
            if p == 0:
                frame = Image.new("RGB", (128, 96), (90, 90, 90))
                frame.paste(Image.fromarray(pixels), (16 + 32 * k, 16))
                frame.save(crops / "frames" / f"p0_{k}", format="PNG")
                metadata[-1].update(
                    frame_image=f"frames/p0_{k}", box=[16 + 32 * k, 16, 48 + 32 * k, 80], frame_size=[128, 96]
                )
    run = folder / "run"
    torch.manual_seed(seed)
    save_model(create_model("tiny"), run / "model.pt", extra={"epoch": 1})
    pipeline = load_pipeline(run, engine="torch")
    index = pipeline.index_images(images, root=str(crops), progress=False, strict=True)
    vectors = build_vector_index("exact", index, metadata, model_fingerprint=pipeline.fingerprint)
    store = folder / "store"
    save_gallery(index, store, model_fingerprint=pipeline.fingerprint, vector_index=vectors, metadata=metadata)
    return run, store


def settings(data_dir: Path, **overrides):
    from minterpr.serving.settings import RateSpec, ServeSettings

    options = {
        "login_rate": RateSpec(1000.0, 1000),
        "login_client_rate": RateSpec(1000.0, 1000),
        "search_rate": RateSpec(1000.0, 1000),
        "torch_threads": 1,
    }
    return ServeSettings(data_dir=data_dir, **{**options, **overrides})


def prepare(data_dir: Path, run: Path, store: Path, **overrides):
    """Services over a fresh data folder with :data:`USERS` and the gallery registered as "test"."""
    from minterpr.serving.service import build_services

    services = build_services(settings(data_dir, **overrides))
    for name, role in USERS.items():
        services.accounts.create_user(name, PASSWORD, role)
    services.galleries.register("test", store, run, by="root")
    return services


def login(client, username: str) -> dict[str, str]:
    """Log ``client`` in as ``username``; returns the CSRF header its state-changing requests need."""
    response = client.post("/api/auth/login", json={"username": username, "password": PASSWORD})
    assert response.status_code == 200, response.text
    return {"X-CSRF-Token": response.json()["csrf_token"]}


def open_case(client, headers, **scope) -> int:
    body = {
        "title": "test case",
        "purpose": "report 2026-17: missing person, authorised by duty officer",
        "cameras": None,
        "start": None,
        "end": None,
        **scope,
    }
    response = client.post("/api/cases", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()["id"]
