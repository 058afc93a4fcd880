"""Using a trained model: load a run with what training chose for it, index galleries, search.

* :mod:`minterpr.runtime.run`: ``load_run`` / ``export_model_dir``, the model and its typed extras;
* :mod:`minterpr.runtime.pipeline`: ``load_pipeline`` (also ``minterpr.load_pipeline``), the
  model as a search pipeline;
* :mod:`minterpr.runtime.neural_backend`: the model as a retrieval backend (engines, text
  cache, batching);
* :mod:`minterpr.runtime.batch_embed`: embedding a large gallery in resumable shards.

Nothing here trains: calibration and the weight choice after training are
:mod:`minterpr.training.post_training`. Importing this package loads no torch.
``export_run``, the old name of ``export_model_dir``, is handed out with a DeprecationWarning
for one release (docs/extending.md).

Example:
    >>> from minterpr.runtime import load_run
    >>> load_run("no/such/run")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    minterpr.errors.RunError: no/such/run: no such run directory or model file (train one: ...)
"""
import warnings
from typing import Any

from minterpr.runtime.run import RunExtras, TrainedRun, export_model_dir, load_run

__all__ = ["RunExtras", "TrainedRun", "export_model_dir", "load_run"]
RENAMED = {"export_run": "export_model_dir"}  # old name -> the name it has now (deprecated, one release)


def __getattr__(name: str) -> Any:
    if name not in RENAMED:
        raise AttributeError(f"module 'minterpr.runtime' has no attribute {name!r}")
    warnings.warn(f"minterpr.runtime.{name} is now minterpr.runtime.{RENAMED[name]}", DeprecationWarning, stacklevel=2)
    return globals()[RENAMED[name]]
