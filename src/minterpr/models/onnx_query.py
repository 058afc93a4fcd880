"""The query side on ONNX Runtime: the turn encoder and the dialogue memory of a search turn.

After the new utterance's text features (:mod:`minterpr.models.onnx_text`), a turn runs the turn
encoder and the dialogue memory over the whole conversation: a few dozen small layers on a
handful of turn vectors. Eager PyTorch spends most of that in per-operator overhead (~4 ms a turn
on one core); ONNX Runtime runs the same float32 graph in well under 1 ms with the same queries
(max |difference| ~1e-7; ``benchmarks/bench_turn_latency.py`` times a whole turn).

The exported graph is ``turn_types (B, R), turn_text (B, R, Dt), turn_image (B, R, D) ->
queries (B, R, D)`` for dialogues without padding (every turn real: one live conversation, or a
group of conversations of one length), i.e. ``memory(turn_encoder(...), types, None)``, which
equals the masked path bit for bit. Batch and round axes are dynamic. Like the other exports it
records a fingerprint (:func:`query_fingerprint`) and is checked against PyTorch before use.

Example:
    >>> from minterpr.models import create_model
    >>> model = create_model("tiny").eval()
    >>> encode = QueryEncoder(model, "torch")
    >>> batch = {"turn_types": torch.tensor([[0, 1]]), "turn_text": torch.zeros(1, 2, model.text_dim),
    ...          "turn_image": torch.zeros(1, 2, model.embed_dim)}
    >>> encode(batch).shape, encode.engine_name
    ((1, 2, 32), 'torch')
"""

from __future__ import annotations

import copy
import hashlib
import io
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import torch
from torch import nn

from minterpr.errors import RunError
from minterpr.models.onnx_export import (
    OPSET,
    LazyOnnxEngine,
    load_checked_engine,
    sibling_onnx_path,
    with_fingerprint,
)
from minterpr.models.onnx_session import cpu_session

if TYPE_CHECKING:
    from .query_model import RetrievalModel

EXPORT_VERSION = "1"  # bump when the exported graph changes for the same weights
FINGERPRINT_KEY = "minterpr.query_fingerprint"
CHECK_TOLERANCE = 1e-4  # largest |ONNX - PyTorch| accepted on the check dialogues (float32 gives ~1e-7)
INPUTS = ("turn_types", "turn_text", "turn_image")


def query_fingerprint(model: "RetrievalModel") -> str:
    """sha256 of what the queries depend on besides the inputs: the turn encoder's and the
    memory's weights and buffers, the memory's ``max_turns`` and :data:`EXPORT_VERSION`.

    Example:
        >>> from minterpr.models import create_model
        >>> a, b = create_model("tiny"), create_model("tiny")
        >>> query_fingerprint(a) == query_fingerprint(a), query_fingerprint(a) == query_fingerprint(b)
        (True, False)
    """
    digest = hashlib.sha256(f"v{EXPORT_VERSION};{model.memory.max_turns}".encode())
    for prefix, module in (("turn_encoder", model.turn_encoder), ("memory", model.memory)):
        for name, tensor in sorted(module.state_dict().items()):
            data = tensor.detach().cpu().float().contiguous()
            digest.update(f"{prefix}.{name};{tensor.dtype};{tuple(data.shape)};".encode())
            digest.update(data.numpy().tobytes())
    return digest.hexdigest()


class _QueryTower(nn.Module):
    """(turn_types, turn_text, turn_image) of unpadded dialogues -> (B, R, D) queries: the export."""

    def __init__(self, model: "RetrievalModel") -> None:
        super().__init__()
        self.turn_encoder = copy.deepcopy(model.turn_encoder).cpu().float().eval()
        self.memory = copy.deepcopy(model.memory).cpu().float().eval()

    def forward(self, turn_types: torch.Tensor, turn_text: torch.Tensor, turn_image: torch.Tensor) -> torch.Tensor:
        turns = self.turn_encoder(turn_types, turn_text, turn_image)  # (B, R, D)
        return self.memory(turns, turn_types, None)  # (B, R, D)


def check_dialogues(model: "RetrievalModel", seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """Random unpadded dialogue batches of every turn type, 1, 3 and ``max_turns`` rounds long."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for rounds in sorted({1, min(3, model.memory.max_turns), model.memory.max_turns}):
        types = torch.randint(0, 4, (3, rounds), generator=generator)
        types[:, 0] = 0  # a description first, as every conversation starts
        batches.append(
            {
                "turn_types": types,
                "turn_text": torch.randn(3, rounds, model.text_dim, generator=generator),
                "turn_image": torch.randn(3, rounds, model.embed_dim, generator=generator),
            }
        )
    return batches


def export_onnx_query_model(model: "RetrievalModel", fingerprint: str | None = None) -> bytes:
    """The ONNX bytes of ``model``'s turn encoder + dialogue memory on unpadded dialogues (batch
    and round axes dynamic), its fingerprint in the metadata (:func:`query_fingerprint` unless given)."""
    example = check_dialogues(model)[-1]
    buffer = io.BytesIO()
    dynamic = {name: {0: "batch", 1: "rounds"} for name in (*INPUTS, "queries")}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about the max_turns check on a traced shape
        torch.onnx.export(
            _QueryTower(model),
            tuple(example[name] for name in INPUTS),
            buffer,
            input_names=list(INPUTS),
            output_names=["queries"],
            opset_version=OPSET,
            dynamo=False,
            dynamic_axes=dynamic,
        )
    return with_fingerprint(buffer.getvalue(), FINGERPRINT_KEY, fingerprint or query_fingerprint(model))


class OnnxQueryEngine:
    """An ONNX Runtime session of an exported query model: ``engine(batch)`` -> (B, R, D) float32
    numpy queries of an unpadded dialogue batch. Thread-safe."""

    def __init__(self, model_bytes: bytes, *, max_turns: int, threads: int | None = None) -> None:
        self.session, self.fingerprint = cpu_session(model_bytes, FINGERPRINT_KEY, threads)
        self.max_turns = max_turns

    def __call__(self, batch: Mapping[str, torch.Tensor]) -> np.ndarray:
        rounds = batch["turn_types"].shape[1]
        if rounds > self.max_turns:  # the graph would read past its position table
            raise ValueError(f"dialogue has {rounds} turns but the model was built for max_turns={self.max_turns}")
        feeds = {
            name: np.ascontiguousarray(
                batch[name].detach().cpu().numpy(), dtype=np.int64 if name == "turn_types" else np.float32
            )
            for name in INPUTS
        }
        return self.session.run(None, feeds)[0]


def check_query_engine(engine: OnnxQueryEngine, model: "RetrievalModel") -> float:
    """Max |ONNX - PyTorch| over :func:`check_dialogues` (PyTorch through the masked path of
    :meth:`RetrievalModel.encode_dialogues`); RunError above :data:`CHECK_TOLERANCE`."""
    difference = 0.0
    for batch in check_dialogues(model):
        with torch.inference_mode():
            reference = model.encode_dialogues({k: v.to(model.device) for k, v in batch.items()})
        difference = max(difference, float(np.abs(engine(batch) - reference.float().cpu().numpy()).max()))
    if not difference <= CHECK_TOLERANCE:
        raise RunError(
            "onnx export",
            f"the ONNX query model differs from the PyTorch model by {difference:.3g} "
            f"(> {CHECK_TOLERANCE}): use engine='torch'",
        )
    return difference


def load_query_engine(
    model: "RetrievalModel", cache: str | os.PathLike[str] | None = None, *, threads: int | None = None
) -> OnnxQueryEngine:
    """An :class:`OnnxQueryEngine` computing ``model``'s queries, checked against the model.

    ``cache``: an ``.onnx`` file reused when its recorded fingerprint is the model's, (re)written
    atomically otherwise; None exports in memory (about a second).
    """
    fingerprint = query_fingerprint(model)
    return load_checked_engine(
        cache,
        fingerprint,
        lambda data: OnnxQueryEngine(data, max_turns=model.memory.max_turns, threads=threads),
        lambda: export_onnx_query_model(model, fingerprint),
        lambda e: check_query_engine(e, model),
    )


class QueryEncoder(LazyOnnxEngine):
    """``encode(batch)`` -> (B, R, D) float32 numpy queries, like
    :meth:`RetrievalModel.encode_dialogues`, on ``engine`` "torch" (the reference), "onnx" or
    "auto" (ONNX Runtime on a CPU device when installed and the export passes its check, else
    torch). Only unpadded batches (:attr:`needs_equal_lengths`) go to ONNX Runtime; a padded batch
    always runs on torch. Resolved (and exported) once, at the first call, under a lock;
    ``cache`` is an ``.onnx`` file for the export. Thread-safe.
    """

    what = "queries"

    def _load_onnx(self) -> OnnxQueryEngine:
        return load_query_engine(self.model, self.cache)

    @property
    def needs_equal_lengths(self) -> bool:
        """Whether callers should batch dialogues of one length together (the ONNX engine runs)."""
        return self.engine_name == "onnx"

    def __call__(self, batch: Mapping[str, Any]) -> np.ndarray:
        mask = batch.get("turn_mask")
        unpadded = mask is None or bool(torch.as_tensor(mask).all())
        if self.engine_name == "onnx" and unpadded and batch["turn_types"].numel():
            assert self._onnx is not None
            return self._onnx(batch)
        with torch.inference_mode():
            return self.model.encode_dialogues(batch).float().cpu().numpy()


def query_cache_path(image_cache: str | os.PathLike[str] | None) -> Path | None:
    """Where the query export is kept next to an image export file: ``x.onnx`` -> ``x.query.onnx``.

    Example:
        >>> str(query_cache_path("cache/image.onnx")), query_cache_path(None)
        ('cache/image.query.onnx', None)
    """
    return sibling_onnx_path(image_cache, "query")
