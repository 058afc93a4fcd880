"""Tiny ONNX models the ingestion and serving tests build (onnx is imported when one is made)."""
from __future__ import annotations

import numpy as np


def constant_detector_model(path, rows, size=(64, 64)) -> str:
    """A model whose one output is the fixed (N, 6) rows [x1, y1, x2, y2, score, class] (plus 0 x the input)."""
    import onnx
    from onnx import TensorProto, helper

    rows = np.asarray(rows, np.float32)
    const = helper.make_tensor("rows_const", TensorProto.FLOAT, list(rows.shape), rows.ravel().tolist())
    nodes = [helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0),
             helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
             helper.make_node("Add", ["rows_const", "nothing"], ["rows"])]
    graph = helper.make_graph(nodes, "constant_detector",
                              [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, *size])],
                              [helper.make_tensor_value_info("rows", TensorProto.FLOAT, list(rows.shape))],
                              [const, helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return str(path)
