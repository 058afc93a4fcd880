"""Using a trained model: load a run with what training chose for it, index galleries, search.

* :mod:`minterpr.runtime.run`: ``load_run`` / ``export_model_dir``, the model and its typed extras;
* :mod:`minterpr.runtime.pipeline`: ``load_pipeline`` (also ``minterpr.load_pipeline``), the
  model as a search pipeline;
* :mod:`minterpr.runtime.neural_backend`: the model as a retrieval backend (engines, text
  cache, batching);
* :mod:`minterpr.runtime.batch_embed`: embedding a large gallery in resumable shards.

Nothing here trains: calibration and the weight choice after training are
:mod:`minterpr.training.post_training`. Importing this package loads no torch.

Example:
    >>> from minterpr.runtime import load_run
    >>> load_run("no/such/run")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    minterpr.errors.RunError: no/such/run: no such run directory or model file (train one: ...)
"""
from minterpr.runtime.run import RunExtras, TrainedRun, export_model_dir, load_run

__all__ = ["RunExtras", "TrainedRun", "export_model_dir", "load_run"]
