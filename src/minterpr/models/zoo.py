"""Where the shipped models are: one place, so that every command finds the same one.

``default_real_model_dir()`` is the model ``minterpr serve --demo street`` (and anything else that
needs a model for real camera footage without ``--run``) uses: the exported model directory
``models/real`` of the repository (``minterpr export`` format), or a one-line
:class:`~minterpr.errors.RunError` saying it is not there and how to pass one.

Example:
    >>> REAL_MODEL_DIR.parts[-2:]
    ('models', 'real')
"""
from __future__ import annotations

from pathlib import Path

from minterpr.errors import RunError

REPO = Path(__file__).resolve().parents[3]  # src/minterpr/models/zoo.py -> the repository (an editable install)
REAL_MODEL_DIR = REPO / "models" / "real"  # the real-pixel model the repository ships


def default_real_model_dir() -> Path:
    """The shipped real-pixel model's directory; RunError when the repository has none."""
    from minterpr.models.io import is_model_dir

    if REAL_MODEL_DIR.is_dir() and (is_model_dir(REAL_MODEL_DIR) or (REAL_MODEL_DIR / "model.pt").is_file()):
        return REAL_MODEL_DIR
    raise RunError(REAL_MODEL_DIR, "no shipped real-footage model here; pass one with --run RUN "
                                   "(a trained run or a `minterpr export` directory)")
