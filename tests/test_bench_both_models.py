"""``benchmarks/bench_both_models.py``: crops/s of the attribute and appearance models, alone, together,
on lanes side by side and end to end."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from support.datasets import make_tiny_dataset  # noqa: E402
from support.helpers import load_benchmark  # noqa: E402
from support.web import tiny_appearance  # noqa: E402


def test_both_models_are_measured_on_lanes_and_end_to_end(tiny_run, tmp_path, capsys):
    bench = load_benchmark("bench_both_models")
    data = make_tiny_dataset(tmp_path / "data")
    looks = tiny_appearance(tmp_path / "looks")
    out = tmp_path / "both.json"
    before = torch.get_num_threads()
    try:
        argv = ["--data", str(data), "--run", str(tiny_run), "--appearance", str(looks), "--count", "8"]
        assert bench.main([*argv, "--batch", "4", "--threads", "2", "--repeats", "1", "--json", str(out)]) == 0
    finally:
        torch.set_num_threads(before)
    results = json.loads(out.read_text())
    assert results["count"] == 8 and results["threads"] == 2
    onnx, torch_row = results["onnx"], results["torch"]
    assert onnx["attribute_engine"] == onnx["appearance_engine"] == "onnx" and onnx["lanes"] == 2
    for key in ("attribute_crops_s", "appearance_crops_s", "both_crops_s", "both_on_lanes_crops_s"):
        assert onnx[key] > 0
    assert onnx["both_crops_s"] < min(onnx["attribute_crops_s"], onnx["appearance_crops_s"])
    assert onnx["end_to_end_both_crops_s"] > 0 and onnx["end_to_end_attribute_only_crops_s"] > 0
    assert torch_row["attribute_engine"] == "torch" and "lanes" not in torch_row  # torch keeps one lane
    assert "load average" in capsys.readouterr().out
