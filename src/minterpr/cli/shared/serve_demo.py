"""The synthetic demo of ``minterpr serve --demo``: its gallery store (the ``minterpr demo`` world and
model, cached, embedded once per model with capture times spread over a day) and the admin user
it creates on an empty service, whose password goes to a file readable by its owner only.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEMO_TIMES_START = dt.datetime(2026, 3, 2, 8, 0, tzinfo=dt.timezone.utc)  # synthetic capture times of the demo


def ensure_demo_gallery(
    services: Any, demo_out: str | os.PathLike[str] = "outputs/demo", seed: int = 0, progress: bool = True
) -> tuple[Path, Path]:
    """The demo's run and stored test gallery, registered as gallery "demo": the world is built and
    the model trained when absent (cached as ``minterpr demo`` caches them, with progress bars on
    stderr unless ``progress`` is false); the store is built once per model, with synthetic capture
    times spread over a day so time filters have something to cut."""
    from minterpr.cli.shared.demo_world import build_data, train_model
    from minterpr.data.dataset import BuiltDataset
    from minterpr.errors import MinterprError
    from minterpr.index.store.gallery_store import open_gallery, save_gallery
    from minterpr.index.store.store_vectors import build_vector_index

    out = Path(demo_out)
    data_dir = build_data(out, seed, progress=progress)
    run_dir = train_model(out, data_dir, seed, progress=progress)
    store = Path(services.settings.galleries_dir) / "demo"
    pipeline = services.galleries.pipeline(str(run_dir.absolute()))
    try:
        open_gallery(store, expected_fingerprint=pipeline.fingerprint)
    except MinterprError:
        log.info("[serve] embedding the demo gallery into %s ...", store)
        images = BuiltDataset(data_dir).gallery("test")
        index = pipeline.index_images(images, root=str(data_dir.absolute()), progress=progress)
        step = 86400 / max(1, len(index))
        metadata = [
            {"time": (DEMO_TIMES_START + dt.timedelta(seconds=round(k * step))).isoformat()} for k in range(len(index))
        ]
        vectors = build_vector_index("exact", index, metadata, model_fingerprint=pipeline.fingerprint)
        save_gallery(
            index,
            store,
            model_fingerprint=pipeline.fingerprint,
            vector_index=vectors,
            metadata=metadata,
            rebuild=f"minterpr serve --demo --demo-out {out}",
            appearance_fingerprint=pipeline.appearance_fingerprint,
        )
    rows = {row.name: row for row in services.galleries.rows()}
    if "demo" not in rows or Path(rows["demo"].directory) != store.absolute():
        services.galleries.register("demo", store, run_dir, by="minterpr serve --demo")
    return run_dir, store


DEMO_USER = "demo"  # the user `minterpr serve --demo` creates on an empty service
CREDENTIALS_FILE = "demo_credentials.txt"  # in --data: that user's password, readable by its owner only


def demo_user(services: Any, data_dir: Path) -> tuple[Path | None, bool]:
    """Create user "demo" (admin) when there is no user; its password goes to a 0600 file, never to
    the screen or the log (terminal scrollback and captured output outlive the demo). Returns the
    credentials file (None when another user set the service up) and whether it was made now."""
    path = data_dir / CREDENTIALS_FILE
    if services.accounts.users():
        known = path.is_file() and any(u["username"] == DEMO_USER for u in services.accounts.users())
        return (path if known else None), False
    password = secrets.token_urlsafe(12)
    services.accounts.create_user(DEMO_USER, password, "admin", by="minterpr serve --demo")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"username: {DEMO_USER}\npassword: {password}\n")
    return path, True
