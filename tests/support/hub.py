"""The Hugging Face Hub without a network: its cache laid out by hand, and a fresh interpreter that
reads only that cache (``HF_HUB_OFFLINE``), for the tests of models by hub id and of publishing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"  # the commit id hub_cache files its snapshot under


def hub_cache(root: Path, repo: str, files: Path, ref: str = "main") -> Path:
    """The Hugging Face cache layout (refs/REF -> commit, snapshots/COMMIT/files) for ``repo``."""
    folder = root / ("models--" + repo.replace("/", "--"))
    shutil.copytree(files, folder / "snapshots" / COMMIT)
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / ref).write_text(COMMIT)
    return root


def offline_python(code: str, cache: Path) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter reading only ``cache`` (HF_HUB_OFFLINE: nothing downloads)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HOME": str(cache.parent / "home")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def export_tiny(root: Path) -> tuple[Path, str]:
    """A freshly initialised tiny model saved as the run ``root/run`` and exported as the model
    directory ``root/export``; (that directory, the model's fingerprint)."""
    import torch

    from minterpr.models import create_model, save_model
    from minterpr.models.fingerprint import model_fingerprint
    from minterpr.runtime import export_model_dir

    torch.manual_seed(0)
    model = create_model("tiny")
    save_model(model, root / "run" / "model.pt", extra={"scoring": {"attribute_weight": 0.2}})
    export_model_dir(root / "run", root / "export")
    return root / "export", model_fingerprint(model)
