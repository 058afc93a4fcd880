"""ONNX Runtime sessions on the CPU, and the one-thread "lanes" that keep both cores busy.

:func:`cpu_session` is how every exported graph of the project runs (the image tower, the
appearance model, the text encoder, the query model). :class:`ImageSession` is the base of the two
engines that encode gallery crops: besides its session (as many intra-op threads as torch uses) it
gives :meth:`ImageSession.lane`, the same graph on **one** intra-op thread. A gallery is encoded
fastest with one such lane per core, each running its own batches at once
(:func:`minterpr.runtime.image_batches.batch_map`): spreading one small batch of small crops over
two threads leaves them waiting on each other, two batches side by side do not (both shipped
models on 2 cores: 132-137 -> 187-194 crops/s on the forwards, 141 -> 163-166 end to end with
decoding; docs/benchmarks.md, "Lanes"). The lane computes what the session does (the same graph; float sums in
another order, ~1e-7).

Example:
    >>> from minterpr.models.onnx_export import OnnxImageEngine, load_image_engine
    >>> OnnxImageEngine.fingerprint_key  # what its export records the weights' fingerprint under
    'minterpr.image_fingerprint'
    >>> lane = load_image_engine(model).lane()  # doctest: +SKIP
    >>> lane.threads  # doctest: +SKIP
    1
"""

from __future__ import annotations

import threading
from typing import Any, TypeVar

import torch

INSTALL_HINT = "pip install 'minterpr[onnx]'"

Engine = TypeVar("Engine", bound="ImageSession")


def cpu_session(model_bytes: bytes, key: str, threads: int | None = None) -> tuple[Any, str | None]:
    """An ONNX Runtime CPU session of ``model_bytes`` and the fingerprint its metadata records
    under ``key`` (None when absent). ``threads``: intra-op threads, torch's count by default."""
    try:
        import onnxruntime as ort
    except ImportError:  # pragma: no cover - the [onnx] extra is installed in development
        raise ImportError(f"engine='onnx' needs onnxruntime: {INSTALL_HINT}") from None
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()  # as many as torch would use
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # errors only: its warnings are about its own rewrites (an int8 graph's constants left unused
    # once its convolutions are fused: ~90 lines per load), nothing a user can act on
    options.log_severity_level = 3
    # no busy-waiting between calls: the thread decoding the next batch (or the session's other
    # work between turns) needs those cores
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    return session, session.get_modelmeta().custom_metadata_map.get(key)


class ImageSession:
    """A CPU session of an exported image network (``session``, ``fingerprint``: what the graph
    records under the subclass's ``fingerprint_key``) and its one-thread twin (:meth:`lane`).
    Thread-safe: ONNX Runtime's ``run`` may be called from several threads at once."""

    fingerprint_key = ""  # the metadata key the export records its fingerprint under

    def __init__(self, model_bytes: bytes, *, threads: int | None = None) -> None:
        self.model_bytes = model_bytes  # kept for the lane: ~10 MB at most for the shipped models
        self.threads = threads or torch.get_num_threads()
        self.session, self.fingerprint = cpu_session(model_bytes, self.fingerprint_key, self.threads)
        self._lane: Any = self if self.threads == 1 else None
        self._lane_lock = threading.Lock()

    def lane(self: Engine) -> Engine:
        """This engine on one intra-op thread, made once (itself when it already has one): what each of
        several threads encoding gallery batches side by side calls."""
        if self._lane is None:
            with self._lane_lock:
                if self._lane is None:
                    self._lane = type(self)(self.model_bytes, threads=1)
        return self._lane  # type: ignore[no-any-return]
