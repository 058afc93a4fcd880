"""What the browser tests and ``benchmarks/screenshots_web.py`` share: a small synthetic gallery
searched by a tiny model, a service data folder with users, a real uvicorn server on a free
loopback port, and Debian's chromium for Playwright (never ``playwright install``).

It holds no tests: the served-page tests (``tests/test_web_*.py``, their Playwright side in
``support.browser``) and the screenshot script import it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

PASSWORD = "correct horse battery staple"  # every test user's password
USERS = {"ana": "analyst", "vic": "viewer"}
ADMIN = "ada"  # the admin :func:`add_admin` makes (the ingestion page is theirs)
CAMERAS = ("station:north", "station:south", "mall:east")
START = dt.datetime(2026, 3, 2, 8, 0, 0, tzinfo=dt.timezone.utc)
CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/lib/chromium/chromium")


def chromium_path() -> str | None:
    """Debian's chromium, or MINTERPR_CHROMIUM; None when neither is installed."""
    for candidate in (os.environ.get("MINTERPR_CHROMIUM"), shutil.which("chromium"), *CHROMIUM_PATHS):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def render_people(
    crops: Path,
    identities: int = 10,
    views: int = 3,
    *,
    seed: int = 0,
    size: tuple[int, int] = (192, 96),
    frames: bool = False,
    tracks: bool = False,
    spacing: tuple[int, int] = (7 * 60, 23 * 60),
) -> tuple[list, list[dict], list[dict]]:
    """Render ``identities`` x ``views`` synthetic crops over three cameras into ``crops`` (the same
    every time for one seed). Returns (GalleryImage list, metadata with capture time, truth): truth[i]
    is image i's identity number and attributes (the tests know who is who; the page does not).
    ``frames``: each crop also gets the "frame it was cut from" (:func:`_frame_of`), as ingestion stores
    them (``frame_image``, ``box``, ``frame_size``, ``frame``). ``tracks``: a person's views are one track
    of one source (``t<pid>`` of ``video``), as a tracker links the crops of one walk. ``spacing``: seconds
    between one person's capture time and the next's, and between one person's views."""
    from minterpr.data.synthetic.cameras import make_cameras, sample_view
    from minterpr.data.synthetic.render import render_person
    from minterpr.data.synthetic.twins import sample_population
    from minterpr.types import GalleryImage

    rng = np.random.default_rng(seed)
    crops.mkdir(parents=True, exist_ok=True)
    cameras = make_cameras(len(CAMERAS), rng)
    people = sample_population(identities, rng, twin_fraction=0.0)
    images, metadata, truth = [], [], []
    for pid, attributes in enumerate(people):
        for v in range(views):
            k = (pid + v) % len(CAMERAS)
            image = render_person(attributes, view=sample_view(cameras[k], rng), camera=cameras[k], rng=rng, size=size)
            name = f"p{pid:02d}_v{v}.jpg"
            image.save(crops / name, quality=90)
            images.append(GalleryImage(name, f"synth:{pid}", camera_id=CAMERAS[k]))
            when = START + dt.timedelta(seconds=spacing[0] * pid + spacing[1] * v)
            metadata.append(
                {
                    "time": when.isoformat(),
                    "track": f"t{pid}" if tracks else f"t{pid}_{v}",
                    "source": "video" if tracks else CAMERAS[k],
                }
            )
            truth.append({"identity": pid, "attributes": attributes})
    if frames:
        for n, meta in enumerate(metadata):
            meta.update(_frame_of(crops, n, images, len(metadata)))
    return images, metadata, truth


def _frame_of(crops: Path, n: int, images: list, count: int) -> dict:
    """A 3:4-ish street frame holding crop ``n`` at its box and the next crop beside it (a frame shows
    other people too), written as ``frames/f<n>.png`` under ``crops``; the row's frame metadata."""
    from PIL import Image

    with Image.open(crops / images[n].path) as own, Image.open(crops / images[(n + 1) % count].path) as other:
        width, height = own.width * 4, round(own.height * 1.5)
        frame = Image.new("RGB", (width, height), (128, 132, 138))
        x, y = own.width // 2 + (n % 3) * own.width // 2, height - own.height - 8
        frame.paste(other, (width - other.width - own.width // 3, y))
        frame.paste(own, (x, y))
    (crops / "frames").mkdir(exist_ok=True)
    frame.save(crops / "frames" / f"f{n:05d}.png")
    return {
        "frame": 10 * n,
        "frame_image": f"frames/f{n:05d}.png",
        "box": [x, y, x + own.width, y + own.height],
        "frame_size": [width, height],
    }


# the calibration record of the test model: sharp temperatures (so some marks are confident) and
# validation AUCs, every label recognisable but "headwear: hat" (55 %, under the page's 75 %)
UNRECOGNISED = "headwear:hat"


def calibration_record() -> dict:
    from minterpr.language.ontology import ONTOLOGY

    labels = {
        f"{slot}:{value}": (55.0 if f"{slot}:{value}" == UNRECOGNISED else 90.0)
        for slot, value in ONTOLOGY.flat_labels()
    }
    return {
        "split": "val",
        "temperatures": {s.name: 0.125 for s in ONTOLOGY.slots},
        "nll_before": 1.0,
        "nll_after": 0.9,
        "label_auc": labels,
    }


def build_gallery(
    folder: Path,
    identities: int = 10,
    views: int = 3,
    *,
    run: Path | None = None,
    seed: int = 0,
    size: tuple[int, int] = (192, 96),
    calibrated: bool = False,
    frames: bool = False,
    tracks: bool = False,
    spacing: tuple[int, int] = (7 * 60, 23 * 60),
    appearance: Path | None = None,
) -> tuple[Path, Path, list[dict]]:
    """:func:`render_people` into ``folder/crops``, embedded by ``run`` (default: a freshly initialised
    tiny model, with :func:`calibration_record` when ``calibrated``) into the gallery store
    ``folder/store`` (with appearance vectors when ``appearance`` names an appearance model).
    Returns (run, store, truth)."""
    import torch

    from minterpr.index.store.gallery_store import save_gallery
    from minterpr.models import create_model, save_model
    from minterpr.runtime.pipeline import load_pipeline

    crops = folder / "crops"
    images, metadata, truth = render_people(
        crops, identities, views, seed=seed, size=size, frames=frames, tracks=tracks, spacing=spacing
    )
    if run is None:
        run = folder / "run"
        torch.manual_seed(seed)
        model, extra = create_model("tiny"), {"epoch": 1}
        if calibrated:
            extra["calibration"] = calibration_record()
            model.set_attribute_temperature(extra["calibration"]["temperatures"])
        save_model(model, run / "model.pt", extra=extra)
    pipeline = load_pipeline(run, engine="torch", appearance=appearance)
    index = pipeline.index_images(images, root=str(crops), progress=False, strict=True)
    store = folder / "store"
    save_gallery(
        index,
        store,
        model_fingerprint=pipeline.fingerprint,
        metadata=metadata,
        appearance_fingerprint=None if appearance is None else pipeline.appearance.fingerprint,
    )
    return run, store, truth


def tiny_appearance(folder: Path, fit: dict | None = None) -> Path:
    """A freshly initialised tiny appearance model (``folder/reid/best.pt``) with a same-person calibration:
    a random model's cosines all lie near 1, so the default fit is steep (P = 1/2 at cosine 0.95)."""
    import torch

    from minterpr.interaction.appearance import SamePersonCalibration, write_same_person
    from minterpr.models.reid import ReidModel, ReidModelConfig

    torch.manual_seed(0)
    model = ReidModel(ReidModelConfig(image_size=(64, 32))).eval()
    (folder / "reid").mkdir(parents=True, exist_ok=True)
    path = folder / "reid" / "best.pt"
    torch.save({"model": model.search_state_dict(), "config": model.config.to_dict()}, path)
    record = fit or {"scale": 60.0, "bias": -57.0, "base_rate": 0.01, "pairs": 10, "split": "val", "auc": 80.0}
    write_same_person(path, SamePersonCalibration(**record))
    return path


def prepare_service(data_dir: Path, run: Path, store: Path, gallery: str = "demo") -> None:
    """Create the users of :data:`USERS` and register the gallery in a fresh service data folder."""
    from minterpr.serving.service import build_services
    from minterpr.serving.settings import ServeSettings

    services = build_services(ServeSettings(data_dir=data_dir))
    try:
        for name, role in USERS.items():
            services.accounts.create_user(name, PASSWORD, role)
        services.galleries.register(gallery, store, run, by="test")
    finally:
        services.close()


def add_admin(data_dir: Path) -> Path:
    """Create the admin :data:`ADMIN` in a prepared service data folder; returns the incoming folder
    "lobby" (where the admin's ingestion reads from, not created here)."""
    from minterpr.serving.service import build_services
    from minterpr.serving.settings import ServeSettings

    services = build_services(ServeSettings(data_dir=data_dir))
    try:
        services.accounts.create_user(ADMIN, PASSWORD, "admin")
        return services.settings.incoming_dir / "lobby"
    finally:
        services.close()


@contextmanager
def gallery_site(folder: Path, **gallery) -> Iterator["Server"]:
    """A started :class:`Server` over :func:`build_gallery` (``gallery``: its options) in ``folder``, with
    the users of :data:`USERS`; stopped after."""
    run, store, _ = build_gallery(folder, **gallery)
    prepare_service(folder / "data", run, store)
    with running(folder / "data") as server:
        yield server


@contextmanager
def admin_site(folder: Path, **gallery) -> Iterator[tuple["Server", Path, Path]]:
    """As :func:`gallery_site`, with the admin :data:`ADMIN` too and the gallery's crops copied to the
    incoming folder "lobby" (something to ingest): yields (server, run, incoming)."""
    run, store, _ = build_gallery(folder, **gallery)
    prepare_service(folder / "data", run, store)
    incoming = add_admin(folder / "data")
    shutil.copytree(folder / "crops", incoming)
    with running(folder / "data") as server:
        yield server, run, incoming


@contextmanager
def running(data_dir: Path, **options) -> Iterator["Server"]:
    """A started :class:`Server` over ``data_dir`` (``options``: its settings, appearance), stopped after."""
    server = Server(data_dir, **options).start()
    try:
        yield server
    finally:
        server.stop()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_LAUNCH = """
import json, os, sys, uvicorn
from pathlib import Path
from minterpr.serving.app import create_app
from minterpr.serving.config import load_settings
from minterpr.serving.settings import ServeSettings
# MINTERPR_TEST_APPEARANCE: the appearance model beside every run (serve --appearance PATH)
looks = os.environ.get("MINTERPR_TEST_APPEARANCE") or "auto"
settings = ServeSettings(data_dir=Path(sys.argv[1]), demo_gallery="demo", torch_threads=1, appearance=looks)
if len(sys.argv) > 3:  # more settings, as a settings file would give them (the vlm table, ...)
    settings = load_settings({"data_dir": sys.argv[1], "demo_gallery": "demo", "torch_threads": 1,
                              "appearance": looks, **json.loads(sys.argv[3])}, environ={})
uvicorn.run(create_app(settings), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


class Server:
    """``minterpr.serving`` under uvicorn in a child process on 127.0.0.1:port (start, stop, restart)."""

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        log: Path | None = None,
        settings: dict | None = None,
        appearance: Path | None = None,
    ) -> None:
        """``settings``: more ServeSettings fields, as a settings file writes them (``{"vlm": {"url": ...}}``);
        ``appearance``: an appearance model every run's pipeline loads."""
        self.data_dir, self.port = data_dir, port or free_port()
        self.settings, self.appearance = settings, appearance
        self.log = log or data_dir.parent / f"server_{self.port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> "Server":
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        if self.appearance is not None:
            env["MINTERPR_TEST_APPEARANCE"] = str(self.appearance)
        with open(self.log, "ab") as log:
            extra = [json.dumps(self.settings)] if self.settings else []
            self.process = subprocess.Popen(
                [sys.executable, "-c", _LAUNCH, str(self.data_dir), str(self.port), *extra],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited ({self.process.returncode}): {self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the server did not answer within {timeout:.0f} s: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        """Kill the server (SIGKILL: nothing is flushed that was not committed)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process = None

    def restart(self) -> "Server":
        self.stop()
        return self.start()


def login(page, base: str, user: str = "ana", password: str = PASSWORD) -> None:
    """Log in through the page's form (keyboard only: type, Enter)."""
    page.goto(base + "/login")
    page.get_by_label("User name").fill(user)
    page.get_by_label("Password").fill(password)
    page.get_by_label("Password").press("Enter")
    page.wait_for_url(base + "/cases")


def open_case_and_search(page, base: str, title: str = "Lost child at the station") -> str:
    """Open a case (purpose, all cameras, no time bound), start a search on gallery "demo"; returns the URL."""
    page.get_by_label("Title").fill(title)
    page.get_by_label("Purpose (why this search is needed)").fill("Report 2026-0312: a child missing since 9:00")
    page.get_by_role("button", name="Open case").click()
    page.get_by_role("button", name="Start search").click()
    page.wait_for_url(f"{base}/sessions/*")
    return page.url
