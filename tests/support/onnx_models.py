"""Tiny ONNX models the ingestion and serving tests build (onnx is imported when one is made)."""

from __future__ import annotations

import numpy as np


def constant_detector_model(path, rows, size=(64, 64)) -> str:
    """A model whose one output is the fixed (N, 6) rows [x1, y1, x2, y2, score, class] (plus 0 x the input)."""
    import onnx
    from onnx import TensorProto, helper

    rows = np.asarray(rows, np.float32)
    const = helper.make_tensor("rows_const", TensorProto.FLOAT, list(rows.shape), rows.ravel().tolist())
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0),
        helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
        helper.make_node("Add", ["rows_const", "nothing"], ["rows"]),
    ]
    graph = helper.make_graph(
        nodes,
        "constant_detector",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, *size])],
        [helper.make_tensor_value_info("rows", TensorProto.FLOAT, list(rows.shape))],
        [const, helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return str(path)


def constant_output_model(path, output, size=(64, 64)) -> str:
    """A model whose one output ``output`` is the fixed array given (any shape; plus 0 x the input)."""
    import onnx
    from onnx import TensorProto, helper

    output = np.asarray(output, np.float32)
    const = helper.make_tensor("const", TensorProto.FLOAT, list(output.shape), output.ravel().tolist())
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0),
        helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
        helper.make_node("Add", ["const", "nothing"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "constant_output",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, *size])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, list(output.shape))],
        [const, helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def random_output_model(path, shape, scale, size=(64, 64), seed=0) -> str:
    """A tiny random head of any output format: mean colour -> MatMul -> sigmoid -> reshape to
    ``shape`` -> times ``scale`` (broadcast: e.g. per column, to put boxes in input pixels), so the
    output changes with the picture."""
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    count = int(np.prod(shape))
    scale = np.asarray(scale, np.float32)
    tensors = [
        helper.make_tensor("w", TensorProto.FLOAT, [3, count], rng.normal(0, 4, 3 * count).tolist()),
        helper.make_tensor("b", TensorProto.FLOAT, [count], rng.normal(0, 1, count).tolist()),
        helper.make_tensor("shape", TensorProto.INT64, [len(shape)], list(shape)),
        helper.make_tensor("scale", TensorProto.FLOAT, list(scale.shape), scale.ravel().tolist()),
    ]
    nodes = [
        helper.make_node("GlobalAveragePool", ["images"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("Gemm", ["flat", "w", "b"], ["logits"]),
        helper.make_node("Sigmoid", ["logits"], ["unit"]),
        helper.make_node("Reshape", ["unit", "shape"], ["shaped"]),
        helper.make_node("Mul", ["shaped", "scale"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "random_output",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, *size])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, list(shape))],
        tensors,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)
