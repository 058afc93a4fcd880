"""Using a trained model: load it with what training chose for it, index galleries, search.

* :mod:`minterpr.runtime.pipeline`: ``load_pipeline`` (also ``minterpr.load_pipeline``), the one
  public loader: a :class:`Pipeline` holds the loaded run and the backend that encodes with it;
* :mod:`minterpr.runtime.run`: the run behind it (:class:`TrainedRun`: the model and its typed
  :class:`RunExtras`; ``load_run``, its reader, for the runtime and training floors) and
  ``export_model_dir``;
* :mod:`minterpr.runtime.neural_backend`: the model as a retrieval backend (engines, text
  cache, batching);
* :mod:`minterpr.runtime.batch_embed`: embedding a large gallery in resumable shards.

Nothing here trains: calibration and the weight choice after training are
:mod:`minterpr.training.post_training`. Importing this package loads no torch.

Example:
    >>> from minterpr.runtime import load_pipeline
    >>> load_pipeline("no/such/run")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    minterpr.errors.RunError: no/such/run: no such run directory or model file (train one: ...)
"""

from minterpr.runtime.pipeline import Pipeline, load_pipeline
from minterpr.runtime.run import RunExtras, TrainedRun, export_model_dir

__all__ = ["Pipeline", "RunExtras", "TrainedRun", "export_model_dir", "load_pipeline"]
